"""Configuration read once from ``MASA_*`` environment variables into frozen dataclasses.

A service declares its settings as a frozen dataclass and calls :func:`load_settings` once at
start-up; the result is passed down explicitly (architecture.md). Every field ``name`` is read from
``MASA_NAME``. A field whose type is itself a settings dataclass is read from the same flat
namespace, so ``PlatformSettings.auth.jwt_jwks_file`` comes from ``MASA_JWT_JWKS_FILE``.

Supported field types: ``str``, ``int``, ``float``, ``bool``, ``Path``, ``tuple[str, ...]``
(comma separated), ``tuple[int, ...]``, any of them ``| None`` (empty means ``None``), and nested
settings dataclasses.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import re
import secrets
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeVar

from masa_platform.runner import EVENT_LOOPS as _EVENT_LOOPS

__all__ = [
    "AuthSettings",
    "LoopSettings",
    "PageTokenSettings",
    "PlatformSettings",
    "QuotaSettings",
    "ServerSettings",
    "SettingsError",
    "TlsSettings",
    "load_settings",
]

ENV_PREFIX = "MASA_"

# The least key MASA_PAGE_TOKEN_KEY gives masa_platform.page_tokens (its MIN_KEY_BYTES).
PAGE_TOKEN_KEY_BYTES = 32

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})

T = TypeVar("T")

_log = logging.getLogger(__name__)


class SettingsError(ValueError):
    """A missing or malformed setting; the message names the environment variable."""


@dataclass(frozen=True, slots=True)
class TlsSettings:
    """Server TLS. TLS is on when ``tls_cert`` and ``tls_key`` are set; mTLS also needs a CA."""

    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_ca: Path | None = None
    tls_require_client_cert: bool = False

    def __post_init__(self) -> None:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise SettingsError("MASA_TLS_CERT and MASA_TLS_KEY must be set together")
        if self.tls_require_client_cert and (not self.enabled or self.tls_ca is None):
            raise SettingsError(
                "MASA_TLS_REQUIRE_CLIENT_CERT needs MASA_TLS_CERT, MASA_TLS_KEY and MASA_TLS_CA"
            )

    @property
    def enabled(self) -> bool:
        return self.tls_cert is not None


# Tokens a server keeps verified unless MASA_VERIFIED_TOKENS says otherwise.
DEFAULT_VERIFIED_TOKENS: Final = 50_000


@dataclass(frozen=True, slots=True)
class AuthSettings:
    """How bearer tokens are checked, and signed by a service that calls others
    (masa_platform.auth, masa_platform.keys).

    A server holds public keys only: the JWK set of ``MASA_JWT_JWKS_FILE`` (the issuer's key
    and every service's identity key). Without it no token is accepted at all. A service that
    calls others also holds its own identity key, ``MASA_JWT_KEY_FILE``, which signs that
    service's tokens and nothing else.
    """

    jwt_issuer: str = "masa"
    jwt_audience: str = "masa"
    jwt_leeway_seconds: float = 0.0
    jwt_jwks_file: Path | None = None
    jwt_key_file: Path | None = None
    # Tokens kept verified (masa_platform.auth.VerifiedTokens): the distinct tokens one
    # process sees within their lives, or every call of the ones beyond pays a signature
    # check again (about 0.1 ms here).
    verified_tokens: int = DEFAULT_VERIFIED_TOKENS

    def __post_init__(self) -> None:
        if not self.jwt_issuer or not self.jwt_audience:
            raise SettingsError("MASA_JWT_ISSUER and MASA_JWT_AUDIENCE must not be empty")
        if not 0 <= self.jwt_leeway_seconds <= 300:
            raise SettingsError("MASA_JWT_LEEWAY_SECONDS must be 0 to 300")
        if not 1 <= self.verified_tokens <= 10_000_000:
            raise SettingsError("MASA_VERIFIED_TOKENS must be 1 to 10,000,000")
        for variable, path in (
            ("MASA_JWT_JWKS_FILE", self.jwt_jwks_file),
            ("MASA_JWT_KEY_FILE", self.jwt_key_file),
        ):
            if path is not None and not path.is_file():
                raise SettingsError(f"{variable}: {path} is not a file")


# Calls in flight that the quota interceptor admits beyond MASA_MAX_CALLER_RPCS, for service
# identities and admins only (masa_platform.quotas): a node full of players still takes an
# operator's drain or matchmaking's CreateTable.
SERVICE_RPC_ROOM = 256
# Health and reflection streams (Watch, ServerReflectionInfo) open at once; they need no
# token, so the quota interceptor caps them server-wide, apart from the callers.
PUBLIC_STREAMS = 64
# Unary health checks in flight that gRPC's own limit leaves room for, above everything else.
PUBLIC_CALL_ROOM = 64


@dataclass(frozen=True, slots=True)
class QuotaSettings:
    """What one caller may hold and send, and what all callers may hold at once
    (masa_platform.quotas). Service identities and admins are not held to a caller's quotas."""

    # Calls of authenticated callers in flight on the server at once (every method but health
    # and reflection), streams included; a player's call past it is refused.
    max_caller_rpcs: int = 10_000
    # Streams (server-streaming, client-streaming, bidi) one caller holds open at once.
    caller_streams: int = 16
    # A token bucket per caller: one token per unary call, per stream opened and per message
    # sent inside a client or bidi stream; refilled at caller_rate a second up to caller_burst.
    # 200 a second is a hundred times what a person playing sends; a masa-load player sends
    # 40 to 120 at one saturated table on the 2-core development machine, fewer at more.
    caller_rate: float = 200.0
    caller_burst: int = 400
    # Callers whose state is kept; an idle caller's goes first (it holds no call, so dropping
    # it loses at most a partly spent bucket). Above max_caller_rpcs, so that one idle is
    # always there to drop.
    callers_tracked: int = 20_000

    def __post_init__(self) -> None:
        if not 1 <= self.max_caller_rpcs <= 1_000_000:
            raise SettingsError("MASA_MAX_CALLER_RPCS must be 1 to 1,000,000")
        if not 1 <= self.caller_streams < self.max_caller_rpcs:
            raise SettingsError(
                f"MASA_CALLER_STREAMS must be at least 1 and below MASA_MAX_CALLER_RPCS "
                f"({self.max_caller_rpcs}): one caller must never fill the server"
            )
        if not 0 < self.caller_rate <= 1_000_000:
            raise SettingsError("MASA_CALLER_RATE must be above 0 and at most 1,000,000 a second")
        if not 1 <= self.caller_burst <= 1_000_000:
            raise SettingsError("MASA_CALLER_BURST must be 1 to 1,000,000")
        if not self.max_caller_rpcs < self.callers_tracked <= 10_000_000:
            raise SettingsError(
                f"MASA_CALLERS_TRACKED must be above MASA_MAX_CALLER_RPCS "
                f"({self.max_caller_rpcs}) and at most 10,000,000"
            )


@dataclass(frozen=True, slots=True)
class PageTokenSettings:
    """The key that signs the page tokens of List calls (masa_platform.page_tokens).

    ``MASA_PAGE_TOKEN_KEY`` is hex, at least 32 bytes (``openssl rand -hex 32``); every instance
    of a service needs the same one. Unset, the process makes a random key of its own: enough
    for tests and one development process, but its tokens die with it and no other instance
    takes them, so production sets it.
    """

    page_token_key: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        if not self.page_token_key:
            return
        try:
            key = bytes.fromhex(self.page_token_key)
        except ValueError:
            raise SettingsError("MASA_PAGE_TOKEN_KEY must be hex (openssl rand -hex 32)") from None
        if len(key) < PAGE_TOKEN_KEY_BYTES:
            raise SettingsError(
                f"MASA_PAGE_TOKEN_KEY must be at least {PAGE_TOKEN_KEY_BYTES} bytes "
                f"({2 * PAGE_TOKEN_KEY_BYTES} hex digits)"
            )

    def key(self) -> bytes:
        """The configured key, else this process's own (made, and warned about, once)."""
        if self.page_token_key:
            return bytes.fromhex(self.page_token_key)
        return _process_page_token_key()


@functools.cache
def _process_page_token_key() -> bytes:
    _log.warning(
        "MASA_PAGE_TOKEN_KEY is unset: page tokens are signed with a random key of this process, "
        "so they will not survive a restart or work on another instance"
    )
    return secrets.token_bytes(PAGE_TOKEN_KEY_BYTES)


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """The gRPC listener. Port 0 asks the OS for a free port."""

    grpc_host: str = "127.0.0.1"
    grpc_port: int = 0
    # The largest message sent; received messages are limited by the service (the table API
    # takes far less, see create_server).
    max_message_bytes: int = 4 * 1024 * 1024
    # gRPC's own limit on calls in flight, health's included: the last resort above the quota
    # interceptor's limits (see grpc_concurrent_rpcs); 0 derives it from them.
    max_concurrent_rpcs: int = 0
    grace_seconds: float = 5.0
    # The request_id cache (masa_platform.idempotency): answers kept for retries.
    request_cache_entries: int = 20_000
    request_cache_bytes: int = 8 * 1024 * 1024
    request_cache_seconds: float = 120.0
    quotas: QuotaSettings = field(default_factory=QuotaSettings)

    def __post_init__(self) -> None:
        if not 0 <= self.grpc_port <= 65535:
            raise SettingsError(f"MASA_GRPC_PORT: {self.grpc_port} is not a port number")
        if self.max_message_bytes <= 0:
            raise SettingsError("MASA_MAX_MESSAGE_BYTES must be positive")
        if self.max_concurrent_rpcs and self.max_concurrent_rpcs < self.quota_ceiling:
            raise SettingsError(
                f"MASA_MAX_CONCURRENT_RPCS must be 0 (derived) or at least {self.quota_ceiling}: "
                f"MASA_MAX_CALLER_RPCS ({self.quotas.max_caller_rpcs}) + {SERVICE_RPC_ROOM} "
                f"for services + {PUBLIC_STREAMS} health and reflection streams + "
                f"{PUBLIC_CALL_ROOM} health checks, so that health never meets it"
            )
        if self.grace_seconds < 0:
            raise SettingsError("MASA_GRACE_SECONDS must not be negative")
        if min(self.request_cache_entries, self.request_cache_bytes) <= 0:
            raise SettingsError("MASA_REQUEST_CACHE_ENTRIES and _BYTES must be positive")
        if self.request_cache_seconds <= 0:
            raise SettingsError("MASA_REQUEST_CACHE_SECONDS must be positive")

    @property
    def quota_ceiling(self) -> int:
        """The most calls the quota interceptor ever lets run at once, plus the health checks
        it leaves alone: callers, the services' room, public streams, health checks."""
        return self.quotas.max_caller_rpcs + SERVICE_RPC_ROOM + PUBLIC_STREAMS + PUBLIC_CALL_ROOM

    @property
    def grpc_concurrent_rpcs(self) -> int:
        """gRPC's own limit: MASA_MAX_CONCURRENT_RPCS, or the quota ceiling when it is 0."""
        return self.max_concurrent_rpcs or self.quota_ceiling


@dataclass(frozen=True, slots=True)
class LoopSettings:
    """The event loop a process runs on (masa_platform.runner), read by services and masa-load."""

    # "uvloop" (cheaper per call) or "asyncio", for profilers that do not see into uvloop.
    event_loop: str = "uvloop"

    def __post_init__(self) -> None:
        if self.event_loop not in _EVENT_LOOPS:
            raise SettingsError(
                f"MASA_EVENT_LOOP: {self.event_loop!r} is not one of {', '.join(_EVENT_LOOPS)}"
            )


_MODULE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}(\.[A-Za-z_][A-Za-z0-9_]{0,63}){0,7}")


@dataclass(frozen=True, slots=True)
class PlatformSettings:
    """What every masa service needs: identity, logging, gRPC, metrics, NATS, auth and TLS."""

    service_name: str = "masa"
    version: str = "dev"
    log_level: str = "INFO"
    metrics_host: str = "127.0.0.1"
    # 0 asks the OS for a free port; the metrics server reports the one it bound.
    metrics_port: int = 0
    # One server, or the servers of a cluster separated by commas.
    nats_url: str = "nats://127.0.0.1:4222"
    # This service's own NATS user (masa_platform.bus_access); empty for a server without
    # authorization.
    nats_user: str = ""
    nats_password: str = ""
    # Where spans go over OTLP/gRPC (e.g. http://otel-collector:4317); empty traces nothing.
    otlp_endpoint: str = ""
    loop: LoopSettings = field(default_factory=LoopSettings)
    server: ServerSettings = field(default_factory=ServerSettings)
    auth: AuthSettings = field(default_factory=AuthSettings)
    tls: TlsSettings = field(default_factory=TlsSettings)
    # Modules whose register() adds a game to this process's registries, loaded at start
    # (docs/architecture.md, "Adding a game"); 51 and Elevator need none.
    game_plugins: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for module in self.game_plugins:
            if not _MODULE.fullmatch(module):
                raise SettingsError(f"MASA_GAME_PLUGINS: {module[:80]!r} is not a module name")
        if not isinstance(logging.getLevelName(self.log_level.upper()), int):
            raise SettingsError(f"MASA_LOG_LEVEL: unknown level {self.log_level!r}")
        if not 0 <= self.metrics_port <= 65535:
            raise SettingsError(f"MASA_METRICS_PORT: {self.metrics_port} is not a port number")
        if bool(self.nats_user) != bool(self.nats_password):
            raise SettingsError("MASA_NATS_USER and MASA_NATS_PASSWORD must be set together")


def load_settings(
    cls: type[T], environ: Mapping[str, str] | None = None, *, prefix: str = ENV_PREFIX
) -> T:
    """Build ``cls`` (a dataclass) from ``environ`` (default ``os.environ``).

    Unset variables take the field default; a field without a default must be set. Any bad
    value raises :class:`SettingsError` naming the variable.
    """
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    env = os.environ if environ is None else environ
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for spec in dataclasses.fields(cls):
        if not spec.init:
            continue
        kind = hints[spec.name]
        if isinstance(kind, type) and dataclasses.is_dataclass(kind):
            values[spec.name] = load_settings(kind, env, prefix=prefix)
            continue
        variable = prefix + spec.name.upper()
        raw = env.get(variable)
        if raw is None:
            has_default = (
                spec.default is not dataclasses.MISSING
                or spec.default_factory is not dataclasses.MISSING
            )
            if not has_default:
                raise SettingsError(f"{variable} is required")
            continue
        values[spec.name] = _parse(variable, raw, kind)
    try:
        return cls(**values)
    except SettingsError:
        raise
    except (TypeError, ValueError) as exc:
        raise SettingsError(f"{cls.__name__}: {exc}") from exc


def _parse(variable: str, raw: str, kind: Any) -> Any:
    optional_of = _optional_inner(kind)
    if optional_of is not None:
        return None if raw.strip() == "" else _parse(variable, raw, optional_of)
    if typing.get_origin(kind) is tuple:
        args = typing.get_args(kind)
        if len(args) != 2 or args[1] is not Ellipsis:
            raise TypeError(f"{variable}: only tuple[X, ...] settings are supported")
        items = [item.strip() for item in raw.split(",") if item.strip()]
        return tuple(_parse(variable, item, args[0]) for item in items)
    parser = _SCALARS.get(kind)
    if parser is None:
        raise TypeError(f"{variable}: unsupported settings type {kind!r}")
    try:
        return parser(raw.strip())
    except ValueError as exc:
        raise SettingsError(f"{variable}: {exc}") from None


def _optional_inner(kind: Any) -> Any | None:
    if typing.get_origin(kind) not in (typing.Union, types.UnionType):
        return None
    others = [arg for arg in typing.get_args(kind) if arg is not type(None)]
    if len(others) != 1:
        raise TypeError(f"unsupported union settings type {kind!r}")
    return others[0]


def _parse_bool(raw: str) -> bool:
    lowered = raw.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError(f"expected a boolean (true/false, 1/0, yes/no, on/off), got {raw!r}")


def _parse_int(raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"expected an integer, got {raw!r}") from None


def _parse_float(raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"expected a number, got {raw!r}") from None


def _parse_str(raw: str) -> str:
    return raw


def _parse_path(raw: str) -> Path:
    if not raw:
        raise ValueError("expected a path, got an empty string")
    return Path(raw).expanduser()


_SCALARS: dict[Any, Callable[[str], Any]] = {
    str: _parse_str,
    int: _parse_int,
    float: _parse_float,
    bool: _parse_bool,
    Path: _parse_path,
}
