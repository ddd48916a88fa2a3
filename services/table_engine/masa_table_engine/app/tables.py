"""The use cases of a table-engine node: create tables, find them, and recover them on start.

Recovery (DESIGN.md §4): every table this node owns has a snapshot (one is written at
creation). On start the node loads each unfinished snapshot, replays the log entries after it
through the same pure :func:`~masa_table_engine.domain.table.accept`, and runs the table on.
Player streams did not survive the restart, so each seat that was connected is recorded as
disconnected, which starts its seat protection (P-12) until the player reconnects.
"""

from __future__ import annotations

import logging
import secrets
import uuid
from collections.abc import Callable

from masa_rules.errors import RuleViolation

from masa_table_engine.app.ports import LogConflict
from masa_table_engine.app.runtime import Deps, RuntimeSettings, TableRuntime
from masa_table_engine.app.stakes import StakeBinder, StakesUnavailable, TableExists
from masa_table_engine.domain.model import (
    Created,
    Entry,
    GameEvents,
    GameFinished,
    SeatChange,
    SeatChanged,
    SeatKind,
    TableConfig,
)
from masa_table_engine.domain.table import Table, accept

__all__ = ["TableNotFound", "Tables"]

_log = logging.getLogger(__name__)


class TableNotFound(Exception):
    def __init__(self, table_id: str) -> None:
        super().__init__(f"no table {table_id!r} on this node")
        self.table_id = table_id


class Tables:
    def __init__(
        self,
        deps: Deps,
        settings: RuntimeSettings,
        *,
        new_id: Callable[[], str] = lambda: uuid.uuid4().hex,
        new_seed: Callable[[], bytes] = lambda: secrets.token_bytes(32),
        stakes: StakeBinder | None = None,
    ) -> None:
        self._deps = deps
        self._stakes = stakes
        self._settings = settings
        self._ownership = deps.ownership
        self._new_id = new_id
        self._new_seed = new_seed
        self._runtimes: dict[str, TableRuntime] = {}

    def get(self, table_id: str) -> TableRuntime:
        runtime = self._runtimes.get(table_id)
        if runtime is None:
            raise TableNotFound(table_id)
        return runtime

    async def locate(self, table_id: str) -> str | None:
        """Where a table this node does not hold is served, if another node owns it."""
        return await self._deps.log.owner_address(table_id)

    @property
    def active(self) -> int:
        return sum(1 for runtime in self._runtimes.values() if not runtime.table.finished)

    async def create(
        self, config: TableConfig, *, table_id: str = "", request_id: str = ""
    ) -> Table:
        """Start a table; raises ``RuleViolation`` for a configuration the rules refuse.

        ``table_id`` is the caller's (AIP-133), else a new one. A table of that id made by the
        same ``request_id`` is returned as it is, also after a restart (the snapshot keeps the
        request id): a retried create makes no second table. A chip table's stakes are bound in
        the ledger (P-30) before anything is written (:mod:`~masa_table_engine.app.stakes`).
        """
        self._forget_finished()
        if table_id:
            existing = await self._existing(table_id, request_id)
            if existing is not None:
                return existing
        else:
            table_id = self._new_id()
        item = Created(table_id, config, self._new_seed(), request_id)
        table, entry = accept(None, item, self._deps.clock(), self._settings.timers)
        if config.stake:
            if self._stakes is None:
                raise StakesUnavailable("this node has no ledger to bind the stakes in")
            holds = [seat.hold_id for seat in config.seats if seat.hold_id]
            await self._stakes.bind(table_id, 1, config.stake, holds)
        if not await self._ownership.claim(table_id):
            raise LogConflict(f"table {table_id} is leased by another node")
        await self._deps.log.append(entry)
        await self._deps.log.save_snapshot(table)
        self._run(table, [entry])
        return table

    async def _existing(self, table_id: str, request_id: str) -> Table | None:
        """The table ``table_id`` if ``request_id`` made it; raises :class:`TableExists` if
        another request did."""
        runtime = self._runtimes.get(table_id)
        table = (
            runtime.table if runtime is not None else await self._deps.log.load_snapshot(table_id)
        )
        if table is None:
            return None
        if not request_id or table.request_id != request_id:
            raise TableExists(table_id)
        return table

    async def recover(self) -> int:
        """Resume every unfinished table of this node; returns how many run again."""
        resumed = 0
        for table_id in await self._deps.log.table_ids():
            if table_id in self._runtimes:
                continue
            try:
                if await self._recover(table_id):
                    resumed += 1
            except Exception:
                _log.exception("could not recover table %s", table_id)
        return resumed

    async def _recover(self, table_id: str) -> bool:
        log = self._deps.log
        table = await log.load_snapshot(table_id)
        if table is None or table.finished:
            return False
        entries: list[Entry] = []
        for logged in await log.read(table_id, table.sequence):
            if logged.sequence != table.sequence + 1:
                raise RuleViolation("P-2", f"table {table_id}: the log skips a sequence")
            table, entry = accept(table, logged.input, logged.at, self._settings.timers)
            entries.append(entry)
        if table.finished:
            # Results are idempotent on their event ids, so publishing again is safe.
            for entry in entries:
                if any(isinstance(e, GameFinished | GameEvents) for e in entry.events):
                    await self._deps.results.publish(table, entry)
            await log.save_snapshot(table)
            return False
        if not await self._ownership.claim(table_id):
            _log.warning("table %s is leased by another node; leaving it", table_id)
            return False
        runtime = self._run(table, entries)
        for seat, status in enumerate(table.seats):
            if status.connected and table.config.seats[seat].kind is SeatKind.HUMAN:
                await runtime.commit(SeatChanged(seat, SeatChange.DISCONNECTED))
        _log.info("recovered table %s at sequence %d", table_id, runtime.table.sequence)
        return True

    def _forget_finished(self) -> None:
        """Drop the tables that finished longer than the retention time ago.

        Kept for ever, every table played would stay in memory with its whole history: the
        process would grow without bound, and the garbage collector's full passes over it all
        would stall every live table (for hundreds of milliseconds after a few thousand games).
        Checked whenever a table is created, so the tables kept stay in proportion to the
        tables started.
        """
        cutoff = self._deps.clock() - self._settings.finished_retention_seconds
        for table_id, runtime in list(self._runtimes.items()):
            if runtime.finished_at is not None and runtime.finished_at <= cutoff:
                del self._runtimes[table_id]

    def _run(self, table: Table, history: list[Entry]) -> TableRuntime:
        runtime = TableRuntime(table, history, self._deps, self._settings)
        self._runtimes[table.table_id] = runtime
        self._deps.metrics.table_opened(runtime.game)
        runtime.start()
        return runtime

    async def close(self) -> None:
        for runtime in self._runtimes.values():
            await runtime.stop()
            if not runtime.table.finished:
                self._deps.metrics.table_closed(runtime.game)
        self._runtimes.clear()
