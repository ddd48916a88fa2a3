"""Helpers of the ledger tests: a store on every backend, a ledger over it, results.

(Kept out of conftest.py so that tests import it by a unique name.)

SQLite always; PostgreSQL too when ``MASA_TEST_POSTGRES_DSN`` is set (``.ci/run`` sets it).
Every PostgreSQL store lives in a schema of its own, created for it and dropped after it, so
tests and test runs never see each other's rows.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import nats.js.errors
import psycopg
from masa.common.v1 import chips_pb2, game_pb2
from masa.events.v1 import ledger_event_pb2, result_pb2
from masa_ledger.adapters.convert import encode_event
from masa_ledger.adapters.postgres_store import PostgresStore
from masa_ledger.adapters.sql import Executor, SqlStore
from masa_ledger.adapters.sqlite_store import SqliteStore
from masa_ledger.app.holds import HoldPolicy, StakeRequest
from masa_ledger.app.ledger import Ledger
from masa_ledger.bootstrap import LedgerService, start_ledger
from masa_ledger.domain.model import GameKey, GameResult, Hold, Standing
from masa_ledger.settings import LedgerSettings
from masa_platform.bus import connect, publish
from masa_platform.bus_access import ADMIN as ADMIN_USER
from masa_platform.bus_access import LEDGER
from masa_platform.settings import PlatformSettings, ServerSettings
from masa_platform.testing import NatsServer, auth_settings, keyring, signed_result, token
from nats.aio.client import Client
from nats.js import JetStreamContext
from prometheus_client import CollectorRegistry
from psycopg.conninfo import conninfo_to_dict, make_conninfo

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
async def postgres_schema(options: str = "") -> AsyncIterator[str]:
    """A DSN whose search path is a fresh schema, dropped afterwards; ``options`` adds
    server settings to its sessions (``-cname=value``)."""
    schema = f"ledger_test_{uuid.uuid4().hex[:16]}"
    async with await psycopg.AsyncConnection.connect(POSTGRES_DSN, autocommit=True) as admin:
        await admin.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield make_conninfo(POSTGRES_DSN, options=f"-csearch_path={schema} {options}".strip())
    finally:
        async with await psycopg.AsyncConnection.connect(POSTGRES_DSN, autocommit=True) as admin:
            await admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


@asynccontextmanager
async def open_store(
    backend: str, directory: Path, *, pool_size: int = 10, pg_options: str = ""
) -> AsyncIterator[SqlStore]:
    if backend == "sqlite":
        store: SqlStore = await SqliteStore.open(directory / f"ledger-{uuid.uuid4().hex[:8]}.db")
        try:
            yield store
        finally:
            await store.close()
        return
    async with postgres_schema(pg_options) as dsn:
        pg = await PostgresStore.open(dsn, min_size=1, max_size=pool_size)
        try:
            yield pg
        finally:
            await pg.close()


def make_ledger(store: SqlStore, clock: Clock) -> tuple[Ledger, RecordedMetrics]:
    metrics = RecordedMetrics()
    ledger = Ledger(store, encode_event, metrics, clock=clock, policy=HoldPolicy())
    return ledger, metrics


async def hold_for(ledger: Ledger, players: Sequence[str], amount: int, prefix: str) -> list[Hold]:
    return await ledger.hold_stakes(
        [
            StakeRequest(
                hold_id=f"{prefix}-{player}",
                player_id=player,
                amount=amount,
                lobby_id="lobby-1",
                ticket_id=f"t-{player}",
            )
            for player in players
        ]
    )


def result(
    key: GameKey,
    stake: int,
    ranking: Sequence[tuple[int, str, int, str]],
    *,
    forfeited: Sequence[int] = (),
    teams: bool = False,
    event_id: str | None = None,
) -> GameResult:
    """A GameFinished: ranking rows are (seat, player, place, hold_id)."""
    return GameResult(
        event_id=event_id or f"{key.table_id}:{key.game_no}:game",
        key=key,
        stake=stake,
        standings=tuple(
            Standing(
                seat=seat,
                player_id=player,
                place=place,
                forfeited=seat in forfeited,
                team=seat % 2 if teams else 0,
                hold_id=hold_id,
            )
            for seat, player, place, hold_id in ranking
        ),
        teams=teams,
    )


def token_metadata(subject: str, *roles: str) -> tuple[tuple[str, str], ...]:
    """A player's token, or an operator's or a service's own (``roles``)."""
    return (("authorization", f"Bearer {token(subject, *roles)}"),)


# Each caller of the ledger as it is in a deployment: matchmaking holds and releases stakes,
# the table-engine binds them, an operator grants, settles and voids by hand.
MATCHMAKING = token_metadata("matchmaking", "matchmaking")
ENGINE = token_metadata("table-engine", "table-engine")
ADMIN = token_metadata("ops", "admin")


def ledger_settings(server: NatsServer, database_url: str, **overrides: Any) -> LedgerSettings:
    """A ledger on ``server`` with the ledger's own NATS user."""
    platform = PlatformSettings(
        service_name="ledger",
        auth=auth_settings("ledger"),
        nats_url=server.url,
        nats_user=LEDGER,
        nats_password=server.password(LEDGER),
        server=ServerSettings(grpc_port=0, grace_seconds=0.2),
    )
    base = LedgerSettings(
        platform=platform,
        database_url=database_url,
        result_keys_file=keyring().results_jwks,
        expiry_interval_seconds=0.2,
        results_fetch_seconds=0.5,
    )
    return replace(base, **overrides)


async def operator_connection(server: NatsServer) -> Client:
    """NATS as the operators: the tests publish results (as the table-engine would) and read
    the ledger's events and consumers."""
    return await connect(
        server.url, name="test-operator", user=ADMIN_USER, password=server.password(ADMIN_USER)
    )


def ledger_nats_env(server: NatsServer) -> dict[str, str]:
    """The ``MASA_*`` variables of a ledger process on ``server``."""
    return {
        "MASA_NATS_URL": server.url,
        "MASA_NATS_USER": LEDGER,
        "MASA_NATS_PASSWORD": server.password(LEDGER),
        **keyring().env(LEDGER),
    }


@asynccontextmanager
async def database_url(backend: str, directory: Path) -> AsyncIterator[str]:
    """A database for a whole ledger service: a SQLite file, or a fresh PostgreSQL schema."""
    if backend == "sqlite":
        yield f"sqlite:///{directory / f'ledger-{uuid.uuid4().hex[:8]}.db'}"
        return
    async with postgres_schema() as dsn:
        yield as_url(dsn)


def as_url(dsn: str) -> str:
    """A key=value DSN as a postgresql:// URL, which MASA_DATABASE_URL takes."""
    params = conninfo_to_dict(dsn)
    host = params.pop("host", "127.0.0.1")
    port = params.pop("port", "5432")
    user = params.pop("user", "postgres")
    dbname = params.pop("dbname", "postgres")
    query = urlencode({key: str(value) for key, value in params.items()})
    return f"postgresql://{user}@{host}:{port}/{dbname}" + (f"?{query}" if query else "")


@asynccontextmanager
async def running_ledger(
    settings: LedgerSettings, registry: CollectorRegistry | None = None
) -> AsyncIterator[LedgerService]:
    service = await start_ledger(settings, registry=registry or CollectorRegistry())
    try:
        yield service
    finally:
        await service.stop(0.2)


def game_finished(
    table_id: str,
    stake: int,
    ranking: Sequence[tuple[int, str, int, str]],
    *,
    game_no: int = 1,
    mode: game_pb2.Mode.ValueType = game_pb2.MODE_SINGLES,
    rule: chips_pb2.PayoutRule | None = None,
    event_id: str | None = None,
) -> result_pb2.TableResult:
    """A TableResult with a GameFinished; ranking rows are (seat, player, place, hold_id)."""
    return result_pb2.TableResult(
        game_finished=result_pb2.GameFinished(
            event_id=event_id or f"{table_id}:{game_no}:game",
            table_id=table_id,
            game_no=game_no,
            game=game_pb2.GAME_KIND_ELEVATOR,
            mode=mode,
            stake=stake,
            ranking=[
                game_pb2.Standing(seat=seat, player_id=player, place=place, hold_id=hold_id)
                for seat, player, place, hold_id in ranking
            ],
            payout=rule,
        )
    )


async def publish_result(
    js: JetStreamContext, result: result_pb2.TableResult, *, msg_id: str | None = None
) -> None:
    inner = getattr(result, result.WhichOneof("result") or "")
    subject = f"masa.table.v1.{inner.table_id}.result"
    payload = result.SerializeToString()
    # Signed as a table-engine signs its results: the ledger pays nothing else.
    await publish(
        js,
        subject,
        payload,
        msg_id=msg_id or inner.event_id,
        headers=signed_result(subject, payload),
    )


async def eventually(
    check: Callable[[], Awaitable[bool]], *, timeout: float = 30.0, what: str = "condition"
) -> None:
    """Wait until ``check`` holds (generous: the machine may be loaded)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def ledger_events(js: JetStreamContext, subject: str = "masa.ledger.v1.>") -> list[Any]:
    """Every LedgerEvent in stream MASA_LEDGER on ``subject``, in order."""
    found: list[Any] = []
    seq = 1
    while True:
        try:
            raw = await js.get_msg("MASA_LEDGER", seq=seq, subject=subject, next=True)
        except nats.js.errors.NotFoundError:
            return found
        if raw.seq is None:
            return found
        seq = raw.seq + 1
        found.append(ledger_event_pb2.LedgerEvent.FromString(raw.data or b""))


async def snapshot(store: SqlStore) -> tuple[object, ...]:
    """Everything a refused request must leave as it was."""

    async def read(ex: Executor) -> tuple[object, ...]:
        return (
            await ex.fetch("SELECT * FROM accounts ORDER BY account_id"),
            await ex.fetch("SELECT hold_id, state, table_id, game_no FROM holds ORDER BY hold_id"),
            await ex.fetch("SELECT transfer_id FROM transfers ORDER BY transfer_id"),
            await ex.fetch("SELECT table_id, game_no, state FROM settlements ORDER BY table_id"),
            await ex.fetch("SELECT event_id FROM outbox ORDER BY event_id"),
        )

    return await store._in_transaction(read, write=False)


async def execute(store: SqlStore, sql: str, params: Sequence[object] = ()) -> None:
    """Run a statement directly, bypassing the ledger (to show what the database refuses)."""

    async def run(ex: Executor) -> None:
        await ex.execute(sql, params)

    await store._in_transaction(run, write=True)


async def assert_consistent(store: SqlStore) -> None:
    report = await store.check()
    assert not any(report.counts.values()), {
        name: rows for name, rows in report.examples.items() if rows
    }


class TcpProxy:
    """Forwards TCP to ``127.0.0.1:<target>``, so that a test can cut a service off.

    :meth:`hold_back` keeps every byte the clients send from going on (the connections stay
    open); :meth:`close` drops every connection and stops listening; :meth:`start` listens
    again, on the same port after the first time.
    """

    def __init__(self, target: int) -> None:
        self._target = target
        self._upstream = asyncio.Event()
        self._upstream.set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        self._upstream.set()
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    def hold_back(self) -> None:
        self._upstream.clear()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for writer in list(self._writers):
            writer.close()
        for task in list(self._tasks):
            task.cancel()
        self._tasks.clear()
        self._writers.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._target)
        if self._server is None:
            # Closed while this connection was being made upstream: it is dropped too, or it
            # would outlive the cut (a pool refilling at that moment keeps its database).
            writer.close()
            up_writer.close()
            return
        self._writers |= {writer, up_writer}
        for pump in (
            self._pump(reader, up_writer, self._upstream),
            self._pump(up_reader, writer, None),
        ):
            task = asyncio.get_running_loop().create_task(pump)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pump(
        self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, gate: asyncio.Event | None
    ) -> None:
        try:
            while data := await source.read(65536):
                if gate is not None:
                    await gate.wait()
                sink.write(data)
                await sink.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            sink.close()
