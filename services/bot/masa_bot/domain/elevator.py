"""Elevator decisions (rules.md §3) from a state rebuilt from one seat's view.

Every level is the rules library's own player, so the bot and the simulator play alike:
``easy`` is ``random_policy`` (uniform among the plays, a voluntary pass once in eight chances),
``normal`` is ``greedy_policy`` (shed the most cards in the smallest step, keep jokers, aces
and 2s for when nothing else goes), ``hard`` is the search of ``masa_rules.elevator.search``
(determinised play-outs over the seat's view, on the wall clock for the seconds it is given).
"""

from __future__ import annotations

import time
from typing import Final

from masa_rules.cards import Rank
from masa_rules.elevator import Action, Give, Pass, Play, State, legal_actions
from masa_rules.elevator.moves import RANK, is_joker
from masa_rules.elevator.policies import greedy_policy, random_policy
from masa_rules.elevator.search import DEFAULT_BUDGET_SECONDS, search
from masa_rules.shuffle import DrawStream
from masa_rules.table_config import BotLevel

from masa_bot.domain.choice import Decision, NothingToDecide

__all__ = ["decide_elevator"]

_POLICY: Final = {BotLevel.EASY: random_policy, BotLevel.NORMAL: greedy_policy}


def decide_elevator(
    state: State,
    seat: int,
    level: BotLevel,
    seed: bytes,
    budget_seconds: float = DEFAULT_BUDGET_SECONDS,
) -> Decision[Action]:
    """The action ``seat`` takes at ``level``; ``seed`` drives any randomness (replayable but
    for ``hard``, which searches for ``budget_seconds`` of wall-clock time).

    >>> from masa_rules.elevator import position
    >>> state = position([["8H", "8S", "KD"], ["3C"], ["4D"]], pile=["5C"])
    >>> decide_elevator(state, 0, BotLevel.NORMAL, b"doc").explanation
    'play 8H 8S: the most cards in the smallest step up'
    """
    actions = legal_actions(state, seat)
    if not actions:
        raise NothingToDecide(f"seat {seat} has nothing to do now")
    if level is BotLevel.HARD:
        action = search(
            state, seat, DrawStream(seed), budget_seconds=budget_seconds, clock=time.monotonic
        )
    else:
        action = _POLICY[level](state, seat, DrawStream(seed))
    return Decision(action, _explain(action, state, level))


def _explain(action: Action, state: State, level: BotLevel) -> str:
    if isinstance(action, Give):
        return f"give {action.card.code}: the card that hurts least to part with (E-9)"
    if isinstance(action, Pass):
        forced = not any(isinstance(other, Play) for other in legal_actions(state, action.seat))
        return "pass: no card goes on the pile (E-8)" if forced else "pass: keep the hand (E-8)"
    codes = " ".join(card.code for card in action.cards)
    if level is BotLevel.EASY:
        return f"play {codes}: a random legal play"
    if level is BotLevel.HARD:
        return f"play {codes}: it won the most play-outs of the hidden cards"
    if is_joker(action.cards[0]) or RANK[action.cards[0].face_index] in (Rank.ACE, Rank.TWO):
        return f"play {codes}: only a joker, an ace or a 2 goes now"
    way = "up" if state.direction.value == "ascending" else "down"
    return f"play {codes}: the most cards in the smallest step {way}"
