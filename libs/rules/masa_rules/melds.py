"""Melds of 51: runs, sets, pairs, jokers and their readings (rules.md C-2, F-10..F-16, F-50..F-56).

Glossary:

- *position*: where a card sits in a run. Ranks 2..K are positions 2..13, a high ace is 14 and,
  with ``ace_low`` (remi), a low ace is 1 (F-11).
- *placed card* (:class:`Placed`): a card in a meld with the card it stands for; a natural
  stands for itself, a joker for the card it replaces (C-2, F-56). Written ``8H`` or ``XR=8H``.
- *reading*: one way to understand a group of cards as a meld. ``8H 9H XR`` reads as
  ``XR=7H 8H 9H`` or ``8H 9H XR=10H``; the default reading has the highest value, ties broken
  run-before-set, then lowest cards (C-2).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import permutations
from typing import Final

from .cards import Card, CardError, Rank, Suit, parse_card
from .errors import RuleViolation
from .ruleset import RuleSet

__all__ = [
    "Meld",
    "MeldError",
    "MeldKind",
    "Placed",
    "card_value",
    "check_meld",
    "default_reading",
    "is_pair",
    "lay_off",
    "layoff_options",
    "pair_meld",
    "parse_placed",
    "readings",
    "retrieve_joker",
]

HIGH_ACE: Final = 14
LOW_ACE: Final = 1


class MeldError(RuleViolation):
    """A group of cards that is not a valid meld, or a move on a meld that a rule forbids."""


class MeldKind(enum.Enum):
    """F-11 runs, F-12 sets and F-15 pairs (pairs only on a pair opener's area)."""

    RUN = "run"
    SET = "set"
    PAIR = "pair"


@dataclass(frozen=True, slots=True)
class Placed:
    """A card in a meld and the card it stands for (C-2). For a natural both are the same."""

    card: Card
    stands_for: Card

    @property
    def is_joker(self) -> bool:
        return self.card.is_joker

    @property
    def code(self) -> str:
        if self.card.is_joker:
            return f"{self.card.code}={self.stands_for.code}"
        return self.card.code

    def __str__(self) -> str:
        return self.code

    @staticmethod
    def natural(card: Card) -> Placed:
        return _PLACED[card.index]


def parse_placed(text: str) -> tuple[Card, Card | None]:
    """Parse ``8H``, ``XR`` or an annotated joker ``XR=8H`` into (card, annotation)."""
    face, sep, target = text.partition("=")
    card = parse_card(face)
    if not sep:
        return card, None
    if not card.is_joker:
        raise MeldError("C-2", f"only a joker carries an annotation, not {card.code} in {text!r}")
    stands_for = parse_card(target)
    if stands_for.is_joker:
        raise MeldError("C-2", f"a joker stands for a natural card, not {stands_for.code}")
    return card, stands_for


@dataclass(frozen=True, slots=True)
class Meld:
    """A valid meld: its kind, its cards in order, and for runs the position of the first card.

    Runs list their cards by ascending position, sets by suit, pairs as laid down.
    """

    kind: MeldKind
    cards: tuple[Placed, ...]
    start: int

    @property
    def codes(self) -> list[str]:
        return [placed.code for placed in self.cards]

    @property
    def jokers(self) -> int:
        return sum(1 for placed in self.cards if placed.is_joker)

    @property
    def rank(self) -> Rank:
        """The rank of a set or pair (F-12, F-15)."""
        return self.cards[0].stands_for.natural_rank()

    @property
    def suit(self) -> Suit:
        """The suit of a run (F-11)."""
        return self.cards[0].stands_for.natural_suit()

    @property
    def end(self) -> int:
        """The position of the last card of a run."""
        return self.start + len(self.cards) - 1

    def value(self, rules: RuleSet) -> int:
        """F-14: the sum of the values of the cards, jokers counted as the card they stand for."""
        if self.kind is MeldKind.RUN:
            return sum(_position_value(p, rules) for p in range(self.start, self.end + 1))
        per_card = card_value(self.cards[0].stands_for, rules)
        return per_card * len(self.cards)

    def sort_key(self) -> tuple[int, ...]:
        """Lowest cards first: the tie-break of C-2."""
        return tuple(
            _position(p.stands_for, self.kind, self.start + i) * 4
            + int(p.stands_for.natural_suit())
            for i, p in enumerate(self.cards)
        )

    def __str__(self) -> str:
        return " ".join(self.codes)


def _position(card: Card, kind: MeldKind, run_position: int) -> int:
    return run_position if kind is MeldKind.RUN else int(card.natural_rank())


def _position_value(position: int, rules: RuleSet) -> int:
    if position == LOW_ACE:
        return rules.ace_low_value
    if position == HIGH_ACE:
        return rules.ace_high_value
    return min(position, 10)


def card_value(card: Card, rules: RuleSet) -> int:
    """F-14: a natural card's value with the ace high. Jokers have no value of their own."""
    rank = card.natural_rank()
    return _position_value(int(rank), rules)


def _card_at(suit: Suit, position: int) -> Card:
    return _RUN_CARDS[int(suit)][position]


# Lookup tables: the card at each run position of each suit (index 0 unused), and the placed
# form of every natural, so that validation allocates as little as it can.
_RUN_CARDS: Final = tuple(
    (
        Card.from_index(s * 13 + 12),
        Card.from_index(s * 13 + 12),
        *(Card.from_index(s * 13 + p - 2) for p in range(2, HIGH_ACE + 1)),
    )
    for s in range(4)
)
_PLACED: Final = tuple(Placed(Card.from_index(i), Card.from_index(i)) for i in range(52))


def _split(
    items: Sequence[tuple[Card, Card | None]],
) -> tuple[list[Card], list[tuple[Card, Card | None]]]:
    naturals = [card for card, _ in items if not card.is_joker]
    jokers = [(card, note) for card, note in items if card.is_joker]
    for card, note in items:
        if note is not None and not card.is_joker:
            raise MeldError("C-2", f"only a joker carries an annotation, not {card.code}")
    if len({card for card, _ in jokers}) != len(jokers):
        raise MeldError("C-4", "the same joker cannot appear twice in one meld")
    return naturals, jokers


def _run_readings(
    naturals: list[Card], jokers: list[tuple[Card, Card | None]], rules: RuleSet
) -> Iterator[Meld]:
    suit = naturals[0].natural_suit()
    if any(card.suit is not suit for card in naturals):
        return
    length = len(naturals) + len(jokers)
    lowest = LOW_ACE if rules.ace_low else 2
    aces = sum(1 for card in naturals if card.rank is Rank.ACE)
    others = sorted(int(card.natural_rank()) for card in naturals if card.rank is not Rank.ACE)
    ace_choices: list[tuple[int, ...]] = [()]
    if aces == 1:
        ace_choices = [(HIGH_ACE,), (LOW_ACE,)] if rules.ace_low else [(HIGH_ACE,)]
    elif aces == 2:
        ace_choices = [(LOW_ACE, HIGH_ACE)] if rules.ace_low else []
    for ace_positions in ace_choices:
        positions = sorted((*others, *ace_positions))
        if len(set(positions)) != len(positions):
            continue
        first = max(lowest, positions[-1] - length + 1)
        last = min(positions[0], HIGH_ACE - length + 1)
        for start in range(first, last + 1):
            end = start + length - 1
            row = _RUN_CARDS[int(suit)]
            if not jokers:
                yield Meld(MeldKind.RUN, tuple(_PLACED[row[p].index] for p in positions), start)
                continue
            gaps = [p for p in range(start, end + 1) if p not in positions]
            for order in permutations(range(len(jokers))):
                filled = dict(zip(gaps, (jokers[i] for i in order), strict=True))
                if not all(note is None or note == row[p] for p, (_, note) in filled.items()):
                    continue
                cards = tuple(
                    Placed(filled[p][0], row[p]) if p in filled else _PLACED[row[p].index]
                    for p in range(start, end + 1)
                )
                yield Meld(MeldKind.RUN, cards, start)


def _set_readings(naturals: list[Card], jokers: list[tuple[Card, Card | None]]) -> Iterator[Meld]:
    rank = naturals[0].natural_rank()
    suits = [card.natural_suit() for card in naturals]
    if any(card.rank is not rank for card in naturals) or len(set(suits)) != len(suits):
        return
    if len(naturals) + len(jokers) > 4:
        return
    missing = [suit for suit in Suit if suit not in suits]
    for chosen in permutations(missing, len(jokers)):
        targets = [Card.from_index(int(suit) * 13 + int(rank) - 2) for suit in chosen]
        if not all(note is None or note == t for (_, note), t in zip(jokers, targets, strict=True)):
            continue
        placed = [Placed.natural(card) for card in naturals]
        placed += [Placed(joker, t) for (joker, _), t in zip(jokers, targets, strict=True)]
        placed.sort(key=lambda p: int(p.stands_for.natural_suit()))
        yield Meld(MeldKind.SET, tuple(placed), int(rank))


def _explain(
    naturals: list[Card], jokers: list[tuple[Card, Card | None]], rules: RuleSet
) -> MeldError:
    same_suit = len({card.suit for card in naturals}) == 1
    same_rank = len({card.rank for card in naturals}) == 1
    if jokers and any(note is not None for _, note in jokers) and (same_suit or same_rank):
        return MeldError("C-2", "a joker's annotation does not fit this meld")
    if same_rank and not same_suit:
        if len(naturals) + len(jokers) > 4:
            return MeldError("F-12", "a set has at most 4 cards, one of each suit")
        return MeldError("F-12", "a set holds each suit only once")
    if same_suit:
        return _explain_run({card.rank for card in naturals}, rules)
    return MeldError("F-10", "a meld is a run (one suit, consecutive) or a set (one rank)")


def _explain_run(ranks: set[Rank | None], rules: RuleSet) -> MeldError:
    """Why naturals of one suit with these ``ranks`` are no run (F-11) nor set (F-12)."""
    if Rank.ACE in ranks and Rank.TWO in ranks and Rank.KING in ranks:
        return MeldError("F-11", "a run never wraps from K over A to 2")
    if Rank.ACE in ranks and not rules.ace_low and ranks & {Rank.TWO, Rank.THREE}:
        return MeldError("F-11", f"the ace is high only in {rules.preset}: A 2 3 is not a run")
    if len(ranks) == 1:
        return MeldError("F-12", "identical cards form neither a run nor a set")
    return MeldError("F-11", "a run needs consecutive ranks of one suit")


def readings(
    items: Sequence[tuple[Card, Card | None]] | Sequence[Card],
    rules: RuleSet,
    *,
    opening: bool = False,
) -> list[Meld]:
    """Every reading of a group of cards as a run or set, best first (C-2). Raises MeldError.

    ``items`` are cards, or (card, annotation) pairs for jokers written ``XR=8H``.

    >>> from masa_rules.cards import parse_cards
    >>> [str(m) for m in readings(parse_cards(["8H", "9H", "XR"]), RuleSet.salon())]
    ['8H 9H XR=10H', 'XR=7H 8H 9H']
    """
    pairs = [(item, None) if isinstance(item, Card) else item for item in items]
    naturals, jokers = _split(pairs)
    if len(pairs) < 3:
        raise MeldError("F-10", f"a meld has at least 3 cards, not {len(pairs)}")
    if not naturals:
        raise MeldError("F-13", "a meld needs at least one natural card")
    if opening and len(jokers) > rules.max_jokers_per_meld_at_opening:
        raise MeldError(
            "F-13",
            f"a meld laid down in the opening turn holds at most "
            f"{rules.max_jokers_per_meld_at_opening} joker(s) in {rules.preset}",
        )
    found = [*_run_readings(naturals, jokers, rules), *_set_readings(naturals, jokers)]
    if not found:
        raise _explain(naturals, jokers, rules)
    if len(found) > 1:
        found.sort(key=lambda m: _preference(m, rules))
    return found


def _preference(meld: Meld, rules: RuleSet) -> tuple[int, int, tuple[int, ...], tuple[int, ...]]:
    jokers = tuple(p.card.index for p in meld.cards if p.is_joker)
    return (-meld.value(rules), 0 if meld.kind is MeldKind.RUN else 1, meld.sort_key(), jokers)


def default_reading(
    items: Sequence[tuple[Card, Card | None]] | Sequence[Card],
    rules: RuleSet,
    *,
    opening: bool = False,
) -> Meld:
    """The reading C-2 picks when a client does not annotate its jokers."""
    return readings(items, rules, opening=opening)[0]


def check_meld(codes: Iterable[str], rules: RuleSet, *, opening: bool = False) -> Meld:
    """Parse codes such as ``["QS", "KS", "XR=AS"]`` and return the default reading."""
    try:
        items = [parse_placed(code) for code in codes]
    except CardError as exc:
        raise MeldError(exc.rule, str(exc)) from None
    return default_reading(items, rules, opening=opening)


def is_pair(first: Card, second: Card, rules: RuleSet) -> bool:
    """F-15: two identical naturals, or a natural and a joker; two jokers only by option."""
    if first.is_joker and second.is_joker:
        return rules.joker_pair_allowed
    return first.is_joker or second.is_joker or first == second


def lay_off(
    meld: Meld,
    card: Card,
    rules: RuleSet,
    *,
    stands_for: Card | None = None,
    at_end: bool | None = None,
) -> Meld:
    """F-50, F-51: the meld with ``card`` added, or MeldError.

    A joker laid off needs to know which card it stands for when more than one fits: give
    ``stands_for`` (or ``at_end`` for runs); without it the highest-valued option is taken.
    """
    options = layoff_options(meld, card, rules)
    if stands_for is not None:
        options = [m for m in options if _added(meld, m).stands_for == stands_for]
    if at_end is not None and meld.kind is MeldKind.RUN:
        options = [m for m in options if (m.start == meld.start) == at_end]
    if not options:
        if meld.kind is MeldKind.SET and len(meld.cards) == 4:
            raise MeldError("F-51", f"the set {meld} is closed")
        raise MeldError("F-50", f"{card.code} cannot be laid off on {meld}")
    return options[0]


def _added(before: Meld, after: Meld) -> Placed:
    if after.kind is MeldKind.RUN:
        return after.cards[0] if after.start != before.start else after.cards[-1]
    remaining = list(before.cards)
    for placed in after.cards:
        if placed in remaining:
            remaining.remove(placed)
        else:
            return placed
    raise MeldError("F-50", "nothing was added")


def layoff_options(meld: Meld, card: Card, rules: RuleSet) -> list[Meld]:
    """Every meld that laying off ``card`` on ``meld`` could give, best value first (F-50, F-51).

    Pairs take no single cards: a pair opener lays off a whole pair (see the engine).
    """
    if meld.kind is MeldKind.PAIR:
        return []
    if meld.kind is MeldKind.SET:
        if len(meld.cards) >= 4:
            return []
        present = {p.stands_for.natural_suit() for p in meld.cards}
        rank = meld.rank
        targets = [
            Card.from_index(int(s) * 13 + int(rank) - 2)
            for s in Suit
            if s not in present and (card.is_joker or card.suit is s)
        ]
        if not card.is_joker and card.rank is not rank:
            return []
        out = []
        for target in targets:
            cards = sorted(
                (*meld.cards, Placed(card, target)), key=lambda p: int(p.stands_for.natural_suit())
            )
            out.append(Meld(MeldKind.SET, tuple(cards), meld.start))
        return out
    suit = meld.suit
    lowest = LOW_ACE if rules.ace_low else 2
    out = []
    for position, at_start in ((meld.end + 1, False), (meld.start - 1, True)):
        if not lowest <= position <= HIGH_ACE:
            continue
        target = _card_at(suit, position)
        if not card.is_joker and card != target:
            continue
        placed = Placed(card, target)
        if at_start:
            out.append(Meld(MeldKind.RUN, (placed, *meld.cards), position))
        else:
            out.append(Meld(MeldKind.RUN, (*meld.cards, placed), meld.start))
    out.sort(key=lambda m: -m.value(rules))
    return out


def retrieve_joker(meld: Meld, natural: Card, rules: RuleSet) -> tuple[Meld, Card]:
    """F-55: put ``natural`` in a joker's place; return the new meld and the freed joker.

    - run: ``natural`` must be the exact card the joker stands for;
    - set: any natural of the set's rank in a suit the set's naturals lack;
    - pair: the identical natural.
    """
    if natural.is_joker:
        raise MeldError("F-55", "a joker is retrieved with a natural card, not another joker")
    natural_suits = {p.card.suit for p in meld.cards if not p.is_joker}
    jokers = [i for i, p in enumerate(meld.cards) if p.is_joker]
    # An exact match first, so that in a set the other joker keeps the suit it stands for (F-56).
    jokers.sort(key=lambda i: meld.cards[i].stands_for != natural)
    for i in jokers:
        placed = meld.cards[i]
        if meld.kind is MeldKind.SET:
            fits = natural.rank is meld.rank and natural.suit not in natural_suits
            fits = fits and all(p.stands_for != natural for j, p in enumerate(meld.cards) if j != i)
        else:
            fits = natural == placed.stands_for
        if not fits:
            continue
        cards = [*meld.cards[:i], Placed.natural(natural), *meld.cards[i + 1 :]]
        if meld.kind is MeldKind.SET:
            cards.sort(key=lambda p: int(p.stands_for.natural_suit()))
        return Meld(meld.kind, tuple(cards), meld.start), placed.card
    raise MeldError("F-55", f"{natural.code} does not release a joker from {meld}")


def pair_meld(first: Card, second: Card, rules: RuleSet) -> Meld:
    """F-15: a pair laid down by a pair opener, the joker standing for the natural."""
    if not is_pair(first, second, rules):
        raise MeldError("F-15", f"{first.code} {second.code} is not a pair")
    natural = second if first.is_joker else first
    if natural.is_joker:
        raise MeldError("F-15", "two jokers are not a pair")
    return Meld(
        MeldKind.PAIR,
        (Placed(first, natural), Placed(second, natural)),
        int(natural.natural_rank()),
    )
