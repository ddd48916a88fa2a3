"""Recovering tables (architecture.md): this node's own after a restart, and any other table
whose lease it wins (after a fence, or a takeover).

Recovery resumes every table in this node's index: it loads the table's snapshot (when there
is one), reads the log after it in a few round trips, replays the entries through the same
pure :func:`~masa_table_engine.domain.table.accept`, and takes the lease. Every table is loaded
before any of them runs, so that tables already back do not starve those still loading; a
table not resumed is logged with the reason and counted. Player streams did not survive the
restart, so each seat that was connected is recorded as disconnected, which starts its seat
protection (P-12) until the player reconnects; a presence grace window still open on the last
owner (:mod:`~masa_table_engine.app.presence`) ends here. :meth:`Recovery.recover_table` works
for any table whose lease this node wins, not only its own.

The replay compares every event it produces with the one logged; a table whose replay
differs, or that cannot be rebuilt at all, is voided: a ``TableVoided`` entry ends its game
with ``GameAbandoned``, which the ledger takes as the order to release the stakes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, replace
from typing import Final

from masa_rules.errors import RuleViolation
from masa_rules.table_config import SeatKind

from masa_table_engine.app.node_state import NodeState
from masa_table_engine.app.ports import LoggedInput, LogUnavailable
from masa_table_engine.app.runtime import TableRuntime, has_results
from masa_table_engine.domain.model import (
    AbandonReason,
    Entry,
    SeatChange,
    SeatChanged,
    TableVoided,
)
from masa_table_engine.domain.table import Table, accept, void_entry

__all__ = ["RECOVERY_CONCURRENCY", "Recovery", "RecoveryReport"]

_log = logging.getLogger(__name__)

# Tables loaded at once during recovery: their reads overlap, their replays take turns.
RECOVERY_CONCURRENCY: Final = 16
# How long closing a finished table's books waits for its results to be out.
_CLOSING_SECONDS: Final = 10.0


class _Unrecoverable(Exception):
    """A table whose state cannot be rebuilt from its snapshot and log: it is voided."""

    def __init__(self, details: str, table: Table | None, last_sequence: int) -> None:
        super().__init__(details)
        self.table = table
        self.last_sequence = last_sequence


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


class Recovery:
    def __init__(self, state: NodeState) -> None:
        self._state = state
        self._deps = state.deps
        self._settings = state.settings
        self._ownership = state.ownership
        self._outbox = state.outbox
        self._runtimes = state.runtimes
        self._loading = state.loading

    async def recover(self) -> RecoveryReport:
        """Resume every unfinished table in this node's index, loading all before running any."""
        started = time.perf_counter()
        table_ids = await self._deps.log.table_ids()
        limit = asyncio.Semaphore(RECOVERY_CONCURRENCY)
        skipped: dict[str, str] = {}
        me = self._deps.log.writer

        async def load(table_id: str) -> TableRuntime | None:
            async with limit:
                try:
                    runtime, _ = await self._load(table_id, me)
                    return runtime
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
            self._state.start(runtime)
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

    async def recover_table(self, table_id: str, node: str = "") -> bool:
        """Load and run one table whose lease this node wins (after a fence, or a takeover of
        a table ``node`` listed), and serve it; False when it is not to be run here."""
        try:
            runtime, handed_over = await self._load(table_id, node or self._deps.log.writer)
        except _Skipped as skip:
            self._skipped(table_id, skip)
            return False
        if node and node != self._deps.log.writer:
            self._deps.metrics.takeover("drained" if handed_over else "expired")
            _log.info(
                "took table %s over from %s",
                table_id,
                node,
                extra={"table_id": table_id, "reason": "drained" if handed_over else "expired"},
            )
        await self._seats_dropped(runtime)
        self._state.start(runtime)
        return True

    async def _load(self, table_id: str, node: str) -> tuple[TableRuntime, bool]:
        """The table leased here and rebuilt from its snapshot and the log after it, listed in
        this node's index instead of ``node``'s, not yet running; and whether its last owner
        handed it over. A finished table has its books closed instead, and one that cannot be
        rebuilt is voided (both raise ``_Skipped``)."""
        self._loading.add(table_id)
        try:
            return await self._claim_and_load(table_id, node)
        finally:
            self._loading.discard(table_id)

    async def _claim_and_load(self, table_id: str, node: str) -> tuple[TableRuntime, bool]:
        if not await self._ownership.claim(table_id):
            holder = await self._ownership.holder(table_id)
            raise _Skipped("leased", f"its lease is held by {holder or 'another node'}")
        try:
            return await self._load_leased(table_id, node)
        except _Skipped as skip:
            if skip.reason not in {"finished", "voided"}:
                await self._state.release_quietly(table_id)
            raise
        except Exception:
            await self._state.release_quietly(table_id)
            raise

    async def _load_leased(self, table_id: str, node: str) -> tuple[TableRuntime, bool]:
        log = self._deps.log
        snapshot = await log.load_snapshot(table_id)
        table = snapshot.table if snapshot is not None else None
        logged = await log.read(table_id, table.sequence if table is not None else 0)
        if table is None and not logged:
            await log.untrack(table_id)
            raise _Skipped("no_log", "neither a snapshot nor a log entry: its creation failed")
        try:
            table, entries = self._replay(table_id, table, logged)
        except _Unrecoverable as broken:
            await self._void_unrecoverable(table_id, node, broken, logged)
            raise _Skipped("voided", f"it could not be rebuilt ({broken}); voided") from None
        if table.finished:
            await self._close_books(table, entries, node)
            raise _Skipped("finished", f"the game is over (at sequence {table.sequence})")
        await log.adopt(table_id, node)
        runtime = self._state.runtime(table, entries, snapshot.requests if snapshot else ())
        for entry in entries:
            if has_results(table, entry):
                # Perhaps published before the last owner stopped; the relay looks first.
                self._outbox.add(table, entry, recheck=True, notify=runtime.wake)
        return runtime, snapshot is not None and snapshot.handed_over

    def _replay(
        self, table_id: str, table: Table | None, logged: list[LoggedInput]
    ) -> tuple[Table, list[Entry]]:
        """Apply the logged inputs after the snapshot, checking each replayed entry's events
        against the logged ones; raise ``_Unrecoverable`` when that cannot be done."""
        entries: list[Entry] = []
        last = logged[-1].sequence if logged else 0
        matches = self._deps.log.matches
        for found in logged:
            expected = 1 if table is None else table.sequence + 1
            if not found.authentic:
                raise _Unrecoverable(
                    f"entry {found.sequence} does not carry a table-engine's seal", table, last
                )
            if found.sequence != expected:
                raise _Unrecoverable(
                    f"the log has entry {found.sequence} where {expected} should be", table, last
                )
            try:
                table, entry = accept(table, found.input, found.at, self._settings.timers)
            except RuleViolation as refused:
                raise _Unrecoverable(
                    f"entry {found.sequence} is refused on replay: {refused}", table, last
                ) from None
            if not matches(entry, found):
                raise _Unrecoverable(
                    f"replaying entry {found.sequence} gave other events than it logged",
                    table,
                    last,
                )
            entries.append(entry)
        if table is None:
            raise _Skipped("no_log", "the log holds no entry")
        return table, entries

    async def _close_books(self, table: Table, entries: list[Entry], node: str) -> None:
        """A game that ended before its node could close its books: publish what it owes
        (results are looked up first, so none goes out twice), then drop it everywhere."""
        table_id = table.table_id
        for entry in entries:
            if has_results(table, entry):
                self._outbox.add(table, entry, recheck=True)
        if not await self._outbox.flushed(table_id, _CLOSING_SECONDS):
            self._outbox.drop(table_id)
            raise LogUnavailable(f"table {table_id}: results not published yet")
        log = self._deps.log
        await log.save_snapshot(table)
        await log.adopt(table_id, node)
        await log.untrack(table_id)
        await self._ownership.release(table_id)

    async def _void_unrecoverable(
        self, table_id: str, node: str, broken: _Unrecoverable, logged: list[LoggedInput]
    ) -> None:
        """End a table that cannot be rebuilt with ``GameAbandoned``, so that its stakes go
        back instead of waiting for ever (a ``TableVoided`` entry after the last one)."""
        already = next(((f, f.input) for f in logged if isinstance(f.input, TableVoided)), None)
        base = broken.table
        if base is None:
            raise _Skipped("error", f"{broken}, and nothing of it is left to void")
        if already is not None:
            # Voided before, by a node that stopped before closing the books.
            found, item = already
            entry = void_entry(table_id, found.sequence, found.at, item)
        else:
            _log.error(
                "table %s cannot be rebuilt: %s; voiding it",
                table_id,
                broken,
                extra={"table_id": table_id},
            )
            item = TableVoided(AbandonReason.UNRECOVERABLE, str(broken)[:256])
            entry = void_entry(table_id, broken.last_sequence + 1, self._deps.clock(), item)
            await self._deps.log.append(entry)
        voided = replace(
            base,
            sequence=entry.sequence,
            finished=True,
            abandoned=True,
            turn_deadline=None,
            timed_out=None,
            ranking=(),
        )
        await self._close_books(voided, [entry], node)

    def _skipped(self, table_id: str, skip: _Skipped) -> None:
        log = _log.info if skip.reason in {"finished", "leased"} else _log.warning
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
