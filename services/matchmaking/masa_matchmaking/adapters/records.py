"""The JSON records matchmaking keeps in its KV buckets: a player's tickets, a rating.

Plain JSON with a version field, so that an operator can read a record with ``nats kv get``
and a later release can read the records of this one.
"""

from __future__ import annotations

import json
from typing import Any, Final

from masa_rules.table_config import BotLevel

from masa_matchmaking.app.ports import PlayerTickets
from masa_matchmaking.domain.rating import PlayerRating
from masa_matchmaking.domain.ticket import Failure, Placement, Ticket, TicketState

__all__ = ["decode_rating", "decode_tickets", "encode_rating", "encode_tickets"]

_VERSION: Final = 1


def encode_tickets(record: PlayerTickets) -> bytes:
    return json.dumps(
        {
            "v": _VERSION,
            "player_id": record.player_id,
            "tickets": [_ticket(t) for t in record.tickets],
        },
        separators=(",", ":"),
    ).encode()


def decode_tickets(data: bytes) -> PlayerTickets:
    raw = json.loads(data)
    return PlayerTickets(raw["player_id"], tuple(_read_ticket(t) for t in raw["tickets"]))


def encode_rating(rating: PlayerRating) -> bytes:
    return json.dumps(
        {
            "v": _VERSION,
            "player_id": rating.player_id,
            "game": rating.game,
            "mu": rating.mu,
            "sigma": rating.sigma,
            "games": rating.games,
            "updated_at": rating.updated_at,
            "recent": list(rating.recent),
        },
        separators=(",", ":"),
    ).encode()


def decode_rating(data: bytes) -> PlayerRating:
    raw = json.loads(data)
    return PlayerRating(
        player_id=raw["player_id"],
        game=str(raw["game"]),
        mu=float(raw["mu"]),
        sigma=float(raw["sigma"]),
        games=int(raw["games"]),
        updated_at=raw["updated_at"],
        recent=tuple(raw["recent"]),
    )


def _ticket(ticket: Ticket) -> dict[str, Any]:
    placement = ticket.placement
    failure = ticket.failure
    return {
        "id": ticket.ticket_id,
        "request_id": ticket.request_id,
        "lobby_id": ticket.lobby_id,
        "player_id": ticket.player_id,
        "name": ticket.display_name,
        "state": ticket.state.value,
        "created_at": ticket.created_at,
        "expires_at": ticket.expires_at,
        "updated_at": ticket.updated_at,
        "party_size": ticket.party_size,
        "party_code": ticket.party_code,
        "bot_level": ticket.bot_level.value if ticket.bot_level else None,
        "rating": ticket.rating,
        "requeues": ticket.requeues,
        "trace_parent": ticket.trace_parent,
        "front": ticket.front,
        "placement": None
        if placement is None
        else {
            "table_id": placement.table_id,
            "seat": placement.seat,
            "table_seats": placement.table_seats,
            "bot_level": placement.bot_level.value,
            "players": placement.players,
            "placer": placement.placer,
            "started_at": placement.started_at,
            "node_id": placement.node_id,
            "address": placement.address,
            "hold_id": placement.hold_id,
        },
        "failure": None if failure is None else [failure.reason, failure.message],
    }


def _read_ticket(raw: dict[str, Any]) -> Ticket:
    placed = raw["placement"]
    failure = raw["failure"]
    return Ticket(
        ticket_id=raw["id"],
        request_id=raw["request_id"],
        lobby_id=raw["lobby_id"],
        player_id=raw["player_id"],
        display_name=raw["name"],
        state=TicketState(raw["state"]),
        created_at=raw["created_at"],
        expires_at=raw["expires_at"],
        updated_at=raw["updated_at"],
        party_size=raw["party_size"],
        party_code=raw["party_code"],
        bot_level=BotLevel(raw["bot_level"]) if raw["bot_level"] else None,
        rating=raw["rating"],
        requeues=raw["requeues"],
        trace_parent=raw.get("trace_parent", ""),
        # Records written before "front" existed put back exactly the requeued tickets.
        front=raw.get("front", raw["requeues"] > 0),
        placement=None
        if placed is None
        else Placement(
            table_id=placed["table_id"],
            seat=placed["seat"],
            table_seats=placed["table_seats"],
            bot_level=BotLevel(placed["bot_level"]),
            players=placed["players"],
            placer=placed["placer"],
            started_at=placed["started_at"],
            node_id=placed["node_id"],
            address=placed["address"],
            hold_id=placed["hold_id"],
        ),
        failure=None if failure is None else Failure(failure[0], failure[1]),
    )
