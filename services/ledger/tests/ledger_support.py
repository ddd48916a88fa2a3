"""Helpers of the ledger tests: a store on every backend, a ledger over it, results.

(Kept out of conftest.py so that tests import it by a unique name.)

SQLite always; PostgreSQL too when ``MASA_TEST_POSTGRES_DSN`` is set (``.ci/run`` sets it).
Every PostgreSQL store lives in a schema of its own, created for it and dropped after it, so
tests and test runs never see each other's rows.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from masa_ledger.adapters.convert import encode_event
from masa_ledger.adapters.postgres_store import PostgresStore
from masa_ledger.adapters.sql import SqlStore
from masa_ledger.adapters.sqlite_store import SqliteStore
from masa_ledger.app.ledger import HoldPolicy, Ledger, StakeRequest
from masa_ledger.domain.model import GameKey, GameResult, Hold, PayoutRule, Standing
from psycopg.conninfo import make_conninfo

POSTGRES_DSN = os.environ.get("MASA_TEST_POSTGRES_DSN", "")
BACKENDS = ("sqlite", "postgres") if POSTGRES_DSN else ("sqlite",)


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass
class RecordedMetrics:
    """The ledger's metrics port, recording what it is told."""

    operations: list[tuple[str, str]] = field(default_factory=list)
    settlements: list[float] = field(default_factory=list)
    expired: int = 0

    def operation(self, kind: str, result: str) -> None:
        self.operations.append((kind, result))

    def settlement_seconds(self, seconds: float) -> None:
        self.settlements.append(seconds)

    def holds_expired(self, count: int) -> None:
        self.expired += count


@asynccontextmanager
async def postgres_schema() -> AsyncIterator[str]:
    """A DSN whose search path is a fresh schema, dropped afterwards."""
    schema = f"ledger_test_{uuid.uuid4().hex[:16]}"
    async with await psycopg.AsyncConnection.connect(POSTGRES_DSN, autocommit=True) as admin:
        await admin.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield make_conninfo(POSTGRES_DSN, options=f"-csearch_path={schema}")
    finally:
        async with await psycopg.AsyncConnection.connect(POSTGRES_DSN, autocommit=True) as admin:
            await admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


@asynccontextmanager
async def open_store(
    backend: str, directory: Path, *, pool_size: int = 10
) -> AsyncIterator[SqlStore]:
    if backend == "sqlite":
        store: SqlStore = await SqliteStore.open(directory / f"ledger-{uuid.uuid4().hex[:8]}.db")
        try:
            yield store
        finally:
            await store.close()
        return
    async with postgres_schema() as dsn:
        pg = await PostgresStore.open(dsn, min_size=1, max_size=pool_size)
        try:
            yield pg
        finally:
            await pg.close()


def make_ledger(store: SqlStore, clock: Clock, **kwargs: object) -> tuple[Ledger, RecordedMetrics]:
    metrics = RecordedMetrics()
    ledger = Ledger(store, encode_event, metrics, clock=clock, policy=HoldPolicy(), **kwargs)  # type: ignore[arg-type]
    return ledger, metrics


async def hold_for(ledger: Ledger, players: Sequence[str], amount: int, prefix: str) -> list[Hold]:
    return await ledger.hold_stakes(
        [
            StakeRequest(f"{prefix}-{player}", player, amount, "lobby-1", f"t-{player}")
            for player in players
        ]
    )


def result(
    key: GameKey,
    stake: int,
    ranking: Sequence[tuple[int, str, int, str]],
    *,
    forfeited: Sequence[int] = (),
    rule: PayoutRule | None = None,
    teams: bool = False,
    event_id: str | None = None,
) -> GameResult:
    """A GameFinished: ranking rows are (seat, player, place, hold_id)."""
    return GameResult(
        event_id=event_id or f"{key.table_id}:{key.game_no}:game",
        key=key,
        stake=stake,
        standings=tuple(
            Standing(seat, player, place, seat in forfeited, seat % 2 if teams else 0, hold_id)
            for seat, player, place, hold_id in ranking
        ),
        rule=rule or PayoutRule(),
        teams=teams,
    )
