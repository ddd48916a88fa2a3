"""One live table's commit pipeline: serialises its inputs and persists each before it counts.

Every input (a player's action, a bot move, a timer, a connection change) goes through
:meth:`TableRuntime.commit` under the table's lock: the pure :func:`accept` computes the next
table, the entry is appended to the log, and only once the log has acknowledged it does the
table move on and do watchers hear of it. A refused input or a failed write leaves the table
exactly as it was.

A driver (:mod:`~masa_table_engine.app.driver`) keeps the table moving through the same
pipeline: bots, the autopilot and timers (P-10..P-12), and the disconnection of a seat whose
grace window ended without a stream (:mod:`~masa_table_engine.app.presence`); the pipeline
tells it when to look again (:attr:`TableRuntime.changes`) and judges its moves
(:meth:`commit_automated`).

The log is the truth, and a write that was not acknowledged may still have landed (NATS keeps
a message it could not deliver and sends it once it is back). Every append is fenced on the
stream sequence of the table's last entry, so at most one entry can land at each place. When
an append fails, or meets an entry already there, the table *syncs*: it reads the log after
its last entry and adopts every entry this node wrote, exactly as if it had just been
accepted (watchers, results, snapshots). An entry another node wrote means the table is no
longer ours: it is *fenced*, and the node recovers it or hands it over (``on_fenced``).
Until a sync succeeds the table takes no input (it is *frozen*), and its driver keeps trying.

Where a runtime is in that life is one :class:`Phase` at a time: serving, unsynced (a write's
fate unknown), closing (the game over, its books still to close), closed, or fenced; the
allowed steps from each are :data:`_NEXT`, and any other is a bug that raises.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections import deque
from collections.abc import AsyncGenerator, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Final, NoReturn

from masa_platform.tasks import stop_tasks
from masa_rules.errors import RuleViolation
from masa_rules.table_config import SeatKind

from masa_table_engine.app.history import History, WatchItem
from masa_table_engine.app.outbox import Outbox
from masa_table_engine.app.ports import (
    Clock,
    Decider,
    LogConflict,
    LogStore,
    LogUnavailable,
    Metrics,
    Ownership,
    ResultPublisher,
    SystemClock,
)
from masa_table_engine.app.presence import Presence
from masa_table_engine.domain.model import (
    AutopilotChanged,
    Entry,
    GameAbandoned,
    GameEvents,
    GameFinished,
    Input,
    PlayerAction,
    SeatChange,
    SeatChanged,
    Source,
    TurnTimedOut,
)
from masa_table_engine.domain.table import (
    Table,
    TimerPolicy,
    accept,
    automated_level,
    automated_seat,
    next_deadline,
)

__all__ = [
    "Deps",
    "RuntimeSettings",
    "SequenceMismatch",
    "TableRuntime",
    "TooManySpectators",
    "WatchItem",
    "WatcherBehind",
    "has_results",
]

_log = logging.getLogger(__name__)


class TooManySpectators(Exception):
    """The table has as many spectators as it takes (RuntimeSettings.max_spectators)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the table has {limit} spectators, the most it takes")
        self.limit = limit


class WatcherBehind(Exception):
    """A watch stream fell ``limit`` entries behind the table and was let go; its reader
    resumes after ``last_sequence``, the last sequence it was given."""

    def __init__(self, limit: int, last_sequence: int) -> None:
        super().__init__(
            f"the stream fell {limit} updates behind the table; resume after {last_sequence}"
        )
        self.limit = limit
        self.last_sequence = last_sequence


class _Watcher:
    """One watch stream's queue of entries, bounded: a reader that falls ``backlog`` entries
    behind is let go (its queue emptied, an end marker left), so a slow or stalled reader
    keeps nothing alive but a fixed number of references to entries the table shares.

    A deque and one future at a time rather than an ``asyncio.Queue``, whose every wait asks
    for the running loop, a getpid system call on Python 3.11 (issue 22): the loop is the
    stream's, taken once."""

    __slots__ = ("_backlog", "_entries", "_loop", "_reader", "behind", "closed", "spectator")

    def __init__(self, backlog: int, *, spectator: bool) -> None:
        self._backlog = backlog
        # Entries, and None once after the last one: the end marker.
        self._entries: deque[Entry | None] = deque()
        self._loop = asyncio.get_running_loop()
        self._reader: asyncio.Future[None] | None = None
        self.spectator = spectator
        self.behind = False
        self.closed = False

    def offer(self, entry: Entry) -> bool:
        """Queue ``entry``; True when that let the reader go, as it fell too far behind."""
        if self.closed:
            return False
        if len(self._entries) >= self._backlog:
            self.behind = True
            self._entries.clear()
            self.close()
            return True
        self._put(entry)
        return False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._put(None)

    async def next(self) -> Entry | None:
        """The next entry, waiting for one; None after the last."""
        while not self._entries:
            self._reader = self._loop.create_future()
            try:
                await self._reader
            finally:
                self._reader = None
        return self._entries.popleft()

    def _put(self, item: Entry | None) -> None:
        self._entries.append(item)
        if self._reader is not None and not self._reader.done():
            self._reader.set_result(None)


class SequenceMismatch(Exception):
    """An action submitted for a sequence the table is no longer at."""

    def __init__(self, expected: int, current: int) -> None:
        super().__init__(f"expected sequence {expected}, but the table is at {current}")
        self.expected = expected
        self.current = current


@dataclass(frozen=True, slots=True)
class RuntimeSettings:
    timers: TimerPolicy
    snapshot_every: int
    bot_timeout_seconds: float
    # A pause before each bot move, so that people can follow a table; 0 in tests.
    bot_delay_seconds: float = 0.0
    # How long a finished table stays in memory, answering reads and retries of its last
    # moves; after that it lives on in JetStream only, as it does after a restart.
    finished_retention_seconds: float = 30.0
    # The latest entries a table keeps in memory for resuming watchers and retries.
    history_kept: int = 128
    # Watch streams of callers without a seat at the table, open at once; seated players'
    # own streams are not counted (each player's streams are capped by the platform's quotas).
    max_spectators: int = 100
    # Entries queued for one watch stream; one that falls further behind ends (WatcherBehind).
    watch_backlog: int = 128
    # How long a seat must be without a stream of its player before the log says it is
    # disconnected (app/presence.py); a reconnection within it writes nothing.
    presence_grace_seconds: float = 2.0


@dataclass(frozen=True, slots=True)
class Deps:
    log: LogStore
    results: ResultPublisher
    decider: Decider | None
    metrics: Metrics
    ownership: Ownership
    clock: Clock = field(default_factory=SystemClock)


class Phase(enum.Enum):
    """Where a table's runtime is in its life, one at a time (:data:`_NEXT` says what may
    follow what)."""

    # It takes input.
    SERVING = "serving"
    # A write's fate is unknown until the log is read again (see the module doc): input waits
    # for that read.
    UNSYNCED = "unsynced"
    # The game is over: its final snapshot, its index entry and its lease are still owed.
    CLOSING = "closing"
    # The game is over and its books are closed (its results may still be on their way out).
    CLOSED = "closed"
    # Another node wrote to its log, took its lease, or it was handed over: it never writes
    # again here.
    FENCED = "fenced"


_NEXT: Final[dict[Phase, frozenset[Phase]]] = {
    Phase.SERVING: frozenset({Phase.UNSYNCED, Phase.CLOSING, Phase.FENCED}),
    Phase.UNSYNCED: frozenset({Phase.SERVING, Phase.UNSYNCED, Phase.CLOSING, Phase.FENCED}),
    Phase.CLOSING: frozenset({Phase.CLOSED, Phase.FENCED}),
    Phase.CLOSED: frozenset({Phase.FENCED}),
    Phase.FENCED: frozenset({Phase.FENCED}),
}


class TableRuntime:
    def __init__(
        self,
        table: Table,
        history: list[Entry],
        deps: Deps,
        settings: RuntimeSettings,
        *,
        outbox: Outbox,
        on_fenced: Callable[[str], None] = lambda table_id: None,
        requests: tuple[tuple[int, str, int], ...] = (),
    ) -> None:
        self.table = table
        # The latest entries and the requests they answered (RuntimeSettings.history_kept).
        self.history = History(settings.history_kept, history, requests)
        self._settings = settings
        self._deps = deps
        self._lock = asyncio.Lock()
        self._changed = asyncio.Event()
        # The deadline the driver sleeps until (None: until a change); see _wake_driver.
        self._armed: float | None = None
        self._watchers: set[_Watcher] = set()
        self._spectators = 0
        self._presence = Presence(settings.presence_grace_seconds)
        self._driver: asyncio.Task[None] | None = None
        self._on_fenced = on_fenced
        self._outbox = outbox
        self._phase = Phase.SERVING
        # A snapshot fell due while results were pending (see Outbox): taken once they are not.
        self._snapshot_due = False
        # When the game ended here (by the deps' clock), for Tables to forget the table later.
        self.finished_at: float | None = None

    @property
    def phase(self) -> Phase:
        return self._phase

    def _enter(self, phase: Phase) -> None:
        if phase not in _NEXT[self._phase]:
            raise RuntimeError(
                f"table {self.table.table_id}: {self._phase.value} cannot become {phase.value}"
            )
        self._phase = phase

    @property
    def fenced(self) -> bool:
        """Another node owns the table: this runtime never writes again."""
        return self._phase is Phase.FENCED

    def fence(self) -> None:
        """Stop writing for good: another node holds the table (called under the lock, or
        with no commit under way)."""
        self._enter(Phase.FENCED)

    async def fence_off(self) -> None:
        """:meth:`fence` once the input being committed is in: a commit under way ends as it
        would have, and none starts after."""
        async with self._lock:
            self.fence()

    @property
    def _unsynced(self) -> bool:
        return self._phase is Phase.UNSYNCED

    def _lost_track(self) -> None:
        """A write's fate is unknown: the log must be read before anything else is written.
        A table fenced meanwhile (its lease lost while the write was out) is no longer ours to
        read or write: LogConflict."""
        if self.fenced:
            raise LogConflict(f"table {self.table.table_id} is no longer owned here")
        self._enter(Phase.UNSYNCED)
        self._changed.set()

    @property
    def game(self) -> str:
        return str(self.table.config.game)

    @property
    def done(self) -> bool:
        """The game is over and everything it owes (results, closing the books) is done."""
        return self.table.finished and not (
            self._phase in (Phase.UNSYNCED, Phase.CLOSING, Phase.FENCED) or self._results_pending
        )

    @property
    def _results_pending(self) -> bool:
        return self._outbox.pending_for(self.table.table_id) > 0

    @property
    def frozen(self) -> bool:
        """The table cannot take input now: its log did not answer, or it lost the table."""
        return self.fenced or self._unsynced

    def start(self, driver: Coroutine[object, object, None]) -> None:
        """Run the table's driver (:class:`~masa_table_engine.app.driver.TableDriver`)."""
        self._driver = asyncio.get_running_loop().create_task(driver)

    async def stop(self) -> None:
        await stop_tasks(self._driver)
        for watcher in self._watchers:
            watcher.close()

    async def hand_over(self, flush_seconds: float) -> None:
        """Stop serving the table here and leave it to the node that takes it over (a drain).

        Once the input being committed is in, nothing more is written here; when the table's
        results are out, a final snapshot (marked handed over) spares the next owner a replay.
        The caller releases the lease, which lets another node take the table at once.
        """
        await self.stop()
        async with self._lock:
            # Whether the log is behind what this runtime knows, read before it is fenced.
            unsynced = self._unsynced
            self.fence()
            # A stream that joined while the driver stopped ends too; none joins from now on.
            for watcher in self._watchers:
                watcher.close()
        table_id = self.table.table_id
        if await self._outbox.flushed(table_id, flush_seconds) and not unsynced:
            try:
                await self._deps.log.save_snapshot(
                    self.table, handed_over=True, requests=self.history.recent_requests()
                )
            except Exception:
                _log.warning(
                    "table %s: no final snapshot before the hand-over",
                    table_id,
                    extra={"table_id": table_id},
                )
        # Whatever is still pending, the next owner publishes from the log.
        self._outbox.drop(table_id)

    # --- inputs ----------------------------------------------------------------------------

    async def commit(self, item: Input, *, expected_sequence: int | None = None) -> Entry:
        async with self._lock:
            return await self._commit(item, expected_sequence)

    async def _commit(self, item: Input, expected_sequence: int | None = None) -> Entry:
        if self.fenced:
            raise LogConflict(f"table {self.table.table_id} is no longer owned here")
        if self._unsynced:
            await self._sync()
        if expected_sequence is not None and expected_sequence != self.table.sequence:
            raise SequenceMismatch(expected_sequence, self.table.sequence)
        deps = self._deps
        started = time.perf_counter()
        name = self._action_name(item)
        try:
            table, entry = accept(self.table, item, deps.clock(), self._settings.timers)
        except RuleViolation:
            deps.metrics.action(self.game, name, "illegal", time.perf_counter() - started)
            raise
        written = time.perf_counter()
        try:
            await deps.log.append(entry)
        except Exception as error:
            return await self._after_failed_write(item, expected_sequence, error)
        deps.metrics.persisted(time.perf_counter() - written)
        await self._applied(table, entry, name, started)
        return entry

    async def _after_failed_write(
        self, item: Input, expected_sequence: int | None, error: Exception
    ) -> Entry:
        """Learn from the log whether the write landed before saying it failed.

        Raises ``LogUnavailable`` while the log does not answer, ``LogConflict`` when another
        node wrote, and ``SequenceMismatch`` when an earlier input of ours landed in its place.
        """
        self._lost_track()
        sequence = self.table.sequence
        if not isinstance(error, LogConflict | LogUnavailable):
            _log.warning(
                "table %s: append failed: %r",
                self.table.table_id,
                error,
                extra={"table_id": self.table.table_id},
            )
        for entry in await self._sync():
            if _same_input(entry.input, item):
                return entry
        if self.table.sequence != sequence:
            # Another input of ours (an attempt that timed out) took the place: this one was
            # judged against a table that no longer is.
            raise SequenceMismatch(
                sequence if expected_sequence is None else expected_sequence, self.table.sequence
            )
        # Nothing landed yet, though it still may: the driver reads the log again shortly.
        self._lost_track()
        raise LogUnavailable(f"table {self.table.table_id}: the log did not take the entry")

    async def _sync(self) -> list[Entry]:
        """Adopt the entries this node wrote after the table's last one; see the module doc."""
        table_id = self.table.table_id
        try:
            logged = await self._deps.log.read(table_id, self.table.sequence)
        except LogUnavailable:
            raise
        except Exception as error:
            raise LogUnavailable(
                f"table {table_id}: the log could not be read: {error!r}"
            ) from None
        adopted: list[Entry] = []
        for found in logged:
            if not found.authentic:
                self._fence(f"entry {found.sequence} does not carry a table-engine's seal")
            if found.writer != self._deps.log.writer:
                self._fence(f"entry {found.sequence} was written by {found.writer or 'another'}")
            if found.sequence != self.table.sequence + 1:
                self._fence(f"the log has entry {found.sequence} after {self.table.sequence}")
            name = self._action_name(found.input)
            table, entry = accept(self.table, found.input, found.at, self._settings.timers)
            await self._applied(table, entry, name, time.perf_counter())
            adopted.append(entry)
        if adopted:
            _log.info(
                "table %s: adopted %d entries that landed after their write timed out",
                table_id,
                len(adopted),
            )
        if self._phase is Phase.UNSYNCED:
            # In step with the log again (an adopted last entry made it CLOSING already).
            self._enter(Phase.SERVING)
        return adopted

    def _fence(self, why: str) -> NoReturn:
        self.fence()
        self._changed.set()
        _log.error(
            "table %s was fenced off: %s",
            self.table.table_id,
            why,
            extra={"table_id": self.table.table_id},
        )
        self._on_fenced(self.table.table_id)
        raise LogConflict(f"table {self.table.table_id} is no longer owned here: {why}")

    async def _applied(self, table: Table, entry: Entry, name: str, started: float) -> None:
        """The entry is in the log: the table moves on and everyone hears of it."""
        self.table = table
        if table.finished:
            self.finished_at = self._deps.clock()
        self.history.keep(entry)
        self._wake_driver()
        for watcher in self._watchers:
            if watcher.offer(entry):
                self._deps.metrics.watcher_behind()
        self._count(entry, name, time.perf_counter() - started)
        if has_results(table, entry):
            self._outbox.add(table, entry, notify=self._changed.set)
        if table.finished:
            if not self.fenced:
                # A table fenced while its last entry was out leaves its books to the next
                # owner, which replays that entry.
                self._enter(Phase.CLOSING)
            _log_finished(table, entry)
            self._changed.set()
        elif table.sequence % self._settings.snapshot_every == 0:
            self._snapshot_due = True
            await self._snapshot()

    async def _snapshot(self) -> None:
        """Save the table's snapshot if one is due and no result before it is unpublished."""
        if not self._snapshot_due or self._results_pending or self._unsynced or self.fenced:
            return
        self._snapshot_due = False
        try:
            await self._deps.log.save_snapshot(self.table, requests=self.history.recent_requests())
        except Exception:
            # The entry is in the log, which recovery replays: a snapshot is a shortcut.
            _log.warning(
                "table %s: snapshot not saved",
                self.table.table_id,
                exc_info=True,
                extra={"table_id": self.table.table_id},
            )

    async def _settle(self) -> bool:
        """At the end, once the results are out, close the table's books; True when done.

        Failures are retried by the driver: the log already holds what happened.
        """
        deps = self._deps
        if self._results_pending:
            return False
        try:
            if self._phase is Phase.CLOSING:
                await deps.log.save_snapshot(self.table)
                await deps.log.untrack(self.table.table_id)
                await deps.ownership.release(self.table.table_id)
                self._enter(Phase.CLOSED)
        except Exception:
            _log.warning(
                "table %s: results or closing not done yet",
                self.table.table_id,
                extra={"table_id": self.table.table_id},
            )
            self._changed.set()
            return False
        return True

    def _wake_driver(self) -> None:
        """Wake the driver when the new table needs it before the deadline it sleeps until.

        That is when a bot, the autopilot or a timed-out turn must play, when the game is
        over, or when a timer now runs out earlier. After most human moves none holds: the next
        turn's deadline is later than the one armed, so the driver sleeps on and, should it
        wake at the old deadline, finds nothing due and arms the new one. This saves a task
        switch per accepted action.
        """
        table = self.table
        deadline = next_deadline(table)
        armed = self._armed
        if (
            table.finished
            or automated_seat(table) is not None
            or (deadline is not None and (armed is None or deadline < armed))
        ):
            self._changed.set()

    def _action_name(self, item: Input) -> str:
        if isinstance(item, PlayerAction):
            return self.table.engine.name_of(item.action)
        return type(item).__name__.lower()

    def wake(self) -> None:
        """Let the driver look again (its results are out, say)."""
        self._changed.set()

    def _count(self, entry: Entry, name: str, seconds: float) -> None:
        metrics = self._deps.metrics
        if isinstance(entry.input, PlayerAction):
            metrics.action(self.game, name, "accepted", seconds)
        for event in entry.events:
            if isinstance(event, TurnTimedOut):
                metrics.timeout()
            elif isinstance(event, AutopilotChanged):
                metrics.autopilot_seats(1 if event.on else -1)
        if self.table.finished:
            # The autopilot stops with the game, and the table no longer counts as active.
            metrics.autopilot_seats(-sum(1 for s in self.table.seats if s.autopilot))
            metrics.table_closed(self.game)

    # --- seats -----------------------------------------------------------------------------

    def is_human(self, seat: int) -> bool:
        return self.table.config.seats[seat].kind is SeatKind.HUMAN

    async def connect(self, seat: int) -> None:
        """Log that the seat's player is back, when a stream of theirs is open here and the log
        has the seat disconnected (P-12); a stream back within the grace window writes nothing."""
        async with self._lock:
            if (
                self._presence.streams(seat)
                and not self.table.finished
                and not self.table.seats[seat].connected
            ):
                await self._commit(SeatChanged(seat, SeatChange.RECONNECTED))

    async def leave(self, seat: int) -> None:
        """The seat's player leaves (LeaveTable); leaving again, or a finished table, is a no-op."""
        async with self._lock:
            if not self.table.finished and not self.table.seats[seat].left:
                await self._commit(SeatChanged(seat, SeatChange.LEFT))

    def _stream_closed(self, seat: int) -> None:
        """A stream of the seat's player closed: the last one starts the seat's grace window,
        whose end the driver waits for (:meth:`record_absences`)."""
        self._presence.closed(seat, self._deps.clock())
        if not self._presence.streams(seat):
            self._changed.set()

    @property
    def presence_deadline(self) -> float | None:
        """When the earliest grace window of a seat without a stream ends."""
        return self._presence.deadline()

    async def record_absences(self) -> bool:
        """Log as disconnected each seat whose grace window ended without a stream, which
        starts its seat protection (P-12); True when an entry was written.

        The window is checked against the log only now: a seat the log does not have connected
        (its player left, or its reconnection was never logged) has nothing to log.
        """
        deadline = self._presence.deadline()
        if deadline is None or deadline > self._deps.clock():
            return False
        wrote = False
        async with self._lock:
            for seat in self._presence.due(self._deps.clock()):
                if not self.table.finished and self.table.seats[seat].connected:
                    await self._commit(SeatChanged(seat, SeatChange.DISCONNECTED))
                    wrote = True
                self._presence.settled(seat)
        return wrote

    async def record_returns(self) -> bool:
        """Log as reconnected each seat with a stream of its player open here that the log has
        disconnected: a reconnection whose write failed when its stream opened (the log did not
        answer, or another input came first). Without it the seat's protection would run out
        while its player watches (P-12). True when an entry was written."""
        if not self._returning():
            return False
        async with self._lock:
            returning = self._returning()
            for seat in returning:
                await self._commit(SeatChanged(seat, SeatChange.RECONNECTED))
        return bool(returning)

    def _returning(self) -> list[int]:
        table = self.table
        if table.finished:
            return []
        # A seat whose player left on purpose stays left while an old stream of theirs is still
        # open: only a stream opened after the leave brings them back (:meth:`connect`).
        return [
            seat
            for seat in self._presence.watched()
            if table.config.seats[seat].kind is SeatKind.HUMAN
            and not table.seats[seat].connected
            and not table.seats[seat].left
        ]

    # --- watching --------------------------------------------------------------------------

    @property
    def spectators(self) -> int:
        """Spectators' watch streams open now."""
        return self._spectators

    async def watch(
        self,
        seat: int | None,
        *,
        as_player: bool,
        after_sequence: int | None,
        spectator: bool = False,
    ) -> AsyncGenerator[WatchItem, None]:
        """A snapshot (or the entries after ``after_sequence``), then every new entry.

        The stream ends after the entry that finishes the game, and at once (nothing sent)
        when the table is handed over or lost before it starts. A player's stream counts for
        the seat's presence from here to its end, however it ends (:mod:`.presence`). A
        ``spectator`` (a caller without a seat here) past ``max_spectators`` raises
        :class:`TooManySpectators` before anything is sent; a stream whose reader falls
        ``watch_backlog`` entries behind raises :class:`WatcherBehind`, naming the last
        sequence it gave.
        """
        settings = self._settings
        if spectator and self._spectators >= settings.max_spectators:
            raise TooManySpectators(settings.max_spectators)
        player = seat if as_player else None
        watcher = _Watcher(settings.watch_backlog, spectator=spectator)
        # Counted at once, before any wait, so that no two streams pass the check together.
        self._spectators += spectator
        if player is not None:
            self._presence.opened(player)
        try:
            if player is not None:
                await self._record_reconnection(player)
            async with self._lock:
                if self.fenced:
                    # Handed over (a drain) or lost while the stream opened: it ends here, and
                    # its reader finds the table's new node.
                    return
                self._watchers.add(watcher)
                backlog, last = self.history.first_items(self.table, after_sequence)
                finished = self.table.finished
            for item in backlog:
                yield item
                last = item.sequence
            while not finished:
                entry = await watcher.next()
                if entry is None:
                    if watcher.behind:
                        raise WatcherBehind(settings.watch_backlog, last)
                    return
                yield entry
                last = entry.sequence
                finished = _ends_game(entry)
        finally:
            self._spectators -= spectator
            self._watchers.discard(watcher)
            if player is not None:
                # Synchronous: the generator may be closing because its call was cancelled,
                # or be closed later by the event loop from a task of its own.
                self._stream_closed(player)

    async def _record_reconnection(self, seat: int) -> None:
        """:meth:`connect` for a stream that opens; the stream goes on if that fails.

        A table handed over (a drain) or fenced while the stream opened refuses the write
        (``LogConflict``): expected while a table moves, so said at INFO without a traceback,
        and the stream then ends (:meth:`watch`). An input that came first (the table moved
        on) is as ordinary; a log that does not answer is worth a warning. Either way the
        driver is woken, and records the reconnection while the stream stays open
        (:meth:`record_returns`).
        """
        table_id = self.table.table_id
        try:
            await self.connect(seat)
        except LogConflict:
            _log.info(
                "table %s seat %d: reconnection not recorded, the table is moving",
                table_id,
                seat,
                extra={"table_id": table_id, "seat": seat},
            )
            return
        except (RuleViolation, SequenceMismatch) as error:
            _log.info(
                "table %s seat %d: reconnection not recorded (%s)",
                table_id,
                seat,
                error,
                extra={"table_id": table_id, "seat": seat},
            )
        except LogUnavailable as error:
            _log.warning(
                "table %s seat %d: reconnection not recorded, the log does not answer (%s)",
                table_id,
                seat,
                error,
                extra={"table_id": table_id, "seat": seat},
            )
        else:
            return
        self._changed.set()

    # --- what the driver asks of the pipeline -------------------------------------------

    @property
    def changes(self) -> asyncio.Event:
        """Set whenever the driver should look again (an entry, a failed write, results out)."""
        return self._changed

    @property
    def owing(self) -> bool:
        """The table's log, results or books still need the driver (even after the game)."""
        return self._phase in (Phase.UNSYNCED, Phase.CLOSING) or self._results_pending

    def arm(self, deadline: float | None) -> None:
        """The deadline the driver sleeps until now (see _wake_driver)."""
        self._armed = deadline

    async def catch_up(self) -> bool:
        """Sync a frozen table and finish what its last entries owe; True when it may go on."""
        if self._unsynced:
            async with self._lock:
                if self._unsynced:
                    await self._sync()
        if self._snapshot_due and not self.table.finished:
            async with self._lock:
                await self._snapshot()
        if self._phase is Phase.CLOSING and not await self._settle():
            return False
        return not self.table.finished

    async def commit_automated(
        self, seen: Table, seat: int, source: Source, action: object | None
    ) -> None:
        """A bot's or the autopilot's move for ``seat``, chosen on the table ``seen``: judged
        like any other; refused, or missing, the engine's own policy plays instead. Nothing
        is played when the table moved on meanwhile."""
        async with self._lock:
            if self._unsynced:
                await self._sync()
            if self.table.sequence != seen.sequence:
                return
            if action is not None:
                try:
                    await self._commit(PlayerAction(seat, action, source))
                except RuleViolation as refused:
                    _log.warning(
                        "bot move for table %s refused: %s",
                        seen.table_id,
                        refused,
                        extra={"table_id": seen.table_id, "seat": seat},
                    )
                else:
                    return
            salt = seen.seed + seen.sequence.to_bytes(8, "big")
            fallback = seen.engine.choose(seen.game, seat, automated_level(seen, seat), salt)
            await self._commit(PlayerAction(seat, fallback, Source.FALLBACK))


def _same_input(logged: Input, attempted: Input) -> bool:
    """Whether a logged input is the attempted one: the same request of the same seat, or an
    equal input (a timer, a connection change, a bot move)."""
    if (
        isinstance(logged, PlayerAction)
        and isinstance(attempted, PlayerAction)
        and attempted.request_id
    ):
        return (logged.seat, logged.request_id) == (attempted.seat, attempted.request_id)
    return logged == attempted


def has_results(table: Table, entry: Entry) -> bool:
    """Whether the entry ends a hand or the game: a result for the ledger and matchmaking."""
    engine = table.engine
    return _ends_game(entry) or any(
        isinstance(event, GameEvents) and engine.ends_hand(event.events) for event in entry.events
    )


def _ends_game(entry: Entry) -> bool:
    return any(isinstance(e, GameFinished | GameAbandoned) for e in entry.events)


def _log_finished(table: Table, last: Entry) -> None:
    """The INFO line operators look for when a table ends (its creation has one too)."""
    fields: dict[str, object] = {
        "table_id": table.table_id,
        "game": str(table.config.game),
        "sequence": table.sequence,
        "seconds": round(last.at - table.created_at, 3),
    }
    if table.abandoned:
        _log.info("table voided", extra=fields)
        return
    fields["ranking"] = [
        {"seat": s.seat, "place": s.place, "total": s.total, "forfeited": s.forfeited}
        for s in table.ranking
    ]
    # P-12: the game ended early because every player left or forfeited.
    fields["every_player_left"] = table.unattended
    _log.info("table finished", extra=fields)
