"""The table-engine side of placement: the node registry in KV, and CreateTable over gRPC.

Every node keeps an ``EngineNode`` record (masa.events.v1) in the KV bucket
``masa_engine_nodes`` under its node id; the bucket's TTL removes the record of a node that
stopped writing it. The registry is read at most every ``refresh_seconds`` (placements in a
burst share one read).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Final

import grpc
import grpc.aio
import nats.errors
import nats.js.errors
from grpc_status import rpc_status
from masa.common.v1 import game_pb2
from masa.events.v1 import engine_pb2
from masa.table.v1 import table_pb2, table_pb2_grpc
from masa_platform.bus import KvBucket
from masa_platform.errors import error_info
from masa_platform.settings import AuthSettings
from nats.aio.client import Client

from masa_matchmaking.adapters.convert import (
    GAMES,
    MODES,
    PRESETS,
    options_to_proto,
    seat_to_proto,
)
from masa_matchmaking.adapters.service_token import ServiceToken
from masa_matchmaking.app.ports import (
    EngineFull,
    EngineNode,
    EngineRefused,
    TableSpec,
    Unreachable,
)
from masa_matchmaking.domain.lobby import Game

__all__ = ["ENGINE_NODES_BUCKET", "GrpcEngines", "KvEngineNodes", "table_config"]

ENGINE_NODES_BUCKET: Final = "masa_engine_nodes"
# The engine's answers that a retry will not change.
_REFUSALS: Final = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.ALREADY_EXISTS,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.NOT_FOUND,
    }
)
# The engine's reason for a CreateTable refused for want of room (MASA_MAX_TABLES).
_AT_CAPACITY: Final = "NODE_AT_CAPACITY"
_GAME_OF: Final = {value: key for key, value in GAMES.items()}


class KvEngineNodes:
    """The live nodes of the registry (the bucket is provisioned with its TTL; until it is,
    there is no node)."""

    def __init__(self, nc: Client, *, refresh_seconds: float = 0.5) -> None:
        self._nc = nc
        self._bucket: KvBucket | None = None
        self._refresh = refresh_seconds
        self._nodes: list[EngineNode] = []
        self._read_at = float("-inf")
        self._lock = asyncio.Lock()

    async def live(self) -> list[EngineNode]:
        async with self._lock:
            if time.monotonic() - self._read_at >= self._refresh:
                try:
                    self._nodes = await self._read()
                except (nats.errors.Error, TimeoutError) as error:
                    raise Unreachable(f"the engine registry did not answer: {error}") from None
                self._read_at = time.monotonic()
            return list(self._nodes)

    async def _read(self) -> list[EngineNode]:
        if self._bucket is None:
            try:
                self._bucket = await KvBucket.open(self._nc, ENGINE_NODES_BUCKET)
            except nats.js.errors.BucketNotFoundError:
                return []
        bucket = self._bucket
        nodes: list[EngineNode] = []
        for key in await bucket.keys():
            entry = await bucket.get(key)
            if entry is None or not entry.value:
                continue
            record = engine_pb2.EngineNode.FromString(entry.value)
            nodes.append(
                EngineNode(
                    node_id=record.node_id,
                    address=record.address,
                    games=frozenset(_GAME_OF[g] for g in record.games if g in _GAME_OF),
                    tables=record.tables,
                    capacity=record.capacity,
                    load=record.load,
                    draining=record.draining,
                )
            )
        return nodes


def table_config(table_id: str, spec: TableSpec) -> table_pb2.CreateTableRequest:
    lobby = spec.lobby
    turn = lobby.turn_seconds
    config = table_pb2.CreateTableRequest(table_id=table_id, request_id=table_id)
    tc = config.config
    tc.game = GAMES[lobby.game]
    tc.preset = (
        PRESETS[lobby.preset] if lobby.game is Game.FIFTYONE else game_pb2.PRESET_UNSPECIFIED
    )
    tc.mode = MODES[lobby.mode]
    tc.options.CopyFrom(options_to_proto(lobby))
    tc.seats.extend(seat_to_proto(seat) for seat in spec.seats)
    tc.stake = lobby.stake
    tc.turn_time.FromNanoseconds(round(turn * 1e9))
    tc.lobby_id = lobby.lobby_id
    tc.payout.rake_basis_points = lobby.payout.rake_basis_points
    tc.payout.place_shares.extend(lobby.payout.place_shares)
    return config


class GrpcEngines:
    """CreateTable on a node, under a service token; one channel per node address."""

    def __init__(
        self,
        auth: AuthSettings,
        open_channel: Callable[[str], grpc.aio.Channel],
        *,
        service_name: str,
        timeout_seconds: float,
    ) -> None:
        self._token = ServiceToken(auth, service_name)
        self._open = open_channel
        self._timeout = timeout_seconds
        self._stubs: dict[str, table_pb2_grpc.TableServiceAsyncStub] = {}
        self._channels: dict[str, grpc.aio.Channel] = {}

    def _stub(self, address: str) -> table_pb2_grpc.TableServiceAsyncStub:
        stub = self._stubs.get(address)
        if stub is None:
            channel = self._open(address)
            self._channels[address] = channel
            stub = self._stubs[address] = table_pb2_grpc.TableServiceStub(channel)
        return stub

    async def create_table(
        self, address: str, table_id: str, request_id: str, spec: TableSpec
    ) -> str:
        request = table_config(table_id, spec)
        request.request_id = request_id
        call = self._stub(address).CreateTable(
            request, metadata=self._token.metadata(), timeout=self._timeout
        )
        try:
            response = await call
        except grpc.aio.AioRpcError as error:
            if error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED:
                info = error_info(await rpc_status.aio.from_call(call))
                if info is not None and info.reason == _AT_CAPACITY:
                    raise EngineFull(error.details() or _AT_CAPACITY) from None
            if error.code() not in _REFUSALS:
                raise Unreachable(f"CreateTable at {address}: {error.code().name}") from None
            info = error_info(await rpc_status.aio.from_call(call))
            reason = info.reason if info is not None else error.code().name
            raise EngineRefused(reason, error.details() or reason) from None
        return response.table.owner_address or address

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()
        self._stubs.clear()
