"""Matchmaking's settings, read once from ``MASA_*`` (DESIGN.md §2)."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from pathlib import Path

from masa_platform.settings import PageTokenSettings, PlatformSettings, SettingsError

__all__ = ["MatchmakingSettings"]


@dataclass(frozen=True, slots=True)
class MatchmakingSettings:
    """The platform settings plus matchmaking's own (see services/matchmaking/README.md)."""

    platform: PlatformSettings = field(
        default_factory=lambda: PlatformSettings(service_name="matchmaking")
    )
    # MASA_PAGE_TOKEN_KEY: signs the page tokens of the List calls; production sets it.
    page_tokens: PageTokenSettings = field(default_factory=PageTokenSettings)
    # This instance's name in the lobby leases; empty means <host>-<pid>.
    instance_id: str = ""
    # The lobbies (TOML); empty means the shipped set, masa_matchmaking/lobbies.toml.
    lobbies_file: Path | None = None
    # The ledger, which holds the stakes of chip lobbies; empty serves training lobbies only.
    ledger_address: str = ""
    ledger_timeout_seconds: float = 5.0
    # How long a CreateTable may take on an engine node.
    engine_timeout_seconds: float = 10.0
    # A round of every lobby runs this often (and at once when a full table is possible).
    round_seconds: float = 1.0
    # A lobby's lease lives this long without a renewal (renewed every third of it).
    lease_ttl_seconds: float = 6.0
    # A placement this old whose instance is gone is resumed by the lobby's leader.
    placement_timeout_seconds: float = 30.0
    # How long the holds of a placement may stay unbound.
    hold_ttl_seconds: float = 120.0
    # Failed placements (not the player's fault) before a ticket fails.
    max_requeues: int = 3
    # Closed tickets and players gone quiet are forgotten after this.
    ticket_retention_seconds: float = 7_200.0
    # Development only (make run): chips granted to every player on first sight; 0 grants none.
    dev_welcome_chips: int = 0
    # The table-engine's stream, and matchmaking's durable consumer of its results.
    results_stream: str = "MASA_TABLES"
    results_consumer: str = "matchmaking-ratings"
    # How long matchmaking's own events stay in stream MASA_MATCHMAKING.
    events_max_age_seconds: float = 7 * 86_400.0

    def __post_init__(self) -> None:
        positive = {
            "MASA_LEDGER_TIMEOUT_SECONDS": self.ledger_timeout_seconds,
            "MASA_ENGINE_TIMEOUT_SECONDS": self.engine_timeout_seconds,
            "MASA_ROUND_SECONDS": self.round_seconds,
            "MASA_LEASE_TTL_SECONDS": self.lease_ttl_seconds,
            "MASA_PLACEMENT_TIMEOUT_SECONDS": self.placement_timeout_seconds,
            "MASA_HOLD_TTL_SECONDS": self.hold_ttl_seconds,
            "MASA_TICKET_RETENTION_SECONDS": self.ticket_retention_seconds,
            "MASA_EVENTS_MAX_AGE_SECONDS": self.events_max_age_seconds,
        }
        for name, value in positive.items():
            if value <= 0:
                raise SettingsError(f"{name} must be positive")
        if self.max_requeues < 1:
            raise SettingsError("MASA_MAX_REQUEUES must be at least 1")
        if self.dev_welcome_chips < 0:
            raise SettingsError("MASA_DEV_WELCOME_CHIPS must not be negative")
        if self.placement_timeout_seconds < 2 * (
            self.engine_timeout_seconds + self.ledger_timeout_seconds
        ):
            # A placement is resumed only when its own calls have certainly timed out.
            raise SettingsError(
                "MASA_PLACEMENT_TIMEOUT_SECONDS must be at least twice the engine and ledger "
                "timeouts together"
            )
        if self.ticket_retention_seconds < 3_600:
            raise SettingsError("MASA_TICKET_RETENTION_SECONDS must outlast a ticket (3600 s)")

    @property
    def instance(self) -> str:
        return self.instance_id or f"{socket.gethostname()}-{os.getpid()}"
