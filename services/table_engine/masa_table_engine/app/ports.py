"""The ports the use cases need; the adapters implement them over JetStream, gRPC and Prometheus.

Keeping them here (and protobuf out of them) lets the use cases run against in-memory fakes in
unit tests and against the real servers in integration tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from masa_table_engine.domain.model import Entry, Input
from masa_table_engine.domain.table import Table

__all__ = [
    "Decider",
    "LogConflict",
    "LogStore",
    "LoggedInput",
    "Metrics",
    "NullMetrics",
    "Ownership",
    "ResultPublisher",
]


class LogConflict(Exception):
    """The log moved on without us (another writer, or a lost lease): stop owning the table."""


@dataclass(frozen=True, slots=True)
class LoggedInput:
    """An input read back from the log with its sequence and time."""

    sequence: int
    at: float
    input: Input


class LogStore(Protocol):
    """The table log (DESIGN.md §4) and its snapshots."""

    async def append(self, entry: Entry) -> None:
        """Append ``entry`` after sequence ``entry.sequence - 1``; raise ``LogConflict`` if the
        log is not there (fencing), any other error if the write was not acknowledged."""
        ...

    async def read(self, table_id: str, after_sequence: int) -> list[LoggedInput]:
        """Every logged input of the table after ``after_sequence``, in order."""
        ...

    async def save_snapshot(self, table: Table) -> None: ...

    async def load_snapshot(self, table_id: str) -> Table | None: ...

    async def table_ids(self) -> list[str]:
        """Every table with a snapshot, finished or not."""
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

    async def decide(self, table: Table, seat: int, history: Sequence[Entry]) -> object | None: ...


class Ownership(Protocol):
    """Table leases (DESIGN.md §4): one owner per table, kept alive while it runs."""

    async def claim(self, table_id: str) -> bool:
        """Take or keep the table's lease; False when another node holds it."""
        ...

    async def release(self, table_id: str) -> None: ...


class Metrics(Protocol):
    def table_opened(self, game: str) -> None: ...

    def table_closed(self, game: str) -> None: ...

    def action(self, game: str, action: str, result: str, seconds: float) -> None: ...

    def timeout(self) -> None: ...

    def autopilot_seats(self, delta: int) -> None: ...

    def persisted(self, seconds: float) -> None: ...


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
