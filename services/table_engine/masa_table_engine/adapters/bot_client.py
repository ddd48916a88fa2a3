"""Decisions from the bot service (``masa.bot.v1.BotService.Decide``) for bots and the autopilot.

The observation is the seat's own view only, so the bot never sees hidden information
(P-20). Every rule a decision depends on is in the view, and the bot does not read the
history: sending it made each request grow with the game (131 ms of CPU to build at 3,095 log
entries). When the service fails, the client stays away from it for ``cooldown_seconds``
instead of making every following move wait for another timeout; the table then plays its
in-process fallback policy.
"""

from __future__ import annotations

import logging
import time

import grpc
import grpc.aio
from masa.bot.v1 import bot_pb2, bot_pb2_grpc
from masa_platform.auth import ServiceTokens
from masa_wire.games import wire_for
from masa_wire.table_config import bot_level_to_proto

from masa_table_engine.adapters.convert import action_from_proto, seat_view
from masa_table_engine.domain.table import Table, automated_level

__all__ = ["GrpcDecider", "decide_request"]

_log = logging.getLogger(__name__)


class GrpcDecider:
    def __init__(
        self,
        channel: grpc.aio.Channel,
        tokens: ServiceTokens,
        *,
        owner_address: str,
        timeout_seconds: float,
        cooldown_seconds: float = 5.0,
    ) -> None:
        self._stub = bot_pb2_grpc.BotServiceStub(channel)
        self._tokens = tokens
        self._owner_address = owner_address
        self._timeout = timeout_seconds
        self._cooldown = cooldown_seconds
        self._skip_until = 0.0

    async def decide(self, table: Table, seat: int) -> object | None:
        if time.monotonic() < self._skip_until:
            return None
        request = decide_request(table, seat, self._owner_address)
        try:
            response = await self._stub.Decide(
                request,
                metadata=self._tokens.metadata(),
                timeout=self._timeout,
            )
        except grpc.aio.AioRpcError as error:
            _log.warning("bot service failed: %s; falling back for a while", error.code())
            self._skip_until = time.monotonic() + self._cooldown
            return None
        return action_from_proto(table, response.action, seat)


def decide_request(table: Table, seat: int, owner_address: str) -> bot_pb2.DecideRequest:
    """What the bot is asked for ``seat``: the seat's view, the level it is played at
    (``automated_level``) and a seed."""
    observation = bot_pb2.Observation(view=seat_view(table, seat, owner_address))
    wire_for(table.config.game).observe(observation, table.game)
    return bot_pb2.DecideRequest(
        observation=observation,
        level=bot_level_to_proto(automated_level(table, seat)),
        seed=int.from_bytes(table.seed[:4], "big") + table.sequence,
    )
