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
import logging
import time
from dataclasses import dataclass

from masa_platform.bus import connect
from masa_platform.keys import KeyFileError
from masa_platform.lifecycle import Lifecycle
from masa_platform.loops import supervise
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
    """A running ledger; :meth:`stop` shuts it down in order (its :class:`Lifecycle`)."""

    settings: LedgerSettings
    store: SqlStore
    ledger: Ledger
    server: GrpcServer
    nats: Client
    metrics: PrometheusLedgerMetrics
    relay: OutboxRelay
    lifecycle: Lifecycle

    @property
    def stopping(self) -> asyncio.Event:
        return self.lifecycle.stopping

    @property
    def tasks(self) -> tuple[asyncio.Task[None], ...]:
        return self.lifecycle.tasks

    async def stop(self, grace_seconds: float | None = None) -> None:
        """Stop serving (calls in flight have ``grace_seconds``), stop the tasks, let the
        ledger's writes finish, drain NATS, close the database."""
        await self.lifecycle.stop(grace_seconds)


async def start_ledger(
    settings: LedgerSettings, registry: CollectorRegistry = REGISTRY
) -> LedgerService:
    platform = settings.platform
    verifier = _result_verifier(settings)
    async with Lifecycle(platform.service_name) as life:
        store = await open_store(settings)
        life.closing("database", store.close)
        nc = await connect(
            platform.nats_url,
            name=platform.service_name,
            user=platform.nats_user,
            password=platform.nats_password,
        )
        life.closing("nats", nc.drain)
        loops = LoopMetrics(registry)
        service = _wire(settings, registry, life, (store, nc, verifier, loops))
        await service.server.start()
        life.draining("grpc", service.server.stop)
        _start_loops(settings, registry, service, (verifier, loops))
        life.detach()
    _log.info(
        "ledger serving",
        extra={
            "grpc_address": service.server.address,
            "database": _redacted(settings.database_url),
        },
    )
    return service


def _wire(
    settings: LedgerSettings,
    registry: CollectorRegistry,
    life: Lifecycle,
    opened: tuple[SqlStore, Client, ResultVerifier, LoopMetrics],
) -> LedgerService:
    """The use cases over the opened store and NATS connection, behind a bound gRPC server."""
    store, nc, verifier, loops = opened
    platform = settings.platform
    metrics = PrometheusLedgerMetrics(registry)
    relay = OutboxRelay(nc.jetstream(), store, metrics, loops)
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
    life.closing("ledger writes", ledger.drain)
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
    return LedgerService(settings, store, ledger, server, nc, metrics, relay, life)


def _start_loops(
    settings: LedgerSettings,
    registry: CollectorRegistry,
    service: LedgerService,
    shared: tuple[ResultVerifier, LoopMetrics],
) -> None:
    """The settlement consumer, the outbox relay and the supervised periodic loops."""
    verifier, loops = shared
    life, store, server, metrics = service.lifecycle, service.store, service.server, service.metrics
    stopping = life.stopping
    consumer = ResultsConsumer(
        service.nats.jetstream(),
        service.ledger,
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

    life.spawn(consumer.run(stopping), name="ledger-results")
    life.spawn(service.relay.run(stopping), name="ledger-outbox")
    for loop, step, seconds, task in (
        ("hold_expiry", service.ledger.expire_due, settings.expiry_interval_seconds, "expiry"),
        ("invariant_check", check, settings.check_interval_seconds, "check"),
        ("prune", prune, _PRUNE_SECONDS, "prune"),
        ("health_probe", probe, _HEALTH_SECONDS, "health"),
    ):
        life.spawn(
            supervise(loop, step, interval_seconds=seconds, stop=stopping, metrics=loops),
            name=f"ledger-{task}",
        )


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
