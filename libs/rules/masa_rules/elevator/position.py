"""Set up a chosen position, for tests, puzzles and bot evaluation.

>>> state = position([["8H", "8S"], ["3C"], ["KD"]], pile=["5C"], stock=["2H"])
>>> state.turn, state.top.code, len(state.stock)
(0, '5C', 1)
"""

from __future__ import annotations

from collections.abc import Sequence

from masa_rules.cards import PhysicalCard
from masa_rules.elevator.rules import ElevatorRules
from masa_rules.elevator.state import Direction, Phase, State
from masa_rules.errors import RuleViolation
from masa_rules.shuffle import hand_seed

__all__ = ["position"]

_DEFAULT_RULES = ElevatorRules()


def position(  # noqa: PLR0913 - one keyword per part of the State a test sets up
    hands: Sequence[Sequence[str]],
    pile: Sequence[str],
    stock: Sequence[str] = (),
    *,
    rules: ElevatorRules = _DEFAULT_RULES,
    turn: int = 0,
    direction: Direction = Direction.ASCENDING,
    open_play: int | None = None,
    after_play: bool = False,
    forced_turns: int = 0,
    seed: str = "position",
) -> State:
    """A hand in play with these cards (physical codes such as ``8H`` or ``8H#1``).

    The pack need not be complete, but every card must belong to it (E-1) and no physical
    card may be in two places (C-4).
    """
    players = len(hands)
    rules.check_players(players)
    seated = tuple(tuple(PhysicalCard.parse(code) for code in hand) for hand in hands)
    placed = tuple(PhysicalCard.parse(code) for code in pile)
    rest = tuple(PhysicalCard.parse(code) for code in stock)
    every = [card for hand in seated for card in hand] + list(placed) + list(rest)
    if len(set(every)) != len(every):
        raise RuleViolation("C-4", "a physical card cannot be in two places")
    decks = rules.pack_count(players)
    strays = [card.code for card in every if card.copy >= decks]
    if strays:
        raise RuleViolation("E-1", f"not in a table of {decks} pack(s): {', '.join(strays)}")
    if not placed:
        raise RuleViolation("E-2", "the pile starts with a card")
    return State(
        rules=rules,
        players=players,
        hand_no=1,
        leader=0,
        decks=decks,
        seed=hand_seed(seed, 1),
        hands=seated,
        stock=rest,
        pile=placed,
        direction=direction,
        phase=Phase.PLAY,
        turn=turn,
        open_play=open_play,
        after_play=after_play,
        forced_turns=forced_turns,
        receiver=None,
        givers=(),
        winner=None,
        ranking=(),
        end_reason=None,
        action_count=0,
    )
