"""Fenced tables: a table fenced off while running (another node wrote to its log) is
recovered here (:mod:`~masa_table_engine.app.recovery`) when its lease is free or still ours,
and handed over (forgotten, so that clients are sent to the owner) when another node holds
it."""

from __future__ import annotations

import logging

from masa_table_engine.app.node_state import NodeState
from masa_table_engine.app.recovery import Recovery
from masa_table_engine.app.runtime import TableRuntime

__all__ = ["Fencing"]

_log = logging.getLogger(__name__)


class Fencing:
    def __init__(self, state: NodeState, recovery: Recovery) -> None:
        self._deps = state.deps
        self._ownership = state.ownership
        self._runtimes = state.runtimes
        self._fenced = state.fenced
        self._recovery = recovery

    async def settle(self) -> None:
        """Recover each fenced table whose lease is free or ours; hand over the others."""
        for table_id in list(self._fenced):
            runtime = self._runtimes.get(table_id)
            if runtime is None or not runtime.fenced:
                self._fenced.discard(table_id)
                continue
            try:
                holder = await self._ownership.holder(table_id)
                if holder is not None and holder != self._deps.log.writer:
                    await self._hand_over(table_id, runtime, holder)
                else:
                    await runtime.stop()
                    del self._runtimes[table_id]
                    self._deps.metrics.table_closed(runtime.game)
                    if not await self._recovery.recover_table(table_id):
                        _log.warning("table %s: fenced and not recovered", table_id)
            except Exception:
                _log.warning("table %s: fenced; will try again", table_id, exc_info=True)
                continue
            self._fenced.discard(table_id)

    async def lease_lost(self, table_id: str) -> None:
        """Another node holds the lease of a table running here: hand it over."""
        runtime = self._runtimes.get(table_id)
        if runtime is None or runtime.table.finished:
            return
        holder = await self._ownership.holder(table_id)
        await self._hand_over(table_id, runtime, holder or "another node")

    async def _hand_over(self, table_id: str, runtime: TableRuntime, holder: str) -> None:
        """Forget a table another node holds. It stays in this node's index until the holder
        has it in its own (the holder moves it over): should the holder fail to load it, it
        must still be listed somewhere, or no node would ever take it over."""
        await runtime.stop()
        await runtime.fence_off()
        self._runtimes.pop(table_id, None)
        self._deps.metrics.table_closed(runtime.game)
        _log.warning("table %s handed over to %s", table_id, holder)
