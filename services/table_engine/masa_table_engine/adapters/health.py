"""gRPC health that tells the truth: SERVING only while the node can do its job.

A node serves its tables through NATS: while JetStream does not answer (the server is down,
restarting, or stalled with the connection still open, which the client cannot see), or
while a table is frozen (its last write's fate unknown, or fenced and awaiting recovery or
hand-over), health says NOT_SERVING, so that load balancers and matchmaking send new tables
elsewhere. A drained node (SIGTERM, or an operator's ``masa admin drain``) says NOT_SERVING
from its drain until it stops, or until an operator resumes it (``masa admin resume``): it
takes no new table meanwhile. A probe (a JetStream API request with a short timeout) runs every ``interval``;
the number of frozen tables is exported as ``masa_tables_frozen``. The probe may take up to
``PROBE_TIMEOUT_SECONDS``: a busy node is slow to hear the answer, and health should not
flap with load. The dashboards' gauges that walk every table's seats and timers
(``masa_tables_overdue``, ``masa_players_online``) are refreshed every
``GAUGES_EVERY_SECONDS`` only: at a thousand tables, walking them at every probe cost a few
percent of the node.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Final, Protocol

from masa_platform.loops import supervise
from masa_platform.metrics import LoopMetrics
from masa_platform.server import GrpcServer
from masa_platform.tasks import stop_tasks

from masa_table_engine.adapters.metrics import OVERDUE_SLACK_SECONDS
from masa_table_engine.app.ports import Metrics

__all__ = ["GAUGES_EVERY_SECONDS", "PROBE_TIMEOUT_SECONDS", "HealthMonitor"]

_log = logging.getLogger(__name__)

PROBE_TIMEOUT_SECONDS: Final = 2.0
GAUGES_EVERY_SECONDS: Final = 5.0


class TableCounts(Protocol):
    """What the monitor reads of the node's tables (``Tables``) at each probe."""

    @property
    def frozen(self) -> int: ...

    @property
    def draining(self) -> bool: ...

    @property
    def players_online(self) -> int: ...

    def overdue(self, slack_seconds: float) -> int: ...


class HealthMonitor:
    def __init__(
        self,
        server: GrpcServer,
        *,
        probe: Callable[[], Awaitable[None]],
        tables: TableCounts,
        metrics: Metrics,
        loops: LoopMetrics,
        interval: float,
    ) -> None:
        self._server = server
        self._probe = probe
        self._tables = tables
        self._loops = loops
        self._metrics = metrics
        self._interval = interval
        self._serving: bool | None = None
        self._task: asyncio.Task[None] | None = None
        self._gauges_due = 0.0

    def start(self) -> None:
        watch = supervise(
            "health_probe",
            self.check,
            interval_seconds=self._interval,
            metrics=self._loops,
            wait_first=True,
        )
        self._task = asyncio.get_running_loop().create_task(watch, name="engine-health")

    async def check(self) -> bool:
        """Probe once and report; True when serving."""
        reachable = True
        try:
            async with asyncio.timeout(PROBE_TIMEOUT_SECONDS):
                await self._probe()
        except Exception as error:
            reachable = False
            reason = f"NATS does not answer ({error!r})"
        frozen = self._tables.frozen
        self._metrics.frozen(frozen)
        now = time.monotonic()
        if now >= self._gauges_due:
            self._gauges_due = now + GAUGES_EVERY_SECONDS
            self._metrics.overdue(self._tables.overdue(OVERDUE_SLACK_SECONDS))
            self._metrics.players_online(self._tables.players_online)
        draining = self._tables.draining
        serving = reachable and frozen == 0 and not draining
        if serving != self._serving:
            if serving:
                _log.info("serving")
            elif draining:
                _log.warning("not serving: the node is drained")
            elif reachable:
                _log.warning("not serving: %d frozen tables", frozen)
            else:
                _log.warning("not serving: %s", reason)
            self._serving = serving
            await self._server.set_serving(serving)
        return serving

    async def close(self) -> None:
        await stop_tasks(self._task)
