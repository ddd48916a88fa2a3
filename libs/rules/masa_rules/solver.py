"""The exact meld solver of 51: best opening, least penalty, pairs, lay-offs, joker retrieval.

Every answer is exact, never heuristic; the tests compare it with a brute-force oracle.

How the search works (best opening and least penalty share it):

- A hand is a multiset of at most two copies of each natural plus up to two jokers. Only the
  distinct naturals that lie in some meld candidate take part; each gets a *local bit*, ordered
  so that the card with the fewest candidates comes first.
- *Candidates* are precomputed per hand: every run interval and every set of 3 or 4 suits that
  the hand's naturals and jokers could fill, as a bitmask over local bits plus the number of
  positions no card of the hand can fill (*ext*, always jokers).
- The remaining hand is two integers, ``one`` (bits with at least one copy) and ``two`` (bits
  with two copies), and the number of jokers left. Taking a candidate spends naturals where the
  hand still has them and jokers elsewhere. The totals do not depend on the order candidates are
  taken in (two placements of the same card swap freely), so one fixed natural-first rule
  reaches every multiset of melds.
- The search branches on the lowest remaining bit (the *anchor*): either one copy of it stays
  in hand, or it goes into one of its candidates. Results are memoised on the remaining hand,
  and an upper bound (what every remaining card and joker could add at best) prunes branches
  that cannot beat the incumbent.
- With ``max_jokers_per_meld_at_opening = 1`` (remi) and both jokers in hand, which meld holds
  which joker matters, so candidates carry their joker positions explicitly instead.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from itertools import combinations
from typing import Final, NamedTuple

from .cards import Card
from .melds import (
    HIGH_ACE,
    LOW_ACE,
    Meld,
    MeldError,
    MeldKind,
    Placed,
    card_value,
    layoff_options,
    pair_meld,
    retrieve_joker,
)
from .ruleset import RuleSet

__all__ = [
    "Arrangement",
    "JokerRetrieval",
    "LayoffTarget",
    "PairsWithMeld",
    "best_opening",
    "best_pairs",
    "can_open",
    "hand_penalty",
    "joker_retrievals",
    "layoff_targets",
    "least_penalty",
    "max_pairs",
    "opening_keeping",
    "opening_reaches",
    "pairs_with_meld",
]


@dataclass(frozen=True, slots=True)
class Arrangement:
    """Disjoint melds taken from a hand, and the cards left over.

    ``value`` is the F-14 total of the melds; ``penalty`` what the leftover would cost in hand
    (F-90 card values, jokers at ``joker_hand_penalty``).
    """

    melds: tuple[Meld, ...]
    leftover: tuple[Card, ...]
    value: int
    penalty: int


class _Objective(enum.Enum):
    VALUE = "value"
    PENALTY = "penalty"


class _RawShape(NamedTuple):
    """A run or set by its represented faces, before it is mapped onto a hand's bits."""

    kind: MeldKind
    start: int
    faces: tuple[int, ...]
    value: int


class _Shape(NamedTuple):
    """A candidate meld: represented cards by face index, kind and first position."""

    kind: MeldKind
    start: int
    faces: tuple[int, ...]
    value: int
    mask: int
    mask2: int
    ext: int
    joker_at: tuple[int, ...]
    weight: int


def hand_penalty(cards: Sequence[Card], rules: RuleSet) -> int:
    """F-90: what cards left in hand cost, aces high and jokers at ``joker_hand_penalty``."""
    return sum(rules.joker_hand_penalty if c.is_joker else card_value(c, rules) for c in cards)


def _split_hand(hand: Sequence[Card]) -> tuple[list[int], list[Card]]:
    """Counts of each natural face, and the jokers in index order."""
    counts = [0] * 52
    for card in hand:
        if not card.is_joker:
            counts[card.index] += 1
    return counts, sorted((c for c in hand if c.is_joker), key=lambda c: c.index)


def _face(suit: int, position: int) -> int:
    return suit * 13 + (12 if position == LOW_ACE else position - 2)


def _position_value(position: int, rules: RuleSet) -> int:
    if position == LOW_ACE:
        return rules.ace_low_value
    if position == HIGH_ACE:
        return rules.ace_high_value
    return min(position, 10)


# Face tuples of every run (suit, first position, last position) and every set (rank, suits),
# built once: candidate generation runs for every hand and must not rebuild them.
_RUN_FACES: Final = {
    (suit, start, end): tuple(_face(suit, p) for p in range(start, end + 1))
    for suit in range(4)
    for start in range(LOW_ACE, HIGH_ACE - 1)
    for end in range(start + 2, HIGH_ACE + 1)
}
_SUIT_GROUPS: Final = tuple(
    (sum(1 << s for s in suits), suits) for size in (3, 4) for suits in combinations(range(4), size)
)
_SET_FACES: Final = {
    (rank, suits): tuple(s * 13 + rank - 2 for s in suits)
    for rank in range(2, HIGH_ACE + 1)
    for _, suits in _SUIT_GROUPS
}


class _Values(NamedTuple):
    """F-14 values by run position (index 0 unused) and by natural face, for one rule set."""

    positions: tuple[int, ...]
    faces: tuple[int, ...]


@cache
def _value_table(ace_low_value: int, ace_high_value: int) -> _Values:
    rules = (ace_low_value, ace_high_value)
    positions = tuple(
        0 if p == 0 else rules[0] if p == LOW_ACE else rules[1] if p == HIGH_ACE else min(p, 10)
        for p in range(HIGH_ACE + 1)
    )
    return _Values(positions, tuple(positions[face % 13 + 2] for face in range(52)))


def _values(rules: RuleSet) -> _Values:
    return _value_table(rules.ace_low_value, rules.ace_high_value)


def _raw_shapes(counts: Sequence[int], jokers: int, rules: RuleSet) -> list[_RawShape]:
    """Every run and set the hand could form with at most ``jokers`` jokers."""
    values = _values(rules).positions
    return [*_raw_runs(counts, jokers, rules, values), *_raw_sets(counts, jokers, values)]


def _raw_runs(
    counts: Sequence[int], jokers: int, rules: RuleSet, values: Sequence[int]
) -> list[_RawShape]:
    shapes: list[_RawShape] = []
    lowest = LOW_ACE if rules.ace_low else 2
    for suit in range(4):
        base = suit * 13
        have = [0, counts[base + 12], *counts[base : base + 13]]
        for start in range(lowest, HIGH_ACE - 1):
            ext = value = 0
            for position in range(start, HIGH_ACE + 1):
                available = have[position] - (1 if position == HIGH_ACE and start == LOW_ACE else 0)
                if available <= 0:
                    ext += 1
                    if ext > jokers:
                        break
                value += values[position]
                length = position - start + 1
                if length >= 3 and ext < length:
                    faces = _RUN_FACES[suit, start, position]
                    shapes.append(_RawShape(MeldKind.RUN, start, faces, value))
    return shapes


def _raw_sets(counts: Sequence[int], jokers: int, values: Sequence[int]) -> list[_RawShape]:
    shapes: list[_RawShape] = []
    for rank in range(2, HIGH_ACE + 1):
        present = sum(1 << s for s in range(4) if counts[s * 13 + rank - 2])
        if not present:
            continue
        for mask, suits in _SUIT_GROUPS:
            ext = (mask & ~present).bit_count()
            if ext <= jokers and ext < len(suits):
                value = values[rank] * len(suits)
                shapes.append(_RawShape(MeldKind.SET, rank, _SET_FACES[rank, suits], value))
    return shapes


class _Problem:
    """One hand prepared for the search: local bits, candidates and per-anchor lists."""

    def __init__(
        self, hand: Sequence[Card], rules: RuleSet, objective: _Objective, joker_limit: int
    ) -> None:
        self.rules = rules
        self.objective = objective
        self.counts, self.jokers = _split_hand(hand)
        # Either objective weighs a natural at its F-14 value with the ace high: its most in a
        # meld, and what it costs left in hand.
        values = _values(rules)
        face_weight = values.faces
        joker_count = len(self.jokers)
        # Natural-first spending is complete when maximising value; when minimising penalty a
        # joker may do better in a meld than a natural it displaces, and with one joker per meld
        # the placement matters, so those cases carry explicit joker positions.
        strict = joker_count > 0 and (objective is _Objective.PENALTY or joker_limit < joker_count)
        counts = self.counts
        raw = _raw_shapes(counts, min(joker_count, joker_limit), rules)
        order = _bit_order(raw, counts, face_weight)
        bit_of = {face: i for i, face in enumerate(order)}
        self.card_weight = [face_weight[f] for f in order]
        shapes: dict[tuple[int, int, int, int, tuple[int, ...]], _Shape] = {}
        placements = min(joker_count, joker_limit) if strict else None
        for kind, start, faces, value in raw:
            variants = [()] if placements is None else _joker_placements(faces, counts, placements)
            for joker_at in variants:
                shape = _local_shape(kind, start, faces, value, joker_at, bit_of, face_weight)
                key = (shape.mask, shape.mask2, shape.ext, value, joker_at)
                if key not in shapes:
                    shapes[key] = shape
        self.strict = strict
        self.shapes = list(shapes.values())
        self.by_anchor = _by_anchor(self.shapes, len(order))
        self.one = self.two = self.rest = 0
        for face, bit in bit_of.items():
            self.one |= 1 << bit
            if counts[face] >= 2:
                self.two |= 1 << bit
            self.rest += face_weight[face] * counts[face]
        if objective is _Objective.VALUE:
            self.joker_weight = max((self._max_position_value(s) for s in self.shapes), default=0)
        else:
            self.joker_weight = rules.joker_hand_penalty

    def _max_position_value(self, shape: _Shape) -> int:
        if shape.kind is MeldKind.SET:
            return _position_value(shape.start, self.rules)
        return max(_position_value(shape.start + i, self.rules) for i in range(len(shape.faces)))


def _bit_order(
    raw: Sequence[_RawShape], counts: Sequence[int], face_weight: Sequence[int]
) -> list[int]:
    """The faces the hand holds that some shape uses, the rarest in shapes first (bit 0)."""
    per_face: dict[int, int] = {}
    for _, _, faces, _ in raw:
        for face in faces:
            if counts[face]:
                per_face[face] = per_face.get(face, 0) + 1
    return sorted(per_face, key=lambda f: (per_face[f], -face_weight[f], f))


def _by_anchor(shapes: Sequence[_Shape], bits: int) -> list[list[_Shape]]:
    """For each bit, the shapes that use it; highest value first, so that good arrangements
    are found early and bound the rest."""
    by_anchor: list[list[_Shape]] = [[] for _ in range(bits)]
    for candidate in sorted(shapes, key=lambda s: -s.value):
        mask = candidate.mask
        while mask:
            low = mask & -mask
            by_anchor[low.bit_length() - 1].append(candidate)
            mask ^= low
    return by_anchor


def _local_shape(
    kind: MeldKind,
    start: int,
    faces: tuple[int, ...],
    value: int,
    joker_at: tuple[int, ...],
    bit_of: dict[int, int],
    face_weight: Sequence[int],
) -> _Shape:
    """A raw shape in the hand's local bits: jokers at ``joker_at`` and faces the hand lacks
    are counted in ``ext``; a face the shape needs twice sets its bit in ``mask2`` too."""
    mask = mask2 = fixed = weight = 0
    for i, face in enumerate(faces):
        if i in joker_at or face not in bit_of:
            fixed += 1
            continue
        bit = 1 << bit_of[face]
        if mask & bit:
            mask2 |= bit
        else:
            weight += face_weight[face]
        mask |= bit
    return _Shape(kind, start, faces, value, mask, mask2, fixed, joker_at, weight)


def _joker_placements(
    faces: tuple[int, ...], counts: Sequence[int], limit: int
) -> list[tuple[int, ...]]:
    """Joker positions (at most ``limit``) leaving naturals the hand holds everywhere else."""
    out: list[tuple[int, ...]] = []
    for size in range(min(limit, len(faces) - 1) + 1):
        for chosen in combinations(range(len(faces)), size):
            demand = Counter(f for i, f in enumerate(faces) if i not in chosen)
            if all(counts[f] >= n for f, n in demand.items()):
                out.append(chosen)
    return out


def _bits_weight(mask: int, weights: Sequence[int]) -> int:
    total = 0
    while mask:
        low = mask & -mask
        total += weights[low.bit_length() - 1]
        mask ^= low
    return total


_Memo = dict[tuple[int, int, int], tuple[int, bool, "_Shape | None"]]


def _run(  # noqa: C901, PLR0915 - the search's hot loop: a nested function, one frame per node
    problem: _Problem, alpha: int, *, satisfice: bool = False
) -> tuple[int, _Memo]:
    """Search the hand; the result exceeds ``alpha`` exactly when the optimum does.

    ``best(state, alpha)`` returns the exact optimum of the remaining hand when it exceeds
    ``alpha``, and otherwise some upper bound no greater than ``alpha``; the memo remembers
    which of the two it stored. With ``satisfice`` the search stops at the first arrangement
    above ``alpha``: every ancestor is then above its own floor too, so the whole search
    unwinds at once (those nodes are not memoised, their value being only a lower bound).
    """
    by_anchor = problem.by_anchor
    weights = problem.card_weight
    joker_weight = problem.joker_weight
    value_mode = problem.objective is _Objective.VALUE
    strict = problem.strict
    memo: _Memo = {}

    def best(one: int, two: int, jokers: int, rest: int, alpha: int) -> int:  # noqa: C901, PLR0912 - hot loop, one frame per node
        if not one:
            return 0
        bound = rest + jokers * joker_weight
        if bound <= alpha:
            return bound
        key = (one, two, jokers)
        hit = memo.get(key)
        if hit is not None and (hit[1] or hit[0] <= alpha):
            return hit[0]
        low = one & -one
        anchor = low.bit_length() - 1
        result = -1
        choice: _Shape | None = None
        for shape in by_anchor[anchor]:
            mask = shape.mask
            short = mask & ~one
            need = shape.ext + short.bit_count()
            if need > jokers or (strict and short):
                continue
            one1 = one & (~mask | two)
            two1 = two & ~mask
            spent = _bits_weight(mask & one, weights) if short else shape.weight
            mask2 = shape.mask2
            if mask2:
                short2 = mask2 & ~one1
                if strict and short2:
                    continue
                need += short2.bit_count()
                if need > jokers:
                    continue
                spent += _bits_weight(mask2 & one1, weights)
                one1, two1 = one1 & (~mask2 | two1), two1 & ~mask2
            gain = shape.value if value_mode else spent + need * joker_weight
            floor = (alpha if alpha > result else result) - gain
            total = gain + best(one1, two1, jokers - need, rest - spent, floor)
            if total > result:
                result, choice = total, shape
                if satisfice and result > alpha:
                    return result
        # One copy of the anchor stays in hand.
        floor = alpha if alpha > result else result
        rest -= weights[anchor]
        if two & low:
            kept = best(one, two ^ low, jokers, rest, floor)
        else:
            kept = best(one ^ low, two, jokers, rest, floor)
        if kept > result:
            result, choice = kept, None
        memo[key] = (result, result > alpha, choice)
        return result

    return best(problem.one, problem.two, len(problem.jokers), problem.rest, alpha), memo


def _search(problem: _Problem) -> list[_Shape]:
    """The shapes of an optimal arrangement (see the module docstring)."""
    _, memo = _run(problem, -1)
    chosen: list[_Shape] = []
    one, two, jokers = problem.one, problem.two, len(problem.jokers)
    while one:
        shape = memo[(one, two, jokers)][2]
        low = one & -one
        if shape is None:
            if two & low:
                two ^= low
            else:
                one ^= low
            continue
        chosen.append(shape)
        mask = shape.mask
        need = shape.ext + (mask & ~one).bit_count()
        one, two = one & (~mask | two), two & ~mask
        if shape.mask2:
            need += (shape.mask2 & ~one).bit_count()
            one, two = one & (~shape.mask2 | two), two & ~shape.mask2
        jokers -= need
    return chosen


def _materialise(problem: _Problem, shapes: Sequence[_Shape]) -> Arrangement:
    counts = list(problem.counts)
    jokers = list(problem.jokers)
    melds: list[Meld] = []
    # Any order spends the same number of jokers (module docstring); runs go first so that
    # jokers land in sets, where a table shows them most plainly.
    for shape in sorted(shapes, key=lambda s: s.kind is not MeldKind.RUN):
        placed: list[Placed] = []
        for i, face in enumerate(shape.faces):
            target = Card.from_index(face)
            use_joker = i in shape.joker_at if problem.strict else counts[face] == 0
            if use_joker:
                placed.append(Placed(jokers.pop(0), target))
            else:
                counts[face] -= 1
                placed.append(Placed.natural(target))
        if shape.kind is MeldKind.SET:
            placed.sort(key=lambda p: int(p.stands_for.natural_suit()))
        melds.append(Meld(shape.kind, tuple(placed), shape.start))
    melds.sort(key=lambda m: (m.kind is not MeldKind.RUN, m.sort_key()))
    leftover = [Card.from_index(face) for face in range(52) for _ in range(counts[face])]
    leftover += jokers
    rules = problem.rules
    return Arrangement(
        tuple(melds),
        tuple(leftover),
        sum(m.value(rules) for m in melds),
        hand_penalty(leftover, rules),
    )


def best_opening(hand: Sequence[Card], rules: RuleSet) -> Arrangement:
    """The disjoint melds of greatest total value the hand can lay down in an opening turn.

    Respects F-13 (``max_jokers_per_meld_at_opening``). Pairs are separate (:func:`max_pairs`).

    >>> from masa_rules.cards import parse_cards
    >>> hand = parse_cards("8H 9H 10H 10S 10D XR 2C".split())
    >>> arrangement = best_opening(hand, RuleSet.salon())
    >>> [str(m) for m in arrangement.melds], arrangement.value, [str(c) for c in arrangement.leftover]
    (['8H 9H 10H', '10S XR=10H 10D'], 57, ['2C'])
    """
    problem = _Problem(hand, rules, _Objective.VALUE, rules.max_jokers_per_meld_at_opening)
    return _materialise(problem, _search(problem))


def opening_reaches(hand: Sequence[Card], rules: RuleSet, threshold: int) -> bool:
    """Whether :func:`best_opening` is worth at least ``threshold``, decided faster.

    The search starts with the threshold as its floor, so that hands far from it are pruned
    at once, and stops at the first arrangement that reaches it.
    """
    if threshold <= 0:
        return True
    problem = _Problem(hand, rules, _Objective.VALUE, rules.max_jokers_per_meld_at_opening)
    return _run(problem, threshold - 1, satisfice=True)[0] >= threshold


def can_open(
    hand: Sequence[Card],
    rules: RuleSet,
    threshold: int,
    *,
    forced: Card | None = None,
    keep: int = 1,
) -> bool:
    """F-40, F-30, F-52: can melds worth ``threshold`` be laid down from ``hand`` in an
    opening turn, with ``forced`` in one of them and at least ``keep`` cards left in hand?

    ``keep`` is 1 by F-52 (the last card is the finishing discard). Exact: every candidate
    meld holding ``forced`` is tried with every joker placement, the rest of the hand then has
    to reach what is missing; cards are kept back one at a time.
    """
    if forced is None:
        return _reaches_keeping(list(hand), rules, threshold, keep)
    return _forced_opening(hand, rules, threshold, forced, keep) is not None


def opening_keeping(
    hand: Sequence[Card],
    rules: RuleSet,
    threshold: int,
    *,
    forced: Card | None = None,
    keep: int = 1,
) -> Arrangement | None:
    """An opening :func:`can_open` accepts, or None: with ``forced``, the first found; without,
    the best of those that keep ``keep`` cards (F-52: a card to discard).

    >>> from masa_rules.cards import parse_cards
    >>> hand = parse_cards("JS QS KS AS 10H JH QH KH AH".split())
    >>> found = opening_keeping(hand, RuleSet.classic(), 51)
    >>> found.value, [c.code for c in found.leftover]
    (82, ['JS'])
    """
    if forced is None:
        best = _best_keeping(list(hand), rules, keep)
        return best if best is not None and best.value >= threshold else None
    found = _forced_opening(hand, rules, threshold, forced, keep)
    if found is None:
        return None
    first, rest = found
    other = _best_keeping(rest, rules, keep)
    if other is None:
        return None
    value = first.value(rules) + other.value
    return Arrangement((first, *other.melds), other.leftover, value, other.penalty)


def _forced_opening(
    hand: Sequence[Card], rules: RuleSet, threshold: int, forced: Card, keep: int
) -> tuple[Meld, list[Card]] | None:
    """A meld holding ``forced`` whose rest of the hand reaches the threshold, and that rest."""
    if forced not in hand:
        return None
    counts, jokers = _split_hand(hand)
    limit = min(len(jokers), rules.max_jokers_per_meld_at_opening)
    for kind, start, faces, value in _raw_shapes(counts, limit, rules):
        if not forced.is_joker and forced.index not in faces:
            continue
        for joker_at in _joker_placements(faces, counts, limit):
            naturals = [f for i, f in enumerate(faces) if i not in joker_at]
            if (forced.index not in naturals) if not forced.is_joker else not joker_at:
                continue
            rest = list(hand)
            for face in naturals:
                rest.remove(Card.from_index(face))
            spent = [j for j in jokers if j != forced][: len(joker_at) - forced.is_joker]
            used = ([forced] if forced.is_joker else []) + spent
            for joker in used:
                rest.remove(joker)
            if _reaches_keeping(rest, rules, threshold - value, keep):
                return _shape_meld(kind, start, faces, joker_at, used), rest
    return None


def _shape_meld(
    kind: MeldKind, start: int, faces: Sequence[int], joker_at: Sequence[int], jokers: list[Card]
) -> Meld:
    spare = iter(jokers)
    placed = [
        Placed(next(spare), Card.from_index(face))
        if i in joker_at
        else Placed.natural(Card.from_index(face))
        for i, face in enumerate(faces)
    ]
    if kind is MeldKind.SET:
        placed.sort(key=lambda p: int(p.stands_for.natural_suit()))
    return Meld(kind, tuple(placed), start)


def _best_keeping(hand: list[Card], rules: RuleSet, keep: int) -> Arrangement | None:
    """The best opening arrangement that leaves at least ``keep`` cards, None if none can.

    Exact: an arrangement that keeps a card is an arrangement of the hand without that card.
    """
    if len(hand) < keep:
        return None
    best = best_opening(hand, rules)
    if len(best.leftover) >= keep:
        return best
    found: Arrangement | None = None
    for card in dict.fromkeys(hand):
        rest = list(hand)
        rest.remove(card)
        other = _best_keeping(rest, rules, keep - 1)
        if other is not None and (found is None or other.value > found.value):
            leftover = (*other.leftover, card)
            found = Arrangement(other.melds, leftover, other.value, hand_penalty(leftover, rules))
    return found


def _reaches_keeping(hand: list[Card], rules: RuleSet, threshold: int, keep: int) -> bool:
    if len(hand) < keep:
        return False
    if not opening_reaches(hand, rules, threshold):
        return False
    if keep == 0 or threshold <= 0:
        return True
    for card in dict.fromkeys(hand):
        rest = list(hand)
        rest.remove(card)
        if _reaches_keeping(rest, rules, threshold, keep - 1):
            return True
    return False


def least_penalty(hand: Sequence[Card], rules: RuleSet) -> Arrangement:
    """The melds that leave the least penalty in hand (for bots and end-of-hand display)."""
    problem = _Problem(hand, rules, _Objective.PENALTY, 2)
    return _materialise(problem, _search(problem))


def best_pairs(hand: Sequence[Card], rules: RuleSet) -> list[Meld]:
    """F-15: as many disjoint pairs as the hand holds (identical naturals, or natural + joker)."""
    counts: dict[Card, int] = {}
    jokers = sorted((c for c in hand if c.is_joker), key=lambda c: c.index)
    for card in hand:
        if not card.is_joker:
            counts[card] = counts.get(card, 0) + 1
    doubles = sorted((c for c, n in counts.items() if n >= 2), key=Card.sort_key)
    singles = sorted((c for c, n in counts.items() if n == 1), key=lambda c: -card_value(c, rules))
    pairs = [pair_meld(c, c, rules) for c in doubles]
    for card in singles:
        if not jokers:
            break
        pairs.append(pair_meld(card, jokers.pop(0), rules))
    if len(jokers) == 2 and rules.joker_pair_allowed:
        pairs.append(Meld(MeldKind.PAIR, tuple(Placed(j, j) for j in jokers), 0))
    elif len(jokers) == 2 and doubles:
        # Splitting one natural pair gives two joker pairs: one pair more.
        card = doubles[-1]
        pairs.remove(next(p for p in pairs if p.cards[0].card == card))
        pairs += [pair_meld(card, jokers[0], rules), pair_meld(card, jokers[1], rules)]
    return pairs


def max_pairs(hand: Sequence[Card], rules: RuleSet) -> int:
    """F-15: the maximum number of disjoint pairs in the hand."""
    return len(best_pairs(hand, rules))


@dataclass(frozen=True, slots=True)
class PairsWithMeld:
    """F-43: four pairs plus one meld, disjoint."""

    pairs: tuple[Meld, ...]
    meld: Meld


def pairs_with_meld(hand: Sequence[Card], rules: RuleSet) -> PairsWithMeld | None:
    """F-43: whether ``pairs_with_meld`` pairs plus one meld exist in the hand, and one such."""
    needed = rules.pairs_with_meld
    if needed is None:
        return None
    counts, jokers = _split_hand(hand)
    limit = min(len(jokers), rules.max_jokers_per_meld_at_opening)
    for kind, start, faces, _ in _raw_shapes(counts, limit, rules):
        for joker_count in range(limit + 1):
            for joker_at in combinations(range(len(faces)), joker_count):
                rest = list(counts)
                feasible = True
                for i, face in enumerate(faces):
                    if i not in joker_at:
                        rest[face] -= 1
                        feasible = feasible and rest[face] >= 0
                if not feasible or joker_count >= len(faces):
                    continue
                remaining = [Card.from_index(f) for f in range(52) for _ in range(rest[f])]
                remaining += jokers[joker_count:]
                pairs = best_pairs(remaining, rules)
                if len(pairs) < needed:
                    continue
                placed = [
                    Placed(jokers[joker_at.index(i)], Card.from_index(face))
                    if i in joker_at
                    else Placed.natural(Card.from_index(face))
                    for i, face in enumerate(faces)
                ]
                if kind is MeldKind.SET:
                    placed.sort(key=lambda p: int(p.stands_for.natural_suit()))
                return PairsWithMeld(tuple(pairs[:needed]), Meld(kind, tuple(placed), start))
    return None


@dataclass(frozen=True, slots=True)
class LayoffTarget:
    """F-50: ``card`` can be laid off on table meld ``meld_index``, giving ``result``."""

    card: Card
    meld_index: int
    result: Meld


def layoff_targets(
    hand: Sequence[Card], table: Sequence[Meld], rules: RuleSet
) -> list[LayoffTarget]:
    """F-50, F-51: every (card, meld) of the hand and the table where the card can go.

    Pairs on a pair opener's area take a whole identical pair (F-50), listed once per card.
    """
    out: list[LayoffTarget] = []
    seen: set[tuple[Card, int]] = set()
    counts: dict[Card, int] = {}
    for card in hand:
        counts[card] = counts.get(card, 0) + 1
    for card in hand:
        for index, meld in enumerate(table):
            if (card, index) in seen:
                continue
            seen.add((card, index))
            if meld.kind is MeldKind.PAIR:
                face = meld.cards[0].stands_for
                if not card.is_joker and card == face and counts[card] >= 2:
                    out.append(LayoffTarget(card, index, pair_meld(card, card, rules)))
                continue
            for result in layoff_options(meld, card, rules):
                out.append(LayoffTarget(card, index, result))
    return out


@dataclass(frozen=True, slots=True)
class JokerRetrieval:
    """F-55: putting ``natural`` into table meld ``meld_index`` frees ``joker``."""

    natural: Card
    meld_index: int
    joker: Card
    result: Meld


def joker_retrievals(
    hand: Sequence[Card], table: Sequence[Meld], rules: RuleSet
) -> list[JokerRetrieval]:
    """F-55: every way a natural card of the hand can release a joker from a table meld."""
    out: list[JokerRetrieval] = []
    for natural in sorted({c for c in hand if not c.is_joker}, key=Card.sort_key):
        for index, meld in enumerate(table):
            if not meld.jokers:
                continue
            try:
                result, joker = retrieve_joker(meld, natural, rules)
            except MeldError:
                continue
            out.append(JokerRetrieval(natural, index, joker, result))
    return out
