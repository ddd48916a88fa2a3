"""Takeover (architecture.md): every node looks for tables that some node's index lists and
whose lease nobody holds (their node died and its leases expired, or it drained and released
them), every ``takeover_scan_seconds``, and every quarter of that while a node has just gone
silent, drained or vanished (its leases run out any moment then). Each table goes to the
live node that ranks it first (rendezvous hashing,
:func:`~masa_table_engine.app.rendezvous.claim_order`), which every node computes alike from
the table's id and the live nodes alone, so the survivors of a dead node split its tables in
one scan whatever each of them has seen claimed so far; one that stays unserved (its first
node is slow, or sees other live nodes) goes to the next node in its order after
``_PATIENCE_SCANS`` scan periods, and so on. With no node in trouble, a table found unserved
(a lease given up after a failed rebuild) goes to the node that found it once it has waited
as long as for the second node in its order: one node lists everything for the cluster each
period, so the others may not see it soon (``Scan.claim_all``). A node rebuilds each table it
takes from the snapshot and the log after it (:mod:`~masa_table_engine.app.recovery`, which
voids a table it cannot rebuild), lists it in its own index and serves it."""

from __future__ import annotations

import asyncio
import logging
import random
from typing import Final

from masa_table_engine.app.node_state import NodeState
from masa_table_engine.app.ports import Directory, Unserved
from masa_table_engine.app.recovery import RECOVERY_CONCURRENCY, Recovery
from masa_table_engine.app.rendezvous import claim_order

__all__ = ["Takeover"]

_log = logging.getLogger(__name__)

# The next scan's wait, as a share of takeover_scan_seconds, when the last one asked for soon.
_SOON: Final = 0.25
# How many scan periods a table waits unserved for each node ranked above this one.
_PATIENCE_SCANS: Final = 2.0
# How many scan periods a table not seen unserved keeps its wait: its first node may hold
# its lease a while, fail to rebuild it and give it up, again and again.
_REMEMBER_SCANS: Final = 10.0


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
        # The tables lately found unserved: since when, and when last (this node's clock).
        # Only those seen within _REMEMBER_SCANS are kept.
        self._unserved_since: dict[str, tuple[float, float]] = {}
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Look for unserved tables every ``takeover_scan_seconds`` (module doc)."""
        if self.task is None and self._directory is not None:
            self.task = asyncio.get_running_loop().create_task(self._scan_for_ever())

    async def _scan_for_ever(self) -> None:
        soon = False
        while True:
            # A little jitter, so that the live nodes do not all list at the same moment.
            pause = self._scan_seconds * (_SOON if soon else 1.0)
            await asyncio.sleep(pause * random.uniform(0.75, 1.25))
            try:
                with self._deps.metrics.loop("takeover_scan"):
                    soon = await self.scan()
            except Exception as error:
                _log.warning("looking for unserved tables failed: %r", error)

    async def scan(self) -> bool:
        """One periodic scan: list what the directory says is worth it and take what is this
        node's; whether the next should come soon."""
        if self._directory is None:
            return False
        scan = await self._directory.worth_scanning()
        if scan is None:
            return False
        await self.take_over_unserved(scan.nodes, claim_all=scan.claim_all)
        return scan.soon

    async def take_over_unserved(
        self, nodes: frozenset[str] | None = None, *, claim_all: bool = False
    ) -> int:
        """Take over the tables nobody serves that the indexes of ``nodes`` (every node's:
        None) list and that are this node's to take now (module doc; with ``claim_all``, every
        one that waited unserved two scan periods, :class:`~masa_table_engine.app.ports.Scan`);
        how many it took."""
        directory = self._directory
        if directory is None or self._state.draining:
            self._unserved_since = {}
            return 0
        found: dict[str, Unserved] = {}
        for unserved in await directory.unserved(nodes):
            if unserved.table_id not in self._runtimes:
                found.setdefault(unserved.table_id, unserved)
        waited = self._waited(found)
        if not found:
            return 0
        me = self._deps.log.writer
        live = {*await directory.live_nodes(), me}
        patience = _PATIENCE_SCANS * self._scan_seconds

        def rank(table_id: str) -> int:
            place = claim_order(table_id, live).index(me)
            # The cluster's listing may be the only one to see it: second at worst.
            return min(place, 1) if claim_all else place

        mine = [
            unserved
            for table_id, unserved in found.items()
            if rank(table_id) * patience <= waited[table_id]
        ]
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

    def _waited(self, found: dict[str, Unserved]) -> dict[str, float]:
        """How long each table ``found`` has waited unserved, as far as this node has seen."""
        now = self._deps.clock()
        remember = _REMEMBER_SCANS * self._scan_seconds
        seen = {
            table_id: times
            for table_id, times in self._unserved_since.items()
            if now - times[1] <= remember
        }
        for table_id in found:
            first, _ = seen.get(table_id, (now, now))
            seen[table_id] = (first, now)
        self._unserved_since = seen
        # max(): a clock stepped back waits as if the table had just been found.
        return {table_id: max(0.0, now - seen[table_id][0]) for table_id in found}
