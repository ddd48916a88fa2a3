"""Takeover (architecture.md): every node looks for tables that some node's index lists and
whose lease nobody holds (their node died and its leases expired, or it drained and released
them), every ``takeover_scan_seconds``. It claims at most its share of them at once (the
unserved tables over the live nodes, in a random order, so that the survivors split a dead
node's tables), rebuilds each from its snapshot and the log after it
(:mod:`~masa_table_engine.app.recovery`, which voids a table it cannot rebuild), lists it in
its own index and serves it."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import random

from masa_table_engine.app.node_state import NodeState
from masa_table_engine.app.ports import Directory, Unserved
from masa_table_engine.app.recovery import RECOVERY_CONCURRENCY, Recovery

__all__ = ["Takeover"]

_log = logging.getLogger(__name__)


class Takeover:
    def __init__(
        self,
        state: NodeState,
        recovery: Recovery,
        directory: Directory | None,
        scan_seconds: float,
    ) -> None:
        self._state = state
        self._deps = state.deps
        self._runtimes = state.runtimes
        self._recovery = recovery
        self._directory = directory
        self._scan_seconds = scan_seconds
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Look for unserved tables every ``takeover_scan_seconds`` (module doc)."""
        if self.task is None and self._directory is not None:
            self.task = asyncio.get_running_loop().create_task(self._scan_for_ever())

    async def _scan_for_ever(self) -> None:
        while True:
            # A little jitter, so that the live nodes do not all list at the same moment.
            await asyncio.sleep(self._scan_seconds * random.uniform(0.75, 1.25))
            try:
                with self._deps.metrics.loop("takeover_scan"):
                    if self._directory is not None and await self._directory.worth_scanning():
                        await self.take_over_unserved()
            except Exception as error:
                _log.warning("looking for unserved tables failed: %r", error)

    async def take_over_unserved(self) -> int:
        """Take over this node's share of the tables nobody serves; how many it took."""
        directory = self._directory
        if directory is None or self._state.draining:
            return 0
        found: dict[str, Unserved] = {}
        for unserved in await directory.unserved():
            if unserved.table_id not in self._runtimes:
                found.setdefault(unserved.table_id, unserved)
        if not found:
            return 0
        me = self._deps.log.writer
        nodes = sorted({*await directory.live_nodes(), me})
        share = math.ceil(len(found) / len(nodes))
        # Rendezvous order: each table goes first to the live node that ranks it highest, so
        # the survivors of a dead node split its tables without racing for the same ones.
        mine = sorted(found.values(), key=lambda u: _rank(me, nodes, u.table_id))[:share]
        limit = asyncio.Semaphore(RECOVERY_CONCURRENCY)

        async def one(unserved: Unserved) -> bool:
            async with limit:
                if self._state.draining or unserved.table_id in self._runtimes:
                    return False
                try:
                    return await self._recovery.recover_table(unserved.table_id, unserved.node)
                except Exception as error:
                    _log.warning("table %s: takeover failed (%r)", unserved.table_id, error)
                    return False

        return sum(await asyncio.gather(*(one(u) for u in mine)))


def _rank(me: str, nodes: list[str], table_id: str) -> tuple[int, str]:
    """Where this node stands among ``nodes`` in the table's rendezvous order (0: first)."""
    order = sorted(nodes, key=lambda node: _weight(node, table_id), reverse=True)
    return order.index(me), table_id


def _weight(node: str, table_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(f"{node}/{table_id}".encode(), digest_size=8).digest())
