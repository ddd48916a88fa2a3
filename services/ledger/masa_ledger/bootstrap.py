"""Wire the ledger: the store, NATS, the use cases, gRPC and the background tasks.

:func:`start_ledger` is what ``python -m masa_ledger`` runs and what integration tests start
in-process. It opens the database (applying its migrations), connects to NATS, makes sure the
ledger's event stream exists, serves gRPC (health, reflection, auth, errors, request_id
de-duplication, metrics) and starts the tasks: the settlement consumer, the outbox relay, the
expiry of unbound holds, the periodic invariant check, the pruning of old outbox and inbox rows,
and a health probe that reports NOT_SERVING while the database cannot be reached.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field

from masa_platform.bus import connect
from masa_platform.keys import KeyFileError
from masa_platform.metrics import ConsumerMetrics, GrpcMetrics, LoopMetrics
from masa_platform.page_tokens import PageTokens
from masa_platform.quotas import caller_quotas
from masa_platform.server import GrpcServer, create_server, standard_interceptors
from masa_platform.settings import SettingsError
from masa_platform.signing import ResultVerifier
from nats.aio.client import Client
from prometheus_client import REGISTRY, CollectorRegistry

from masa_ledger.adapters.bus import (
    JetStreamResultLog,
    OutboxRelay,
    ResultsConsumer,
)
from masa_ledger.adapters.convert import encode_event
from masa_ledger.adapters.grpc_api import UNCACHED, LedgerServicer, auth_policy, registration
from masa_ledger.adapters.metrics import PrometheusLedgerMetrics
from masa_ledger.adapters.postgres_store import PostgresStore
from masa_ledger.adapters.sql import SqlStore
from masa_ledger.adapters.sqlite_store import SqliteStore
from masa_ledger.app.background import every
from masa_ledger.app.check import run_check
from masa_ledger.app.holds import HoldPolicy
from masa_ledger.app.ledger import Ledger
from masa_ledger.settings import LedgerSettings, sqlite_path

__all__ = ["LedgerService", "open_store", "start_ledger"]

_log = logging.getLogger(__name__)
_HEALTH_SECONDS = 2.0
_PRUNE_SECONDS = 600.0


async def open_store(settings: LedgerSettings, *, create: bool = True) -> SqlStore:
    """The database of ``MASA_DATABASE_URL``, migrated to the current schema; a SQLite file
    is made when missing unless ``create`` is False (``FileNotFoundError`` then)."""
    path = sqlite_path(settings.database_url)
    if path is not None:
        return await SqliteStore.open(path, create=create)
    return await PostgresStore.open(settings.database_url, max_size=settings.database_pool_size)


@dataclass(slots=True)
class LedgerService:
    """A running ledger; :meth:`stop` shuts it down in order."""

    settings: LedgerSettings
    store: SqlStore
    ledger: Ledger
    server: GrpcServer
    nats: Client
    metrics: PrometheusLedgerMetrics
    relay: OutboxRelay
    stopping: asyncio.Event
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def stop(self, grace_seconds: float | None = None) -> None:
        await self.server.stop(grace_seconds)
        self.stopping.set()
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.ledger.drain()
        with contextlib.suppress(Exception):
            await self.nats.drain()
        await self.store.close()


async def start_ledger(
    settings: LedgerSettings, registry: CollectorRegistry = REGISTRY
) -> LedgerService:
    platform = settings.platform
    verifier = _result_verifier(settings)
    store = await open_store(settings)
    try:
        nc = await connect(
            platform.nats_url,
            name=platform.service_name,
            user=platform.nats_user,
            password=platform.nats_password,
        )
    except Exception:
        await store.close()
        raise
    js = nc.jetstream()
    metrics = PrometheusLedgerMetrics(registry)
    loops = LoopMetrics(registry)
    relay = OutboxRelay(js, store, metrics, loops)
    ledger = Ledger(
        store,
        encode_event,
        metrics,
        results=JetStreamResultLog(nc, verifier),
        policy=HoldPolicy(
            default_ttl_seconds=settings.hold_ttl_seconds,
            max_ttl_seconds=settings.hold_max_ttl_seconds,
        ),
        on_commit=relay.wake,
        welcome_chips=settings.dev_welcome_chips,
    )
    server = create_server(
        platform.server,
        [registration(LedgerServicer(ledger, PageTokens(settings.page_tokens.key())))],
        tls=platform.tls,
        interceptors=standard_interceptors(
            platform.auth,
            policy=auth_policy(),
            metrics=GrpcMetrics(registry),
            uncached=UNCACHED,
            quotas=caller_quotas(platform.server.quotas, registry),
        ),
    )
    stopping = asyncio.Event()
    service = LedgerService(settings, store, ledger, server, nc, metrics, relay, stopping)
    consumer = ResultsConsumer(
        js,
        ledger,
        verifier,
        fetch_seconds=settings.results_fetch_seconds,
        metrics=ConsumerMetrics(registry),
    )

    async def check() -> None:
        report = await run_check(store)
        metrics.checked(report, time.time())
        if not report.ok:
            _log.error("ledger invariant violated", extra={"check": report.to_json()})

    async def prune() -> None:
        now = time.time()
        await store.prune(
            published_before=now - settings.outbox_retention_seconds,
            received_before=now - settings.inbox_retention_seconds,
        )

    async def probe() -> None:
        try:
            await store.ping()
        except Exception:
            await server.set_serving(False)
            raise
        await server.set_serving(True)

    await server.start()
    loop = asyncio.get_running_loop()
    service.tasks = [
        loop.create_task(consumer.run(stopping), name="ledger-results"),
        loop.create_task(relay.run(stopping), name="ledger-outbox"),
        loop.create_task(
            every(
                settings.expiry_interval_seconds,
                loops.timed("hold_expiry", ledger.expire_due),
                stopping,
                name="expiry",
            ),
            name="ledger-expiry",
        ),
        loop.create_task(
            every(
                settings.check_interval_seconds,
                loops.timed("invariant_check", check),
                stopping,
                name="check",
            ),
            name="ledger-check",
        ),
        loop.create_task(
            every(_PRUNE_SECONDS, loops.timed("prune", prune), stopping, name="prune"),
            name="ledger-prune",
        ),
        loop.create_task(
            every(_HEALTH_SECONDS, loops.timed("health_probe", probe), stopping, name="health"),
            name="ledger-health",
        ),
    ]
    _log.info(
        "ledger serving",
        extra={"grpc_address": server.address, "database": _redacted(settings.database_url)},
    )
    return service


def _result_verifier(settings: LedgerSettings) -> ResultVerifier:
    """The engines' results keys: the ledger pays nothing it cannot verify, so it needs them."""
    path = settings.result_keys_file
    if path is None:
        raise SettingsError(
            "MASA_RESULT_KEYS_FILE is unset: the ledger pays no result it cannot verify"
        )
    try:
        return ResultVerifier(path)
    except KeyFileError as error:
        raise SettingsError(f"MASA_RESULT_KEYS_FILE: {error}") from None


def _redacted(url: str) -> str:
    """The database URL without a password."""
    scheme, _, rest = url.partition("://")
    credentials, at, host = rest.rpartition("@")
    if not at:
        return url
    user = credentials.split(":", 1)[0]
    return f"{scheme}://{user}@{host}"
