"""Built-in 51 policies for the simulator, bots and the autopilot.

A policy is ``(state, seat, rng) -> action``. It reads only what :func:`~masa_rules.fiftyone.view.view`
shows that seat: its own hand, the table, the discard pile and the public counters, plus the
legal actions, which depend on nothing else.

- ``random``: a weighted draw among the legal actions, favouring opening, laying off and
  finishing so that games end.
- ``greedy``: opens as soon as it can, lays off whatever it can, and discards the card that
  least hurts its best arrangement.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from masa_rules.cards import PhysicalCard
from masa_rules.errors import RuleViolation
from masa_rules.melds import card_value
from masa_rules.ruleset import IslekRule

from .actions import (
    Action,
    Answer,
    ClaimBottom,
    DeclarePairs,
    Discard,
    Draw,
    LayDown,
    LayOff,
    RetrieveJoker,
    ShowPairs,
    TakeBottom,
    TakeDiscard,
)
from .legal import legal_actions, legal_by_kind
from .melding import cached_opening, islek_faces
from .state import Phase, State

__all__ = ["POLICIES", "Policy", "greedy_policy", "random_policy"]

Policy = Callable[[State, int, random.Random], Action]

_WEIGHTS: dict[type, float] = {
    LayDown: 40.0,
    TakeBottom: 40.0,
    LayOff: 10.0,
    RetrieveJoker: 0.3,
    Draw: 6.0,
    TakeDiscard: 1.0,
    Discard: 1.0,
    DeclarePairs: 0.1,
    ShowPairs: 0.5,
    ClaimBottom: 2.0,
    Answer: 1.0,
}


def random_policy(state: State, seat: int, rng: random.Random) -> Action:
    """A weighted choice: a kind of action by its weight, then one of its instances uniformly.

    Kinds are listed lazily (rejection sampling): a kind that turns out empty is dropped and
    the draw repeated, which gives the same distribution as listing everything first.
    """
    kinds = legal_by_kind(state, seat)
    weights = [_WEIGHTS[kind] for kind, _ in kinds]
    while kinds:
        index = rng.choices(range(len(kinds)), weights)[0]
        actions = kinds[index][1]()
        if actions:
            return rng.choice(actions)
        del kinds[index], weights[index]
    raise RuleViolation("F-21", f"seat {seat} has no legal action")


def _first(actions: list[Action], kind: type) -> Action | None:
    return next((a for a in actions if isinstance(a, kind)), None)


def greedy_policy(state: State, seat: int, rng: random.Random) -> Action:
    """Open at once, lay off everything, discard the least useful card."""
    actions = legal_actions(state, seat)
    if state.phase is Phase.QUERY:
        return Answer(seat, True)
    for kind in (TakeBottom, LayDown, LayOff):
        found = _first(actions, kind)
        if found is not None:
            return found
    if state.phase is Phase.DRAW:
        take = next((a for a in actions if isinstance(a, TakeDiscard) and not a.pairs), None)
        return take if take is not None and _helps(state, seat) else Draw(seat)
    discards = [a for a in actions if isinstance(a, Discard) and a.twin is None]
    if not discards:
        return rng.choice(actions)
    return _best_discard(state, seat, discards)


def _helps(state: State, seat: int) -> bool:
    """Whether the top discard raises the value of the seat's best arrangement."""
    faces = [c.card for c in state.seats[seat].hand]
    top = state.discard[-1].card
    before = cached_opening(faces, state.rules).value
    return cached_opening([*faces, top], state.rules).value > before


def _best_discard(state: State, seat: int, discards: list[Discard]) -> Discard:
    rules = state.rules
    hand = state.seats[seat].hand
    faces = [c.card for c in hand]
    best = cached_opening(faces, rules)
    spare = list(best.leftover)
    islek = islek_faces(state.table, rules) if rules.islek is IslekRule.PENALTY else frozenset()

    def score(card: PhysicalCard) -> tuple[int, int, int]:
        face = card.card
        if face.is_joker:
            return (-1000, 0, 0)
        rest = list(faces)
        rest.remove(face)
        kept = best.value if face in spare else cached_opening(rest, rules).value
        neighbours = sum(
            1
            for other in faces
            if other is not face
            and not other.is_joker
            and (
                other.rank == face.rank
                or (
                    other.suit == face.suit
                    and abs(int(other.natural_rank()) - int(face.natural_rank())) <= 2
                )
            )
        )
        penalty = -rules.islek_penalty if card.face_index in islek else 0
        return (kept + penalty, card_value(face, rules) - 3 * neighbours, -card.id)

    if len(hand) == 1:
        return discards[0]
    candidates = [a for a in discards if a.card.card in spare] or discards
    return max(candidates, key=lambda a: score(a.card))


POLICIES: dict[str, Policy] = {"random": random_policy, "greedy": greedy_policy}
