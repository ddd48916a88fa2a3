"""Matchmaking's domain to and from protobuf: lobbies, tickets and ratings.

A lobby's game, preset, mode, options, payout and bot levels, like the configuration of the
tables it asks the engines for, are converted by ``masa_wire.table_config``, the mapping the
table engine reads them with.
"""

from __future__ import annotations

from typing import Final

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp
from masa.common.v1 import error_pb2, game_pb2
from masa.matchmaking.v1 import matchmaking_pb2 as mm
from masa_rules.table_config import BotLevel, bot_levels
from masa_wire import WireError
from masa_wire.table_config import (
    bot_level_from_proto,
    bot_level_to_proto,
    game_name_to_proto,
    game_to_proto,
    mode_to_proto,
    named_game_from_proto,
    options_to_proto,
    preset_to_proto,
)

from masa_matchmaking.app.tickets import NewTicket
from masa_matchmaking.domain.errors import BadInput
from masa_matchmaking.domain.lobby import Lobby
from masa_matchmaking.domain.rating import PlayerRating
from masa_matchmaking.domain.ticket import Ticket, TicketState
from masa_matchmaking.domain.waits import WaitSummary

__all__ = [
    "game_from_proto",
    "lobby_to_proto",
    "new_ticket_from_proto",
    "rating_to_proto",
    "ticket_to_proto",
]

_STATES: Final = {
    TicketState.SEARCHING: mm.Ticket.STATE_SEARCHING,
    TicketState.PLACING: mm.Ticket.STATE_PLACING,
    TicketState.MATCHED: mm.Ticket.STATE_MATCHED,
    TicketState.CANCELLED: mm.Ticket.STATE_CANCELLED,
    TicketState.EXPIRED: mm.Ticket.STATE_EXPIRED,
    TicketState.FAILED: mm.Ticket.STATE_FAILED,
}
_ERROR_DOMAIN: Final = "masa.dev"


def _duration(seconds: float) -> Duration:
    duration = Duration()
    duration.FromNanoseconds(round(seconds * 1e9))
    return duration


def _timestamp(seconds: float) -> Timestamp:
    stamp = Timestamp()
    stamp.FromNanoseconds(round(seconds * 1e9))
    return stamp


def lobby_to_proto(
    lobby: Lobby,
    *,
    queue_length: int,
    tables_in_play: int,
    recent_waits: WaitSummary | None,
    seats_now: bool,
) -> mm.Lobby:
    fill = lobby.bot_fill
    waits = mm.SeatWaits()
    if recent_waits is not None:
        waits.placements = recent_waits.placements
        waits.median.CopyFrom(_duration(recent_waits.median_seconds))
        waits.p90.CopyFrom(_duration(recent_waits.p90_seconds))
    return mm.Lobby(
        lobby_id=lobby.lobby_id,
        display_name=lobby.display_name,
        game=game_to_proto(lobby.game),
        game_name=game_name_to_proto(lobby.game),
        preset=preset_to_proto(lobby.preset),
        mode=mode_to_proto(lobby.mode),
        max_seats=lobby.max_seats,
        min_seats=lobby.min_seats,
        options=options_to_proto(lobby.game, lobby.options),
        stake=lobby.stake,
        rake_basis_points=lobby.payout.rake_basis_points,
        place_shares=list(lobby.payout.place_shares),
        turn_time=_duration(lobby.turn_seconds),
        bot_fill=mm.BotFill(
            enabled=fill.enabled or lobby.training,
            fill_after=_duration(0.0 if lobby.training else fill.fill_after_seconds),
            min_players=fill.min_players,
            level=bot_level_to_proto(fill.level),
        ),
        short_table_after=_duration(lobby.short_table_after_seconds),
        ticket_ttl=_duration(lobby.ticket_ttl_seconds),
        queue_length=queue_length,
        tables_in_play=tables_in_play,
        recent_waits=waits,
        seats_now=seats_now,
        autopilot_level=bot_level_to_proto(lobby.autopilot_level),
        bot_levels=[bot_level_to_proto(level) for level in bot_levels(lobby.game)],
    )


def ticket_to_proto(ticket: Ticket, *, players_needed: int = 0) -> mm.Ticket:
    """The ticket as its player sees it; ``players_needed`` is the lobby's (P-13)."""
    message = mm.Ticket(
        ticket_id=ticket.ticket_id,
        lobby_id=ticket.lobby_id,
        player_id=ticket.player_id,
        state=_STATES[ticket.state],
        create_time=_timestamp(ticket.created_at),
        expire_time=_timestamp(ticket.expires_at),
        update_time=_timestamp(ticket.updated_at),
        party_code=ticket.party_code,
        party_size=ticket.party_size,
        bot_level=(
            bot_level_to_proto(ticket.bot_level)
            if ticket.bot_level
            else game_pb2.BOT_LEVEL_UNSPECIFIED
        ),
        requeues=ticket.requeues,
        players_needed=players_needed,
    )
    placement = ticket.placement
    if ticket.state is TicketState.MATCHED and placement is not None:
        message.table_id = placement.table_id
        message.seat = placement.seat
        message.table_address = placement.address
        message.hold_id = placement.hold_id
    if ticket.failure is not None:
        message.error.CopyFrom(
            error_pb2.ErrorDetail(
                reason=ticket.failure.reason,
                domain=_ERROR_DOMAIN,
                metadata={"message": ticket.failure.message},
            )
        )
    return message


def rating_to_proto(rating: PlayerRating) -> mm.Rating:
    message = mm.Rating(
        player_id=rating.player_id,
        game=game_to_proto(rating.game),
        game_name=game_name_to_proto(rating.game),
        mu=rating.mu,
        sigma=rating.sigma,
        ordinal=rating.ordinal,
        games=rating.games,
    )
    if rating.updated_at is not None:
        message.update_time.CopyFrom(_timestamp(rating.updated_at))
    return message


def game_from_proto(game: int, name: str = "") -> str:
    """The game a request or an event names, by kind or (a plugin's) by name."""
    try:
        return named_game_from_proto(game, name)
    except WireError as error:
        raise BadInput(f"name the game by its kind or its name: {error.message}") from None


def new_ticket_from_proto(request: mm.CreateTicketRequest) -> NewTicket:
    level: BotLevel | None = None
    if request.bot_level:
        try:
            level = bot_level_from_proto(request.bot_level)
        except WireError as error:
            raise BadInput(error.message) from None
    ttl = None
    if request.HasField("ttl"):
        ttl = request.ttl.ToNanoseconds() / 1e9
    return NewTicket(
        request_id=request.request_id,
        lobby_id=request.lobby_id,
        party_size=request.party_size,
        party_code=request.party_code,
        bot_level=level,
        ttl_seconds=ttl,
        display_name=request.display_name,
    )
