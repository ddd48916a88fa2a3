"""Everything masa keeps on NATS JetStream, defined once: streams, KV buckets, durable consumers.

The bus is provisioned, not self-served. No service may create, update, delete or purge a
stream or bucket, or make a durable consumer: nats-server checks a user's subject permissions
when it publishes, but not the destinations of a stream's RePublish rule, Sources or Mirror, so
a user that may update its own stream could copy another's log or write into another's
subjects. The operator's provisioning step (``masa-bus provision``, :mod:`masa_platform.
provision`) applies this plan as the operators' NATS user; ``make run``, the compose file and
the Kubernetes Job all run it before the services start, and the services only bind to what it
made (:mod:`masa_platform.bus_access` grants them nothing more).

The plan's timings are settings of the provisioning step (:class:`BusSettings`, ``MASA_*``):
a bucket's TTL is what a lease or a node record lasts, and the services read it back from the
bucket rather than keeping a copy of their own that could disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from nats.js import api

from masa_platform.bus_access import (
    DEAD_LETTER_STREAM,
    ENGINE_NODES_BUCKET,
    LEDGER_RESULTS_CONSUMER,
    LEDGER_STREAM,
    MATCHMAKING_RESULTS_CONSUMER,
    MATCHMAKING_STREAM,
    RESULTS,
    TABLES_STREAM,
)
from masa_platform.settings import SettingsError

__all__ = [
    "DEAD_LETTER_SUBJECTS",
    "LEASES_BUCKET",
    "LIVE_TABLES_BUCKET",
    "LOBBY_LEASES_BUCKET",
    "RATINGS_BUCKET",
    "SNAPSHOTS_BUCKET",
    "TABLE_INDEX_BUCKET",
    "TICKETS_BUCKET",
    "BucketPlan",
    "BusPlan",
    "BusSettings",
    "ConsumerPlan",
    "bus_plan",
]

SNAPSHOTS_BUCKET: Final = "masa_table_snapshots"
LEASES_BUCKET: Final = "masa_table_leases"
TABLE_INDEX_BUCKET: Final = "masa_table_index"
TICKETS_BUCKET: Final = "masa_matchmaking_tickets"
RATINGS_BUCKET: Final = "masa_matchmaking_ratings"
LOBBY_LEASES_BUCKET: Final = "masa_matchmaking_leases"
LIVE_TABLES_BUCKET: Final = "masa_matchmaking_tables"
DEAD_LETTER_SUBJECTS: Final = "masa.deadletter.v1.>"

_DAY: Final = 86_400.0
# JetStream's duplicate window for streams without a TTL: a republish after a crash within it
# is dropped by Nats-Msg-Id.
_DUPLICATE_WINDOW: Final = 120.0


@dataclass(frozen=True, slots=True)
class BusSettings:
    """The plan's knobs, read by the provisioning step from ``MASA_*``."""

    # Servers of a JetStream cluster that store each stream (3 in production).
    bus_replicas: int = 1
    # A table's lease: how long a dead node's tables stay frozen before another node takes
    # them; the owner renews every third of it. 6 s keeps a killed node's tables frozen about
    # 6.5 s (the lease, a quarter-second scan, the rebuild; the worst table 5.9-6.5 s measured
    # with twenty tables to rebuild, services/table_engine/README), for a renewal every 2 s
    # per table; a node stalled (or cut from NATS) for 4 s loses its tables (same README).
    table_lease_ttl_seconds: float = 6.0
    # An engine node's registry record; the node rewrites it every third of this, and the
    # others take it for dead (and look for its tables) after two thirds without a rewrite:
    # no later than its leases run out.
    engine_node_ttl_seconds: float = 6.0
    # A lobby's lease among matchmaking instances.
    lobby_lease_ttl_seconds: float = 6.0
    # How long a player's ticket record is kept after its last change.
    ticket_retention_seconds: float = 7_200.0
    # A placed table whose end was never heard leaves the lobby's count after this.
    live_table_ttl_seconds: float = _DAY
    ledger_events_max_age_seconds: float = 7 * _DAY
    matchmaking_events_max_age_seconds: float = 7 * _DAY
    # Poison messages set aside for an operator (each service's consumers publish them).
    dead_letter_max_age_seconds: float = 30 * _DAY
    # And at most this many bytes of them, the oldest dropped first: a flood of poison can
    # cost the bus this much, never more.
    dead_letter_max_bytes: int = 1 << 30
    # A result handed to a consumer and neither acked nor nak'ed comes back after this.
    results_ack_wait_seconds: float = 30.0
    # Deliveries of one result before its consumer gives up and sets it aside; with the
    # consumers' back-off (up to a minute between tries) the default is about a day.
    results_max_deliver: int = 1_500

    def __post_init__(self) -> None:
        if not 1 <= self.bus_replicas <= 5:
            raise SettingsError("MASA_BUS_REPLICAS must be between 1 and 5")
        positive = {
            "MASA_TABLE_LEASE_TTL_SECONDS": self.table_lease_ttl_seconds,
            "MASA_ENGINE_NODE_TTL_SECONDS": self.engine_node_ttl_seconds,
            "MASA_LOBBY_LEASE_TTL_SECONDS": self.lobby_lease_ttl_seconds,
            "MASA_LIVE_TABLE_TTL_SECONDS": self.live_table_ttl_seconds,
            "MASA_LEDGER_EVENTS_MAX_AGE_SECONDS": self.ledger_events_max_age_seconds,
            "MASA_MATCHMAKING_EVENTS_MAX_AGE_SECONDS": self.matchmaking_events_max_age_seconds,
            "MASA_DEAD_LETTER_MAX_AGE_SECONDS": self.dead_letter_max_age_seconds,
            "MASA_RESULTS_ACK_WAIT_SECONDS": self.results_ack_wait_seconds,
        }
        for name, value in positive.items():
            if not 0 < value <= 366 * _DAY:
                raise SettingsError(f"{name} must be positive and at most a year")
        # A lease or a record renewed every third of its TTL must outlive a slow renewal.
        for name, value in (
            ("MASA_TABLE_LEASE_TTL_SECONDS", self.table_lease_ttl_seconds),
            ("MASA_ENGINE_NODE_TTL_SECONDS", self.engine_node_ttl_seconds),
            ("MASA_LOBBY_LEASE_TTL_SECONDS", self.lobby_lease_ttl_seconds),
        ):
            if value < 1.0:
                raise SettingsError(f"{name} must be at least 1 second")
        if self.ticket_retention_seconds < 3_600:
            raise SettingsError("MASA_TICKET_RETENTION_SECONDS must be at least an hour")
        if not 2 <= self.results_max_deliver <= 100_000:
            raise SettingsError("MASA_RESULTS_MAX_DELIVER must be between 2 and 100000")
        if not 1 << 20 <= self.dead_letter_max_bytes <= 1 << 40:
            raise SettingsError("MASA_DEAD_LETTER_MAX_BYTES must be between 1 MiB and 1 TiB")


@dataclass(frozen=True, slots=True)
class BucketPlan:
    """A KV bucket: its name, the TTL of every entry (``None``: kept), and its history."""

    bucket: str
    ttl_seconds: float | None = None
    history: int = 1

    @property
    def stream(self) -> str:
        return f"KV_{self.bucket}"


@dataclass(frozen=True, slots=True)
class ConsumerPlan:
    """A durable pull consumer that one service reads."""

    stream: str
    config: api.ConsumerConfig

    @property
    def name(self) -> str:
        return str(self.config.durable_name)


@dataclass(frozen=True, slots=True)
class BusPlan:
    streams: tuple[api.StreamConfig, ...]
    buckets: tuple[BucketPlan, ...]
    consumers: tuple[ConsumerPlan, ...]

    def stream_configs(self) -> tuple[api.StreamConfig, ...]:
        """Every stream, the buckets' own included, as JetStream is asked to hold it."""
        return (*self.streams, *(bucket_stream(bucket, self) for bucket in self.buckets))

    @property
    def replicas(self) -> int:
        return int(self.streams[0].num_replicas or 1)


def bus_plan(settings: BusSettings | None = None) -> BusPlan:
    """The whole bus for ``settings`` (the defaults of ``make run`` when none)."""
    s = settings or BusSettings()
    replicas = s.bus_replicas

    def stream(
        name: str,
        subjects: list[str],
        *,
        max_age: float | None = None,
        max_bytes: int | None = None,
    ) -> api.StreamConfig:
        return api.StreamConfig(
            name=name,
            subjects=subjects,
            storage=api.StorageType.FILE,
            num_replicas=replicas,
            max_age=max_age,
            max_bytes=max_bytes,
            duplicate_window=_DUPLICATE_WINDOW,
            # Reads go through the direct-get API, which needs no consumer (bus_access).
            allow_direct=True,
            deny_delete=True,
        )

    return BusPlan(
        streams=(
            # No age limit: a live table's log is its state. Finished tables are swept once
            # their result is settled (masa-bus sweep).
            stream(TABLES_STREAM, ["masa.table.v1.*.log", RESULTS]),
            stream(LEDGER_STREAM, ["masa.ledger.v1.>"], max_age=s.ledger_events_max_age_seconds),
            stream(
                MATCHMAKING_STREAM,
                ["masa.matchmaking.v1.>"],
                max_age=s.matchmaking_events_max_age_seconds,
            ),
            stream(
                DEAD_LETTER_STREAM,
                [DEAD_LETTER_SUBJECTS],
                max_age=s.dead_letter_max_age_seconds,
                max_bytes=s.dead_letter_max_bytes,
            ),
        ),
        buckets=(
            BucketPlan(SNAPSHOTS_BUCKET),
            BucketPlan(LEASES_BUCKET, ttl_seconds=s.table_lease_ttl_seconds),
            BucketPlan(TABLE_INDEX_BUCKET),
            BucketPlan(ENGINE_NODES_BUCKET, ttl_seconds=s.engine_node_ttl_seconds),
            BucketPlan(TICKETS_BUCKET, ttl_seconds=s.ticket_retention_seconds),
            BucketPlan(RATINGS_BUCKET),
            BucketPlan(LOBBY_LEASES_BUCKET, ttl_seconds=s.lobby_lease_ttl_seconds),
            BucketPlan(LIVE_TABLES_BUCKET, ttl_seconds=s.live_table_ttl_seconds),
        ),
        consumers=tuple(
            ConsumerPlan(
                TABLES_STREAM,
                api.ConsumerConfig(
                    durable_name=name,
                    deliver_policy=api.DeliverPolicy.ALL,
                    ack_policy=api.AckPolicy.EXPLICIT,
                    ack_wait=s.results_ack_wait_seconds,
                    max_deliver=s.results_max_deliver,
                    max_ack_pending=1024,
                    filter_subject=RESULTS,
                    num_replicas=replicas,
                ),
            )
            for name in (LEDGER_RESULTS_CONSUMER, MATCHMAKING_RESULTS_CONSUMER)
        ),
    )


def bucket_stream(bucket: BucketPlan, plan: BusPlan) -> api.StreamConfig:
    """The stream behind a KV bucket, as nats-py's ``create_key_value`` would make it, with
    per-message TTLs allowed (a removed key's marker expires: :meth:`KvBucket.forget`)."""
    duplicate_window = _DUPLICATE_WINDOW
    if bucket.ttl_seconds is not None:
        duplicate_window = min(duplicate_window, bucket.ttl_seconds)
    return api.StreamConfig(
        name=bucket.stream,
        subjects=[f"$KV.{bucket.bucket}.>"],
        allow_direct=True,
        allow_rollup_hdrs=True,
        allow_msg_ttl=True,
        deny_delete=True,
        discard=api.DiscardPolicy.NEW,
        duplicate_window=duplicate_window,
        max_age=bucket.ttl_seconds,
        max_consumers=-1,
        max_msgs=-1,
        max_msgs_per_subject=bucket.history,
        num_replicas=plan.replicas,
        storage=api.StorageType.FILE,
    )
