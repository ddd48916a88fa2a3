"""Settings and wiring of one table-engine node: real adapters around the use cases.

:func:`start_node` is what ``python -m masa_table_engine`` runs, and what integration tests
start in-process: NATS and JetStream (with this service's own NATS user), the snapshot, lease
and index buckets, the bot client, the gRPC server (health, reflection, auth, errors,
request_id de-duplication, metrics, a small received-message limit). The server starts first
and answers health with NOT_SERVING while the node recovers its unfinished tables; table calls
are UNAVAILABLE until then. Then the health monitor keeps health true (NOT_SERVING while NATS
does not answer or a table is frozen).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Final

import grpc.aio
from masa.table.v1 import table_pb2_grpc
from masa_platform.auth import INTERNAL_ROLES, AuthPolicy
from masa_platform.bus import KvBucket, Leases, connect
from masa_platform.idempotency import IdempotencyCache
from masa_platform.metrics import GrpcMetrics, LoopMetrics
from masa_platform.server import (
    GrpcServer,
    ServiceRegistration,
    create_server,
    standard_interceptors,
)
from masa_platform.settings import PlatformSettings, SettingsError
from masa_platform.tls import open_channel
from nats.aio.client import Client
from prometheus_client import REGISTRY, CollectorRegistry

from masa_table_engine.adapters.bot_client import GrpcDecider
from masa_table_engine.adapters.grpc_api import TableServicer
from masa_table_engine.adapters.health import HealthMonitor
from masa_table_engine.adapters.jetstream import (
    INDEX_BUCKET,
    LEASE_BUCKET,
    SNAPSHOT_BUCKET,
    JetStreamLog,
    JetStreamResults,
    KvOwnership,
    ensure_table_stream,
)
from masa_table_engine.adapters.ledger_client import GrpcStakeBinder
from masa_table_engine.adapters.metrics import PrometheusMetrics
from masa_table_engine.adapters.registry import NodeRegistry
from masa_table_engine.app.runtime import Deps, RuntimeSettings
from masa_table_engine.app.tables import RecoveryReport, Tables
from masa_table_engine.domain.table import TimerPolicy

__all__ = ["EngineSettings", "Node", "start_node"]

_log = logging.getLogger(__name__)

SERVICE = "masa.table.v1.TableService"
# A node id is a NATS subject token and part of KV keys.
NODE_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True, slots=True)
class EngineSettings:
    """Everything a node reads from ``MASA_*`` (the platform's variables plus these)."""

    platform: PlatformSettings = field(
        default_factory=lambda: PlatformSettings(service_name="table-engine")
    )
    # This node's identity: its leases and snapshots name it, and a restart with the same id
    # resumes its tables.
    node_id: str = "table-engine-0"
    # The host:port clients dial for this node's tables; empty means the bound gRPC address.
    advertise_address: str = ""
    # The bot service; empty plays every bot move with the in-process policy.
    bot_address: str = ""
    bot_timeout_seconds: float = 1.0
    # The ledger, which binds a chip table's stakes (P-30); empty refuses chip tables.
    ledger_address: str = ""
    ledger_timeout_seconds: float = 5.0
    bot_delay_seconds: float = 0.0
    turn_seconds: float = 20.0
    query_seconds: float = 15.0
    seat_protection_seconds: float = 180.0
    autopilot_after_timeouts: int = 3
    snapshot_every: int = 20
    lease_ttl_seconds: float = 15.0
    # The largest request the table API takes: a move is a few hundred bytes, a table's
    # configuration a few kilobytes; anything bigger is refused before it is decoded.
    max_request_bytes: int = 64 * 1024
    # How long a finished table stays in memory for reads and retries of its last moves.
    finished_retention_seconds: float = 30.0
    # The latest entries each table keeps in memory for resuming watchers and retries.
    history_kept: int = 128
    # How often health probes NATS and counts frozen tables.
    health_check_seconds: float = 0.5
    # The engine-node registry: this node's record expires this long after its last rewrite
    # (rewritten every third of it), and says the node takes this many live tables at most.
    node_ttl_seconds: float = 10.0
    max_tables: int = 5_000

    def __post_init__(self) -> None:
        positive = {
            "MASA_TURN_SECONDS": self.turn_seconds,
            "MASA_QUERY_SECONDS": self.query_seconds,
            "MASA_SEAT_PROTECTION_SECONDS": self.seat_protection_seconds,
            "MASA_BOT_TIMEOUT_SECONDS": self.bot_timeout_seconds,
            "MASA_LEDGER_TIMEOUT_SECONDS": self.ledger_timeout_seconds,
            "MASA_LEASE_TTL_SECONDS": self.lease_ttl_seconds,
            "MASA_FINISHED_RETENTION_SECONDS": self.finished_retention_seconds,
            "MASA_HEALTH_CHECK_SECONDS": self.health_check_seconds,
            "MASA_NODE_TTL_SECONDS": self.node_ttl_seconds,
            "MASA_MAX_TABLES": self.max_tables,
        }
        for name, value in positive.items():
            if value <= 0:
                raise SettingsError(f"{name} must be positive")
        if self.snapshot_every < 1 or self.autopilot_after_timeouts < 1:
            raise SettingsError(
                "MASA_SNAPSHOT_EVERY and MASA_AUTOPILOT_AFTER_TIMEOUTS must be >= 1"
            )
        if self.history_kept < 1:
            raise SettingsError("MASA_HISTORY_KEPT must be >= 1")
        if not NODE_ID.fullmatch(self.node_id):
            raise SettingsError(f"MASA_NODE_ID must match {NODE_ID.pattern}")
        if not 1024 <= self.max_request_bytes <= self.platform.server.max_message_bytes:
            raise SettingsError("MASA_MAX_REQUEST_BYTES must be 1 KiB to MASA_MAX_MESSAGE_BYTES")


@dataclass(slots=True)
class Node:
    """A running node; :meth:`stop` shuts it down in order."""

    settings: EngineSettings
    server: GrpcServer
    tables: Tables
    nats: Client
    ownership: KvOwnership
    health: HealthMonitor
    bot_channel: grpc.aio.Channel | None
    address: str
    recovery: RecoveryReport
    ledger_channel: grpc.aio.Channel | None = None
    registry: NodeRegistry | None = None

    async def stop(self, grace_seconds: float | None = None) -> None:
        if self.registry is not None:
            # Draining first: matchmaking places no new table here while the server drains.
            await self.registry.stop()
        await self.health.close()
        await self.server.stop(grace_seconds)
        await self.tables.close()
        await self.ownership.close()
        for channel in (self.bot_channel, self.ledger_channel):
            if channel is not None:
                await channel.close()
        await self.nats.drain()


async def start_node(settings: EngineSettings, registry: CollectorRegistry = REGISTRY) -> Node:
    platform = settings.platform
    nc = await connect(
        platform.nats_url,
        name=settings.node_id,
        user=platform.nats_user,
        password=platform.nats_password,
    )
    js = nc.jetstream()
    await ensure_table_stream(js)
    snapshots = await KvBucket.ensure(js, SNAPSHOT_BUCKET)
    index = await KvBucket.ensure(js, INDEX_BUCKET)
    lease_bucket = await KvBucket.ensure(js, LEASE_BUCKET, ttl_seconds=settings.lease_ttl_seconds)
    ownership = KvOwnership(
        Leases(lease_bucket, settings.node_id), renew_every=settings.lease_ttl_seconds / 3
    )
    metrics = PrometheusMetrics(registry)
    loops = LoopMetrics(registry)
    server_settings = platform.server
    # The servicer exists before the server so that it can be registered; it is bound to the
    # tables once they are recovered (until then every table call is UNAVAILABLE).
    servicer = TableServicer(settings.turn_seconds, max_tables=settings.max_tables)
    server = create_server(
        server_settings,
        [
            ServiceRegistration(
                SERVICE, lambda s: table_pb2_grpc.add_TableServiceServicer_to_server(servicer, s)
            )
        ],
        tls=platform.tls,
        interceptors=standard_interceptors(
            platform.auth,
            policy=AuthPolicy(required_roles={f"/{SERVICE}/CreateTable": INTERNAL_ROLES}),
            metrics=GrpcMetrics(registry),
            idempotency=IdempotencyCache(
                max_entries=server_settings.request_cache_entries,
                max_bytes=server_settings.request_cache_bytes,
                ttl_seconds=server_settings.request_cache_seconds,
            ),
        ),
        max_receive_message_bytes=settings.max_request_bytes,
    )
    address = settings.advertise_address or server.address
    bot_channel = None
    decider = None
    if settings.bot_address:
        bot_channel = open_channel(settings.bot_address, platform.tls)
        decider = GrpcDecider(
            bot_channel,
            platform.auth,
            service_name=settings.node_id,
            owner_address=address,
            timeout_seconds=settings.bot_timeout_seconds,
        )
    log = JetStreamLog(
        js,
        snapshots,
        index,
        node_id=settings.node_id,
        owner_address=address,
        default_turn_seconds=settings.turn_seconds,
    )
    deps = Deps(
        log=log, results=JetStreamResults(js), decider=decider, metrics=metrics, ownership=ownership
    )
    runtime_settings = RuntimeSettings(
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
    )
    ledger_channel = None
    stakes = None
    if settings.ledger_address:
        ledger_channel = open_channel(settings.ledger_address, platform.tls)
        stakes = GrpcStakeBinder(
            ledger_channel,
            platform.auth,
            service_name=settings.node_id,
            timeout_seconds=settings.ledger_timeout_seconds,
        )
    tables = Tables(deps, runtime_settings, stakes=stakes)
    ownership.on_lost = tables.lease_lost

    async def probe() -> None:
        await js.account_info()

    health = HealthMonitor(
        server,
        probe=probe,
        tables=tables,
        metrics=metrics,
        loops=loops,
        interval=settings.health_check_seconds,
    )
    # Health answers (NOT_SERVING) while the tables come back.
    await server.start(serving=False)
    recovery = await tables.recover()
    servicer.bind(tables, address)
    tables.start_housekeeping()
    await health.check()
    health.start()
    advertised = await NodeRegistry.open(
        js,
        node_id=settings.node_id,
        address=address,
        version=platform.version,
        capacity=settings.max_tables,
        tables=lambda: tables.active,
        ttl_seconds=settings.node_ttl_seconds,
    )
    await advertised.start()
    _log.info(
        "table engine serving",
        extra={
            "address": address,
            "node_id": settings.node_id,
            "resumed_tables": recovery.resumed,
            "skipped_tables": len(recovery.skipped),
            "recovery_seconds": round(recovery.seconds, 3),
        },
    )
    return Node(
        settings,
        server,
        tables,
        nc,
        ownership,
        health,
        bot_channel,
        address,
        recovery,
        ledger_channel,
        advertised,
    )
