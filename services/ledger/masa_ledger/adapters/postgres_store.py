"""The ledger on PostgreSQL (production): psycopg 3 with a psycopg-pool connection pool.

Transactions run at READ COMMITTED and lock what they change with ``SELECT ... FOR UPDATE``
in one global order (accounts by id, then holds by id; the ``"C"`` collation makes the
database's order the same as Python's). A deadlock, a serialization failure or a concurrent
insert of the same id rolls the transaction back and :meth:`SqlStore.transact` runs it again.
Migrations run under an advisory lock, so several instances may start at once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import TypeVar

import psycopg
import psycopg.errors
from psycopg_pool import AsyncConnectionPool, PoolTimeout

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
    account_from_row,
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
from masa_ledger.domain.model import Account

__all__ = ["PostgresStore"]

T = TypeVar("T")

_CONFLICTS = (
    psycopg.errors.SerializationFailure,
    psycopg.errors.DeadlockDetected,
    psycopg.errors.UniqueViolation,
    psycopg.errors.LockNotAvailable,
)


class _PgExecutor(Executor):
    def __init__(self, connection: psycopg.AsyncConnection[Row]) -> None:
        self._connection = connection

    async def fetch(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        cursor = await self._connection.execute(sql, tuple(params) or None)
        return await cursor.fetchall()

    async def execute(self, sql: str, params: Sequence[object] = ()) -> None:
        # Without parameters the text is sent as it is ('%' in a migration is not a marker).
        await self._connection.execute(sql, tuple(params) or None)

    async def execute_many(self, sql: str, rows: Sequence[Sequence[object]]) -> None:
        if rows:
            async with self._connection.cursor() as cursor:
                await cursor.executemany(sql, [tuple(row) for row in rows])


_ACCOUNT_TYPES = (
    "text",
    "text",
    "text",
    "text",
    "bigint",
    "bigint",
    "bigint",
    "bigint",
    "bigint",
    "text",
    "bigint",
    "text",
)
# The types of each column of the rows apply() writes, for unnest(): one array per column.
_NEW_HOLD_TYPES = (
    "text",
    "text",
    "text",
    "bigint",
    "text",
    "text",
    "bigint",
    "text",
    "bigint",
    "bigint",
    "text",
    "bigint",
    "bigint",
    "text",
    "text",
)
_SETTLEMENT_TYPES = (
    "text",
    "bigint",
    "text",
    "bigint",
    "bigint",
    "bigint",
    "text",
    "text",
    "text",
    "text",
    "text",
    "bigint",
)
_TRANSFER_TYPES = (
    "text",
    "text",
    "text",
    "text",
    "bigint",
    "bigint",
    "text",
    "bigint",
    "text",
    "text",
)


class _PgTx(SqlTx):
    """Writes a whole change in one statement: each part is a data-modifying CTE fed by
    unnest() of one array per column, so the cost does not grow with the number of rows."""

    async def lock_accounts(
        self, account_ids: Collection[str], *, create: Sequence[Account] = ()
    ) -> dict[str, Account]:
        ids = sorted(set(account_ids))
        if not create or {a.account_id for a in create} != set(ids):
            return await super().lock_accounts(account_ids, create=create)
        # Only accounts that may be new: one upsert that creates the missing ones and locks
        # and returns them all (the no-op update takes the row lock), in account-id order.
        rows = await self._ex.fetch(
            f"INSERT INTO accounts ({ACCOUNT_COLUMNS}) "
            f"SELECT * FROM unnest({', '.join(f'%b::{t}[]' for t in _ACCOUNT_TYPES)}) "
            "ORDER BY 1 ON CONFLICT (account_id) DO UPDATE SET kind = accounts.kind "
            f"RETURNING {ACCOUNT_COLUMNS}",
            [list(column) for column in zip(*new_account_rows(create), strict=True)],
        )
        return {row[0]: account_from_row(row) for row in rows}

    async def apply(self, change: Change) -> None:
        parts: list[str] = []
        params: list[object] = []

        def add(sql: str, rows: Sequence[Sequence[object]], types: Sequence[str]) -> None:
            if not rows:
                return
            arrays = ", ".join(f"%b::{kind}[]" for kind in types)
            parts.append(sql.format(rows=f"unnest({arrays})"))
            params.extend(list(column) for column in zip(*rows, strict=True))

        add(
            f"INSERT INTO accounts ({ACCOUNT_COLUMNS}) SELECT * FROM {{rows}}",
            new_account_rows(change.new_accounts),
            _ACCOUNT_TYPES,
        )
        add(
            f"INSERT INTO holds ({NEW_HOLD_COLUMNS}) SELECT * FROM {{rows}}",
            new_hold_rows(change.new_holds),
            _NEW_HOLD_TYPES,
        )
        add(
            "UPDATE holds h SET state = u.state, table_id = u.table_id, game_no = u.game_no, "
            "closed_us = u.closed_us, reason = u.reason "
            "FROM {rows} AS u(hold_id, state, table_id, game_no, closed_us, reason) "
            "WHERE h.hold_id = u.hold_id",
            hold_update_rows(change.holds),
            ("text", "text", "text", "bigint", "bigint", "text"),
        )
        add(
            f"INSERT INTO transfers ({TRANSFER_COLUMNS}) SELECT * FROM {{rows}}",
            transfer_rows(change.transfers),
            _TRANSFER_TYPES,
        )
        add(
            f"INSERT INTO settlements ({SETTLEMENT_COLUMNS}) SELECT * FROM {{rows}}",
            [settlement_row(settlement) for settlement in change.settlements],
            _SETTLEMENT_TYPES,
        )
        add(
            "UPDATE accounts a SET balance = a.balance + c.balance, held = a.held + c.held, "
            "pending_stakes = a.pending_stakes + c.pending_stakes, "
            "stake = COALESCE(c.stake, a.stake), closed = COALESCE(c.closed, a.closed), "
            "rule = COALESCE(c.rule, a.rule) "
            "FROM {rows} AS c(account_id, balance, held, pending_stakes, stake, closed, rule) "
            "WHERE a.account_id = c.account_id",
            account_change_rows(change.accounts),
            ("text", "bigint", "bigint", "bigint", "bigint", "text", "text"),
        )
        add(
            "INSERT INTO inbox (event_id, table_id, game_no, outcome, detail, received_us) "
            "SELECT * FROM {rows} ON CONFLICT (event_id) DO NOTHING",
            [inbox_row(entry, change.at) for entry in change.inbox],
            ("text", "text", "bigint", "text", "text", "bigint"),
        )
        add(
            "INSERT INTO outbox (event_id, subject, payload, created_us) "
            "SELECT * FROM {rows} ON CONFLICT (event_id) DO NOTHING",
            outbox_rows(change.outbox, change.at),
            ("text", "text", "bytea", "bigint"),
        )
        if not parts:
            return
        ctes = ", ".join(f"w{index} AS ({part})" for index, part in enumerate(parts))
        await self._ex.execute(f"WITH {ctes} SELECT 1", params)


class PostgresStore(SqlStore):
    """Open with :meth:`open`, which applies the migrations that are not applied yet."""

    for_update = " FOR UPDATE"
    tx_class = _PgTx

    def __init__(self, pool: AsyncConnectionPool[psycopg.AsyncConnection[Row]]) -> None:
        self._pool = pool

    @classmethod
    async def open(
        cls, dsn: str, *, min_size: int = 2, max_size: int = 10, timeout: float = 5.0
    ) -> PostgresStore:
        pool: AsyncConnectionPool[psycopg.AsyncConnection[Row]] = AsyncConnectionPool(
            dsn, min_size=min_size, max_size=max_size, timeout=timeout, open=False
        )
        try:
            await pool.open(wait=True, timeout=timeout)
        except PoolTimeout as error:
            await pool.close()
            raise Unavailable(f"postgresql: no connection within {timeout:g} s") from error
        store = cls(pool)
        await store._migrate()
        return store

    async def _migrate(self) -> None:
        # A migration is many statements in one text, which only the simple query protocol
        # takes: no parameters here.
        async with self._pool.connection() as connection, connection.transaction():
            await connection.execute(
                "SELECT pg_advisory_xact_lock(hashtext('masa_ledger_migrations'))"
            )
            await connection.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_us BIGINT NOT NULL)"
            )
            cursor = await connection.execute("SELECT version FROM schema_migrations")
            applied = {int(row[0]) for row in await cursor.fetchall()}
            for version, name, sql in migrations("postgres"):
                if version in applied:
                    continue
                await connection.execute(sql)
                await connection.execute(
                    "INSERT INTO schema_migrations VALUES "
                    "(%s, %s, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint)",
                    (version, name),
                )

    async def _in_transaction(self, work: Callable[[Executor], Awaitable[T]], *, write: bool) -> T:
        try:
            # No pipeline mode: a transaction is a few statements (reads, one change, the
            # commit), and psycopg's pipeline costs more processor time than the round trips
            # it saves here (measured: about 15% more per settlement, and fewer per second).
            async with self._pool.connection() as connection, connection.transaction():
                if not write:
                    await connection.execute(
                        "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"
                    )
                return await work(_PgExecutor(connection))
        except _CONFLICTS as error:
            raise Conflict(str(error)) from error
        except PoolTimeout as error:
            raise Unavailable("postgresql: no free connection in time") from error
        except psycopg.OperationalError as error:
            raise Unavailable(f"postgresql: {error}") from error

    async def ping(self) -> None:
        await self._fetch("SELECT 1")

    async def close(self) -> None:
        await self._pool.close()
