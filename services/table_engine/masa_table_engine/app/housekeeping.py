"""A node's housekeeping, every second: finished tables past their retention are forgotten,
fenced tables settled (:mod:`~masa_table_engine.app.fencing`), and leases held without a
table running released."""

from __future__ import annotations

import asyncio
import logging
from typing import Final

from masa_platform.loops import supervise

from masa_table_engine.app.fencing import Fencing
from masa_table_engine.app.node_state import NodeState

__all__ = ["Housekeeping", "forget_finished"]

_log = logging.getLogger(__name__)

# How often finished tables past their retention are forgotten, and fenced ones retried.
_HOUSEKEEPING_SECONDS: Final = 1.0


class Housekeeping:
    def __init__(self, state: NodeState, fencing: Fencing) -> None:
        self._state = state
        self._deps = state.deps
        self._ownership = state.ownership
        self._fencing = fencing
        # Leases seen without a table at the last housekeeping pass.
        self._stray: set[str] = set()
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self.task is None:
            # Ended by stop_tasks; a failed pass is logged and the next one runs on time.
            passes = supervise(
                "housekeeping",
                self._housekeep,
                interval_seconds=_HOUSEKEEPING_SECONDS,
                wait_first=True,
            )
            self.task = asyncio.get_running_loop().create_task(passes, name="engine-housekeeping")

    async def _housekeep(self) -> None:
        with self._deps.metrics.loop("housekeeping"):
            forget_finished(self._state)
            if self._state.fenced:
                await self._fencing.settle()
            await self._release_stray_leases()

    async def _release_stray_leases(self) -> None:
        """Give up leases of tables this node neither runs nor is loading (a load that gave
        up between its claim and its start, say) two passes in a row: held and renewed for
        ever, they would keep every other node from taking the table over."""
        busy = self._state.runtimes.keys() | self._state.loading
        stray = {t for t in self._ownership.held() if t not in busy}
        for table_id in stray & self._stray:
            _log.warning("table %s: lease held without the table running; released", table_id)
            await self._state.release_quietly(table_id)
        self._stray = stray


def forget_finished(state: NodeState) -> None:
    """Drop the tables that finished longer than the retention time ago.

    Kept for ever, every table played would stay in memory with its whole history: the
    process would grow without bound, and the garbage collector's full passes over it all
    would stall every live table (for hundreds of milliseconds after a few thousand games).
    Checked periodically and whenever a table is created.
    """
    cutoff = state.deps.clock() - state.settings.finished_retention_seconds
    for table_id, runtime in list(state.runtimes.items()):
        if runtime.finished_at is not None and runtime.finished_at <= cutoff and runtime.done:
            del state.runtimes[table_id]
