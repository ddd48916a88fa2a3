"""The ledger on PostgreSQL (production): psycopg 3 with a psycopg-pool connection pool.

Transactions run at READ COMMITTED and lock what they change with ``SELECT ... FOR UPDATE``
in one global order (accounts by id, then holds by id; the ``"C"`` collation makes the
database's order the same as Python's). A deadlock, a serialization failure or a concurrent
insert of the same id rolls the transaction back and :meth:`SqlStore.transact` runs it again.
Migrations run under an advisory lock, so several instances may start at once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import psycopg
import psycopg.errors
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from masa_ledger.adapters.sql import Executor, Row, SqlStore, migrations
from masa_ledger.domain.errors import Conflict, Unavailable

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


class PostgresStore(SqlStore):
    """Open with :meth:`open`, which applies the migrations that are not applied yet."""

    for_update = " FOR UPDATE"

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
        async def run(ex: Executor) -> None:
            await ex.execute("SELECT pg_advisory_xact_lock(hashtext('masa_ledger_migrations'))")
            await ex.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_us BIGINT NOT NULL)"
            )
            applied = {
                int(row[0]) for row in await ex.fetch("SELECT version FROM schema_migrations")
            }
            for version, name, sql in migrations("postgres"):
                if version in applied:
                    continue
                await ex.execute(sql)
                await ex.execute(
                    "INSERT INTO schema_migrations VALUES "
                    "(%s, %s, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint)",
                    (version, name),
                )

        await self._in_transaction(run, write=True)

    async def _in_transaction(self, work: Callable[[Executor], Awaitable[T]], *, write: bool) -> T:
        try:
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
