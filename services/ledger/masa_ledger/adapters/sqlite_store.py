"""The ledger on SQLite: the embedded default (``make run``), WAL and ``synchronous=FULL``.

SQLite lets one transaction write at a time, so writes are serialised here by one lock around
one connection (``BEGIN IMMEDIATE`` takes the database's write lock up front, which also keeps
a second process, such as ``masa-ledger check``, from deadlocking with this one). Statements
run on the event loop, each in microseconds; the commit, which waits for the disk, runs in a
worker thread. Reads use a second connection and never wait for a write (WAL).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TypeVar

from masa_ledger.adapters.sql import (
    ACCOUNT_COLUMNS,
    NEW_HOLD_COLUMNS,
    SETTLEMENT_COLUMNS,
    TRANSFER_COLUMNS,
    Executor,
    Row,
    SqlStore,
    SqlTx,
    account_change_rows,
    hold_update_rows,
    inbox_row,
    migrations,
    new_account_rows,
    new_hold_rows,
    outbox_rows,
    settlement_row,
    transfer_rows,
)
from masa_ledger.app.ports import Change
from masa_ledger.domain.errors import Conflict, Unavailable

__all__ = ["SqliteStore"]

T = TypeVar("T")

_BUSY_TIMEOUT_MS = 5000


class _SqliteExecutor(Executor):
    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    async def fetch(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        return self._connection.execute(sql.replace("%s", "?"), tuple(params)).fetchall()

    async def execute(self, sql: str, params: Sequence[object] = ()) -> None:
        self._connection.execute(sql.replace("%s", "?"), tuple(params))

    async def execute_many(self, sql: str, rows: Sequence[Sequence[object]]) -> None:
        if rows:
            self._connection.executemany(sql.replace("%s", "?"), [tuple(row) for row in rows])


class _SqliteTx(SqlTx):
    """Writes a change statement by statement: in-process, each costs microseconds."""

    async def apply(self, change: Change) -> None:
        ex = self._ex
        await ex.execute_many(
            f"INSERT INTO accounts ({ACCOUNT_COLUMNS}) VALUES ({_marks(12)})",
            new_account_rows(change.new_accounts),
        )
        await ex.execute_many(
            f"INSERT INTO holds ({NEW_HOLD_COLUMNS}) VALUES ({_marks(15)})",
            new_hold_rows(change.new_holds),
        )
        await ex.execute_many(
            "UPDATE holds SET state = ?2, table_id = ?3, game_no = ?4, closed_us = ?5, "
            "reason = ?6 WHERE hold_id = ?1",
            hold_update_rows(change.holds),
        )
        await ex.execute_many(
            f"INSERT INTO transfers ({TRANSFER_COLUMNS}) VALUES ({_marks(10)})",
            transfer_rows(change.transfers),
        )
        await ex.execute_many(
            f"INSERT INTO settlements ({SETTLEMENT_COLUMNS}) VALUES ({_marks(12)})",
            [settlement_row(settlement) for settlement in change.settlements],
        )
        await ex.execute_many(
            "UPDATE accounts SET balance = balance + ?2, held = held + ?3, "
            "pending_stakes = pending_stakes + ?4, stake = COALESCE(?5, stake), "
            "closed = COALESCE(?6, closed), rule = COALESCE(?7, rule) WHERE account_id = ?1",
            account_change_rows(change.accounts),
        )
        await ex.execute_many(
            "INSERT INTO inbox (event_id, table_id, game_no, outcome, detail, received_us) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (event_id) DO NOTHING",
            [inbox_row(entry, change.at) for entry in change.inbox],
        )
        await ex.execute_many(
            "INSERT INTO outbox (event_id, subject, payload, created_us) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (event_id) DO NOTHING",
            outbox_rows(change.outbox, change.at),
        )


def _marks(count: int) -> str:
    return ", ".join(["?"] * count)


class SqliteStore(SqlStore):
    """Open with :meth:`open`, which applies the migrations that are not applied yet."""

    tx_class = _SqliteTx

    def __init__(self, path: Path) -> None:
        self.path = path
        self._writer = self._connect()
        self._reader = self._connect()
        self._write_lock = asyncio.Lock()
        self._read_lock = asyncio.Lock()

    @classmethod
    async def open(cls, path: Path, *, create: bool = True) -> SqliteStore:
        """The database at ``path``, made (with its folder) when missing unless ``create`` is
        False (``masa-ledger check``): then a missing file is ``FileNotFoundError``, and nothing
        is made. A file that is not a SQLite database is ``Unavailable``."""
        if create:
            path.parent.mkdir(parents=True, exist_ok=True)
        elif not path.is_file():
            raise FileNotFoundError(f"no SQLite database at {path}")
        try:
            store = cls(path)
            await store._migrate()
        except sqlite3.DatabaseError as error:
            raise Unavailable(f"{path}: {error}") from None
        return store

    def _connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(
            self.path,
            isolation_level=None,
            check_same_thread=False,
            timeout=_BUSY_TIMEOUT_MS / 1000,
        )
        connection.execute("PRAGMA journal_mode = WAL")
        # Every commit reaches the disk before it is acknowledged: a crash loses no chips.
        connection.execute("PRAGMA synchronous = FULL")
        connection.execute("PRAGMA foreign_keys = ON")
        connection.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
        return connection

    async def _migrate(self) -> None:
        async with self._write_lock:
            self._writer.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_us INTEGER NOT NULL)"
            )
            for version, name, sql in migrations("sqlite"):
                done = self._writer.execute(
                    "SELECT 1 FROM schema_migrations WHERE version = ?", (version,)
                ).fetchone()
                if done:
                    continue
                # One script, one transaction: a migration is applied whole or not at all.
                await asyncio.to_thread(
                    self._writer.executescript,
                    f"BEGIN IMMEDIATE;\n{sql}\nINSERT INTO schema_migrations VALUES "
                    f"({version}, '{name}', {round(time.time() * 1e6)});\nCOMMIT;",
                )

    async def _in_transaction(self, work: Callable[[Executor], Awaitable[T]], *, write: bool) -> T:
        lock, connection = (
            (self._write_lock, self._writer) if write else (self._read_lock, self._reader)
        )
        async with lock:
            try:
                connection.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            except sqlite3.OperationalError as error:
                raise _mapped(error) from error
            try:
                result = await work(_SqliteExecutor(connection))
                if write:
                    await _commit(connection)
                else:
                    connection.execute("COMMIT")
            except BaseException as error:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                if isinstance(error, sqlite3.OperationalError):
                    raise _mapped(error) from error
                raise
            return result

    async def ping(self) -> None:
        try:
            await self._fetch("SELECT 1")
        except sqlite3.Error as error:
            raise Unavailable(f"sqlite: {error}") from error

    async def close(self) -> None:
        async with self._write_lock, self._read_lock:
            self._writer.close()
            self._reader.close()


async def _commit(connection: sqlite3.Connection) -> None:
    """COMMIT in a worker thread (it waits for the disk). A cancelled caller still waits for
    the commit to end, so that nothing touches the connection while it runs."""
    done = asyncio.get_running_loop().run_in_executor(None, connection.execute, "COMMIT")
    cancelled = False
    while True:
        try:
            await asyncio.shield(done)
        except asyncio.CancelledError:
            cancelled = True
            if not done.done():
                continue
        break
    done.result()
    if cancelled:
        raise asyncio.CancelledError


def _mapped(error: sqlite3.OperationalError) -> Exception:
    text = str(error).lower()
    if "locked" in text or "busy" in text:
        return Conflict(str(error))
    return Unavailable(f"sqlite: {error}")
