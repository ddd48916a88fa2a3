"""This node in the engine-node registry that matchmaking places tables from.

The node keeps one ``EngineNode`` record (masa.events.v1) in the KV bucket
``masa_engine_nodes`` under its node id: its address, games, version, live tables (their
number and ids), capacity and load, rewritten every third of the bucket's TTL, and at once
when it starts draining or an operator resumes it. A node that dies stops writing and its
record expires with the TTL; a node that stops says it is draining, then deletes the record.
The node id is a key of this bucket only: it never stands where a table id stands in a subject.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Final

import nats.errors
from google.protobuf.timestamp_pb2 import Timestamp
from masa.events.v1 import engine_pb2
from masa_platform.bus import KvBucket
from masa_platform.bus_access import ENGINE_NODES_BUCKET as _BUCKET
from masa_platform.loops import supervise
from masa_platform.metrics import LoopMetrics
from masa_platform.tasks import stop_tasks
from masa_wire.table_config import game_name_to_proto, game_to_proto

from masa_table_engine.domain.games import hosted

__all__ = ["ENGINE_NODES_BUCKET", "NodeRegistry"]

_log = logging.getLogger(__name__)

ENGINE_NODES_BUCKET: Final = _BUCKET
_GOODBYE_SECONDS: Final = 2.0


class NodeRegistry:
    def __init__(  # noqa: PLR0913 - the record's facts and the heartbeat's metrics, by keyword
        self,
        bucket: KvBucket,
        *,
        node_id: str,
        address: str,
        version: str,
        capacity: int,
        tables: Callable[[], list[str]],
        ttl_seconds: float,
        loops: LoopMetrics,
    ) -> None:
        self._bucket = bucket
        self._loops = loops
        self._node_id = node_id
        self._address = address
        self._version = version
        self._capacity = capacity
        self._tables = tables
        self._every = ttl_seconds / 3
        self._task: asyncio.Task[None] | None = None
        self._draining = False

    def record(self, *, draining: bool = False) -> engine_pb2.EngineNode:
        table_ids = sorted(self._tables())
        tables = len(table_ids)
        stamp = Timestamp()
        stamp.FromNanoseconds(time.time_ns())
        return engine_pb2.EngineNode(
            node_id=self._node_id,
            address=self._address,
            # The games this node hosts: the shipped ones by kind, a plugin's by name.
            games=[kind for kind in map(game_to_proto, hosted()) if kind],
            game_names=[name for name in map(game_name_to_proto, hosted()) if name],
            version=self._version,
            tables=tables,
            capacity=self._capacity,
            load=min(1.0, tables / self._capacity),
            draining=draining,
            update_time=stamp,
            table_ids=table_ids,
        )

    async def advertise(self, *, draining: bool | None = None) -> None:
        record = self.record(draining=self._draining if draining is None else draining)
        await self._bucket.put(self._node_id, record.SerializeToString())

    async def drain(self) -> None:
        """Say from now on that the node drains: matchmaking places no new table here."""
        self._draining = True
        await self._say_now()

    async def resume(self) -> None:
        """Say from now on that the node is live again (an operator's ResumeNode)."""
        self._draining = False
        await self._say_now()

    async def _say_now(self) -> None:
        """Rewrite the record at once; bounded: with NATS away the next heartbeat says it."""
        with contextlib.suppress(nats.errors.Error, TimeoutError):
            async with asyncio.timeout(_GOODBYE_SECONDS):
                await self.advertise()

    async def start(self) -> None:
        await self.advertise()
        beat = supervise(
            "registry_heartbeat",
            self.advertise,
            interval_seconds=self._every,
            metrics=self._loops,
            wait_first=True,
        )
        self._task = asyncio.get_running_loop().create_task(beat, name="engine-registry")

    async def stop(self) -> None:
        """Say the node drains (no new tables), then leave the registry; a registry that
        never started has nothing to leave."""
        if self._task is None:
            return
        await stop_tasks(self._task)
        # Bounded: with NATS gone the record simply expires.
        with contextlib.suppress(nats.errors.Error, TimeoutError):
            async with asyncio.timeout(_GOODBYE_SECONDS):
                await self.advertise(draining=True)
                await self._bucket.delete(self._node_id)
