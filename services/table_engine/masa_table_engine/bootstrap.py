"""Wiring of one table-engine node: the use cases with their adapters, behind the gRPC server.

:func:`start_node` is what ``python -m masa_table_engine`` runs, and what integration tests
start in-process: the gRPC server (health, reflection, auth, errors, request_id
de-duplication, metrics, a small received-message limit), the bot and ledger clients, and the
node's :class:`Stores`: on NATS JetStream (:func:`jetstream_stores`, with this service's own
NATS user: the table stream, the snapshot, index, lease and node buckets) unless the caller
passes others (the in-memory ones of :mod:`~masa_table_engine.adapters.memory` in tests). The
server starts first and answers health with NOT_SERVING while the node recovers its unfinished
tables; table calls are UNAVAILABLE until then. Then the health monitor keeps health true
(NOT_SERVING while the stores do not answer or a table is frozen), the node advertises itself
in the engine-node registry and looks for tables to take over.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final, Protocol

import nats.errors
from masa.table.v1 import admin_pb2_grpc, table_pb2_grpc
from masa_platform.acks import AckedPublisher
from masa_platform.auth import AuthPolicy, Role, ServiceTokens, TokenSigner
from masa_platform.bus import KvBucket, Leases, connect
from masa_platform.idempotency import IdempotencyCache
from masa_platform.keys import RESULTS, KeyFileError, load_mac_keys, load_signing_key
from masa_platform.lifecycle import Lifecycle
from masa_platform.metrics import GrpcMetrics, LoopMetrics
from masa_platform.plugins import load_game_plugins
from masa_platform.quotas import caller_quotas
from masa_platform.server import (
    GrpcServer,
    ServiceRegistration,
    create_server,
    standard_interceptors,
)
from masa_platform.settings import SettingsError
from masa_platform.signing import ResultSigner, Sealer
from masa_platform.tls import open_channel
from nats.aio.client import Client
from prometheus_client import REGISTRY, CollectorRegistry

from masa_table_engine.adapters.admin_api import TableAdminServicer
from masa_table_engine.adapters.bot_client import GrpcDecider
from masa_table_engine.adapters.grpc_api import TABLE_SPECTATORS, TableServicer
from masa_table_engine.adapters.health import HealthMonitor
from masa_table_engine.adapters.jetstream import (
    INDEX_BUCKET,
    LEASE_BUCKET,
    SNAPSHOT_BUCKET,
    STREAM,
    JetStreamDirectory,
    JetStreamLog,
    JetStreamResults,
    KvOwnership,
)
from masa_table_engine.adapters.ledger_client import GrpcStakeBinder
from masa_table_engine.adapters.metrics import PrometheusMetrics
from masa_table_engine.adapters.registry import ENGINE_NODES_BUCKET, NodeRegistry
from masa_table_engine.app.ports import (
    Clock,
    Directory,
    LogStore,
    LogUnavailable,
    Ownership,
    ResultPublisher,
    SystemClock,
)
from masa_table_engine.app.runtime import Deps, RuntimeSettings
from masa_table_engine.app.tables import NodeLeaving, RecoveryReport, Tables
from masa_table_engine.domain.table import TimerPolicy
from masa_table_engine.settings import EngineSettings

__all__ = [
    "Advertiser",
    "LeaseKeeper",
    "Node",
    "Stores",
    "StoresFactory",
    "jetstream_stores",
    "start_node",
]

_log = logging.getLogger(__name__)

SERVICE = "masa.table.v1.TableService"
ADMIN_SERVICE = "masa.table.v1.TableAdminService"
# How long a starting node keeps asking for its stream and buckets (made by masa-bus provision).
_STORAGE_SECONDS: Final = 60.0


class Advertiser(Protocol):
    """This node in the engine-node registry (:class:`NodeRegistry`)."""

    async def start(self) -> None: ...

    async def advertise(self) -> None: ...

    async def drain(self) -> None: ...

    async def resume(self) -> None: ...

    async def stop(self) -> None: ...


class LeaseKeeper(Ownership, Protocol):
    """Leases renewed in the background; ``on_lost`` hears of one another node took."""

    on_lost: Callable[[str], Awaitable[None]] | None

    async def close(self) -> None: ...


@dataclass(slots=True)
class Stores:
    """Where a node keeps its tables, says where it is, and how health probes them."""

    log: LogStore
    results: ResultPublisher
    ownership: LeaseKeeper
    directory: Directory
    registry: Callable[[Tables], Advertiser]
    probe: Callable[[], Awaitable[None]]
    close: Callable[[], Awaitable[None]]
    clock: Clock = field(default_factory=SystemClock)


@dataclass(slots=True)
class Node:
    """A running node; :meth:`drain` hands its tables over, :meth:`stop` shuts it down."""

    settings: EngineSettings
    server: GrpcServer
    tables: Tables
    stores: Stores
    health: HealthMonitor
    address: str
    recovery: RecoveryReport
    registry: Advertiser
    # What stopping the node runs, in order (registered by _started).
    life: Lifecycle
    stopped: bool = False
    # Drained to stop (SIGTERM): no operator's ResumeNode brings the node back.
    leaving: bool = False
    # One drain or resume at a time: an operator's DrainNode, ResumeNode and SIGTERM may come
    # together.
    _drain_lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def drain(self, *, leaving: bool = False) -> int:
        """Take no new table and hand every table over to the other nodes (SIGTERM does this
        before :meth:`stop`, with ``leaving``; an operator's DrainNode without stopping): a
        final snapshot each, then the lease released, so that another node takes it at once
        instead of after the lease's expiry. From then on health says NOT_SERVING. How many
        tables it handed over (none when drained already)."""
        if leaving:
            self.leaving = True
        async with self._drain_lock:
            await self.registry.drain()
            handed = await self.tables.drain()
            await self.health.check()
            await self.registry.advertise()
            return handed

    async def resume(self) -> bool:
        """Return a node an operator drained to service (ResumeNode): it makes new tables and
        takes tables over again, the registry says it is live, and health says SERVING again
        (while NATS answers and no table is frozen). False when it was not drained; raises
        :class:`NodeLeaving` once SIGTERM drained it to stop."""
        async with self._drain_lock:
            if self.leaving or self.stopped:
                raise NodeLeaving("the node is stopping (SIGTERM); start it again instead")
            if not self.tables.resume():
                return False
            await self.registry.resume()
            await self.health.check()
            return True

    async def void_table(self, table_id: str, details: str) -> None:
        """End a stuck table this node serves without a ranking: ``GameAbandoned`` is logged
        and published, and the ledger releases its stakes (``TableNotFound`` elsewhere)."""
        await self.tables.void(table_id, details)

    async def stop(self, grace_seconds: float | None = None) -> None:
        """Stop serving; the leases are left to expire (:meth:`drain` first to hand over)."""
        self.stopped = True
        await self.life.stop(grace_seconds)


async def jetstream_stores(settings: EngineSettings, address: str, loops: LoopMetrics) -> Stores:
    """The node's stores on NATS JetStream, as its own NATS user; ``loops`` counts the lease
    renewals and the registry's heartbeats."""
    platform = settings.platform
    nc = await connect(
        platform.nats_url,
        name=settings.node_id,
        user=platform.nats_user,
        password=platform.nats_password,
    )
    js = nc.jetstream()
    signer, sealer = _sealing(settings)
    snapshots, index, leases, nodes = await _storage(nc)
    # A lease and a node's record last as long as their buckets keep an entry.
    lease_seconds = _ttl(leases)
    node_seconds = _ttl(nodes)
    publisher = await AckedPublisher.started(nc, unavailable=LogUnavailable)

    async def probe() -> None:
        await js.account_info()

    def registry(tables: Tables) -> Advertiser:
        return NodeRegistry(
            nodes,
            node_id=settings.node_id,
            address=address,
            version=platform.version,
            capacity=settings.max_tables,
            tables=lambda: tables.served,
            ttl_seconds=node_seconds,
            loops=loops,
        )

    return Stores(
        log=JetStreamLog(
            nc,
            publisher,
            snapshots,
            index,
            node_id=settings.node_id,
            owner_address=address,
            default_turn_seconds=settings.turn_seconds,
            sealer=sealer,
        ),
        results=JetStreamResults(nc, signer),
        ownership=KvOwnership(
            Leases(leases, settings.node_id, publisher=publisher),
            renew_every=lease_seconds / 3,
            loops=loops,
        ),
        directory=JetStreamDirectory(
            index, leases, nodes, node=settings.node_id, node_ttl_seconds=node_seconds
        ),
        registry=registry,
        probe=probe,
        close=lambda: _closed(publisher, nc),
    )


def _sealing(settings: EngineSettings) -> tuple[ResultSigner, Sealer]:
    """The results key and the log's seal key (masa_platform.keys), which only engines hold."""
    signing, sealing = settings.result_signing_key_file, settings.log_mac_key_file
    if signing is None or sealing is None:
        raise SettingsError(
            "MASA_RESULT_SIGNING_KEY_FILE and MASA_LOG_MAC_KEY_FILE must be set: no result is "
            "paid and no table rebuilt without the engines' seals"
        )
    try:
        return ResultSigner(load_signing_key(signing, RESULTS)), Sealer(load_mac_keys(sealing))
    except KeyFileError as error:
        raise SettingsError(str(error)) from None


def _ttl(bucket: KvBucket) -> float:
    if bucket.ttl_seconds is None:
        raise RuntimeError(f"bucket {bucket.bucket} keeps entries for ever: run masa-bus provision")
    return bucket.ttl_seconds


async def _closed(publisher: AckedPublisher, nc: Client) -> None:
    """The ack inbox first (no append is left once the tables are closed), then the bus."""
    await publisher.close()
    await nc.drain()


async def _storage(nc: Client) -> tuple[KvBucket, KvBucket, KvBucket, KvBucket]:
    """The snapshot, index, lease and node buckets, once the table stream is there too.

    The provisioning step makes them (masa-bus provision); a node started before it, or while a
    NATS cluster still agrees on them, asks again for up to ``_STORAGE_SECONDS`` before it
    gives up.
    """
    js = nc.jetstream()
    deadline = time.monotonic() + _STORAGE_SECONDS
    while True:
        try:
            await js.stream_info(STREAM)
            return (
                await KvBucket.open(nc, SNAPSHOT_BUCKET),
                await KvBucket.open(nc, INDEX_BUCKET),
                await KvBucket.open(nc, LEASE_BUCKET),
                await KvBucket.open(nc, ENGINE_NODES_BUCKET),
            )
        except (nats.errors.Error, TimeoutError) as error:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the table stream or buckets are missing ({error!r}): run masa-bus provision"
                ) from error
            _log.warning(
                "the table stream or buckets are not there (%r); run masa-bus provision. "
                "Asking again",
                error,
            )
            await asyncio.sleep(0.5)


StoresFactory = Callable[[EngineSettings, str, LoopMetrics], Awaitable[Stores]]


async def start_node(
    settings: EngineSettings,
    registry: CollectorRegistry = REGISTRY,
    *,
    stores: StoresFactory = jetstream_stores,
) -> Node:
    """Start a node on ``stores`` (JetStream by default), given the node's address."""
    platform = settings.platform
    # Checked before anything starts: a node that must call the bot or the ledger needs its key.
    tokens = _service_tokens(settings)
    # Before the metrics, which list every hosted game from the start.
    load_game_plugins(platform.game_plugins)
    metrics = PrometheusMetrics(registry)
    server_settings = platform.server
    # The servicer exists before the server so that it can be registered; it is bound to the
    # tables once they are recovered (until then every table call is UNAVAILABLE).
    servicer = TableServicer(settings.turn_seconds, max_tables=settings.max_tables)
    admin = TableAdminServicer(settings.node_id, servicer)
    server = create_server(
        server_settings,
        [
            ServiceRegistration(
                SERVICE, lambda s: table_pb2_grpc.add_TableServiceServicer_to_server(servicer, s)
            ),
            ServiceRegistration(
                ADMIN_SERVICE,
                lambda s: admin_pb2_grpc.add_TableAdminServiceServicer_to_server(admin, s),
            ),
        ],
        tls=platform.tls,
        interceptors=standard_interceptors(
            platform.auth,
            policy=auth_policy(),
            metrics=GrpcMetrics(registry),
            idempotency=IdempotencyCache(
                max_entries=server_settings.request_cache_entries,
                max_bytes=server_settings.request_cache_bytes,
                ttl_seconds=server_settings.request_cache_seconds,
            ),
            quotas=caller_quotas(server_settings.quotas, registry, own_quotas=(TABLE_SPECTATORS,)),
        ),
        max_receive_message_bytes=settings.max_request_bytes,
    )
    address = settings.advertise_address or server.address
    async with Lifecycle("table-engine") as life:
        node = await _started(settings, server, servicer, stores, metrics, tokens, life)
        admin.bind(
            node.tables,
            drain=node.drain,
            resume=node.resume,
            address_of=node.stores.directory.address_of,
        )
        life.detach()
    _log.info(
        "table engine serving",
        extra={
            "address": address,
            "node_id": settings.node_id,
            "resumed_tables": node.recovery.resumed,
            "skipped_tables": len(node.recovery.skipped),
            "recovery_seconds": round(node.recovery.seconds, 3),
        },
    )
    return node


async def _started(
    settings: EngineSettings,
    server: GrpcServer,
    servicer: TableServicer,
    stores: StoresFactory,
    metrics: PrometheusMetrics,
    tokens: ServiceTokens | None,
    life: Lifecycle,
) -> Node:
    """The node's parts, each stop registered with ``life`` as it starts: on a start that
    fails, what had started stops (in the order :meth:`Node.stop` gives), and nothing leaks."""
    platform = settings.platform
    address = settings.advertise_address or server.address
    kept = await stores(settings, address, metrics.loops)
    life.closing("stores", kept.close)
    decider = None
    if settings.bot_address and tokens is not None:
        bot_channel = open_channel(settings.bot_address, platform.tls)
        life.closing("bot channel", bot_channel.close)
        decider = GrpcDecider(
            bot_channel,
            tokens,
            owner_address=address,
            timeout_seconds=settings.bot_timeout_seconds,
        )
    stakes = None
    if settings.ledger_address and tokens is not None:
        ledger_channel = open_channel(settings.ledger_address, platform.tls)
        life.closing("ledger channel", ledger_channel.close)
        stakes = GrpcStakeBinder(
            ledger_channel,
            tokens,
            timeout_seconds=settings.ledger_timeout_seconds,
        )
    deps = Deps(
        log=kept.log,
        results=kept.results,
        decider=decider,
        metrics=metrics,
        ownership=kept.ownership,
        clock=kept.clock,
    )
    tables = Tables(
        deps,
        _runtime_settings(settings),
        stakes=stakes,
        directory=kept.directory,
        takeover_scan_seconds=settings.takeover_scan_seconds,
    )
    kept.ownership.on_lost = tables.lease_lost
    life.closing("leases", kept.ownership.close)
    life.closing("tables", tables.close)
    health = HealthMonitor(
        server,
        probe=kept.probe,
        tables=tables,
        metrics=metrics,
        loops=metrics.loops,
        interval=settings.health_check_seconds,
    )
    advertised = kept.registry(tables)
    # Draining first: matchmaking places no new table here while the server drains.
    life.draining("registry", lambda _: advertised.stop())
    life.draining("health", lambda _: health.close())
    life.draining("server", server.stop)
    # Health answers (NOT_SERVING) while the tables come back.
    await server.start(serving=False)
    recovery = await tables.recover()
    servicer.bind(tables, address)
    tables.start_housekeeping()
    await health.check()
    health.start()
    await advertised.start()
    tables.start_takeover()
    return Node(settings, server, tables, kept, health, address, recovery, advertised, life)


def auth_policy() -> AuthPolicy:
    """Who may call what (docs/security.md): players play and watch, matchmaking (and an
    operator) creates tables, operators drain and resume nodes and void tables; nothing
    else."""
    players = frozenset({Role.PLAYER})
    return AuthPolicy(
        allowed={
            f"/{SERVICE}/CreateTable": frozenset({Role.MATCHMAKING, Role.ADMIN}),
            # An operator may look on, as a spectator: no seat's hand is an operator's to read.
            f"/{SERVICE}/GetTable": frozenset({Role.PLAYER, Role.ADMIN}),
            f"/{SERVICE}/WatchTable": frozenset({Role.PLAYER, Role.ADMIN}),
            f"/{SERVICE}/SubmitAction": players,
            f"/{SERVICE}/SubmitActions": players,
            f"/{SERVICE}/ResumeControl": players,
            f"/{SERVICE}/LeaveTable": players,
            ADMIN_SERVICE: frozenset({Role.ADMIN}),
        }
    )


def _service_tokens(settings: EngineSettings) -> ServiceTokens | None:
    """The engine's own token for the bot and the ledger, signed with its identity key; None
    for a node that calls neither."""
    if not (settings.bot_address or settings.ledger_address):
        return None
    auth = settings.platform.auth
    if auth.jwt_key_file is None:
        raise SettingsError(
            "MASA_JWT_KEY_FILE is unset: the table-engine needs its identity key to call the "
            "bot and the ledger"
        )
    return ServiceTokens(
        TokenSigner(load_signing_key(auth.jwt_key_file, Role.TABLE_ENGINE.value), auth)
    )


def _runtime_settings(settings: EngineSettings) -> RuntimeSettings:
    return RuntimeSettings(
        timers=TimerPolicy(
            seat_protection_seconds=settings.seat_protection_seconds,
            query_seconds=settings.query_seconds,
            autopilot_after=settings.autopilot_after_timeouts,
        ),
        snapshot_every=settings.snapshot_every,
        bot_timeout_seconds=settings.bot_timeout_seconds,
        bot_delay_seconds=settings.bot_delay_seconds,
        finished_retention_seconds=settings.finished_retention_seconds,
        history_kept=settings.history_kept,
        max_spectators=settings.max_spectators_per_table,
        watch_backlog=settings.watch_backlog,
        presence_grace_seconds=settings.presence_grace_seconds,
    )
