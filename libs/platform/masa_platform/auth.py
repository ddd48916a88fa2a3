"""JWT bearer authentication and per-method role checks.

A token in ``authorization: Bearer <jwt>`` is checked against a fixed list of algorithms, the
issuer, the audience and the expiry; ``exp``, ``sub``, ``iss`` and ``aud`` are required. The
subject is the player id and ``roles`` lists ``player``, ``service`` or ``admin``. The
authenticated :class:`Principal` is available to handlers through :func:`current_principal`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import grpc
import grpc.aio
import jwt

from masa_platform.errors import PermissionDenied, Unauthenticated
from masa_platform.handlers import Context, WrappingInterceptor, split_method, wrap_handler
from masa_platform.settings import AuthSettings

__all__ = [
    "INTERNAL_ROLES",
    "PUBLIC_SERVICES",
    "AuthInterceptor",
    "AuthPolicy",
    "Principal",
    "Role",
    "current_principal",
    "mint_token",
    "require_principal",
    "verify_token",
]


class Role(StrEnum):
    PLAYER = "player"
    SERVICE = "service"
    ADMIN = "admin"


# Internal RPCs (CreateTable, Hold/Release, Decide, Grant) accept either role (DESIGN.md §3).
INTERNAL_ROLES: frozenset[Role] = frozenset({Role.SERVICE, Role.ADMIN})

# Probes and tooling must work without a token: health checks from orchestrators, grpcurl.
PUBLIC_SERVICES: tuple[str, ...] = (
    "grpc.health.v1.Health",
    "grpc.reflection.v1alpha.ServerReflection",
    "grpc.reflection.v1.ServerReflection",
)


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the player id (``sub``), the roles the token grants, and when the token
    stops being accepted (epoch seconds, leeway included), which a long stream checks."""

    subject: str
    roles: frozenset[Role]
    expires_at: float = math.inf

    def has_any(self, roles: Iterable[Role]) -> bool:
        return not self.roles.isdisjoint(roles)

    def check_not_expired(self) -> None:
        if time.time() >= self.expires_at:
            raise Unauthenticated("the token expired: call again with a new one")


_principal: ContextVar[Principal | None] = ContextVar("masa_principal", default=None)


def current_principal() -> Principal | None:
    """The caller of the RPC being served, or ``None`` for a public method."""
    return _principal.get()


def require_principal() -> Principal:
    """The caller of the RPC being served; raises ``Unauthenticated`` outside an authed call."""
    principal = _principal.get()
    if principal is None:
        raise Unauthenticated("no authenticated caller")
    return principal


@dataclass(frozen=True, slots=True)
class AuthPolicy:
    """Which methods skip auth and which need a role; every other method needs a valid token.

    Keys are full method names (``/masa.table.v1.TableService/CreateTable``) or service names
    (``masa.table.v1.TableService``) for the whole service.
    """

    public: frozenset[str] = frozenset(PUBLIC_SERVICES)
    required_roles: Mapping[str, frozenset[Role]] = field(default_factory=dict)

    def is_public(self, method: str) -> bool:
        return method in self.public or split_method(method)[0] in self.public

    def roles_for(self, method: str) -> frozenset[Role] | None:
        return self.required_roles.get(method) or self.required_roles.get(split_method(method)[0])


def mint_token(
    settings: AuthSettings,
    subject: str,
    roles: Collection[Role | str] = (Role.PLAYER,),
    *,
    ttl_seconds: float = 3600.0,
    now: float | None = None,
) -> str:
    """A token signed with the settings' secret and first algorithm (development and tests)."""
    issued = time.time() if now is None else now
    claims = {
        "sub": subject,
        "iss": settings.jwt_issuer,
        "aud": settings.jwt_audience,
        "iat": int(issued),
        "exp": int(issued + ttl_seconds),
        "roles": [str(Role(role)) for role in roles],
    }
    return jwt.encode(claims, settings.jwt_secret, algorithm=settings.jwt_algorithms[0])


def verify_token(token: str, settings: AuthSettings) -> Principal:
    """The principal of a valid token; raises :class:`Unauthenticated` otherwise."""
    return _verify(token, settings)[0]


def _verify(token: str, settings: AuthSettings) -> tuple[Principal, float]:
    """The principal of a valid token and the epoch time at which the token stops being valid."""
    try:
        claims = jwt.decode(
            token,
            settings.jwt_secret,
            algorithms=list(settings.jwt_algorithms),
            audience=settings.jwt_audience,
            issuer=settings.jwt_issuer,
            leeway=settings.jwt_leeway_seconds,
            options={"require": ["exp", "sub", "iss", "aud"]},
        )
    except jwt.ExpiredSignatureError:
        raise Unauthenticated("token expired") from None
    except jwt.InvalidTokenError as exc:
        # PyJWT's message says which check failed and never echoes the secret.
        raise Unauthenticated(f"invalid token: {exc}") from None
    subject = claims["sub"]
    if not isinstance(subject, str) or not subject:
        raise Unauthenticated("invalid token: empty subject")
    raw_roles = claims.get("roles", [])
    if not isinstance(raw_roles, list):
        raise Unauthenticated("invalid token: roles must be a list")
    known = {role.value for role in Role}
    # PyJWT refuses a token once exp <= now - leeway.
    expires = float(claims["exp"]) + settings.jwt_leeway_seconds
    principal = Principal(subject, frozenset(Role(r) for r in raw_roles if r in known), expires)
    return principal, expires


class _VerifiedTokens:
    """Tokens verified already, each kept until it expires, so a client's repeated token is
    checked once rather than on every call (signature and claims cost as much as a small RPC).

    The secret, algorithms, issuer and audience are fixed for the server's life, so the only
    thing that can turn a verified token invalid later is its expiry, which is checked on every
    use: a kept token is accepted exactly as long as verifying it again would accept it.
    """

    def __init__(self, settings: AuthSettings, *, max_entries: int = 10_000) -> None:
        self._settings = settings
        self._max_entries = max_entries
        self._tokens: dict[str, tuple[Principal, float]] = {}

    def principal(self, token: str) -> Principal:
        kept = self._tokens.get(token)
        if kept is not None and time.time() < kept[1]:
            return kept[0]
        principal, expires = _verify(token, self._settings)
        self._tokens.pop(token, None)
        if len(self._tokens) >= self._max_entries:
            # Insertion order: the oldest verification goes first.
            del self._tokens[next(iter(self._tokens))]
        self._tokens[token] = (principal, expires)
        return principal


def bearer_token(metadata: Iterable[tuple[str, str | bytes]] | None) -> str:
    """The token of the ``authorization`` header; raises :class:`Unauthenticated` if absent."""
    for key, value in metadata or ():
        if key.lower() != "authorization":
            continue
        text = value.decode() if isinstance(value, bytes) else value
        scheme, _, token = text.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated("authorization must be 'Bearer <token>'")
        return token.strip()
    raise Unauthenticated("missing authorization metadata")


class AuthInterceptor(WrappingInterceptor):
    """Authenticates every non-public call and enforces the policy's roles."""

    def __init__(self, settings: AuthSettings, policy: AuthPolicy | None = None) -> None:
        self._settings = settings
        self._policy = policy or AuthPolicy()
        self._tokens = _VerifiedTokens(settings)
        super().__init__()

    def _applies(self, method: str, handler: grpc.RpcMethodHandler[Any, Any]) -> bool:
        return not self._policy.is_public(method)

    def _wrap(
        self, method: str, handler: grpc.RpcMethodHandler[Any, Any]
    ) -> grpc.RpcMethodHandler[Any, Any]:
        required = self._policy.roles_for(method)
        tokens = self._tokens

        @contextmanager
        def authenticated(context: Context) -> Iterator[None]:
            # Refusals are raised for the error interceptor, which is installed around this
            # one (standard_interceptors), to turn into the status.
            principal = tokens.principal(bearer_token(context.invocation_metadata()))
            if required and not principal.has_any(required):
                wanted = " or ".join(sorted(required))
                raise PermissionDenied(f"{method} requires the {wanted} role")
            # Each RPC runs in its own task with its own context copy, so the value cannot leak
            # into another call; it is deliberately not reset, because a streaming handler's
            # generator may be finalised from another context.
            _principal.set(principal)
            yield

        return wrap_handler(handler, authenticated)
