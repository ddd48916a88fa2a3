"""Matchmaking's events on JetStream stream MASA_MATCHMAKING (masa.events.v1).

Subjects carry a ticket or table id, never a player id; ``Nats-Msg-Id`` is the event id, which
derives from what the event reports, so a repeated publish (a resumed placement, a redelivered
result) is dropped by JetStream's duplicate window.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Awaitable, Callable
from typing import Final

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp
from masa.events.v1 import matchmaking_event_pb2 as ev
from masa_platform.acks import AckedPublisher, AckRefused, publish_headers
from masa_wire.table_config import (
    game_name_to_proto,
    game_to_proto,
    mode_to_proto,
    preset_to_proto,
    seat_to_proto,
)

from masa_matchmaking.app.ports import GameStarted, Unreachable
from masa_matchmaking.domain.rating import PlayerRating
from masa_matchmaking.domain.ticket import Ticket

__all__ = ["STREAM", "JetStreamEvents"]

_log = logging.getLogger(__name__)

STREAM: Final = "MASA_MATCHMAKING"


def _stamp(seconds: float) -> Timestamp:
    stamp = Timestamp()
    stamp.FromNanoseconds(round(seconds * 1e9))
    return stamp


class JetStreamEvents:
    """Publishes the events; a started game is also recorded by ``on_started`` (the live
    tables of its lobby)."""

    def __init__(
        self, publisher: AckedPublisher, on_started: Callable[[str, str], Awaitable[None]]
    ) -> None:
        self._publisher = publisher
        self._on_started = on_started

    async def _publish(
        self, subject: str, event_id: str, event: ev.MatchmakingEvent, *, required: bool = False
    ) -> None:
        try:
            await self._publisher.publish(
                subject, event.SerializeToString(), publish_headers(msg_id=event_id)
            )
        except (AckRefused, Unreachable) as error:
            if required:
                raise Unreachable(f"could not publish {subject}: {error}") from None
            # Events inform; the tickets and tables they report are already recorded.
            _log.warning("could not publish %s: %s", subject, error)

    async def ticket_matched(self, ticket: Ticket, now: float) -> None:
        placement = ticket.placement
        if placement is None:
            return
        wait = Duration()
        wait.FromNanoseconds(round(max(0.0, now - ticket.created_at) * 1e9))
        event_id = f"matched-{ticket.ticket_id}"
        await self._publish(
            f"masa.matchmaking.v1.{ticket.ticket_id}.ticket_matched",
            event_id,
            ev.MatchmakingEvent(
                ticket_matched=ev.TicketMatched(
                    event_id=event_id,
                    occurred_at=_stamp(now),
                    ticket_id=ticket.ticket_id,
                    lobby_id=ticket.lobby_id,
                    player_id=ticket.player_id,
                    table_id=placement.table_id,
                    seat=placement.seat,
                    wait=wait,
                )
            ),
        )

    async def game_started(self, started: GameStarted, now: float) -> None:
        config = started.config
        await self._on_started(started.table_id, config.lobby_id)
        event_id = f"started-{started.table_id}"
        await self._publish(
            f"masa.matchmaking.v1.{started.table_id}.game_started",
            event_id,
            ev.MatchmakingEvent(
                game_started=ev.GameStarted(
                    event_id=event_id,
                    occurred_at=_stamp(now),
                    table_id=started.table_id,
                    lobby_id=config.lobby_id,
                    game=game_to_proto(config.game),
                    game_name=game_name_to_proto(config.game),
                    preset=preset_to_proto(config.preset),
                    mode=mode_to_proto(config.mode),
                    seats=[seat_to_proto(seat) for seat in config.seats],
                    stake=config.stake,
                    node_id=started.node_id,
                    address=started.address,
                )
            ),
        )

    async def rating_changed(
        self,
        before: PlayerRating,
        after: PlayerRating,
        *,
        table_id: str,
        game_no: int,
        place: int,
        now: float,
    ) -> None:
        player_key = hashlib.sha256(before.player_id.encode()).hexdigest()[:16]
        event_id = f"rating-{table_id}-{game_no}-{player_key}"
        await self._publish(
            f"masa.matchmaking.v1.{table_id}.rating_changed",
            event_id,
            ev.MatchmakingEvent(
                rating_changed=ev.RatingChanged(
                    event_id=event_id,
                    occurred_at=_stamp(now),
                    player_id=before.player_id,
                    game=game_to_proto(before.game),
                    game_name=game_name_to_proto(before.game),
                    table_id=table_id,
                    game_no=game_no,
                    place=place,
                    mu_before=before.mu,
                    sigma_before=before.sigma,
                    mu_after=after.mu,
                    sigma_after=after.sigma,
                )
            ),
            # A game's ratings are delivered again until their events are out (app/ratings).
            required=True,
        )
