"""A playable state rebuilt from one seat's view: what a stateless bot decides from (P-20).

The view (:func:`~masa_rules.elevator.view.view`) holds everything public plus the seat's own
hand. :func:`seat_state` turns it back into a full :class:`~masa_rules.elevator.state.State`
by a *determinisation*: the cards the seat has not seen (other hands and the stock) are the
pack minus its own hand and the pile, and they are dealt out in pack order, hand sizes and
stock count kept. The seat's legal actions depend only on its own hand, the pile and the
public flags, never on those identities, so ``legal_actions`` and every policy give the same
answer on the rebuilt state as on the real one.

>>> from masa_rules.elevator import ElevatorRules, legal_actions, new_game, view
>>> state = new_game(ElevatorRules(), 4, "observe")
>>> mine = seat_state(view(state, 0))
>>> legal_actions(mine, 0) == legal_actions(state, 0)
True
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import cast

from masa_rules.cards import PhysicalCard, elevator_pack
from masa_rules.elevator.codec import rules_from_json, tells_from_json
from masa_rules.elevator.state import Direction, Phase, State
from masa_rules.errors import RuleViolation

__all__ = ["deal_unseen", "seat_state"]


def seat_state(seen: Mapping[str, object]) -> State:
    """A state consistent with ``seen``, the view of one seat (not a spectator's).

    Raises :class:`~masa_rules.errors.RuleViolation` (``P-20``) when the view is a spectator's
    or its card counts do not add up to the pack.
    """
    seat = seen.get("seat")
    if not isinstance(seat, int):
        raise RuleViolation("P-20", "a spectator's view has no hand to decide from")
    players = _int(seen["players"])
    decks = _int(seen["decks"])
    hand = _cards(seen["hand"])
    pile = _cards(seen["pile"])
    sizes = [_int(size) for size in cast(Sequence[object], seen["hand_sizes"])]
    stock_count = _int(seen["stock_count"])
    if len(sizes) != players:
        raise RuleViolation("P-20", "the hand sizes do not match the seats")
    hands, stock = deal_unseen(seat, hand, pile, sizes, stock_count, decks)
    over = seen["phase"] == Phase.OVER.value
    revealed = seen.get("seed")
    turn = seen.get("turn")
    return State(
        rules=rules_from_json(cast(Mapping[str, object], seen.get("rules", {}))),
        players=players,
        hand_no=_int(seen["hand_no"]),
        leader=_int(seen["leader"]),
        decks=decks,
        # The real seed stays secret until the hand is over (F-5); before that a stand-in
        # derived from the public commitment keeps the state deterministic.
        seed=(
            bytes.fromhex(revealed)
            if isinstance(revealed, str)
            else hashlib.sha256(b"determinised:" + str(seen["commitment"]).encode()).digest()
        ),
        hands=hands,
        stock=stock,
        pile=pile,
        direction=Direction(seen["direction"]),
        phase=Phase(seen["phase"]),
        turn=_int(turn) if isinstance(turn, int) else (seat if over else 0),
        open_play=_optional_int(seen.get("open_play")),
        after_play=bool(seen.get("after_play", seen.get("may_pass_voluntarily"))),
        forced_turns=_int(seen.get("forced_turns", 0)),
        receiver=_optional_int(seen.get("receiver")),
        givers=tuple(_int(giver) for giver in cast(Sequence[object], seen.get("givers", []))),
        winner=_optional_int(seen.get("winner")),
        ranking=tuple(
            tuple(_int(place_seat) for place_seat in cast(Sequence[object], place))
            for place in cast(Sequence[object], seen.get("ranking", []))
        ),
        end_reason=cast(str | None, seen.get("end_reason")),
        action_count=_int(seen.get("action_count", 0)),
        tells=tells_from_json(seen),
    )


def deal_unseen(
    seat: int,
    hand: tuple[PhysicalCard, ...],
    pile: tuple[PhysicalCard, ...],
    sizes: Sequence[int],
    stock_count: int,
    decks: int,
) -> tuple[tuple[tuple[PhysicalCard, ...], ...], tuple[PhysicalCard, ...]]:
    """The hands and the stock of a determinisation: the cards ``seat`` has not seen (the pack
    minus its hand and the pile) dealt in pack order, ``sizes`` and ``stock_count`` kept.

    Raises :class:`~masa_rules.errors.RuleViolation` (``P-20``) when the counts do not add up.
    """
    if not 0 <= seat < len(sizes) or sizes[seat] != len(hand):
        raise RuleViolation("P-20", "the hand sizes do not match the seats and the own hand")
    known = set(hand) | set(pile)
    unseen = [card for card in elevator_pack(decks) if card not in known]
    if min(sizes) < 0 or stock_count < 0 or len(unseen) != sum(sizes) - len(hand) + stock_count:
        raise RuleViolation("P-20", "the view's card counts do not add up to the pack")
    hands: list[tuple[PhysicalCard, ...]] = []
    taken = 0
    for other, size in enumerate(sizes):
        if other == seat:
            hands.append(hand)
            continue
        hands.append(tuple(unseen[taken : taken + size]))
        taken += size
    return tuple(hands), tuple(unseen[taken:])


def _cards(value: object) -> tuple[PhysicalCard, ...]:
    return tuple(PhysicalCard.parse(str(code)) for code in cast(Sequence[object], value))


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RuleViolation("P-20", f"expected a whole number in the view, got {value!r}")
    return value


def _optional_int(value: object) -> int | None:
    return None if value is None else _int(value)
