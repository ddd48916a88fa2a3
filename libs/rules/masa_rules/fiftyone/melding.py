"""Melds made of physical cards, işlek cards and what a hand can still do (F-13..F-61).

The solver and the meld validator work on card faces; the engine tracks physical cards (C-4).
This module maps between the two and answers the feasibility questions the engine asks before
it lets a seat take on an obligation, so that no legal sequence of actions can leave a seat
unable to finish its turn:

- :func:`can_open`: can this hand open now (F-40..F-43), optionally with a given card in the
  opening (F-30)?
- :func:`can_use`: can an opened seat still lay down or lay off a given card this turn (F-33,
  F-55)?

:func:`can_open` is exact (the solver's :func:`~masa_rules.solver.can_open` tries every meld
holding the card with every joker placement). :func:`can_use` searches the natural-first melds
that contain the card (:func:`melds_with`): a joker fills a position only where the hand has no
natural for it, which loses nothing when any meld of any value will do.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import lru_cache
from itertools import combinations
from typing import cast

from masa_rules.cards import Card, PhysicalCard, Rank, Suit
from masa_rules.melds import HIGH_ACE, LOW_ACE, Meld, MeldError, MeldKind, default_reading
from masa_rules.ruleset import RuleSet
from masa_rules.solver import (
    Arrangement,
    PairsWithMeld,
    best_opening,
    best_pairs,
    pairs_with_meld,
)
from masa_rules.solver import (
    can_open as solver_can_open,
)
from masa_rules.solver import (
    opening_keeping as solver_opening_keeping,
)
from masa_rules.solver import (
    opening_reaches as solver_reaches,
)

from .actions import MeldSpec
from .state import TableMeld

__all__ = [
    "align",
    "cached_opening",
    "cached_opening_keeping",
    "cached_pairs",
    "cached_pairs_with_meld",
    "can_open",
    "can_use",
    "islek_faces",
    "joker_fits_table",
    "melds_with",
    "opening_bound",
    "opening_reaches",
    "pairs_bound",
    "read_meld",
]


def align(meld: Meld, physical: Sequence[PhysicalCard]) -> tuple[PhysicalCard, ...]:
    """The physical cards of ``physical`` in the order of ``meld``'s placed cards."""
    pool = list(physical)
    out: list[PhysicalCard] = []
    for placed in meld.cards:
        index = placed.card.index
        for i, card in enumerate(pool):
            if card.face_index == index:
                out.append(pool.pop(i))
                break
        else:
            raise MeldError("C-4", f"no physical card for {placed.card.code}")
    return tuple(out)


def read_meld(
    spec: MeldSpec, rules: RuleSet, *, opening: bool
) -> tuple[Meld, tuple[PhysicalCard, ...]]:
    """C-2: the meld a client wrote (jokers annotated or not) and its physical cards."""
    meld = default_reading([(card.card, note) for card, note in spec], rules, opening=opening)
    return meld, align(meld, [card for card, _ in spec])


# Face indices 0..51 are naturals, 52 and 53 the jokers (masa_rules.cards).
JOKER_INDEX = 52
_RULES: list[RuleSet] = []
_RULE_KEYS: dict[RuleSet, int] = {}


def _rules_key(rules: RuleSet) -> int:
    """A small int per distinct option set, so the memo keys stay cheap to hash and compare.

    One entry per distinct RuleSet value: tables with the same options share their memo.
    """
    key = _RULE_KEYS.get(rules)
    if key is None:
        key = _RULE_KEYS[rules] = len(_RULES)
        _RULES.append(rules)
    return key


Cards = Sequence[Card] | Sequence[PhysicalCard]


def _indices(cards: Cards) -> list[int]:
    """Face indices of faces or physical cards (a physical card's is a plain attribute)."""
    if cards and isinstance(cards[0], PhysicalCard):
        return [c.face_index for c in cast(Sequence[PhysicalCard], cards)]
    return [c.index for c in cast(Sequence[Card], cards)]


def _faces_key(cards: Cards) -> tuple[int, ...]:
    return tuple(sorted(_indices(cards)))


@lru_cache(maxsize=16384)
def _opening(faces: tuple[int, ...], key: int) -> Arrangement:
    return best_opening([Card.from_index(f) for f in faces], _RULES[key])


@lru_cache(maxsize=16384)
def _reaches(faces: tuple[int, ...], key: int, threshold: int) -> bool:
    return solver_reaches([Card.from_index(f) for f in faces], _RULES[key], threshold)


@lru_cache(maxsize=16384)
def _pairs(faces: tuple[int, ...], key: int) -> tuple[Meld, ...]:
    return tuple(best_pairs([Card.from_index(f) for f in faces], _RULES[key]))


@lru_cache(maxsize=4096)
def _pairs_with_meld(faces: tuple[int, ...], key: int) -> PairsWithMeld | None:
    return pairs_with_meld([Card.from_index(f) for f in faces], _RULES[key])


def cached_opening(cards: Cards, rules: RuleSet) -> Arrangement:
    """:func:`~masa_rules.solver.best_opening`, memoised on the multiset of faces."""
    return _opening(_faces_key(cards), _rules_key(rules))


@lru_cache(maxsize=4096)
def _opening_keeping(
    faces: tuple[int, ...], key: int, threshold: int, forced: int
) -> Arrangement | None:
    hand = [Card.from_index(f) for f in faces]
    taken = None if forced < 0 else Card.from_index(forced)
    return solver_opening_keeping(hand, _RULES[key], threshold, forced=taken)


def cached_opening_keeping(
    cards: Cards, rules: RuleSet, threshold: int, forced: Card | None = None
) -> Arrangement | None:
    """:func:`~masa_rules.solver.opening_keeping` (F-52: a card stays to discard), memoised."""
    forced_index = -1 if forced is None else forced.index
    return _opening_keeping(_faces_key(cards), _rules_key(rules), threshold, forced_index)


def cached_pairs(cards: Cards, rules: RuleSet) -> tuple[Meld, ...]:
    """:func:`~masa_rules.solver.best_pairs`, memoised on the multiset of faces."""
    return _pairs(_faces_key(cards), _rules_key(rules))


def pairs_bound(cards: Cards) -> int:
    """An upper bound of the pairs a hand holds: its doubles plus one per joker (F-15)."""
    faces = [f for f in _indices(cards) if f < JOKER_INDEX]
    return len(faces) - len(set(faces)) + (len(cards) - len(faces))


def cached_pairs_with_meld(cards: Cards, rules: RuleSet) -> PairsWithMeld | None:
    """:func:`~masa_rules.solver.pairs_with_meld`, memoised, skipped when too few pairs exist."""
    needed = rules.pairs_with_meld
    if needed is None or pairs_bound(cards) < needed or len(cached_pairs(cards, rules)) < needed:
        return None
    return _pairs_with_meld(_faces_key(cards), _rules_key(rules))


def opening_bound(cards: Cards, rules: RuleSet) -> int:
    """An upper bound of the best opening's value, far cheaper than the solver.

    >>> from masa_rules.cards import parse_cards
    >>> opening_bound(parse_cards(["8H", "9H", "10H", "2C"]), RuleSet.salon())  # 2C fits nothing
    27

    A natural counts only if some set (three suits of its rank) or some window of three run
    positions around it could be filled by the hand's naturals and jokers; a joker counts as
    the highest card value.
    """
    counts: dict[int, int] = {}
    jokers = 0
    # Per suit, bit p is run position p: 1..13 are ranks 2..A, 0 a low ace (F-11, ace_low).
    rows = [0, 0, 0, 0]
    suits_of_rank = [0] * 13
    for face in _indices(cards):
        if face >= JOKER_INDEX:
            jokers += 1
            continue
        if face not in counts:
            counts[face] = 0
            suit, k = divmod(face, 13)
            rows[suit] |= 1 << (k + 1)
            suits_of_rank[k] += 1
        counts[face] += 1
    if rules.ace_low:
        rows = [row | (row >> 13 & 1) for row in rows]
    need = 3 - jokers
    joker_value = max(rules.ace_high_value, 10)
    if need <= 1:
        # Every natural has a window (and a set) that the jokers can fill around it.
        total = sum(
            n * (rules.ace_high_value if face % 13 == 12 else min(face % 13 + 2, 10))
            for face, n in counts.items()
        )
        return total + jokers * joker_value
    covered = [_covered(row, need) for row in rows]
    low_ace = rules.ace_low
    total = 0
    for face, n in counts.items():
        suit, k = divmod(face, 13)
        if (
            suits_of_rank[k] >= need
            or covered[suit] >> (k + 1) & 1
            or (k == 12 and low_ace and covered[suit] & 1)
        ):
            total += n * (rules.ace_high_value if k == 12 else min(k + 2, 10))
    return total + jokers * joker_value


def _covered(row: int, need: int) -> int:
    """The run positions of ``row`` inside some window of three positions (starting at 0..11)
    that holds at least ``need`` (2 or 3) of its cards."""
    a, b, c = row, row >> 1, row >> 2
    windows = a & b & c if need >= 3 else (a & b) | (a & c) | (b & c)
    windows &= 0xFFF
    return windows | windows << 1 | windows << 2


def opening_reaches(cards: Cards, rules: RuleSet, threshold: int) -> bool:
    """Whether the best opening of ``cards`` is worth at least ``threshold``."""
    if opening_bound(cards, rules) < threshold:
        return False
    # A search that starts at the threshold and stops on reaching it is far cheaper than
    # finding the best opening, which is computed only for the seats that can open.
    return _reaches(_faces_key(cards), _rules_key(rules), threshold)


def _card(suit: Suit, position: int) -> Card:
    rank = Rank.ACE if position == LOW_ACE else Rank(position)
    return Card.from_index(int(suit) * 13 + int(rank) - 2)


_LAST_ISLEK: list[tuple[Sequence[TableMeld], RuleSet, frozenset[int]]] = []


def islek_faces(table: Sequence[TableMeld], rules: RuleSet) -> frozenset[int]:
    """F-61: the faces that could be laid off on some run or set on the table.

    Jokers are included only with ``islek_joker`` (a joker fits almost anywhere).

    States share their table tuple until it changes, so the last answer is kept by identity.
    """
    if _LAST_ISLEK and _LAST_ISLEK[0][0] is table and _LAST_ISLEK[0][1] is rules:
        return _LAST_ISLEK[0][2]
    found = _islek_faces(table, rules)
    _LAST_ISLEK[:] = [(table, rules, found)]
    return found


def _islek_faces(table: Sequence[TableMeld], rules: RuleSet) -> frozenset[int]:
    out: set[int] = set()
    if rules.islek_joker and joker_fits_table(table, rules):
        out.update((JOKER_INDEX, JOKER_INDEX + 1))
    lowest = LOW_ACE if rules.ace_low else 2
    for entry in table:
        meld = entry.meld
        if meld.kind is MeldKind.RUN:
            for position in (meld.start - 1, meld.end + 1):
                if lowest <= position <= HIGH_ACE:
                    out.add(_card(meld.suit, position).index)
        elif meld.kind is MeldKind.SET and len(meld.cards) < 4:
            present = {p.stands_for.natural_suit() for p in meld.cards}
            out.update(_card(s, int(meld.rank)).index for s in Suit if s not in present)
    return frozenset(out)


def joker_fits_table(table: Sequence[TableMeld], rules: RuleSet) -> bool:
    """F-50: whether a joker could be laid off on some run or set on the table."""
    lowest = LOW_ACE if rules.ace_low else 2
    for entry in table:
        meld = entry.meld
        if meld.kind is MeldKind.RUN and (meld.start > lowest or meld.end < HIGH_ACE):
            return True
        if meld.kind is MeldKind.SET and len(meld.cards) < 4:
            return True
    return False


def _positions(card: Card, rules: RuleSet) -> list[int]:
    rank = int(card.natural_rank())
    return [HIGH_ACE, LOW_ACE] if rank == HIGH_ACE and rules.ace_low else [rank]


def melds_with(
    card: Card, hand: Sequence[Card], rules: RuleSet, *, opening: bool
) -> Iterator[list[Card]]:
    """Natural-first melds of ``hand`` (which holds ``card``) that contain the natural ``card``.

    Positions the hand has no natural for are filled by its jokers, at most
    ``max_jokers_per_meld_at_opening`` of them when ``opening`` (F-13).
    """
    counts: dict[int, int] = {}
    for c in hand:
        counts[c.index] = counts.get(c.index, 0) + 1
    jokers = [c for c in hand if c.is_joker]
    limit = min(len(jokers), rules.max_jokers_per_meld_at_opening if opening else 2)
    lowest = LOW_ACE if rules.ace_low else 2
    for position in _positions(card, rules):
        for start in range(max(lowest, position - 12), position + 1):
            yield from _runs_from(card, position, start, counts, jokers[:limit])
    yield from _sets_with(card, counts, jokers[:limit])


def _runs_from(
    card: Card, position: int, start: int, counts: dict[int, int], jokers: Sequence[Card]
) -> Iterator[list[Card]]:
    """The runs of ``card``'s suit from ``start`` that hold ``card`` at ``position``, each
    missing natural filled by the next of ``jokers``."""
    suit = card.natural_suit()
    group: list[Card] = []
    used: dict[int, int] = {card.index: 1}
    wild = 0
    for p in range(start, position):
        face = _card(suit, p)
        if used.get(face.index, 0) < counts.get(face.index, 0):
            used[face.index] = used.get(face.index, 0) + 1
            group.append(face)
        elif wild < len(jokers):
            group.append(jokers[wild])
            wild += 1
        else:
            return
    group.append(card)
    if len(group) >= 3:
        yield list(group)
    for p in range(position + 1, HIGH_ACE + 1):
        face = _card(suit, p)
        if used.get(face.index, 0) < counts.get(face.index, 0):
            used[face.index] = used.get(face.index, 0) + 1
            group.append(face)
        elif wild < len(jokers):
            group.append(jokers[wild])
            wild += 1
        else:
            return
        if len(group) >= 3:
            yield list(group)


def _sets_with(card: Card, counts: dict[int, int], jokers: Sequence[Card]) -> Iterator[list[Card]]:
    """The sets of three and four suits that hold ``card``, missing suits filled by jokers."""
    suit = card.natural_suit()
    limit = len(jokers)
    rank = card.natural_rank()
    others = [s for s in Suit if s is not suit]
    for size in (2, 3):
        for suits in combinations(others, size):
            group = [card]
            wild = 0
            for s in suits:
                face = Card.from_index(int(s) * 13 + int(rank) - 2)
                if counts.get(face.index, 0):
                    group.append(face)
                else:
                    wild += 1
                    if wild > limit:
                        break
                    group.append(jokers[wild - 1])
            else:
                yield group


def _value(group: Sequence[Card], rules: RuleSet, *, opening: bool) -> int | None:
    try:
        return default_reading(list(group), rules, opening=opening).value(rules)
    except MeldError:
        return None


def can_open(
    hand: Sequence[Card],
    rules: RuleSet,
    *,
    threshold: int | None,
    pairs_needed: int | None,
    forced: Card | None = None,
    keep: int = 1,
) -> bool:
    """F-40..F-43 (and F-30 with ``forced``): can ``hand`` open, keeping ``keep`` cards?

    ``threshold`` None forbids a meld opening (pair status, F-70); ``pairs_needed`` None forbids
    a pair opening.
    """
    if threshold is not None and _can_open_melds(hand, rules, threshold, forced, keep):
        return True
    if pairs_needed is None or rules.pairs_to_open is None:
        return False
    return _can_open_pairs(hand, rules, pairs_needed, forced, keep)


def _can_open_pairs(
    hand: Sequence[Card], rules: RuleSet, pairs_needed: int, forced: Card | None, keep: int
) -> bool:
    """F-43: a pair opening (pairs alone, or pairs and a meld) keeping ``keep`` cards."""
    pairs = cached_pairs(hand, rules) if pairs_bound(hand) >= pairs_needed else ()
    if len(pairs) >= pairs_needed and len(hand) - 2 * pairs_needed >= keep:
        # Any maximum pairing can be changed to include a card that pairs (twin or joker).
        partners = [c for c in hand if c == forced or c.is_joker]
        if forced is None or len(partners) >= 2:
            return True
    if rules.pairs_with_meld is None or rules.pairs_with_meld + 1 < pairs_needed:
        return False
    found = cached_pairs_with_meld(hand, rules)
    if found is None:
        return False
    size = 2 * len(found.pairs) + len(found.meld.cards)
    if len(hand) - size < keep:
        return False
    used = [p.card for m in (*found.pairs, found.meld) for p in m.cards]
    return forced is None or forced in used


def _can_open_melds(
    hand: Sequence[Card], rules: RuleSet, threshold: int, forced: Card | None, keep: int
) -> bool:
    if not opening_reaches(hand, rules, threshold):
        return False
    forced_index = -1 if forced is None else forced.index
    return _can_open_exact(_faces_key(hand), _rules_key(rules), threshold, forced_index, keep)


@lru_cache(maxsize=4096)
def _can_open_exact(
    faces: tuple[int, ...], key: int, threshold: int, forced: int, keep: int
) -> bool:
    hand = [Card.from_index(f) for f in faces]
    taken = None if forced < 0 else Card.from_index(forced)
    return solver_can_open(hand, _RULES[key], threshold, forced=taken, keep=keep)


def can_use(  # noqa: PLR0913 - melds, pairs and layoff are what F-43 lets this seat lay
    card: Card,
    hand: Sequence[Card],
    table: Sequence[TableMeld],
    rules: RuleSet,
    *,
    melds: bool,
    pairs: bool,
    layoff: bool,
    keep: int,
) -> bool:
    """F-33, F-55: can ``card`` (in ``hand``) still be laid down or laid off this turn?

    ``melds``/``pairs`` say what the seat may lay down (F-43), ``layoff`` whether laying off
    counts, ``keep`` how many cards must stay in hand (F-21, F-52).
    """
    if layoff and len(hand) - 1 >= keep:
        fits = joker_fits_table(table, rules) if card.is_joker else None
        if fits or (fits is None and card.index in islek_faces(table, rules)):
            return True
    if pairs and len(hand) - 2 >= keep:
        if _pairs_use(card, hand):
            return True
        if layoff and any(
            e.meld.kind is MeldKind.PAIR and e.meld.cards[0].stands_for == card for e in table
        ):
            return False  # a pair opener's area takes a whole pair, never this card alone
    return melds and _melds_use(card, hand, rules, keep)


def _pairs_use(card: Card, hand: Sequence[Card]) -> bool:
    """F-43: ``card`` makes a pair with another card of ``hand`` (its twin or a joker)."""
    if card.is_joker:
        return any(not c.is_joker for c in hand)
    naturals = sum(1 for c in hand if c == card)
    return naturals >= 2 or (naturals > 0 and any(c.is_joker for c in hand))


def _melds_use(card: Card, hand: Sequence[Card], rules: RuleSet, keep: int) -> bool:
    """F-10: ``card`` is in a meld of ``hand`` that leaves ``keep`` cards behind."""
    if card.is_joker:
        best = cached_opening(hand, rules)
        return any(p.card == card for m in best.melds for p in m.cards) and len(hand) - 3 >= keep
    return any(
        len(hand) - len(group) >= keep and _value(group, rules, opening=False) is not None
        for group in melds_with(card, hand, rules, opening=False)
    )
