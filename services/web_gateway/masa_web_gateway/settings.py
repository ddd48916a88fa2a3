"""The gateway's settings, read once from ``MASA_*`` (docs/architecture.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from masa_platform.settings import PlatformSettings, SettingsError

__all__ = ["GatewaySettings"]

_ADDRESS: Final = re.compile(r"[A-Za-z0-9.\-\[\]:]{1,253}:[0-9]{1,5}")
_ORIGIN: Final = re.compile(r"https?://[A-Za-z0-9.\-\[\]:]{1,253}(:[0-9]{1,5})?")
_MAX_REQUEST_BYTES: Final = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class GatewaySettings:
    """The platform settings (metrics, TLS to the services, log level) plus the gateway's own.

    ``table_addresses`` are the table-engine nodes the gateway asks first: a table's calls
    follow ``TABLE_MOVED`` only to one of them or to an address ``table_address_pattern``
    matches whole, so that no answer can send the gateway to an address of an attacker's
    choosing. ``cors_origins`` are the other origins whose pages may
    call the APIs (the gateway's own page needs none). ``dev_issuer_key_file`` (development
    only, as ``make run`` sets it) turns on ``POST /dev/token``; a deployment leaves it unset.
    """

    platform: PlatformSettings = field(default_factory=PlatformSettings)
    http_host: str = "127.0.0.1"
    http_port: int = 8080
    matchmaking_address: str = "127.0.0.1:50054"
    ledger_address: str = "127.0.0.1:50053"
    table_addresses: tuple[str, ...] = ("127.0.0.1:50051",)
    # Further table-engine nodes a TABLE_MOVED may name, as a regular expression an address
    # must match whole (an autoscaled StatefulSet's pods); empty: the list above only.
    table_address_pattern: str = ""
    # The built web client (clients/web/dist); unset serves the APIs only.
    web_root: Path | None = None
    cors_origins: tuple[str, ...] = ()
    dev_issuer_key_file: Path | None = None
    # Development tokens minted per second, over all callers (a burst of twice as many).
    dev_token_rate: float = 20.0
    # A unary call's longest wait for its service, whatever the client's own deadline.
    call_timeout_seconds: float = 10.0
    # The largest request message: the public APIs take far less.
    max_request_bytes: int = 64 * 1024
    # Streams open at once through this gateway (WatchTable, WatchTicket); past it, refused.
    max_streams: int = 20_000
    # How often the services' health is asked.
    health_interval_seconds: float = 2.0
    # How long /healthz says NOT_SERVING before the listener closes, when the gateway stops:
    # a load balancer's probe period (Kubernetes sets its own).
    drain_seconds: float = 1.0

    def __post_init__(self) -> None:
        if not 1 <= self.http_port <= 65535:
            raise SettingsError(f"MASA_HTTP_PORT: {self.http_port} is not a port number")
        self._check_addresses()
        if not 0 < self.dev_token_rate <= 10_000:
            raise SettingsError("MASA_DEV_TOKEN_RATE must be above 0 and at most 10000")
        if not 0 < self.call_timeout_seconds <= 300:
            raise SettingsError("MASA_CALL_TIMEOUT_SECONDS must be above 0 and at most 300")
        if not 1024 <= self.max_request_bytes <= _MAX_REQUEST_BYTES:
            raise SettingsError(f"MASA_MAX_REQUEST_BYTES must be 1024 to {_MAX_REQUEST_BYTES}")
        if self.max_streams < 1:
            raise SettingsError("MASA_MAX_STREAMS must be at least 1")
        if not 0 <= self.drain_seconds <= 60:
            raise SettingsError("MASA_DRAIN_SECONDS must be 0 to 60")
        if not 0.1 <= self.health_interval_seconds <= 60:
            raise SettingsError("MASA_HEALTH_INTERVAL_SECONDS must be 0.1 to 60")

    def _check_addresses(self) -> None:
        if not self.table_addresses:
            raise SettingsError("MASA_TABLE_ADDRESSES must name at least one table-engine node")
        for address in (self.matchmaking_address, self.ledger_address, *self.table_addresses):
            if not _ADDRESS.fullmatch(address):
                raise SettingsError(f"{address[:80]!r} is not a host:port address")
        if self.table_address_pattern:
            try:
                re.compile(self.table_address_pattern)
            except re.error as error:
                raise SettingsError(f"MASA_TABLE_ADDRESS_PATTERN: {error}") from None
        for origin in self.cors_origins:
            if not _ORIGIN.fullmatch(origin):
                raise SettingsError(
                    f"MASA_CORS_ORIGINS: {origin[:80]!r} is not an origin (scheme://host[:port])"
                )
