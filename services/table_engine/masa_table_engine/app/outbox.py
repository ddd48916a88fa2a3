"""The results relay: publishes each committed result off the table's lock (an outbox).

The log is the outbox. A committed entry that ends a hand or a game is handed to the relay,
which publishes its results (``HandFinished``, ``GameFinished``, ``GameAbandoned``) in the
background, one table's in order, retrying with a growing pause until the bus takes them. The
caller of the action that produced the result has its answer as soon as the entry is in the
log: a publish that fails does not fail it.

Nothing is lost when a node dies between the append and the publish: a table rebuilt from its
log (after a restart, or by the node that takes it over) hands every result of the entries it
replayed to the relay again with ``recheck``, and the publisher then looks up what is already
on the bus, so each result is published exactly once. For that to cover every result, a table
saves a snapshot only while its relay has nothing pending (``TableRuntime``): the entries
replayed after a snapshot include every result that may not have been published.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from masa_platform.tasks import stop_tasks

from masa_table_engine.app.ports import Metrics, ResultPublisher
from masa_table_engine.domain.model import Entry
from masa_table_engine.domain.table import Table

__all__ = ["Outbox"]

_log = logging.getLogger(__name__)

_RETRY_SECONDS: Final = 0.25
_LONGEST_RETRY_SECONDS: Final = 2.0


@dataclass(slots=True)
class _Pending:
    table: Table
    entry: Entry
    recheck: bool


@dataclass(slots=True)
class _Queue:
    items: deque[_Pending] = field(default_factory=deque)
    notify: Callable[[], None] = lambda: None
    task: asyncio.Task[None] | None = None
    empty: asyncio.Event = field(default_factory=asyncio.Event)


class Outbox:
    """One node's relay; each table with pending results has a task of its own while it has."""

    def __init__(self, results: ResultPublisher, metrics: Metrics) -> None:
        self._results = results
        self._metrics = metrics
        self._queues: dict[str, _Queue] = {}
        self._pending = 0

    @property
    def pending(self) -> int:
        """Results handed over and not published yet, on this node."""
        return self._pending

    def pending_for(self, table_id: str) -> int:
        queue = self._queues.get(table_id)
        return len(queue.items) if queue is not None else 0

    def add(
        self,
        table: Table,
        entry: Entry,
        *,
        recheck: bool = False,
        notify: Callable[[], None] = lambda: None,
    ) -> None:
        """Publish ``entry``'s results soon; ``notify`` is called when the table has none left."""
        queue = self._queues.get(table.table_id)
        if queue is None:
            queue = self._queues[table.table_id] = _Queue()
        queue.notify = notify
        queue.items.append(_Pending(table, entry, recheck))
        queue.empty.clear()
        self._count(1)
        if queue.task is None:
            queue.task = asyncio.get_running_loop().create_task(
                self._relay(table.table_id, queue), name=f"outbox-{table.table_id}"
            )

    async def flushed(self, table_id: str, timeout: float | None = None) -> bool:
        """Wait until the table's results are all published; False when ``timeout`` ran out."""
        queue = self._queues.get(table_id)
        if queue is None:
            return True
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await queue.empty.wait()
                return True
        return False

    def drop(self, table_id: str) -> None:
        """Forget the table's pending results: another node owns it now and, having rebuilt
        it from the log, publishes what is missing."""
        queue = self._queues.pop(table_id, None)
        if queue is None:
            return
        self._count(-len(queue.items))
        queue.items.clear()
        if queue.task is not None:
            queue.task.cancel()

    async def close(self) -> None:
        tasks = [queue.task for queue in self._queues.values()]
        for table_id in list(self._queues):
            self.drop(table_id)
        await stop_tasks(*tasks)

    async def _relay(self, table_id: str, queue: _Queue) -> None:
        retry = _RETRY_SECONDS
        try:
            while queue.items:
                item = queue.items[0]
                try:
                    with self._metrics.loop("outbox_relay"):
                        outcomes = await self._results.publish(
                            item.table, item.entry, recheck=item.recheck
                        )
                except Exception as error:
                    self._metrics.result_published("failed")
                    _log.warning(
                        "table %s: result of entry %d not published (%r); retrying",
                        table_id,
                        item.entry.sequence,
                        error,
                        extra={"table_id": table_id},
                    )
                    # It may have landed all the same: look before publishing again.
                    item.recheck = True
                    await asyncio.sleep(retry)
                    retry = min(retry * 2, _LONGEST_RETRY_SECONDS)
                    continue
                retry = _RETRY_SECONDS
                for outcome in outcomes:
                    self._metrics.result_published(outcome)
                if queue.items and queue.items[0] is item:
                    queue.items.popleft()
                    self._count(-1)
        finally:
            queue.task = None
            if not queue.items:
                queue.empty.set()
                if self._queues.get(table_id) is queue:
                    del self._queues[table_id]
                queue.notify()

    def _count(self, delta: int) -> None:
        self._pending += delta
        self._metrics.outbox_pending(self._pending)
