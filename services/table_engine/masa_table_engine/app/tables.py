"""The use cases of a table-engine node: create tables, find them, recover and hand them over.

Creation validates everything before the first write (the pure :func:`accept` of the
``Created`` input runs first), then takes the lease, records the table in this node's index
and appends the first entry. A creation that fails after that leaves no lease and no index
entry behind, and no log entry as far as the log can tell.

Recovery (DESIGN.md §4) resumes every table in this node's index: it loads the table's
snapshot (when there is one), reads the log after it in a few round trips, replays the entries
through the same pure :func:`~masa_table_engine.domain.table.accept`, and takes the lease. Every
table is loaded before any of them runs, so that tables already back do not starve those still
loading; a table not resumed is logged with the reason and counted. Player streams did not
survive the restart, so each seat that was connected is recorded as disconnected, which starts
its seat protection (P-12) until the player reconnects. :meth:`Tables.recover_table` works for
any table whose lease this node wins, not only its own.

A table fenced off while running (another node wrote to its log) is recovered here when its
lease is free or still ours, and handed over (forgotten, so that clients are sent to the
owner) when another node holds it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from masa_table_engine.app.ports import LogConflict
from masa_table_engine.app.runtime import Deps, RuntimeSettings, TableRuntime
from masa_table_engine.app.stakes import StakeBinder, StakesUnavailable, TableExists
from masa_table_engine.domain.model import (
    Created,
    Entry,
    GameAbandoned,
    GameEvents,
    GameFinished,
    SeatChange,
    SeatChanged,
    SeatKind,
    TableConfig,
)
from masa_table_engine.domain.table import Table, accept, next_deadline

__all__ = ["RecoveryReport", "TableNotFound", "Tables"]

_log = logging.getLogger(__name__)

# Tables loaded at once during recovery: their reads overlap, their replays take turns.
_RECOVERY_CONCURRENCY: Final = 16
# How often finished tables past their retention are forgotten, and fenced ones retried.
_HOUSEKEEPING_SECONDS: Final = 1.0


class TableNotFound(Exception):
    def __init__(self, table_id: str) -> None:
        super().__init__(f"no table {table_id!r} on this node")
        self.table_id = table_id


class _Skipped(Exception):
    """A table recovery leaves alone, with the reason (a metrics label) and the details."""

    def __init__(self, reason: str, details: str) -> None:
        super().__init__(details)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    resumed: int
    skipped: dict[str, str]
    seconds: float


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
        self._fenced: set[str] = set()
        self._housekeeping: asyncio.Task[None] | None = None

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

    @property
    def frozen(self) -> int:
        """Tables that cannot take input now (see TableRuntime.frozen)."""
        return sum(1 for runtime in self._runtimes.values() if runtime.frozen)

    @property
    def players_online(self) -> int:
        """Human seats with a player connected, at tables in play."""
        return sum(
            1
            for runtime in self._runtimes.values()
            if not runtime.table.finished
            for status in runtime.table.seats
            if status.connected
        )

    def overdue(self, slack_seconds: float) -> int:
        """Tables in play, not frozen, whose next timer ran out more than ``slack_seconds``
        ago: the timer should have moved them (P-10, P-11), so nothing is moving them."""
        cutoff = self._deps.clock() - slack_seconds
        count = 0
        for runtime in self._runtimes.values():
            deadline = next_deadline(runtime.table)
            if deadline is not None and deadline < cutoff and not runtime.frozen:
                count += 1
        return count

    # --- creating --------------------------------------------------------------------------

    async def create(
        self, config: TableConfig, *, table_id: str = "", request_id: str = ""
    ) -> Table:
        """Start a table; raises ``RuleViolation`` for a configuration the rules refuse, before
        anything is written.

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
        log = self._deps.log
        if not await self._ownership.claim(table_id):
            raise LogConflict(f"table {table_id} is leased by another node")
        try:
            await log.track(table_id)
            await log.append(entry)
        except Exception:
            if not await self._landed(item):
                await self._undo_create(table_id)
                raise
        try:
            await log.save_snapshot(table)
        except Exception:
            # The first entry is in the log and the table in the index: recovery replays it.
            _log.warning("table %s: first snapshot not saved", table_id, exc_info=True)
        self._start(self._runtime(table, [entry]))
        _log.info(
            "table created",
            extra={
                "table_id": table_id,
                "game": config.game.value,
                "preset": config.preset,
                "mode": config.mode.value,
                "seats": [seat.kind.value for seat in config.seats],
                "players": [seat.player_id for seat in config.seats if seat.player_id],
                "stake": config.stake,
            },
        )
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

    async def _landed(self, item: Created) -> bool:
        """Whether a creation whose append failed is in the log after all (its seed is new,
        so an equal first entry is this one)."""
        try:
            logged = await self._deps.log.read(item.table_id, 0)
        except Exception:
            return False
        first = logged[0].input if logged else None
        return isinstance(first, Created) and first.seed == item.seed

    async def _undo_create(self, table_id: str) -> None:
        try:
            await self._deps.log.untrack(table_id)
            await self._ownership.release(table_id)
        except Exception:
            # The lease expires on its own; an index entry without a log is dropped (and
            # logged) by the next recovery.
            _log.warning("table %s: failed creation not fully undone", table_id, exc_info=True)

    # --- recovering ------------------------------------------------------------------------

    async def recover(self) -> RecoveryReport:
        """Resume every unfinished table in this node's index, loading all before running any."""
        started = time.perf_counter()
        table_ids = await self._deps.log.table_ids()
        limit = asyncio.Semaphore(_RECOVERY_CONCURRENCY)
        skipped: dict[str, str] = {}

        async def load(table_id: str) -> TableRuntime | None:
            async with limit:
                try:
                    return await self._load(table_id)
                except _Skipped as skip:
                    self._skipped(table_id, skip)
                    skipped[table_id] = skip.reason
                except Exception as error:
                    _log.exception("table %s not recovered: it could not be loaded", table_id)
                    self._deps.metrics.recovery_skipped("error")
                    skipped[table_id] = f"error: {error!r}"
                return None

        loaded = await asyncio.gather(*(load(t) for t in table_ids if t not in self._runtimes))
        runtimes = [runtime for runtime in loaded if runtime is not None]
        await asyncio.gather(*(self._seats_dropped(runtime) for runtime in runtimes))
        for runtime in runtimes:
            self._start(runtime)
        report = RecoveryReport(len(runtimes), skipped, time.perf_counter() - started)
        _log.info(
            "recovery done",
            extra={
                "resumed_tables": report.resumed,
                "skipped_tables": len(skipped),
                "recovery_seconds": round(report.seconds, 3),
            },
        )
        return report

    async def recover_table(self, table_id: str) -> bool:
        """Load and run one table whose lease this node wins (after a fence, or a takeover)."""
        try:
            runtime = await self._load(table_id)
        except _Skipped as skip:
            self._skipped(table_id, skip)
            return False
        await self._seats_dropped(runtime)
        self._start(runtime)
        return True

    async def _load(self, table_id: str) -> TableRuntime:
        """The table rebuilt from its snapshot and the log after it, leased, not yet running."""
        log = self._deps.log
        table = await log.load_snapshot(table_id)
        logged = await log.read(table_id, table.sequence if table is not None else 0)
        if table is None and not logged:
            await log.untrack(table_id)
            raise _Skipped("no_log", "neither a snapshot nor a log entry: its creation failed")
        entries: list[Entry] = []
        for found in logged:
            expected = 1 if table is None else table.sequence + 1
            if found.sequence != expected:
                raise _Skipped(
                    "gap", f"the log has entry {found.sequence} where {expected} should be"
                )
            table, entry = accept(table, found.input, found.at, self._settings.timers)
            entries.append(entry)
        if table is None:
            raise _Skipped("no_log", "the log holds no entry")
        if table.finished:
            # Results are idempotent on their event ids, so publishing again is safe.
            for entry in entries:
                if any(
                    isinstance(e, GameFinished | GameAbandoned | GameEvents) for e in entry.events
                ):
                    await self._deps.results.publish(table, entry)
            await log.save_snapshot(table)
            await log.untrack(table_id)
            raise _Skipped("finished", f"the game is over (at sequence {table.sequence})")
        if not await self._ownership.claim(table_id):
            holder = await self._ownership.holder(table_id)
            raise _Skipped("leased", f"its lease is held by {holder or 'another node'}")
        return self._runtime(table, entries)

    def _skipped(self, table_id: str, skip: _Skipped) -> None:
        log = _log.info if skip.reason == "finished" else _log.warning
        log("table %s not recovered: %s", table_id, skip, extra={"reason": skip.reason})
        self._deps.metrics.recovery_skipped(skip.reason)

    async def _seats_dropped(self, runtime: TableRuntime) -> None:
        """Seats whose streams died with the last owner are recorded as disconnected (P-12)."""
        table = runtime.table
        for seat, status in enumerate(table.seats):
            if status.connected and table.config.seats[seat].kind is SeatKind.HUMAN:
                try:
                    await runtime.commit(SeatChanged(seat, SeatChange.DISCONNECTED))
                except Exception as error:
                    # The seat stays connected on record: its turns still time out (P-10).
                    _log.warning(
                        "table %s seat %d: disconnection not recorded (%r)",
                        table.table_id,
                        seat,
                        error,
                    )
        _log.info("recovered table %s at sequence %d", table.table_id, runtime.table.sequence)

    # --- fenced tables ---------------------------------------------------------------------

    def _on_fenced(self, table_id: str) -> None:
        self._fenced.add(table_id)

    async def _settle_fenced(self) -> None:
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
                    if not await self.recover_table(table_id):
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
        runtime.fenced = True
        await runtime.stop()
        self._runtimes.pop(table_id, None)
        self._deps.metrics.table_closed(runtime.game)
        _log.warning("table %s handed over to %s", table_id, holder)
        try:
            # The holder lists it now; a restart here would only skip it.
            await self._deps.log.untrack(table_id)
        except Exception:
            _log.warning("table %s: still in this node's index", table_id, exc_info=True)

    # --- running ---------------------------------------------------------------------------

    def start_housekeeping(self) -> None:
        if self._housekeeping is None:
            self._housekeeping = asyncio.get_running_loop().create_task(self._housekeep())

    async def _housekeep(self) -> None:
        while True:
            await asyncio.sleep(_HOUSEKEEPING_SECONDS)
            self._forget_finished()
            if self._fenced:
                await self._settle_fenced()

    def _forget_finished(self) -> None:
        """Drop the tables that finished longer than the retention time ago.

        Kept for ever, every table played would stay in memory with its whole history: the
        process would grow without bound, and the garbage collector's full passes over it all
        would stall every live table (for hundreds of milliseconds after a few thousand games).
        Checked periodically and whenever a table is created.
        """
        cutoff = self._deps.clock() - self._settings.finished_retention_seconds
        for table_id, runtime in list(self._runtimes.items()):
            if runtime.finished_at is not None and runtime.finished_at <= cutoff and runtime.done:
                del self._runtimes[table_id]

    def _runtime(self, table: Table, history: list[Entry]) -> TableRuntime:
        return TableRuntime(table, history, self._deps, self._settings, self._on_fenced)

    def _start(self, runtime: TableRuntime) -> None:
        self._runtimes[runtime.table.table_id] = runtime
        self._deps.metrics.table_opened(runtime.game)
        runtime.start()

    async def close(self) -> None:
        if self._housekeeping is not None:
            self._housekeeping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._housekeeping
        for runtime in self._runtimes.values():
            await runtime.stop()
            if not runtime.table.finished:
                self._deps.metrics.table_closed(runtime.game)
        self._runtimes.clear()
