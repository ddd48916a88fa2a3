"""51 decisions (rules.md §2) from a state rebuilt from one seat's view.

``easy`` is the engine's ``random_policy``: a weighted draw among the legal actions that
favours opening, laying off and finishing, so games still end. ``normal`` is the engine's
``greedy_policy`` (solver-driven opening, every lay-off, the discard that least hurts the best
arrangement, answers GIVE to a query) with one rule of its own on top: it never feeds the next
player an işlek card (F-61) when another discard is possible, whatever the preset charges for
it. Among the safe discards it keeps the best arrangement's value and sheds the most points.
``hard`` is the search of ``masa_rules.fiftyone.search`` (``normal``'s play but for its draws
and discards, chosen by the expected cost of the hand after the next card, over the cards the
seat has not seen), on the wall clock for the seconds it is given.
"""

from __future__ import annotations

import time
from typing import Final

from masa_rules.fiftyone import Action, Discard, Draw, State, TakeDiscard, legal_actions
from masa_rules.fiftyone.melding import cached_opening, islek_faces
from masa_rules.fiftyone.policies import greedy_policy, random_policy
from masa_rules.fiftyone.search import DEFAULT_BUDGET_SECONDS, search
from masa_rules.melds import card_value
from masa_rules.shuffle import DrawStream
from masa_rules.table_config import BotLevel

from masa_bot.domain.choice import Decision, NothingToDecide

__all__ = ["decide_fiftyone"]

# A joker is never işlek (the engine's reading 4) and is the last card to give away.
_JOKER_COST: Final = 1000


def decide_fiftyone(
    state: State,
    seat: int,
    level: BotLevel,
    seed: bytes,
    budget_seconds: float = DEFAULT_BUDGET_SECONDS,
) -> Decision[Action]:
    """The action ``seat`` takes at ``level``; ``seed`` drives any randomness (replayable but
    for ``hard`` cut short by its ``budget_seconds`` of wall-clock time)."""
    actions = legal_actions(state, seat)
    if not actions:
        raise NothingToDecide(f"seat {seat} has nothing to do now")
    rng = DrawStream(seed)
    if level is BotLevel.EASY:
        action = random_policy(state, seat, rng)
        return Decision(action, f"{type(action).__name__}: a weighted random legal move")
    if level is BotLevel.HARD:
        action = search(state, seat, rng, budget_seconds=budget_seconds, clock=time.monotonic)
        return Decision(action, _explain_hard(action))
    action = greedy_policy(state, seat, rng)
    if isinstance(action, Discard) and _islek(state, action):
        safe = [
            a for a in actions if isinstance(a, Discard) and a.twin is None and not _islek(state, a)
        ]
        if safe:
            choice = max(safe, key=lambda a: _keep_score(state, seat, a))
            return Decision(
                choice,
                f"discard {choice.card.code}: {action.card.code} would feed the table (F-61)",
            )
    return Decision(action, _explain(action))


def _islek(state: State, action: Discard) -> bool:
    return not action.card.card.is_joker and action.card.face_index in islek_faces(
        state.table, state.rules
    )


def _keep_score(state: State, seat: int, action: Discard) -> tuple[int, int]:
    """The best arrangement left without the card, then the points it sheds."""
    faces = [card.card for card in state.seats[seat].hand]
    faces.remove(action.card.card)
    face = action.card.card
    shed = -_JOKER_COST if face.is_joker else card_value(face, state.rules)
    return (cached_opening(faces, state.rules).value, shed)


_REASONS: Final = {
    "Draw": "draw: the discard does not improve the best arrangement",
    "TakeDiscard": "take the discard: it improves the best arrangement",
    "LayDown": "lay down: the solver's best melds reach what is needed",
    "LayOff": "lay off: one card fewer in hand",
    "TakeBottom": "take the bottom card to finish",
    "Answer": "answer the query",
}


def _explain(action: Action) -> str:
    kind = type(action).__name__
    if isinstance(action, Discard):
        return f"discard {action.card.code}: it hurts the best arrangement least"
    return _REASONS.get(kind, kind)


def _explain_hard(action: Action) -> str:
    if isinstance(action, Discard):
        return f"discard {action.card.code}: the card the hand misses least, counting the unseen"
    if isinstance(action, Draw):
        return "draw from the stock"
    if isinstance(action, TakeDiscard):
        return "take the discard: it does more for the hand than the stock would"
    return _explain(action)
