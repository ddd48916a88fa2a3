"""51 views (P-20) to and from ``masa.table.v1.TableView`` and ``SeatView``.

A table view is the engine's spectator :class:`~masa_rules.fiftyone.View` in protobuf; a seat
view adds the seat's hand. The conversion is lossless: :func:`view_from_seat_view` gives back
the very :class:`~masa_rules.fiftyone.View` the engine shows that seat, from which a stateless
bot rebuilds a playable state (:func:`state_from_seat_view`).
"""

from __future__ import annotations

from typing import Final

from masa.common.v1 import game_pb2
from masa.table.v1 import view_pb2
from masa_rules.errors import RuleViolation
from masa_rules.fiftyone import (
    Phase,
    PublicSeat,
    Query,
    State,
    Turn,
    View,
    seat_state,
    view,
)

from masa_wire.cards import card_from_proto, card_to_proto, cards_from_proto, cards_to_proto
from masa_wire.errors import WireError
from masa_wire.fiftyone.config import rules_from_config
from masa_wire.fiftyone.melds import meld_from_proto, meld_to_proto

__all__ = [
    "fill_table_view",
    "opening_to_proto",
    "seat_view",
    "state_from_seat_view",
    "view_from_seat_view",
]

_PHASE: Final = {
    Phase.DRAW: view_pb2.TURN_PHASE_DRAW,
    Phase.PLAY: view_pb2.TURN_PHASE_MELD,
    Phase.QUERY: view_pb2.TURN_PHASE_QUERY,
    Phase.OVER: view_pb2.TURN_PHASE_UNSPECIFIED,
}
_PHASE_BACK: Final = {value: key for key, value in _PHASE.items()}


def opening_to_proto(opened: bool, with_pairs: bool) -> view_pb2.Opening.ValueType:
    """How a seat opened (F-40, F-43)."""
    if not opened:
        return view_pb2.OPENING_UNSPECIFIED
    return view_pb2.OPENING_PAIRS if with_pairs else view_pb2.OPENING_MELDS


# --- engine to protobuf --------------------------------------------------------------------


def fill_table_view(message: view_pb2.TableView, state: State, seen: View | None = None) -> None:
    """Set the public 51 fields of ``message`` (the table resource and seats stay the caller's).

    The 51 fields of the seats already present in ``message.seats`` are set too. ``seen`` is
    any seat's view of ``state`` when the caller has one already: every view holds the same
    public fields, and only those are read.
    """
    if seen is None:
        seen = view(state, None)
    if seen.phase is Phase.OVER:
        message.ClearField("turn_seat")
    else:
        message.turn_seat = seen.turn.seat
    message.hand_no = seen.hand_no
    message.dealer_seat = seen.dealer
    message.turn_phase = _PHASE[seen.phase]
    message.seed_commitment = bytes.fromhex(seen.commitment)
    for public in message.seats:
        if public.seat < seen.players:
            _fill_seat(public, seen, public.seat)
    message.fiftyone.CopyFrom(_table(seen))


def _fill_seat(message: view_pb2.SeatState, seen: View, seat: int) -> None:
    own = seen.seats[seat]
    message.card_count = own.cards
    if own.opened:
        message.opening = opening_to_proto(True, own.opened_with_pairs)
    elif _partner_opened(seen, seat):
        message.opening = view_pb2.OPENING_PARTNER
    message.pair_status = own.pair_status
    message.total = seen.totals[seat]
    message.eliminated = not own.active


def _partner_opened(seen: View, seat: int) -> bool:
    """F-46: in team mode a seat whose partner opened counts as opened."""
    return seen.teams and seen.seats[(seat + 2) % 4].opened


def _table(seen: View) -> view_pb2.FiftyOneTable:
    table = view_pb2.FiftyOneTable(
        melds=[meld_to_proto(i, entry, seen.rules) for i, entry in enumerate(seen.table)],
        discard_pile=cards_to_proto(seen.discard),
        stock_count=seen.stock,
        effective_threshold=seen.series_threshold,
        pairs_needed=seen.pairs_needed or 0,
        turn=_turn(seen.turn),
        seats=[_fiftyone_seat(seen, seat) for seat in range(seen.players)],
        hands_scored=seen.hands_scored,
        reshuffles=seen.reshuffles,
        high_open=seen.high_open,
        high_pairs=seen.high_pairs,
        pair_opened=seen.pair_opened,
        action_count=seen.action_count,
        turns_without_stock_draw=seen.turns_without_draw,
    )
    if seen.bottom_card is not None:
        table.bottom_card.CopyFrom(card_to_proto(seen.bottom_card))
    claimant = next((i for i, s in enumerate(seen.seats) if s.bottom_claim is not None), None)
    if claimant is not None:
        table.bottom_card_claimant = claimant
    if seen.last_discarder is not None:
        table.last_discarder_seat = seen.last_discarder
    if seen.query is not None:
        table.query.CopyFrom(_query(seen, seen.query))
    return table


def _turn(turn: Turn) -> view_pb2.FiftyOneTurn:
    message = view_pb2.FiftyOneTurn(
        number=turn.number,
        took_rule=turn.took_rule or "",
        took_used=turn.took_used,
        must_open=turn.must_open,
        retrieved_jokers=cards_to_proto(turn.jokers),
        opened_now=turn.opened_now,
        laid_off_others=turn.laid_off_others,
    )
    if turn.took is not None:
        message.taken_discard.CopyFrom(card_to_proto(turn.took))
    return message


def _query(seen: View, query: Query) -> view_pb2.PendingQuery:
    asked = _asked(seen, query)
    given = sorted(set(asked) - set(query.pending) - set(query.refused))
    return view_pb2.PendingQuery(
        query_id=seen.turn.number,
        taker_seat=query.taker,
        card=card_to_proto(query.card),
        asked_seats=asked,
        given_seats=given,
        refused_seats=query.refused,
    )


def _asked(seen: View, query: Query) -> list[int]:
    """F-80: every other active seat that does not count as opened was asked."""
    return [
        seat
        for seat, public in enumerate(seen.seats)
        if seat != query.taker
        and public.active
        and not public.opened
        and not _partner_opened(seen, seat)
    ]


def _fiftyone_seat(seen: View, seat: int) -> view_pb2.FiftyOneSeat:
    own = seen.seats[seat]
    message = view_pb2.FiftyOneSeat(
        seat=seat,
        opening_total=own.opening_total,
        shown_pairs=own.shown_pairs,
        shown_twins=cards_to_proto(own.shown_twins),
        islek_penalty=own.islek_penalty,
        free_islek_used=own.free_islek_used,
        turns=own.turns,
        eliminated_after_hand=next(
            (i + 1 for i, group in enumerate(seen.eliminated) if seat in group), 0
        ),
    )
    if own.bottom_claim is not None:
        message.bottom_claim_turn = own.bottom_claim
    return message


def seat_view(
    table_view: view_pb2.TableView, state: State, seat: int, seen: View | None = None
) -> view_pb2.SeatView:
    """``seat``'s view: the public ``table_view`` (already filled) plus its own hand;
    ``seen`` is ``view(state, seat)`` when the caller has it already."""
    if seen is None:
        seen = view(state, seat)
    if seen.hand is None:
        return view_pb2.SeatView(table=table_view, seat=seat)
    turn = seen.turn
    must_use = []
    if turn.seat == seat:
        if turn.took is not None and turn.took_rule in ("F-30", "F-33") and not turn.took_used:
            must_use.append(turn.took)
        must_use.extend(turn.jokers)
    own = seen.seats[seat]
    free = seen.rules.islek_free_in_pair_status - own.free_islek_used if own.pair_status else 0
    return view_pb2.SeatView(
        table=table_view,
        seat=seat,
        hand=cards_to_proto(sorted(seen.hand)),
        must_use=cards_to_proto(must_use),
        undiscardable=cards_to_proto(own.shown_twins),
        free_islek_left=max(0, free),
    )


# --- protobuf to engine --------------------------------------------------------------------


def view_from_seat_view(message: view_pb2.SeatView) -> View:
    """The engine's :class:`~masa_rules.fiftyone.View` of the seat that ``message`` was made for.

    Raises :class:`WireError` for a view that is not of a 51 hand in play.
    """
    table = message.table
    if table.WhichOneof("game") != "fiftyone":
        raise WireError("the view is not of a 51 table")
    game = table.fiftyone
    rules, hands = rules_from_config(table.table.config)
    players = len(table.seats)
    seat = message.seat
    if not 0 <= seat < players or len(game.seats) != players:
        raise WireError("a 51 view needs every seat and the viewing seat", "P-20")
    phase = _PHASE_BACK.get(table.turn_phase)
    if phase is None or phase is Phase.OVER or not table.HasField("turn_seat"):
        raise WireError("only a view of a hand in play can be read back", "P-20")
    return View(
        rules=rules,
        players=players,
        teams=table.table.config.mode == game_pb2.MODE_TEAMS,
        hands_limit=hands,
        hand_no=table.hand_no,
        hands_scored=game.hands_scored,
        dealer=table.dealer_seat,
        phase=phase,
        turn=_turn_from(table.turn_seat, game.turn),
        commitment=table.seed_commitment.hex(),
        stock=game.stock_count,
        bottom_card=card_from_proto(game.bottom_card) if game.HasField("bottom_card") else None,
        discard=cards_from_proto(game.discard_pile),
        last_discarder=(game.last_discarder_seat if game.HasField("last_discarder_seat") else None),
        table=tuple(meld_from_proto(meld) for meld in game.melds),
        seats=tuple(_seat_from(table.seats[i], entry) for i, entry in enumerate(game.seats)),
        query=_query_from(game.query) if game.HasField("query") else None,
        totals=tuple(entry.total for entry in table.seats),
        eliminated=_eliminated_from(game),
        ranking=(),
        reshuffles=game.reshuffles,
        high_open=game.high_open,
        high_pairs=game.high_pairs,
        pair_opened=game.pair_opened,
        series_threshold=game.effective_threshold,
        pairs_needed=game.pairs_needed if rules.pair_opening else None,
        turns_without_draw=game.turns_without_stock_draw,
        action_count=game.action_count,
        seat=seat,
        hand=cards_from_proto(message.hand),
    )


def _turn_from(seat: int, turn: view_pb2.FiftyOneTurn) -> Turn:
    return Turn(
        seat=seat,
        number=turn.number,
        took=card_from_proto(turn.taken_discard) if turn.HasField("taken_discard") else None,
        took_rule=turn.took_rule or None,
        took_used=turn.took_used,
        must_open=turn.must_open,
        jokers=cards_from_proto(turn.retrieved_jokers),
        opened_now=turn.opened_now,
        laid_off_others=turn.laid_off_others,
    )


def _seat_from(public: view_pb2.SeatState, entry: view_pb2.FiftyOneSeat) -> PublicSeat:
    return PublicSeat(
        active=not public.eliminated,
        cards=public.card_count,
        opened=public.opening in (view_pb2.OPENING_MELDS, view_pb2.OPENING_PAIRS),
        opened_with_pairs=public.opening == view_pb2.OPENING_PAIRS,
        opening_total=entry.opening_total,
        pair_status=public.pair_status,
        shown_pairs=entry.shown_pairs,
        shown_twins=cards_from_proto(entry.shown_twins),
        islek_penalty=entry.islek_penalty,
        free_islek_used=entry.free_islek_used,
        bottom_claim=entry.bottom_claim_turn if entry.HasField("bottom_claim_turn") else None,
        turns=entry.turns,
    )


def _query_from(query: view_pb2.PendingQuery) -> Query:
    answered = {*query.given_seats, *query.refused_seats}
    pending = tuple(s for s in query.asked_seats if s not in answered)
    return Query(query.taker_seat, card_from_proto(query.card), pending, tuple(query.refused_seats))


def _eliminated_from(game: view_pb2.FiftyOneTable) -> tuple[tuple[int, ...], ...]:
    groups: dict[int, list[int]] = {}
    for entry in game.seats:
        if entry.eliminated_after_hand:
            groups.setdefault(entry.eliminated_after_hand, []).append(entry.seat)
    return tuple(tuple(sorted(groups[hand])) for hand in sorted(groups))


def state_from_seat_view(message: view_pb2.SeatView) -> State:
    """A state equivalent to the real one for every decision of ``message.seat``.

    It is the engine's :func:`~masa_rules.fiftyone.seat_state` of the view the message carries:
    the seat's own hand and the public table, with the unseen cards dealt out as stand-ins, so
    ``legal_actions`` and the policies give the same answers as on the real state (P-20).
    """
    try:
        return seat_state(view_from_seat_view(message))
    except RuleViolation as error:
        raise WireError(error.message, error.rule) from None
