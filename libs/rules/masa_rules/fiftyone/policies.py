"""Built-in 51 policies for the simulator, bots and the autopilot.

Each is a :data:`~masa_rules.policy.Policy`: ``(state, seat, rng) -> action``. It reads only
what :func:`~masa_rules.fiftyone.view.view` shows that seat: its own hand, the table, the
discard pile and the public counters, plus the legal actions, which depend on nothing else.

- ``random``: a weighted draw among the legal actions, favouring opening, laying off and
  finishing so that games end.
- ``greedy``: opens as soon as it can, lays off whatever it can, takes a discard only when
  that makes its best arrangement strictly better after the discard it then makes, and
  discards the card that least hurts its best arrangement.

>>> from masa_rules.fiftyone.engine import new_game
>>> from masa_rules.ruleset import RuleSet
>>> state = new_game(RuleSet.classic(), 2, "doc")
>>> type(greedy_policy(state, state.turn.seat, DrawStream(b"doc"))).__name__
'Discard'
"""

from __future__ import annotations

from masa_rules.cards import Card, PhysicalCard
from masa_rules.errors import RuleViolation
from masa_rules.melds import card_value
from masa_rules.policy import Policy, weighted_index
from masa_rules.ruleset import IslekRule
from masa_rules.shuffle import DrawStream

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

__all__ = ["POLICIES", "greedy_policy", "random_policy"]

# Relative weights of the kinds of action (tenths).
_WEIGHTS: dict[type, int] = {
    LayDown: 400,
    TakeBottom: 400,
    LayOff: 100,
    RetrieveJoker: 3,
    Draw: 60,
    TakeDiscard: 10,
    Discard: 10,
    DeclarePairs: 1,
    ShowPairs: 5,
    ClaimBottom: 20,
    Answer: 10,
}


def random_policy(state: State, seat: int, rng: DrawStream) -> Action:
    """A weighted choice: a kind of action by its weight, then one of its instances uniformly.

    Kinds are listed lazily (rejection sampling): a kind that turns out empty is dropped and
    the draw repeated, which gives the same distribution as listing everything first.
    """
    kinds = legal_by_kind(state, seat)
    weights = [_WEIGHTS[kind] for kind, _ in kinds]
    while kinds:
        index = weighted_index(rng, weights)
        actions = kinds[index][1]()
        if actions:
            return actions[rng.below(len(actions))]
        del kinds[index], weights[index]
    raise RuleViolation("F-21", f"seat {seat} has no legal action")


def _first(actions: list[Action], kind: type) -> Action | None:
    return next((a for a in actions if isinstance(a, kind)), None)


def greedy_policy(state: State, seat: int, rng: DrawStream) -> Action:
    """Open at once, lay off everything, take a discard only when it pays, discard the least
    useful card."""
    actions = legal_actions(state, seat)
    if not actions:
        raise RuleViolation("F-21", f"seat {seat} has no legal action")
    if state.phase is Phase.QUERY:
        return Answer(seat, True)
    for kind in (TakeBottom, LayDown, LayOff):
        found = _first(actions, kind)
        if found is not None:
            return found
    if state.phase is Phase.DRAW:
        take = next((a for a in actions if isinstance(a, TakeDiscard) and not a.pairs), None)
        return take if take is not None and _take_pays(state, seat) else Draw(seat)
    discards = [a for a in actions if isinstance(a, Discard) and a.twin is None]
    if not discards:
        return actions[rng.below(len(actions))]
    return _best_discard(state, seat, discards)


def _take_pays(state: State, seat: int) -> bool:
    """Whether taking the top discard makes the best arrangement strictly better once another
    card is discarded (F-36: never the taken one). Drawing instead can always keep the hand's
    arrangement (the drawn card is discarded), so taking must beat it."""
    rules = state.rules
    faces = [c.card for c in state.seats[seat].hand]
    top = state.discard[-1].card
    before = cached_opening(faces, rules).value
    return any(
        cached_opening(_swapped(faces, out, top), rules).value > before
        for out in dict.fromkeys(faces)
    )


def _swapped(faces: list[Card], out: Card, top: Card) -> list[Card]:
    rest = list(faces)
    rest.remove(out)
    return [*rest, top]


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


POLICIES: dict[str, Policy[State, Action]] = {"random": random_policy, "greedy": greedy_policy}
