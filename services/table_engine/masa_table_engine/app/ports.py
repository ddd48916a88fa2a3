"""The ports the use cases need; the adapters implement them over JetStream, gRPC and Prometheus.

Keeping them here (and protobuf out of them) lets the use cases run against in-memory fakes in
unit tests and against the real servers in integration tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from masa_table_engine.domain.model import Entry, Input
from masa_table_engine.domain.table import Table

__all__ = [
    "Decider",
    "LogConflict",
    "LogStore",
    "LogUnavailable",
    "LoggedInput",
    "Metrics",
    "NullMetrics",
    "Ownership",
    "ResultPublisher",
]


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


class LogStore(Protocol):
    """The table log (DESIGN.md §4), its snapshots and the index of the tables this node runs.

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

    async def save_snapshot(self, table: Table) -> None: ...

    async def load_snapshot(self, table_id: str) -> Table | None: ...

    async def track(self, table_id: str) -> None:
        """Record that this node runs the table, before its first entry is written."""
        ...

    async def untrack(self, table_id: str) -> None:
        """The table is finished or gone: drop it from this node's index and bookkeeping."""
        ...

    async def table_ids(self) -> list[str]:
        """The tables this node runs and has not finished (its index)."""
        ...

    async def owner_address(self, table_id: str) -> str | None:
        """The address of the node whose snapshot of ``table_id`` names it as the owner, when
        that is another node (DESIGN.md §3, TABLE_MOVED)."""
        ...


class ResultPublisher(Protocol):
    """Hand and game results for the ledger and matchmaking, idempotent on the entry."""

    async def publish(self, table: Table, entry: Entry) -> None: ...


class Decider(Protocol):
    """Move choice for bot seats and the autopilot; None when no answer came in time."""

    async def decide(self, table: Table, seat: int) -> object | None: ...


class Ownership(Protocol):
    """Table leases (DESIGN.md §4): one owner per table, kept alive while it runs."""

    async def claim(self, table_id: str) -> bool:
        """Take or keep the table's lease; False when another node holds it."""
        ...

    async def release(self, table_id: str) -> None: ...

    async def holder(self, table_id: str) -> str | None:
        """The node holding the table's lease now, if any."""
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

    def overdue(self, tables: int) -> None:
        """How many tables in play are past a timer that nothing acted on (stuck)."""
        ...

    def players_online(self, players: int) -> None:
        """How many players are connected to a seat of a table in play."""
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

    def overdue(self, tables: int) -> None:
        del tables

    def players_online(self, players: int) -> None:
        del players
