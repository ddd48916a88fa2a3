"""Ledger speed (issue 10): holds and settlements per second on PostgreSQL and SQLite.

Prints one JSON document with both databases side by side. Each runs the ledger's use cases
(``masa_ledger.app.ledger.Ledger``) in this process over the real store: PostgreSQL through
psycopg 3 and psycopg-pool (``MASA_BENCH_POSTGRES_DSN``, default the machine's local database,
in a schema of its own that is dropped afterwards), SQLite in WAL with ``synchronous=FULL`` in a
temporary directory. gRPC is not in the loop: the figures are the ledger's own, the cost a
matchmaking call or a GameFinished adds on top is the transport's.

Phases, on ``PLAYERS`` wallets granted beforehand:

- ``holds``: ``HOLD_CALLERS`` callers place single-player holds (``HoldStake``) as fast as
  they are answered; and the same with four-player ``HoldStakes`` (one table's stakes).
- ``settlements_paced``: games offered at ``TARGET_SETTLEMENTS`` per second for
  ``WINDOW_SECONDS``. A game binds four held stakes to its escrow (``BindHolds``, at table
  creation in production) and settles them (``GameFinished``: 4 seats, a 5% rake, shares
  60/30/10), two transactions. Latencies are given for the settlement alone (GameFinished to
  committed payout), the bind alone, and the two back to back. The latency target applies
  here, at the target rate.
- ``settlements_saturated``: ``SETTLE_CALLERS`` callers play games back to back: the most the
  ledger sustains.
- ``raw_commits``: the baseline, one single-row INSERT per transaction on the same database
  with the same number of callers, so the ledger's figures read against the database's own
  cost on this machine (``ratio``: settlements per raw commit).

At the end ``masa-ledger check``'s invariant check runs on the database and must pass.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import random
import sqlite3
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import psycopg
from masa_ledger.adapters.convert import encode_event
from masa_ledger.adapters.postgres_store import PostgresStore
from masa_ledger.adapters.sql import SqlStore
from masa_ledger.adapters.sqlite_store import SqliteStore
from masa_ledger.app.check import run_check
from masa_ledger.app.holds import HoldPolicy, StakeRequest
from masa_ledger.app.ledger import Ledger
from masa_ledger.domain.model import GameKey, GameResult, Standing
from masa_rules.table_config import PayoutRule
from psycopg.conninfo import make_conninfo

POSTGRES_DSN = os.environ.get(
    "MASA_BENCH_POSTGRES_DSN",
    os.environ.get("MASA_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test"),
)
PLAYERS = 4_000
STAKE = 100
SEATS = 4
HOLD_CALLERS = 64
HOLDS = int(os.environ.get("BENCH_HOLDS", "20000"))
SETTLE_CALLERS = 64
TARGET_SETTLEMENTS = 500
TARGET_HOLDS = 2_000
TARGET_P99_MS = 50.0
WINDOW_SECONDS = float(os.environ.get("BENCH_WINDOW", "10"))
SATURATED_GAMES = int(os.environ.get("BENCH_GAMES", "5000"))
RAW_COMMITS = 5_000
POOL_SIZE = 16
RULE = PayoutRule(rake_basis_points=500, place_shares=(6000, 3000, 1000))


class _Metrics:
    """The use cases' metrics port; the benchmark times things itself."""

    def operation(self, kind: str, result: str) -> None:
        del kind, result

    def settlement_seconds(self, seconds: float) -> None:
        del seconds

    def holds_expired(self, count: int) -> None:
        del count


def percentiles(samples: list[float]) -> dict[str, float | int]:
    if not samples:
        return {"count": 0}
    ordered = sorted(samples)

    def at(q: float) -> float:
        return round(1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)

    return {
        "count": len(ordered),
        "p50": at(0.50),
        "p90": at(0.90),
        "p99": at(0.99),
        "max": round(1000 * ordered[-1], 2),
    }


async def _callers(count: int, work: Callable[[int], Awaitable[None]], total: int) -> float:
    """``count`` callers share ``total`` calls of ``work``; returns the seconds it took."""
    counter = iter(range(total))

    async def caller() -> None:
        for n in counter:
            await work(n)

    started = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(count)))
    return time.perf_counter() - started


class _Games:
    """Hands out four held stakes per game, placed beforehand, and plays the games."""

    def __init__(self, ledger: Ledger, tag: str) -> None:
        self._ledger = ledger
        self._tag = tag
        self._next = 0

    async def prepare(self, games: int) -> list[list[str]]:
        prepared: list[list[str]] = []
        start = self._next
        self._next += games

        async def one(n: int) -> None:
            game = start + n
            players = [f"p{(game * SEATS + seat) % PLAYERS}" for seat in range(SEATS)]
            holds = await self._ledger.hold_stakes(
                [
                    StakeRequest(
                        hold_id=f"{self._tag}-{game}-{p}",
                        player_id=p,
                        amount=STAKE,
                        lobby_id="bench",
                        rule=RULE,
                    )
                    for p in players
                ]
            )
            prepared.append([h.hold_id for h in holds])

        await _callers(32, one, games)
        return prepared

    async def play(self, hold_ids: list[str]) -> tuple[float, float]:
        """Bind and settle one game: the seconds of the bind, and of the settlement."""
        started = time.perf_counter()
        table_id = f"{self._tag}-{hold_ids[0].split('-')[1]}"
        await self._ledger.bind_holds(table_id, 1, STAKE, hold_ids, RULE)
        bound = time.perf_counter()
        places = list(range(1, SEATS + 1))
        random.shuffle(places)
        result = GameResult(
            event_id=f"{table_id}:1:game",
            key=GameKey(table_id=table_id, game_no=1),
            stake=STAKE,
            standings=tuple(
                Standing(
                    seat=seat,
                    player_id=hold_id.rsplit("-", 1)[1],
                    place=places[seat],
                    forfeited=False,
                    team=0,
                    hold_id=hold_id,
                )
                for seat, hold_id in enumerate(hold_ids)
            ),
        )
        _, applied = await self._ledger.settle(result, from_event=True)
        assert applied
        return bound - started, time.perf_counter() - bound


async def _holds(ledger: Ledger) -> dict[str, Any]:
    latencies: list[float] = []

    async def single(n: int) -> None:
        started = time.perf_counter()
        await ledger.hold_stakes(
            [
                StakeRequest(
                    hold_id=f"single-{n}",
                    player_id=f"p{n % PLAYERS}",
                    amount=1,
                    lobby_id="bench",
                    rule=RULE,
                )
            ]
        )
        latencies.append(time.perf_counter() - started)

    seconds = await _callers(HOLD_CALLERS, single, HOLDS)
    grouped: list[float] = []

    async def group(n: int) -> None:
        started = time.perf_counter()
        await ledger.hold_stakes(
            [
                StakeRequest(
                    hold_id=f"group-{n}-{seat}",
                    player_id=f"p{(n * SEATS + seat) % PLAYERS}",
                    amount=1,
                    lobby_id="bench",
                    rule=RULE,
                )
                for seat in range(SEATS)
            ]
        )
        grouped.append(time.perf_counter() - started)

    group_seconds = await _callers(HOLD_CALLERS // SEATS, group, HOLDS // SEATS)
    return {
        "single_player_calls": {
            "callers": HOLD_CALLERS,
            "holds": HOLDS,
            "holds_per_second": round(HOLDS / seconds),
            "latency_ms": percentiles(latencies),
        },
        "four_player_calls": {
            "callers": HOLD_CALLERS // SEATS,
            "holds": HOLDS,
            "holds_per_second": round(HOLDS / group_seconds),
            "latency_ms": percentiles(grouped),
        },
    }


async def _paced(games: _Games) -> dict[str, Any]:
    offered = int(TARGET_SETTLEMENTS * WINDOW_SECONDS)
    prepared = await games.prepare(offered)
    binds: list[float] = []
    settles: list[float] = []
    started = time.perf_counter()
    tasks: list[asyncio.Task[None]] = []

    async def one(hold_ids: list[str]) -> None:
        bind, settle = await games.play(hold_ids)
        binds.append(bind)
        settles.append(settle)

    for n, hold_ids in enumerate(prepared):
        due = started + n / TARGET_SETTLEMENTS
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.get_running_loop().create_task(one(hold_ids)))
    await asyncio.gather(*tasks)
    seconds = time.perf_counter() - started
    return {
        "offered_per_second": TARGET_SETTLEMENTS,
        "settlements": offered,
        "settlements_per_second": round(offered / seconds),
        **_latencies(binds, settles),
    }


async def _saturated(games: _Games) -> dict[str, Any]:
    prepared = await games.prepare(SATURATED_GAMES)
    binds: list[float] = []
    settles: list[float] = []

    async def one(n: int) -> None:
        bind, settle = await games.play(prepared[n])
        binds.append(bind)
        settles.append(settle)

    seconds = await _callers(SETTLE_CALLERS, one, SATURATED_GAMES)
    return {
        "callers": SETTLE_CALLERS,
        "settlements": SATURATED_GAMES,
        "settlements_per_second": round(SATURATED_GAMES / seconds),
        **_latencies(binds, settles),
    }


def _latencies(binds: list[float], settles: list[float]) -> dict[str, Any]:
    """The settlement (GameFinished to committed payout), the bind (at table creation), and
    the two back to back."""
    return {
        "settle_latency_ms": percentiles(settles),
        "bind_latency_ms": percentiles(binds),
        "bind_and_settle_latency_ms": percentiles(
            [bind + settle for bind, settle in zip(binds, settles, strict=True)]
        ),
    }


async def _raw_postgres(dsn: str) -> float:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as admin:
        await admin.execute("CREATE TABLE bench_raw (id BIGINT PRIMARY KEY, value BIGINT)")
    connections = [await psycopg.AsyncConnection.connect(dsn) for _ in range(POOL_SIZE)]
    try:
        free: asyncio.Queue[psycopg.AsyncConnection[Any]] = asyncio.Queue()
        for connection in connections:
            free.put_nowait(connection)

        async def commit(n: int) -> None:
            connection = await free.get()
            try:
                async with connection.transaction():
                    await connection.execute("INSERT INTO bench_raw VALUES (%s, %s)", (n, n))
            finally:
                free.put_nowait(connection)

        seconds = await _callers(SETTLE_CALLERS, commit, RAW_COMMITS)
    finally:
        for connection in connections:
            await connection.close()
    return RAW_COMMITS / seconds


async def _raw_sqlite(path: Path) -> float:
    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = FULL")
    connection.execute("CREATE TABLE bench_raw (id INTEGER PRIMARY KEY, value INTEGER)")
    lock = asyncio.Lock()

    async def commit(n: int) -> None:
        async with lock:
            connection.execute("BEGIN IMMEDIATE")
            connection.execute("INSERT INTO bench_raw VALUES (?, ?)", (n, n))
            await asyncio.to_thread(connection.execute, "COMMIT")

    try:
        seconds = await _callers(SETTLE_CALLERS, commit, RAW_COMMITS)
    finally:
        connection.close()
    return RAW_COMMITS / seconds


@asynccontextmanager
async def _postgres() -> AsyncIterator[tuple[SqlStore, str]]:
    schema = f"ledger_bench_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(POSTGRES_DSN, autocommit=True) as admin:
        await admin.execute(f'CREATE SCHEMA "{schema}"')
    dsn = make_conninfo(POSTGRES_DSN, options=f"-csearch_path={schema}")
    try:
        store = await PostgresStore.open(dsn, min_size=POOL_SIZE, max_size=POOL_SIZE)
        try:
            yield store, dsn
        finally:
            await store.close()
    finally:
        async with await psycopg.AsyncConnection.connect(POSTGRES_DSN, autocommit=True) as admin:
            await admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


async def _measure(store: SqlStore, raw: Callable[[], Awaitable[float]]) -> dict[str, Any]:
    ledger = Ledger(
        store,
        encode_event,
        _Metrics(),
        policy=HoldPolicy(default_ttl_seconds=3600.0, max_ttl_seconds=86_400.0),
    )

    async def grant(n: int) -> None:
        await ledger.grant(f"bench-{n}", f"p{n}", 10**9, "bench")

    await _callers(32, grant, PLAYERS)
    holds = await _holds(ledger)
    games = _Games(ledger, "g")
    paced = await _paced(games)
    saturated = await _saturated(games)
    raw_per_second = await raw()
    report = await run_check(store)
    return {
        "holds": holds,
        "settlements_paced": paced,
        "settlements_saturated": saturated,
        "raw_commits": {
            "callers": SETTLE_CALLERS,
            "commits_per_second": round(raw_per_second),
            "ratio_saturated_settlements_per_raw_commit": round(
                saturated["settlements_per_second"] / raw_per_second, 3
            ),
        },
        "check": {"ok": report.ok, "totals": dict(report.totals)},
        "targets_met": {
            "holds_per_second": holds["single_player_calls"]["holds_per_second"] >= TARGET_HOLDS,
            "settlements_per_second": saturated["settlements_per_second"] >= TARGET_SETTLEMENTS,
            "paced_settle_p99_ms": paced["settle_latency_ms"]["p99"] <= TARGET_P99_MS,
            "paced_bind_and_settle_p99_ms": (
                paced["bind_and_settle_latency_ms"]["p99"] <= TARGET_P99_MS
            ),
        },
    }


async def run(workdir: Path) -> dict[str, Any]:
    backends: dict[str, Any] = {}
    try:
        async with _postgres() as (store, dsn):
            backends["postgresql"] = await _measure(store, lambda: _raw_postgres(dsn))
    except (OSError, psycopg.OperationalError) as error:
        backends["postgresql"] = {"skipped": f"no PostgreSQL at MASA_BENCH_POSTGRES_DSN: {error}"}
    sqlite_store = await SqliteStore.open(workdir / "ledger.sqlite3")
    try:
        backends["sqlite"] = await _measure(sqlite_store, lambda: _raw_sqlite(workdir / "raw.db"))
    finally:
        await sqlite_store.close()
    return {
        "benchmark": "ledger",
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_average": [round(x, 2) for x in os.getloadavg()],
        },
        "targets": {
            "settlements_per_second": TARGET_SETTLEMENTS,
            "settlement_p99_ms": TARGET_P99_MS,
            "holds_per_second": TARGET_HOLDS,
            "applies_to": "postgresql",
        },
        "backends": backends,
    }


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="masa-bench-ledger-") as workdir:
        result = asyncio.run(run(Path(workdir)))
    print(json.dumps(result, indent=2))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
