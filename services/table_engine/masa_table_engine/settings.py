"""The table-engine's settings, read once from ``MASA_*`` (the platform's variables plus these).

The service README lists each with its default; ``load_settings(EngineSettings)`` reads them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from masa_platform.settings import PlatformSettings, SettingsError
from masa_rules.table_config import DEFAULT_TURN_SECONDS, MAX_TURN_SECONDS, MIN_TURN_SECONDS

__all__ = ["NODE_ID", "EngineSettings"]

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
    # P-10: the turn time of a table whose configuration sets none.
    turn_seconds: float = DEFAULT_TURN_SECONDS
    query_seconds: float = 15.0
    seat_protection_seconds: float = 180.0
    # How long a seat must be without a stream of its player before the log says it is
    # disconnected: reconnections within it write nothing (app/presence.py).
    presence_grace_seconds: float = 2.0
    autopilot_after_timeouts: int = 3
    snapshot_every: int = 20
    # The largest request the table API takes: a move is a few hundred bytes, a table's
    # configuration a few kilobytes; anything bigger is refused before it is decoded.
    max_request_bytes: int = 64 * 1024
    # How long a finished table stays in memory for reads and retries of its last moves.
    finished_retention_seconds: float = 30.0
    # The latest entries each table keeps in memory for resuming watchers and retries.
    history_kept: int = 128
    # Watch streams of callers without a seat at a table, open at once (0: no spectators).
    # Seated players are not counted, so they can always watch their own table.
    max_spectators_per_table: int = 100
    # Updates queued for one watch stream; a reader further behind is let go and resumes.
    watch_backlog: int = 128
    # How often health probes NATS and counts frozen tables.
    health_check_seconds: float = 0.5
    # The most live tables the node takes (its engine-node record says so). How long a lease
    # and the node's record last is the TTL of their buckets, which the bus plan sets
    # (MASA_TABLE_LEASE_TTL_SECONDS, MASA_ENGINE_NODE_TTL_SECONDS of masa-bus provision).
    max_tables: int = 5_000
    # How often the node looks for tables whose node died or drained, to take them over.
    takeover_scan_seconds: float = 1.0
    # The results key (Ed25519, PEM), which signs every result the ledger pays and matchmaking
    # rates from, and the seal key (hex) of the log entries and snapshots: engines alone hold
    # them (masa_platform.keys). A node on JetStream does not start without both.
    result_signing_key_file: Path | None = None
    log_mac_key_file: Path | None = None

    def __post_init__(self) -> None:
        _check_turn_seconds(self.turn_seconds)
        positive = {
            "MASA_QUERY_SECONDS": self.query_seconds,
            "MASA_SEAT_PROTECTION_SECONDS": self.seat_protection_seconds,
            "MASA_BOT_TIMEOUT_SECONDS": self.bot_timeout_seconds,
            "MASA_LEDGER_TIMEOUT_SECONDS": self.ledger_timeout_seconds,
            "MASA_FINISHED_RETENTION_SECONDS": self.finished_retention_seconds,
            "MASA_HEALTH_CHECK_SECONDS": self.health_check_seconds,
            "MASA_MAX_TABLES": self.max_tables,
            "MASA_TAKEOVER_SCAN_SECONDS": self.takeover_scan_seconds,
        }
        for name, value in positive.items():
            if value <= 0:
                raise SettingsError(f"{name} must be positive")
        if self.snapshot_every < 1 or self.autopilot_after_timeouts < 1:
            raise SettingsError(
                "MASA_SNAPSHOT_EVERY and MASA_AUTOPILOT_AFTER_TIMEOUTS must be >= 1"
            )
        if not 0.1 <= self.presence_grace_seconds <= 60:
            # Shorter, a client reconnecting in a loop writes to the log again at will;
            # longer, a player who is gone shows as connected for that long.
            raise SettingsError("MASA_PRESENCE_GRACE_SECONDS must be 0.1 to 60")
        if self.history_kept < 1:
            raise SettingsError("MASA_HISTORY_KEPT must be >= 1")
        if not 0 <= self.max_spectators_per_table <= 100_000:
            raise SettingsError("MASA_MAX_SPECTATORS_PER_TABLE must be 0 to 100,000")
        if not 1 <= self.watch_backlog <= 10_000:
            raise SettingsError("MASA_WATCH_BACKLOG must be 1 to 10,000")
        if not NODE_ID.fullmatch(self.node_id):
            raise SettingsError(f"MASA_NODE_ID must match {NODE_ID.pattern}")
        if not 1024 <= self.max_request_bytes <= self.platform.server.max_message_bytes:
            raise SettingsError("MASA_MAX_REQUEST_BYTES must be 1 KiB to MASA_MAX_MESSAGE_BYTES")


def _check_turn_seconds(seconds: float) -> None:
    """A table's own turn time has these bounds too (P-10, ``masa_rules.table_config``)."""
    if not MIN_TURN_SECONDS <= seconds <= MAX_TURN_SECONDS:
        raise SettingsError(
            f"MASA_TURN_SECONDS must be {MIN_TURN_SECONDS} to {MAX_TURN_SECONDS:.0f} seconds"
        )
