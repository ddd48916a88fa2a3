"""The use cases of a table-engine node: create tables, find them, recover and hand them over.

Creation validates everything before the first write (the pure :func:`accept` of the
``Created`` input runs first), then takes the lease, records the table in this node's index
and appends the first entry. A creation that fails after that leaves no lease and no index
entry behind, and no log entry as far as the log can tell.

Recovery (architecture.md) resumes every table in this node's index: it loads the table's
snapshot (when there is one), reads the log after it in a few round trips, replays the entries
through the same pure :func:`~masa_table_engine.domain.table.accept`, and takes the lease. Every
table is loaded before any of them runs, so that tables already back do not starve those still
loading; a table not resumed is logged with the reason and counted. Player streams did not
survive the restart, so each seat that was connected is recorded as disconnected, which starts
its seat protection (P-12) until the player reconnects; a presence grace window still open on
the last owner (:mod:`~masa_table_engine.app.presence`) ends here. :meth:`Tables.recover_table` works for
any table whose lease this node wins, not only its own.

A table fenced off while running (another node wrote to its log) is recovered here when its
lease is free or still ours, and handed over (forgotten, so that clients are sent to the
owner) when another node holds it.

Takeover (architecture.md): every node looks for tables that some node's index lists and whose
lease nobody holds (their node died and its leases expired, or it drained and released them),
every ``takeover_scan_seconds``. It claims at most its share of them at once (the unserved
tables over the live nodes, in a random order, so that the survivors split a dead node's
tables), rebuilds each from its snapshot and the log after it, lists it in its own index and
serves it. The replay compares every event it produces with the one logged; a table whose
replay differs, or that cannot be rebuilt at all, is voided: a ``TableVoided`` entry ends its
game with ``GameAbandoned``, which the ledger takes as the order to release the stakes.

Draining (SIGTERM, ``Node.drain``): the node takes no new table and no takeover, and hands
each table over: a final snapshot, then the lease released, so that another node takes the
table at its next scan instead of waiting for the lease to expire. An operator may return a
drained node to service (``Node.resume``): it takes new tables and takeovers again.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import random
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final

from masa_rules.errors import RuleViolation
from masa_rules.table_config import SeatKind, TableConfig

from masa_table_engine.app.driver import TableDriver
from masa_table_engine.app.outbox import Outbox
from masa_table_engine.app.ports import (
    Directory,
    LogConflict,
    LoggedInput,
    LogUnavailable,
    Unserved,
)
from masa_table_engine.app.runtime import Deps, RuntimeSettings, TableRuntime, has_results
from masa_table_engine.app.stakes import StakeBinder, StakesUnavailable, TableExists
from masa_table_engine.app.tasks import stop_tasks
from masa_table_engine.domain.model import (
    AbandonReason,
    Created,
    Entry,
    SeatChange,
    SeatChanged,
    TableVoided,
)
from masa_table_engine.domain.table import Table, accept, next_deadline, void_entry

__all__ = ["Draining", "NodeLeaving", "RecoveryReport", "TableNotFound", "TableUnserved", "Tables"]

_log = logging.getLogger(__name__)

# Tables loaded at once during recovery: their reads overlap, their replays take turns.
_RECOVERY_CONCURRENCY: Final = 16
# How often finished tables past their retention are forgotten, and fenced ones retried.
_HOUSEKEEPING_SECONDS: Final = 1.0
# How long a drain waits for a table's results to be out before handing it over anyway.
_HAND_OVER_FLUSH_SECONDS: Final = 1.0
# How long closing a finished table's books waits for its results to be out.
_CLOSING_SECONDS: Final = 10.0


class TableNotFound(Exception):
    def __init__(self, table_id: str) -> None:
        super().__init__(f"no table {table_id!r} on this node")
        self.table_id = table_id


class TableUnserved(Exception):
    """The table exists but no node serves it at the moment: it is being taken over."""

    def __init__(self, table_id: str) -> None:
        super().__init__(f"table {table_id} is being taken over by another node; try again")
        self.table_id = table_id


class Draining(Exception):
    """The node is draining: it takes no new table."""


class NodeLeaving(Exception):
    """The node drains to stop (SIGTERM): no operator's ResumeNode brings it back."""


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


class Tables:
    def __init__(
        self,
        deps: Deps,
        settings: RuntimeSettings,
        *,
        new_id: Callable[[], str] = lambda: uuid.uuid4().hex,
        new_seed: Callable[[], bytes] = lambda: secrets.token_bytes(32),
        stakes: StakeBinder | None = None,
        directory: Directory | None = None,
        takeover_scan_seconds: float = 1.0,
    ) -> None:
        self._deps = deps
        self._directory = directory
        self._scan_seconds = takeover_scan_seconds
        self._takeover: asyncio.Task[None] | None = None
        self._draining = False
        self.outbox = Outbox(deps.results, deps.metrics)
        self._stakes = stakes
        self._settings = settings
        self._ownership = deps.ownership
        self._new_id = new_id
        self._new_seed = new_seed
        self._runtimes: dict[str, TableRuntime] = {}
        # Tables being created or loaded (leased, not yet running), and leases seen without a
        # table at the last housekeeping pass.
        self._loading: set[str] = set()
        self._stray: set[str] = set()
        self._fenced: set[str] = set()
        self._housekeeping: asyncio.Task[None] | None = None

    def get(self, table_id: str) -> TableRuntime:
        runtime = self._runtimes.get(table_id)
        if runtime is None:
            raise TableNotFound(table_id)
        return runtime

    async def locate(self, table_id: str) -> str | None:
        """The address of the node that serves a table this node does not hold; None when no
        table of that id is known. Raises :class:`TableUnserved` when nobody serves it now (its
        node died or drained and no node has taken it over yet)."""
        holder = await self._ownership.holder(table_id)
        me = self._deps.log.writer
        if holder is not None and holder != me and self._directory is not None:
            address = await self._directory.address_of(holder)
            if address:
                return address
        placed = await self._deps.log.placement(table_id)
        if placed is None:
            if holder is not None and holder != me:
                raise TableUnserved(table_id)
            return None
        if holder is not None and holder != me:
            if placed.node == holder and placed.address:
                return placed.address
            raise TableUnserved(table_id)
        if not placed.finished:
            raise TableUnserved(table_id)
        return placed.address if placed.node != me else None

    @property
    def active(self) -> int:
        return sum(1 for runtime in self._runtimes.values() if not runtime.table.finished)

    @property
    def served(self) -> list[str]:
        """The ids of the live tables this node serves now."""
        return [
            table_id
            for table_id, runtime in self._runtimes.items()
            if not runtime.table.finished and not runtime.fenced
        ]

    @property
    def draining(self) -> bool:
        return self._draining

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
        if self._draining:
            raise Draining("this node is draining and takes no new table")
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
            await self._stakes.bind(table_id, 1, config.stake, holds, config.payout)
        self._loading.add(table_id)
        try:
            await self._write_creation(item, table, entry)
        finally:
            self._loading.discard(table_id)
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

    async def _write_creation(self, item: Created, table: Table, entry: Entry) -> None:
        """Lease, index, first entry and snapshot of a new table; then it runs."""
        log = self._deps.log
        table_id = table.table_id
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

    async def _existing(self, table_id: str, request_id: str) -> Table | None:
        """The table ``table_id`` if ``request_id`` made it; raises :class:`TableExists` if
        another request did."""
        runtime = self._runtimes.get(table_id)
        if runtime is not None:
            table: Table | None = runtime.table
        else:
            snapshot = await self._deps.log.load_snapshot(table_id)
            table = snapshot.table if snapshot is not None else None
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
        self._start(runtime)
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
                await self._release_quietly(table_id)
            raise
        except Exception:
            await self._release_quietly(table_id)
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
        runtime = self._runtime(table, entries, snapshot.requests if snapshot else ())
        for entry in entries:
            if has_results(table, entry):
                # Perhaps published before the last owner stopped; the relay looks first.
                self.outbox.add(table, entry, recheck=True, notify=runtime.wake)
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
                self.outbox.add(table, entry, recheck=True)
        if not await self.outbox.flushed(table_id, _CLOSING_SECONDS):
            self.outbox.drop(table_id)
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

    async def _release_quietly(self, table_id: str) -> None:
        try:
            await self._ownership.release(table_id)
        except Exception:
            _log.warning("table %s: lease not released; it expires", table_id, exc_info=True)

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

    # --- taking over and draining ----------------------------------------------------------

    def start_takeover(self) -> None:
        """Look for unserved tables every ``takeover_scan_seconds`` (module doc)."""
        if self._takeover is None and self._directory is not None:
            self._takeover = asyncio.get_running_loop().create_task(self._scan_for_ever())

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
        if directory is None or self._draining:
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
        limit = asyncio.Semaphore(_RECOVERY_CONCURRENCY)

        async def one(unserved: Unserved) -> bool:
            async with limit:
                if self._draining or unserved.table_id in self._runtimes:
                    return False
                try:
                    return await self.recover_table(unserved.table_id, unserved.node)
                except Exception as error:
                    _log.warning("table %s: takeover failed (%r)", unserved.table_id, error)
                    return False

        return sum(await asyncio.gather(*(one(u) for u in mine)))

    async def drain(self) -> int:
        """Take no new table, and hand each table over (see the module doc); how many."""
        self._draining = True
        await stop_tasks(self._takeover)
        limit = asyncio.Semaphore(_RECOVERY_CONCURRENCY)

        async def one(table_id: str, runtime: TableRuntime) -> None:
            async with limit:
                await runtime.hand_over(_HAND_OVER_FLUSH_SECONDS)
                if self._runtimes.get(table_id) is runtime:
                    del self._runtimes[table_id]
                if not runtime.table.finished:
                    self._deps.metrics.table_closed(runtime.game)
                await self._release_quietly(table_id)

        handing = [(t, r) for t, r in self._runtimes.items() if not r.done and not r.fenced]
        await asyncio.gather(*(one(t, r) for t, r in handing))
        _log.info("drained: handed %d tables over", len(handing))
        return len(handing)

    def resume(self) -> bool:
        """Take new tables and take unserved ones over again after a drain (an operator's
        ResumeNode); the tables handed over stay where they went. False when not drained."""
        if not self._draining:
            return False
        self._draining = False
        self._takeover = None
        self.start_takeover()
        _log.info("resumed: taking new tables again")
        return True

    async def void(self, table_id: str, details: str) -> Table:
        """End a table this node serves without a ranking (an operator's order, for a stuck
        game): ``GameAbandoned`` goes out and the ledger releases the stakes."""
        runtime = self.get(table_id)
        await runtime.commit(TableVoided(AbandonReason.VOIDED, details[:256]))
        return runtime.table

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
        """Forget a table another node holds. It stays in this node's index until the holder
        has it in its own (the holder moves it over): should the holder fail to load it, it
        must still be listed somewhere, or no node would ever take it over."""
        runtime.fenced = True
        await runtime.stop()
        self._runtimes.pop(table_id, None)
        self._deps.metrics.table_closed(runtime.game)
        _log.warning("table %s handed over to %s", table_id, holder)

    async def _release_stray_leases(self) -> None:
        """Give up leases of tables this node neither runs nor is loading (a load that gave
        up between its claim and its start, say) two passes in a row: held and renewed for
        ever, they would keep every other node from taking the table over."""
        busy = self._runtimes.keys() | self._loading
        stray = {t for t in self._ownership.held() if t not in busy}
        for table_id in stray & self._stray:
            _log.warning("table %s: lease held without the table running; released", table_id)
            await self._release_quietly(table_id)
        self._stray = stray

    # --- running ---------------------------------------------------------------------------

    def start_housekeeping(self) -> None:
        if self._housekeeping is None:
            self._housekeeping = asyncio.get_running_loop().create_task(self._housekeep())

    async def _housekeep(self) -> None:
        while True:
            await asyncio.sleep(_HOUSEKEEPING_SECONDS)
            try:
                with self._deps.metrics.loop("housekeeping"):
                    self._forget_finished()
                    if self._fenced:
                        await self._settle_fenced()
                    await self._release_stray_leases()
            except Exception:
                _log.warning("housekeeping failed; trying again next pass", exc_info=True)

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

    def _runtime(
        self,
        table: Table,
        history: list[Entry],
        requests: tuple[tuple[int, str, int], ...] = (),
    ) -> TableRuntime:
        return TableRuntime(
            table,
            history,
            self._deps,
            self._settings,
            outbox=self.outbox,
            on_fenced=self._on_fenced,
            requests=requests,
        )

    def _start(self, runtime: TableRuntime) -> None:
        self._runtimes[runtime.table.table_id] = runtime
        self._deps.metrics.table_opened(runtime.game)
        runtime.start(TableDriver(runtime, self._deps, self._settings).run())

    async def close(self) -> None:
        await stop_tasks(self._housekeeping, self._takeover)
        for runtime in self._runtimes.values():
            await runtime.stop()
            if not runtime.table.finished:
                self._deps.metrics.table_closed(runtime.game)
        self._runtimes.clear()
        await self.outbox.close()


def _rank(me: str, nodes: list[str], table_id: str) -> tuple[int, str]:
    """Where this node stands among ``nodes`` in the table's rendezvous order (0: first)."""
    order = sorted(nodes, key=lambda node: _weight(node, table_id), reverse=True)
    return order.index(me), table_id


def _weight(node: str, table_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(f"{node}/{table_id}".encode(), digest_size=8).digest())
