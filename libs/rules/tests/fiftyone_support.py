"""Fixed deals for the 51 scenario tests: build a State with chosen hands, stock and table.

Cards are written as codes (``"8H 9H XR"``); each takes the first free physical copy unless
written with its copy (``8H#1``). Cards nobody was given fill the rest of the stock (or, with
``rest="discard"``, the bottom of the discard pile), so all 106 cards are always accounted for.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from masa_rules.cards import PhysicalCard, fiftyone_pack
from masa_rules.fiftyone import Phase, SeatState, State, TableMeld, Turn, new_game
from masa_rules.fiftyone.melding import align
from masa_rules.melds import default_reading, pair_meld, parse_placed
from masa_rules.ruleset import RuleSet


class _Pool:
    def __init__(self) -> None:
        self.free = list(fiftyone_pack())

    def take(self, code: str) -> PhysicalCard:
        if "#" in code:
            card = PhysicalCard.parse(code)
            self.free.remove(card)
            return card
        face = PhysicalCard.parse(code).face_index
        card = next(c for c in self.free if c.face_index == face)
        self.free.remove(card)
        return card

    def cards(self, codes: str) -> tuple[PhysicalCard, ...]:
        return tuple(self.take(code) for code in codes.split())


def build(  # noqa: PLR0913 - one keyword per part of the State a test sets up
    preset: str | RuleSet = "classic",
    players: int = 4,
    *,
    teams: bool = False,
    hands: Mapping[int, str] | None = None,
    stock: str = "",
    discard: str = "",
    last_discarder: int | None = None,
    table: Iterable[tuple[int, str]] = (),
    pairs: Iterable[tuple[int, str]] = (),
    seat: int = 0,
    phase: Phase = Phase.PLAY,
    bottom: str | None = None,
    rest: str = "stock",
    seats: Mapping[int, Mapping[str, Any]] | None = None,
    turn: Mapping[str, Any] | None = None,
    **changes: Any,
) -> State:
    """A state in the middle of a hand, exactly as described."""
    rules = RuleSet.preset_named(preset) if isinstance(preset, str) else preset
    state = new_game(rules, players, "fixed", teams=teams)
    pool = _Pool()
    hand_cards = {s: tuple(sorted(pool.cards((hands or {}).get(s, "")))) for s in range(players)}
    melds: list[TableMeld] = []
    for owner, codes in table:
        items = [parse_placed(code) for code in codes.split()]
        physical = [pool.take(code.split("=")[0]) for code in codes.split()]
        meld = default_reading(items, rules)
        melds.append(TableMeld(owner, meld, align(meld, physical)))
    for owner, codes in pairs:
        first, second = pool.cards(codes)
        meld = pair_meld(first.card, second.card, rules)
        melds.append(TableMeld(owner, meld, align(meld, [first, second])))
    stock_cards = list(pool.cards(stock))
    discard_cards = list(pool.cards(discard))
    bottom_card = pool.take(bottom) if bottom else None
    leftover = list(pool.free)
    if rest == "stock":
        stock_cards += leftover
    else:
        discard_cards = leftover + discard_cards
    if bottom_card is not None:
        stock_cards.append(bottom_card)
    seat_states = []
    for s in range(players):
        extra = dict((seats or {}).get(s, {}))
        seat_states.append(SeatState(hand_cards[s], turns=extra.pop("turns", 2), **extra))
    new = replace(
        state,
        seats=tuple(seat_states),
        stock=tuple(stock_cards),
        bottom_card=bottom_card,
        discard=tuple(discard_cards),
        last_discarder=last_discarder
        if last_discarder is not None
        else ((seat - 1) % players if discard_cards else None),
        table=tuple(melds),
        turn=Turn(seat, 10, **(turn or {})),
        phase=phase,
        **changes,
    )
    assert count_cards(new) == 106
    return new


def count_cards(state: State) -> int:
    """Every physical card in the state, once: hands, stock, discard pile and table."""
    cards = [c for s in state.seats for c in s.hand]
    cards += [*state.stock, *state.discard]
    cards += [c for m in state.table for c in m.cards]
    assert len(set(cards)) == len(cards), "a card is in two places"
    return len(cards)


def pc(code: str) -> PhysicalCard:
    return PhysicalCard.parse(code)


def codes(cards: Iterable[PhysicalCard]) -> list[str]:
    return [c.code for c in cards]


POSITIONS = Path(__file__).parent / "golden" / "positions"


def position(name: str) -> dict[str, Any]:
    """A position recorded from a simulated game: its ``state`` (JSON), the ``seat`` to act
    and, where the position is about one, the ``action`` it was about to take."""
    data: dict[str, Any] = json.loads((POSITIONS / f"{name}.json").read_text())
    return data
