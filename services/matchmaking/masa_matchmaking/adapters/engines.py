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
from masa.common.v1 import error_pb2
from masa.events.v1 import engine_pb2
from masa.table.v1 import table_pb2, table_pb2_grpc
from masa_platform.auth import ServiceTokens
from masa_platform.bus import KvBucket
from masa_platform.errors import error_info, reason_name
from masa_rules.table_config import TableConfig
from masa_wire import WireError
from masa_wire.table_config import config_to_proto, game_from_proto
from nats.aio.client import Client

from masa_matchmaking.app.ports import EngineFull, EngineNode, EngineRefused, Unreachable

__all__ = ["ENGINE_NODES_BUCKET", "GrpcEngines", "KvEngineNodes"]

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
_AT_CAPACITY: Final = reason_name(error_pb2.ERROR_REASON_NODE_AT_CAPACITY)


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
                    games=frozenset(_games(record)),
                    tables=record.tables,
                    capacity=record.capacity,
                    load=record.load,
                    draining=record.draining,
                )
            )
        return nodes


def _games(record: engine_pb2.EngineNode) -> list[str]:
    """The games a node hosts, by name: the shipped ones by kind and a plugin's by name; a
    kind this instance does not know is left out."""
    known: list[str] = list(record.game_names)
    for game in record.games:
        try:
            known.append(game_from_proto(game))
        except WireError:
            continue
    return known


class GrpcEngines:
    """CreateTable on a node, under a service token; one channel per node address."""

    def __init__(
        self,
        tokens: ServiceTokens,
        open_channel: Callable[[str], grpc.aio.Channel],
        *,
        timeout_seconds: float,
    ) -> None:
        self._token = tokens
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
        self, address: str, table_id: str, request_id: str, config: TableConfig
    ) -> str:
        request = table_pb2.CreateTableRequest(
            table_id=table_id, request_id=request_id, config=config_to_proto(config)
        )
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
