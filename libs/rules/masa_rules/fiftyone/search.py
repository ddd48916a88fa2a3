"""The ``hard`` 51 player: an expectimax over the next card, from one seat's view.

``normal`` (:func:`~masa_rules.fiftyone.policies.greedy_policy`) keeps the hand's best
arrangement and throws what looks least useful; it never asks which cards are still out
there. ``hard`` plays every step of a turn as ``normal`` does (answering a query, taking the
bottom card, opening as soon as it can, laying off everything) except the two choices that
decide how fast a hand comes together, which it makes by looking one card ahead:

- **which card to discard**: for each distinct face among the cards the best arrangement
  leaves over (all the hand's when it leaves none), the hand it keeps is worth the expected
  *cost* after the next draw, averaged over every card the seat has not seen (the pack less
  its own hand, the discard pile, the table, the face-up bottom card and the twins others
  have shown), each face weighted by its unseen copies; after drawing a card the seat
  discards its worst leftover (never a joker), so a card only counts when it improves the
  hand. Cards that can improve nothing (no joker, not of the rank or the suit within two
  ranks of a leftover card, nor next to or of the rank of a melded one, two ranks when the
  hand holds a joker, nor a second copy of a leftover card) are counted without being tried,
  as leaving the cost as it was (a low one kept instead of a higher leftover is not credited).
  An işlek discard (F-61) adds its fine where the preset charges one (salon), and where it is
  free (remi) the cost of a card left over, since it hands the next seat a lay-off.
- **draw or take the discard** (F-30..F-33): taking is worth the cost of the hand with the
  discard once its worst leftover other than the taken card is thrown (F-36); drawing is
  worth the same expectation as above.

A hand's cost reads its best opening arrangement (the solver's, memoised as the engine's
own): every card left over costs :data:`_CARD_WEIGHT` and a tenth of its F-90 value, and a
seat that has not opened pays for every point its best arrangement is short of the threshold,
plus a step for not reaching it at all (a partner's opening lets a seat lay off, not lay down
its own melds, F-46). A hand that melds every card, and may lay them down, costs
:data:`_FINISH`. The lowest expected cost wins; ties keep ``normal``'s choice.

Only the seat's view is read (:func:`~masa_rules.fiftyone.view.view`): its own hand and what
is public, so two states that differ in hidden cards give the same decision. It is anytime:
``normal``'s choice is costed first and the other discards after it while ``budget_seconds``
of ``clock`` have not passed (checked before each; the thread's CPU time by default, the bot
service passes a wall clock), and the cheapest costed is played. Without a budget every
candidate is costed; there are at most a hand's faces, each over at most the pack's faces,
so a decision always ends.

>>> from masa_rules.fiftyone import new_game, legal_actions
>>> state = new_game(RuleSet.salon(), 4, "doc")
>>> seat = state.turn.seat
>>> search(state, seat, DrawStream(b"doc"), budget_seconds=None) in legal_actions(state, seat)
True
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from masa_rules.cards import Card, fiftyone_pack
from masa_rules.policy import Policy
from masa_rules.ruleset import IslekRule, RuleSet
from masa_rules.shuffle import DrawStream
from masa_rules.solver import Arrangement, hand_penalty

from .actions import Action, Discard, Draw, TakeDiscard
from .legal import legal_by_kind
from .melding import cached_opening, islek_faces
from .policies import greedy_policy
from .state import State
from .view import View, view

__all__ = ["DEFAULT_BUDGET_SECONDS", "hard_policy", "search"]

# The bot service's default budget per decision (200 ms of one core).
DEFAULT_BUDGET_SECONDS: Final = 0.2

# The cost of a hand, in tenths of a card (tuned on 800 salon hands against three normal
# seats; a point short of the threshold weighs like a fifth of a card left over).
_CARD_WEIGHT: Final = 10.0
_PENALTY_WEIGHT: Final = 0.1
_SHORT_WEIGHT: Final = 2.0
_UNOPENED: Final = 30.0
# Every card of the hand melds: the hand is (nearly) out, worth more than any other outcome.
_FINISH: Final = -1000.0
# An işlek fine (F-61) is paid for certain, where a point in hand is paid only if another seat
# finishes first: a fined point weighs ten times a point held.
_FINE_WEIGHT: Final = 1.0
# Where işlek discards are free (remi), one still hands the next opened seat a card to lay
# off: it weighs a card of ours left over.
_FED: Final = _CARD_WEIGHT

_PACK: Final = Counter(card.face_index for card in fiftyone_pack())


@dataclass(frozen=True, slots=True)
class _Reading:
    """What the view says that the search needs: the rules, whether the seat counts as
    opened, the threshold it must reach if not, and the unseen faces with their copies."""

    rules: RuleSet
    opened: bool
    threshold: int
    unseen: tuple[tuple[int, int], ...]
    total: int
    # What each face costs left in hand (F-90), by face index.
    penalties: tuple[int, ...]


def _reading(seen: View) -> _Reading | None:
    """None when the seat opens by pairs only (F-70): its plan is not melds, ``normal`` plays."""
    seat, hand = seen.seat, seen.hand
    if seat is None or hand is None or seen.threshold is None:
        return None
    # Physical cards, so that a shown twin (F-61) later laid down is counted once.
    seen_cards = {
        *hand,
        *seen.discard,
        *(card for meld in seen.table for card in meld.cards),
        *((seen.bottom_card,) if seen.bottom_card is not None else ()),
        *(
            card
            for other, public in enumerate(seen.seats)
            if other != seat
            for card in public.shown_twins
        ),
    }
    unseen = _PACK - Counter(card.face_index for card in seen_cards)
    return _Reading(
        rules=seen.rules,
        # A partner's opening lets the seat lay off, not lay down its own melds (F-46): those
        # still need the threshold.
        opened=seen.seats[seat].opened,
        threshold=seen.threshold,
        unseen=tuple(sorted(unseen.items())),
        total=sum(unseen.values()),
        penalties=_penalties(seen.rules),
    )


@lru_cache(maxsize=16)
def _penalties(rules: RuleSet) -> tuple[int, ...]:
    return tuple(hand_penalty([Card.from_index(face)], rules) for face in range(max(_PACK) + 1))


def _cost(arrangement: Arrangement, left: int, penalty: int, reading: _Reading) -> float:
    cost = left * _CARD_WEIGHT + penalty * _PENALTY_WEIGHT
    short = reading.threshold - arrangement.value
    if not reading.opened and short > 0:
        cost += short * _SHORT_WEIGHT + _UNOPENED
    return cost


def _arrangement(faces: tuple[int, ...], rules: RuleSet) -> Arrangement:
    return cached_opening([Card.from_index(face) for face in faces], rules)


def _cost_after_discard(faces: tuple[int, ...], reading: _Reading, taken: int = -1) -> float:
    """The cost of a hand one card over, once its worst leftover (never ``taken``, F-36) is
    thrown."""
    arrangement = _arrangement(faces, reading.rules)
    if not arrangement.leftover and (reading.opened or arrangement.value >= reading.threshold):
        return _FINISH
    # A joker is never the card thrown (the discard choice keeps it too), nor is the card
    # just taken (one copy of its face).
    spare = [card.index for card in arrangement.leftover if not card.is_joker]
    if taken in spare:
        spare.remove(taken)
    if not spare:
        return _cost(arrangement, len(arrangement.leftover), arrangement.penalty, reading)
    worst = max(reading.penalties[face] for face in spare)
    return _cost(arrangement, len(arrangement.leftover) - 1, arrangement.penalty - worst, reading)


def _within(rank: int, other: int, step: int) -> bool:
    # An ace (rank 14) also stands below the 2.
    ranks = (rank, 1) if rank == 14 else (rank,)
    others = (other, 1) if other == 14 else (other,)
    return any(abs(a - b) <= step for a in ranks for b in others)


def _near(face: int, step: int) -> frozenset[int]:
    """The faces that could meld with ``face``: its rank in any suit, its suit within
    ``step`` ranks (the ace at both ends), and the jokers. A joker adds nothing of its own: a
    meld of it and one drawn card needs a third, which is near that third card already."""
    card = Card.from_index(face)
    near: set[int] = set()
    for other in _PACK:
        candidate = Card.from_index(other)
        if candidate.is_joker:
            near.add(other)
        elif card.is_joker:
            continue
        elif int(candidate.natural_rank()) == int(card.natural_rank()) or (
            candidate.suit == card.suit
            and _within(int(card.natural_rank()), int(candidate.natural_rank()), step)
        ):
            near.add(other)
    return frozenset(near)


# A loose card melds with a card two ranks away (the gap filled); a melded one is extended by
# a card next to it or of its rank.
_NEAR_LOOSE: Final = {face: _near(face, 2) for face in _PACK}
_NEAR_MELDED: Final = {face: _near(face, 1) for face in _PACK}
_JOKERS: Final = frozenset(face for face in _PACK if Card.from_index(face).is_joker)


def _joining(faces: tuple[int, ...], arrangement: Arrangement) -> frozenset[int]:
    """The faces a card drawn to this hand could improve it with: near a leftover card, or
    next to a melded one; never a second copy of a leftover natural, which melds with nothing
    the first does not."""
    loose = [card.index for card in arrangement.leftover]
    melded = list(faces)
    for face in loose:
        melded.remove(face)
    # A joker in a run stands between or beyond naturals: a card two ranks from one may
    # extend that run.
    extended = _NEAR_LOOSE if any(face in _JOKERS for face in faces) else _NEAR_MELDED
    near = frozenset().union(
        *(_NEAR_LOOSE[face] for face in loose), *(extended[face] for face in melded)
    )
    return near - (frozenset(loose) - _JOKERS)


def _after_draw(faces: tuple[int, ...], reading: _Reading) -> float:
    """The expected cost of keeping ``faces`` once the next card is drawn (and the worst
    card thrown)."""
    arrangement = _arrangement(faces, reading.rules)
    base = _cost(arrangement, len(arrangement.leftover), arrangement.penalty, reading)
    joining = _joining(faces, arrangement)
    weighed, unchanged = 0.0, reading.total
    for face, copies in reading.unseen:
        if face in joining:
            unchanged -= copies
            weighed += copies * min(base, _cost_after_discard((*faces, face), reading))
    return (weighed + unchanged * base) / reading.total if reading.total else base


def search(
    state: State,
    seat: int,
    rng: DrawStream,
    *,
    budget_seconds: float | None = DEFAULT_BUDGET_SECONDS,
    clock: Callable[[], float] = time.thread_time,
) -> Action:
    """The ``hard`` action of ``seat`` (see the module doc); ``rng`` feeds ``normal``'s
    choices, which ``hard`` keeps wherever it does not search."""
    deadline = math.inf if budget_seconds is None else clock() + budget_seconds
    fallback = greedy_policy(state, seat, rng)
    if not isinstance(fallback, Draw | TakeDiscard | Discard):
        return fallback
    seen = view(state, seat)
    reading = _reading(seen)
    if reading is None or seen.hand is None or len(seen.hand) <= 2:
        return fallback
    faces = tuple(card.face_index for card in seen.hand)
    if isinstance(fallback, Discard):
        return _discard(state, seat, fallback, faces, reading, deadline, clock)
    return _draw_or_take(state, seat, fallback, faces, reading)


def _legal(state: State, seat: int, kind: type) -> list[Action]:
    """The legal actions of one kind only: listing every kind would run the solver for the
    lay-downs, which ``normal`` has just done (a take to go pairs is its own kind, F-31)."""
    return [
        action for listed, make in legal_by_kind(state, seat) if listed is kind for action in make()
    ]


def _draw_or_take(
    state: State, seat: int, fallback: Action, faces: tuple[int, ...], reading: _Reading
) -> Action:
    take = next(iter(_legal(state, seat, TakeDiscard)), None)
    if take is None:
        return fallback
    top = state.discard[-1].face_index
    taking = _cost_after_discard((*faces, top), reading, taken=top)
    drawing = _after_draw(faces, reading)
    if taking == drawing:
        return fallback
    return take if taking < drawing else Draw(seat)


def _discard(
    state: State,
    seat: int,
    fallback: Discard,
    faces: tuple[int, ...],
    reading: _Reading,
    deadline: float,
    clock: Callable[[], float],
) -> Action:
    rules = reading.rules
    islek = islek_faces(state.table, rules)
    fed = rules.islek_penalty * _FINE_WEIGHT if rules.islek is IslekRule.PENALTY else _FED
    discards = [
        a for a in _legal(state, seat, Discard) if isinstance(a, Discard) and a.twin is None
    ]
    # normal's choice first, then one discard per face of the cards its best arrangement
    # leaves over (breaking a meld to keep a loose card rarely pays, and costing only the
    # loose cards keeps a decision within its budget);
    # a joker is kept for the melds (and for F-91's doubled finish), as normal keeps it.
    loose = {card.index for card in _arrangement(faces, rules).leftover}
    order = [
        fallback,
        *(a for a in discards if a != fallback and (not loose or a.card.face_index in loose)),
    ]
    best: Discard = fallback
    best_cost = math.inf
    tried: set[int] = set()
    for action in order:
        face = action.card.face_index
        if face in tried or (action.card.card.is_joker and action is not fallback):
            continue
        if tried and clock() > deadline:
            break
        tried.add(face)
        rest = list(faces)
        rest.remove(face)
        cost = _after_draw(tuple(rest), reading)
        if face in islek:
            cost += fed
        if cost < best_cost:
            best, best_cost = action, cost
    return best


def hard_policy(budget_seconds: float | None = DEFAULT_BUDGET_SECONDS) -> Policy[State, Action]:
    """:func:`search` with this budget, as a policy ``(state, seat, rng) -> action``."""

    def policy(state: State, seat: int, rng: DrawStream) -> Action:
        return search(state, seat, rng, budget_seconds=budget_seconds)

    return policy
