"""Settings and wiring of one table-engine node: real adapters around the use cases.

:func:`start_node` is what ``python -m masa_table_engine`` runs, and what integration tests
start in-process: NATS and JetStream, the snapshot and lease buckets, the bot client, the gRPC
server (health, reflection, auth, errors, request_id de-duplication, metrics), then recovery of
this node's unfinished tables before the server accepts calls.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import grpc.aio
from masa.table.v1 import table_pb2_grpc
from masa_platform.auth import INTERNAL_ROLES, AuthPolicy
from masa_platform.bus import KvBucket, Leases, connect
from masa_platform.metrics import GrpcMetrics
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
from masa_table_engine.adapters.jetstream import (
    LEASE_BUCKET,
    SNAPSHOT_BUCKET,
    JetStreamLog,
    JetStreamResults,
    KvOwnership,
    ensure_table_stream,
)
from masa_table_engine.adapters.ledger_client import GrpcStakeBinder
from masa_table_engine.adapters.metrics import PrometheusMetrics
from masa_table_engine.app.runtime import Deps, RuntimeSettings
from masa_table_engine.app.tables import Tables
from masa_table_engine.domain.table import TimerPolicy

__all__ = ["EngineSettings", "Node", "start_node"]

_log = logging.getLogger(__name__)

SERVICE = "masa.table.v1.TableService"


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

    def __post_init__(self) -> None:
        positive = {
            "MASA_TURN_SECONDS": self.turn_seconds,
            "MASA_QUERY_SECONDS": self.query_seconds,
            "MASA_SEAT_PROTECTION_SECONDS": self.seat_protection_seconds,
            "MASA_BOT_TIMEOUT_SECONDS": self.bot_timeout_seconds,
            "MASA_LEDGER_TIMEOUT_SECONDS": self.ledger_timeout_seconds,
            "MASA_LEASE_TTL_SECONDS": self.lease_ttl_seconds,
        }
        for name, value in positive.items():
            if value <= 0:
                raise SettingsError(f"{name} must be positive")
        if self.snapshot_every < 1 or self.autopilot_after_timeouts < 1:
            raise SettingsError(
                "MASA_SNAPSHOT_EVERY and MASA_AUTOPILOT_AFTER_TIMEOUTS must be >= 1"
            )


@dataclass(slots=True)
class Node:
    """A running node; :meth:`stop` shuts it down in order."""

    settings: EngineSettings
    server: GrpcServer
    tables: Tables
    nats: Client
    ownership: KvOwnership
    bot_channel: grpc.aio.Channel | None
    address: str
    ledger_channel: grpc.aio.Channel | None = None

    async def stop(self, grace_seconds: float | None = None) -> None:
        await self.server.stop(grace_seconds)
        await self.tables.close()
        await self.ownership.close()
        for channel in (self.bot_channel, self.ledger_channel):
            if channel is not None:
                await channel.close()
        await self.nats.drain()


async def start_node(settings: EngineSettings, registry: CollectorRegistry = REGISTRY) -> Node:
    platform = settings.platform
    nc = await connect(platform.nats_url, name=settings.node_id)
    js = nc.jetstream()
    await ensure_table_stream(js)
    snapshots = await KvBucket.ensure(js, SNAPSHOT_BUCKET)
    lease_bucket = await KvBucket.ensure(js, LEASE_BUCKET, ttl_seconds=settings.lease_ttl_seconds)
    ownership = KvOwnership(
        Leases(lease_bucket, settings.node_id), renew_every=settings.lease_ttl_seconds / 3
    )
    metrics = PrometheusMetrics(registry)
    # The servicer exists before the server so that it can be registered; it is bound to the
    # tables once the bound address (which the tables record as their owner) is known.
    servicer = TableServicer(settings.turn_seconds)
    server = create_server(
        platform.server,
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
        ),
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
    servicer.bind(tables, address)
    resumed = await tables.recover()
    await server.start()
    _log.info(
        "table engine serving",
        extra={"address": address, "node_id": settings.node_id, "resumed_tables": resumed},
    )
    return Node(settings, server, tables, nc, ownership, bot_channel, address, ledger_channel)
