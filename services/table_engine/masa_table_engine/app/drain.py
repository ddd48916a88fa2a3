"""Draining (SIGTERM, ``Node.drain``): the node takes no new table and no takeover, and hands
each table over: a final snapshot, then the lease released, so that another node takes the
table at its next scan instead of waiting for the lease to expire. An operator may return a
drained node to service (``Node.resume``): it takes new tables and takeovers again."""

from __future__ import annotations

import asyncio
import logging
from typing import Final

from masa_platform.tasks import stop_tasks

from masa_table_engine.app.node_state import NodeState
from masa_table_engine.app.recovery import RECOVERY_CONCURRENCY
from masa_table_engine.app.runtime import TableRuntime
from masa_table_engine.app.takeover import Takeover

__all__ = ["Drain", "Draining", "NodeLeaving"]

_log = logging.getLogger(__name__)

# How long a drain waits for a table's results to be out before handing it over anyway.
_HAND_OVER_FLUSH_SECONDS: Final = 1.0


class Draining(Exception):
    """The node is draining: it takes no new table."""


class NodeLeaving(Exception):
    """The node drains to stop (SIGTERM): no operator's ResumeNode brings it back."""


class Drain:
    def __init__(self, state: NodeState, takeover: Takeover) -> None:
        self._state = state
        self._deps = state.deps
        self._runtimes = state.runtimes
        self._takeover = takeover

    async def drain(self) -> int:
        """Take no new table, and hand each table over (see the module doc); how many."""
        self._state.draining = True
        await stop_tasks(self._takeover.task)
        limit = asyncio.Semaphore(RECOVERY_CONCURRENCY)

        async def one(table_id: str, runtime: TableRuntime) -> None:
            async with limit:
                await runtime.hand_over(_HAND_OVER_FLUSH_SECONDS)
                if self._runtimes.get(table_id) is runtime:
                    del self._runtimes[table_id]
                if not runtime.table.finished:
                    self._deps.metrics.table_closed(runtime.game)
                await self._state.release_quietly(table_id)

        handing = [(t, r) for t, r in self._runtimes.items() if not r.done and not r.fenced]
        await asyncio.gather(*(one(t, r) for t, r in handing))
        _log.info("drained: handed %d tables over", len(handing))
        return len(handing)

    def resume(self) -> bool:
        """Take new tables and take unserved ones over again after a drain (an operator's
        ResumeNode); the tables handed over stay where they went. False when not drained."""
        if not self._state.draining:
            return False
        self._state.draining = False
        self._takeover.task = None
        self._takeover.start()
        _log.info("resumed: taking new tables again")
        return True
