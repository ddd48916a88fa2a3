"""The ledger's settings, read once from ``MASA_*`` (architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from masa_platform.settings import PageTokenSettings, PlatformSettings, SettingsError

__all__ = ["LedgerSettings", "sqlite_path"]


@dataclass(frozen=True, slots=True)
class LedgerSettings:
    """The platform settings plus the ledger's own (see services/ledger/README.md)."""

    platform: PlatformSettings = field(default_factory=PlatformSettings)
    # MASA_PAGE_TOKEN_KEY: signs the page tokens of the List calls; production sets it.
    page_tokens: PageTokenSettings = field(default_factory=PageTokenSettings)
    # sqlite:///relative/path, sqlite:////absolute/path, or postgresql://user@host/db.
    database_url: str = "sqlite:///.masa/ledger.sqlite3"
    database_pool_size: int = 16
    # How long an unbound hold lives when HoldStake names no ttl, and the longest it may.
    hold_ttl_seconds: float = 600.0
    hold_max_ttl_seconds: float = 86_400.0
    # How often unbound holds past their expiry are voided.
    expiry_interval_seconds: float = 1.0
    # How often the invariant check runs and its metrics are refreshed.
    check_interval_seconds: float = 60.0
    # Published outbox rows and consumed inbox rows are forgotten after these; settlements,
    # holds and transfers are kept for ever.
    outbox_retention_seconds: float = 86_400.0
    inbox_retention_seconds: float = 7 * 86_400.0
    # Development only (make run): the chips a player the ledger has no wallet of gets at its
    # first look at its chips or its first stake; 0 grants none.
    dev_welcome_chips: int = 0
    # The public keys the table-engines sign results with (a JWK set, masa_platform.keys): the
    # ledger pays no result they do not verify, so it does not start without them.
    result_keys_file: Path | None = None
    # How long one fetch from the results consumer waits for a result. The consumer itself,
    # its ack wait and its redeliveries are the bus plan's (masa-bus provision).
    results_fetch_seconds: float = 1.0

    def __post_init__(self) -> None:
        if not self.database_url.startswith(("sqlite:///", "postgresql://", "postgres://")):
            raise SettingsError("MASA_DATABASE_URL must be sqlite:///<path> or postgresql://<dsn>")
        positive = {
            "MASA_DATABASE_POOL_SIZE": self.database_pool_size,
            "MASA_HOLD_TTL_SECONDS": self.hold_ttl_seconds,
            "MASA_EXPIRY_INTERVAL_SECONDS": self.expiry_interval_seconds,
            "MASA_CHECK_INTERVAL_SECONDS": self.check_interval_seconds,
            "MASA_OUTBOX_RETENTION_SECONDS": self.outbox_retention_seconds,
            "MASA_INBOX_RETENTION_SECONDS": self.inbox_retention_seconds,
            "MASA_RESULTS_FETCH_SECONDS": self.results_fetch_seconds,
        }
        for name, value in positive.items():
            if value <= 0:
                raise SettingsError(f"{name} must be positive")
        if not 0 <= self.dev_welcome_chips <= 1_000_000:
            raise SettingsError("MASA_DEV_WELCOME_CHIPS must be 0 to 1000000")
        if self.hold_max_ttl_seconds < self.hold_ttl_seconds:
            raise SettingsError("MASA_HOLD_MAX_TTL_SECONDS must be at least MASA_HOLD_TTL_SECONDS")


def sqlite_path(database_url: str) -> Path | None:
    """The file of a sqlite:/// URL (three slashes and a relative path, four for an absolute
    one); None for a PostgreSQL URL."""
    if not database_url.startswith("sqlite:///"):
        return None
    return Path(database_url.removeprefix("sqlite:///"))
