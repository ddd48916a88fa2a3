"""A playable 51 state rebuilt from one seat's view: what a stateless bot decides from (P-20).

The view (:func:`~masa_rules.fiftyone.view.view`) holds everything public plus the seat's own
hand. :func:`seat_state` turns it back into a full :class:`~masa_rules.fiftyone.state.State` by
a *determinisation*: cards every seat has seen in another seat's hand (shown twins, a taken
discard, retrieved jokers) go back to that hand, and the cards nobody but their holder has seen
(the rest of the other hands and the stock) are the pack minus everything known, dealt out in
pack order with every hand size and the stock count kept. The face-up bottom card stays the
last card of the stock (F-4). The seat's legal actions depend on its own hand and the public
table only, so ``legal_actions`` and every policy give the same answer on the rebuilt state as
on the real one.

>>> from masa_rules.ruleset import RuleSet
>>> from masa_rules.fiftyone import legal_actions, new_game, view
>>> state = new_game(RuleSet.salon(), 4, "observe")
>>> seat = state.turn.seat
>>> legal_actions(seat_state(view(state, seat)), seat) == legal_actions(state, seat)
True
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import cast

from masa_rules.cards import PhysicalCard, fiftyone_pack
from masa_rules.errors import RuleViolation
from masa_rules.fiftyone.codec import state_from_json
from masa_rules.fiftyone.state import State

__all__ = ["seat_state"]

JSON = object


def seat_state(seen: Mapping[str, JSON]) -> State:
    """A state consistent with ``seen``, the view of one seat during a hand.

    Raises :class:`~masa_rules.errors.RuleViolation` (``P-20``) for a spectator's view, a view
    of a finished game, or a view whose card counts do not add up to the pack.
    """
    seat = seen.get("seat")
    if not isinstance(seat, int) or "hand" not in seen:
        raise RuleViolation("P-20", "only a seat's view of a hand in play can be rebuilt")
    seats = cast(Sequence[Mapping[str, JSON]], seen["seats"])
    turn_seat = cast(int, seen["turn"])
    turn = cast(Mapping[str, JSON], seen["turn_state"])
    hand = _cards(seen["hand"])
    bottom = _card_or_none(seen["bottom_card"])

    table = cast(Sequence[Mapping[str, JSON]], seen["table"])
    on_table = [
        PhysicalCard.parse(str(code).partition("=")[0])
        for meld in table
        for code in cast(Sequence[object], meld["cards"])
    ]
    public = {*_cards(seen["discard"]), *on_table, *([bottom] if bottom is not None else [])}

    # Cards known to be in another seat's hand, because every seat saw them go there. A shown
    # twin, a taken discard or a retrieved joker may since have been laid down: then the
    # table has it.
    known_in: dict[int, list[PhysicalCard]] = {index: [] for index in range(len(seats))}
    for index, entry in enumerate(seats):
        if index != seat:
            known_in[index].extend(_cards(entry["shown_twins"]))
    if turn_seat != seat:
        took = _card_or_none(seen["taken_discard"])
        known_in[turn_seat].extend([took] if took is not None else [])
        known_in[turn_seat].extend(_cards(turn["jokers"]))
    for index, cards in known_in.items():
        known_in[index] = [card for card in dict.fromkeys(cards) if card not in public]
    placed = {*hand, *public, *(card for cards in known_in.values() for card in cards)}
    unseen = [card for card in fiftyone_pack() if card not in placed]
    stock_count = _int(seen["stock"])
    hidden = sum(
        _int(entry["cards"]) - len(known_in[index])
        for index, entry in enumerate(seats)
        if index != seat
    )
    drawn_stock = stock_count - (1 if bottom is not None else 0)
    if hidden + drawn_stock != len(unseen) or _int(seats[seat]["cards"]) != len(hand):
        raise RuleViolation("P-20", "the view's card counts do not add up to the pack")

    hands: list[list[str]] = []
    taken = 0
    for index, entry in enumerate(seats):
        if index == seat:
            hands.append([card.code for card in hand])
            continue
        size = _int(entry["cards"]) - len(known_in[index])
        filled = [*known_in[index], *unseen[taken : taken + size]]
        taken += size
        hands.append([card.code for card in filled])
    stock = [card.code for card in unseen[taken:]] + ([bottom.code] if bottom else [])

    # The seeds stay secret (F-5); stand-ins derived from the public commitment keep the
    # rebuilt state deterministic.
    stand_in = hashlib.sha256(b"determinised:" + str(seen["commitment"]).encode()).hexdigest()
    query = cast(Mapping[str, JSON] | None, seen["query"])
    return state_from_json(
        {
            "rules": seen["rules"],
            "players": seen["players"],
            "teams": seen["teams"],
            "game_seed_hex": stand_in,
            "hands_limit": seen["hands_limit"],
            "hand_no": seen["hand_no"],
            "hands_scored": seen["hands_scored"],
            "dealer": seen["dealer"],
            "active": [entry["active"] for entry in seats],
            "totals": seen["totals"],
            "eliminated": seen["eliminated"],
            "phase": seen["phase"],
            "seats": [
                {
                    "hand": hands[index],
                    "opened": entry["opened"],
                    "opened_with_pairs": entry["opened_with_pairs"],
                    "opening_total": entry["opening_total"],
                    "pair_status": entry["pair_status"],
                    "shown_pairs": entry["shown_pairs"],
                    "locked": entry["shown_twins"],
                    "islek_penalty": entry["islek_penalty"],
                    "free_islek_used": entry["free_islek_used"],
                    "bottom_claim": entry["bottom_claim"],
                    "turns": entry["turns"],
                }
                for index, entry in enumerate(seats)
            ],
            "stock": stock,
            "bottom_card": seen["bottom_card"],
            "discard": seen["discard"],
            "last_discarder": seen["last_discarder"],
            "table": [
                {
                    "owner": meld["owner"],
                    "kind": meld["kind"],
                    "start": meld["start"],
                    "cards": [_placed(str(code)) for code in cast(Sequence[object], meld["cards"])],
                }
                for meld in table
            ],
            "turn": {
                "seat": turn_seat,
                "number": turn["number"],
                "took": seen["taken_discard"],
                "took_rule": turn["took_rule"],
                "took_used": turn["took_used"],
                "must_open": turn["must_open"],
                "jokers": turn["jokers"],
                "opened_now": seen["opened_this_turn"],
                "laid_off_others": turn["laid_off_others"],
            },
            "query": None if query is None else dict(query),
            "hand_seed_hex": stand_in,
            "commitment": seen["commitment"],
            "reshuffles": seen["reshuffles"],
            "high_open": seen["high_open"],
            "high_pairs": seen["high_pairs"],
            "pair_opened": seen["pair_opened"],
            "action_count": seen["action_count"],
            "ranking": seen["ranking"],
        }
    )


def _placed(code: str) -> list[str]:
    """``XR=8H`` -> ``["XR", "8H"]``; a natural stands for its own face."""
    card, _, stands_for = code.partition("=")
    return [card, stands_for or card.partition("#")[0]]


def _cards(value: JSON) -> tuple[PhysicalCard, ...]:
    return tuple(PhysicalCard.parse(str(code)) for code in cast(Sequence[object], value))


def _card_or_none(value: JSON) -> PhysicalCard | None:
    return None if value is None else PhysicalCard.parse(str(value))


def _int(value: JSON) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RuleViolation("P-20", f"expected a whole number in the view, got {value!r}")
    return value
