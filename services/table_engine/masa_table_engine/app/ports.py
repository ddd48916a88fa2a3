"""The ports the use cases need; the adapters implement them over JetStream, gRPC and Prometheus.

Keeping them here (and protobuf out of them) lets the use cases run against in-memory fakes in
unit tests and against the real servers in integration tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Protocol

from masa_table_engine.domain.model import Entry, Input
from masa_table_engine.domain.table import Table

__all__ = [
    "Clock",
    "Decider",
    "Directory",
    "LogConflict",
    "LogStore",
    "LogUnavailable",
    "LoggedInput",
    "Metrics",
    "NullMetrics",
    "Ownership",
    "Placement",
    "ResultPublisher",
    "Scan",
    "Snapshot",
    "SystemClock",
    "Unserved",
]


class Clock(Protocol):
    """Table time: ``clock()`` is now in epoch seconds (deadlines are absolute times, P-10..P-12),
    and the driver waits for a change or a deadline through it, so that tests can move time."""

    def __call__(self) -> float: ...

    async def wait(self, event: asyncio.Event, timeout: float | None) -> None:
        """Until ``event`` is set or ``timeout`` seconds of this clock have passed."""
        ...


class SystemClock:
    def __call__(self) -> float:
        return time.time()

    async def wait(self, event: asyncio.Event, timeout: float | None) -> None:
        # asyncio.timeout, unlike wait_for, needs no extra task per wait; the driver waits
        # after every bot move and timer, so that adds up.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await event.wait()


class LogConflict(Exception):
    """The log already holds an entry where ours was to go. Whether that entry is ours (an
    earlier attempt that landed late) or another writer's, only reading the log tells."""


class LogUnavailable(Exception):
    """The log did not answer. A write may still land: the next read of the log finds it."""


@dataclass(frozen=True, slots=True)
class LoggedInput:
    """An input read back from the log with its sequence, time and writer (a node id)."""

    sequence: int
    at: float
    input: Input
    writer: str = ""
    # The events the writer logged with the input, in a form only the log store reads: a
    # replay compares its own events with them (LogStore.matches).
    logged_events: bytes | None = None
    # Whether the entry carries the seal of a table-engine (a key only engines hold): an
    # entry without one was not written by an engine, and no table is rebuilt from it.
    authentic: bool = True


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A saved table; ``handed_over`` when its owner gave it up while draining. ``requests``
    are the latest player actions before it, ``(seat, request_id, sequence)``, so that a
    retry of one is still known as such by a node that replays only the log after it."""

    table: Table
    handed_over: bool = False
    requests: tuple[tuple[int, str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Placement:
    """The node that saved a table's latest snapshot, its address, and whether it was final."""

    node: str
    address: str
    finished: bool


@dataclass(frozen=True, slots=True)
class Unserved:
    """A table some node's index lists and whose lease nobody holds: a node died or drained."""

    table_id: str
    node: str


@dataclass(frozen=True, slots=True)
class Scan:
    """What a takeover scan lists: the tables of ``nodes``' indexes (every node's: None) that
    nobody leases. ``soon``: a node just went silent, drained or vanished, so its leases run
    out (or were released) any moment now and the next scan should follow quickly.
    ``claim_all``: the listing is the one a single node makes for the cluster, and no node is
    in trouble, so a table found unserved is not one of a dead or draining node's that every
    live node is splitting by rank, and other nodes may not list it soon: the node that found
    it takes it once it has waited unserved as long as the rank rule makes the second node
    wait (a node that died a moment ago has turned silent by then)."""

    nodes: frozenset[str] | None = None
    soon: bool = False
    claim_all: bool = False


class LogStore(Protocol):
    """The table log (architecture.md), its snapshots and the index of the tables this node runs.

    ``writer`` names this node in every entry it appends, so that a table reading its log
    back tells its own late writes from another owner's.
    """

    writer: str

    async def append(self, entry: Entry) -> None:
        """Append ``entry`` after sequence ``entry.sequence - 1``; raise ``LogConflict`` when
        the log holds an entry there already, ``LogUnavailable`` when it did not answer."""
        ...

    async def read(self, table_id: str, after_sequence: int) -> list[LoggedInput]:
        """Every logged input of the table after ``after_sequence``, in order; raise
        ``LogUnavailable`` when the log does not answer."""
        ...

    def matches(self, entry: Entry, logged: LoggedInput) -> bool:
        """Whether replaying ``logged`` gave the events its writer logged (True when it
        logged none to compare with)."""
        ...

    async def save_snapshot(
        self,
        table: Table,
        *,
        handed_over: bool = False,
        requests: tuple[tuple[int, str, int], ...] = (),
    ) -> None: ...

    async def load_snapshot(self, table_id: str) -> Snapshot | None:
        """The table's snapshot; None when there is none, or when it was written in a schema
        this node does not read (the log is then replayed from its start)."""
        ...

    async def track(self, table_id: str) -> None:
        """Record that this node runs the table, before its first entry is written."""
        ...

    async def untrack(self, table_id: str) -> None:
        """The table is finished or gone: drop it from this node's index and bookkeeping."""
        ...

    async def adopt(self, table_id: str, node: str) -> None:
        """This node took the table over from ``node``: list it here, no longer there."""
        ...

    async def table_ids(self) -> list[str]:
        """The tables this node runs and has not finished (its index)."""
        ...

    async def placement(self, table_id: str) -> Placement | None:
        """Who saved the table's latest snapshot, from where, and whether the game was over
        (architecture.md, TABLE_MOVED); None when it has no snapshot."""
        ...


class Directory(Protocol):
    """What the live nodes see of each other: the tables nobody serves, and which nodes are
    live to take them."""

    async def unserved(self, nodes: frozenset[str] | None = None) -> list[Unserved]:
        """The tables the indexes of ``nodes`` (every node's: None) list and nobody leases."""
        ...

    async def worth_scanning(self) -> Scan | None:
        """What the periodic scan should list, or None when no table can have become unserved
        since the last listing. A node that went silent, started draining or vanished asks
        for its own index, soon for a lease's life, and while that index lists tables; the
        node's own start, the end of a node's trouble, tables left over by the last listing
        of everything, or this node's turn to list for the cluster (one live node a period)
        ask for every node's, since that reads every node's index and every lease."""
        ...

    async def live_nodes(self) -> list[str]:
        """The ids of the nodes that take tables now (alive, not draining)."""
        ...

    async def address_of(self, node: str) -> str | None:
        """The address a live node advertises."""
        ...


class ResultPublisher(Protocol):
    """Hand and game results for the ledger and matchmaking, idempotent on the entry."""

    async def publish(self, table: Table, entry: Entry, *, recheck: bool = False) -> list[str]:
        """Publish the results ``entry`` holds; returns each one's outcome, ``published`` or
        ``duplicate``. With ``recheck`` (a retry, or a table rebuilt elsewhere) the results
        already on the bus are looked up first, so a result is never published twice, even
        past the bus's de-duplication window."""
        ...


class Decider(Protocol):
    """Move choice for bot seats and the autopilot; None when no answer came in time."""

    async def decide(self, table: Table, seat: int) -> object | None: ...


class Ownership(Protocol):
    """Table leases (architecture.md): one owner per table, kept alive while it runs."""

    async def claim(self, table_id: str) -> bool:
        """Take or keep the table's lease; False when another node holds it."""
        ...

    async def release(self, table_id: str) -> None: ...

    async def holder(self, table_id: str) -> str | None:
        """The node holding the table's lease now, if any."""
        ...

    def held(self) -> set[str]:
        """The tables whose leases this node holds (and renews)."""
        ...


class Metrics(Protocol):
    def table_opened(self, game: str) -> None: ...

    def table_closed(self, game: str) -> None: ...

    def action(self, game: str, action: str, result: str, seconds: float) -> None: ...

    def timeout(self) -> None: ...

    def autopilot_seats(self, delta: int) -> None: ...

    def persisted(self, seconds: float) -> None: ...

    def frozen(self, tables: int) -> None:
        """How many tables cannot take input now (their log did not answer, or they lost it)."""
        ...

    def recovery_skipped(self, reason: str) -> None:
        """A table in this node's index that a start did not resume, and why."""
        ...

    def outbox_pending(self, results: int) -> None:
        """Results in the log that are not on the bus yet."""
        ...

    def result_published(self, outcome: str) -> None:
        """One result publish: ``published``, ``duplicate`` or ``failed``."""
        ...

    def takeover(self, reason: str) -> None:
        """A table this node took over from another: ``expired`` or ``drained``."""
        ...

    def overdue(self, tables: int) -> None:
        """How many tables in play are past a timer that nothing acted on (stuck)."""
        ...

    def players_online(self, players: int) -> None:
        """How many players are connected to a seat of a table in play."""
        ...

    def watcher_behind(self) -> None:
        """A watch stream let go: its reader fell RuntimeSettings.watch_backlog entries behind."""
        ...

    def loop(self, name: str) -> AbstractContextManager[None]:
        """One run of the background loop ``name`` (a fixed name, never an id), counted and
        timed; an exception leaving the block counts as an error run."""
        ...


class NullMetrics:
    """Metrics that record nothing, for unit tests."""

    def table_opened(self, game: str) -> None:
        del game

    def table_closed(self, game: str) -> None:
        del game

    def action(self, game: str, action: str, result: str, seconds: float) -> None:
        del game, action, result, seconds

    def timeout(self) -> None:
        return None

    def autopilot_seats(self, delta: int) -> None:
        del delta

    def persisted(self, seconds: float) -> None:
        del seconds

    def frozen(self, tables: int) -> None:
        del tables

    def recovery_skipped(self, reason: str) -> None:
        del reason

    def outbox_pending(self, results: int) -> None:
        del results

    def result_published(self, outcome: str) -> None:
        del outcome

    def takeover(self, reason: str) -> None:
        del reason

    def overdue(self, tables: int) -> None:
        del tables

    def players_online(self, players: int) -> None:
        del players

    def watcher_behind(self) -> None:
        return None

    def loop(self, name: str) -> AbstractContextManager[None]:
        del name
        return nullcontext()
