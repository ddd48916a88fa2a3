"""Matchmaking's settings, read once from ``MASA_*`` (architecture.md)."""

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
    # A placement this old whose instance is gone is resumed by the lobby's leader.
    placement_timeout_seconds: float = 30.0
    # How long the holds of a placement may stay unbound.
    hold_ttl_seconds: float = 120.0
    # Placements refused for a reason a retry will not change (an engine or the ledger refused
    # the table, no node hosts the game) before a ticket fails; an outage never counts.
    max_requeues: int = 3
    # After a placement the system failed (the ledger or the engines did not answer, every node
    # was full), a lobby's rounds pause this long, doubled after each such failure up to the
    # most, and not at all again once a table is seated.
    placement_backoff_seconds: float = 0.5
    placement_backoff_max_seconds: float = 8.0
    # The public keys the table-engines sign results with (a JWK set, masa_platform.keys):
    # ratings move only on results they verify, so matchmaking does not start without them.
    result_keys_file: Path | None = None
    # The lobby leases' life, the tickets' retention and the events' age are the bus plan's
    # (MASA_LOBBY_LEASE_TTL_SECONDS, MASA_TICKET_RETENTION_SECONDS, ... of masa-bus provision),
    # read back from the buckets.

    def __post_init__(self) -> None:
        positive = {
            "MASA_LEDGER_TIMEOUT_SECONDS": self.ledger_timeout_seconds,
            "MASA_ENGINE_TIMEOUT_SECONDS": self.engine_timeout_seconds,
            "MASA_ROUND_SECONDS": self.round_seconds,
            "MASA_PLACEMENT_TIMEOUT_SECONDS": self.placement_timeout_seconds,
            "MASA_HOLD_TTL_SECONDS": self.hold_ttl_seconds,
            "MASA_PLACEMENT_BACKOFF_SECONDS": self.placement_backoff_seconds,
        }
        for name, value in positive.items():
            if value <= 0:
                raise SettingsError(f"{name} must be positive")
        if self.placement_backoff_max_seconds < self.placement_backoff_seconds:
            raise SettingsError(
                "MASA_PLACEMENT_BACKOFF_MAX_SECONDS must be at least MASA_PLACEMENT_BACKOFF_SECONDS"
            )
        if self.max_requeues < 1:
            raise SettingsError("MASA_MAX_REQUEUES must be at least 1")
        if self.placement_timeout_seconds < 2 * (
            self.engine_timeout_seconds + self.ledger_timeout_seconds
        ):
            # A placement is resumed only when its own calls have certainly timed out.
            raise SettingsError(
                "MASA_PLACEMENT_TIMEOUT_SECONDS must be at least twice the engine and ledger "
                "timeouts together"
            )

    @property
    def instance(self) -> str:
        return self.instance_id or f"{socket.gethostname()}-{os.getpid()}"
