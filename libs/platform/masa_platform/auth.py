"""JWT bearer authentication and per-method access by identity.

A token in ``authorization: Bearer <jwt>`` is an EdDSA (Ed25519) JWT naming the key it was
signed with (``kid``). A server holds only public keys (:mod:`masa_platform.keys`, the JWK set
of ``MASA_JWT_JWKS_FILE``), and each key may sign for one identity:

- the issuer's key signs player and admin tokens: ``sub`` is the player (or operator) id,
  ``roles`` lists ``player`` or ``admin``, ``iss`` is ``MASA_JWT_ISSUER``;
- a service's own key (``table-engine``, ``matchmaking``) signs that service's tokens only:
  ``sub``, ``iss`` and the one role are the service's name. A service can never mint a player
  or an admin, nor another service.

``exp``, ``sub``, ``iss`` and ``aud`` are required; anything else (another algorithm, an
unknown key, a role the key may not grant) is UNAUTHENTICATED. The authenticated
:class:`Principal` is available to handlers through :func:`current_principal`.

Access is deny-by-default: an :class:`AuthPolicy` names, for every method a service serves, the
roles that may call it; a method it does not name is refused to everyone (PERMISSION_DENIED).
Whether a player may act on a particular seat or read a particular wallet is the handler's
check on the principal.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import secrets
import time
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final, TypeVar

import grpc
import grpc.aio
import jwt

from masa_platform.errors import PermissionDenied, TokenExpired, Unauthenticated
from masa_platform.handlers import Context, WrappingInterceptor, split_method, wrap_handler
from masa_platform.keys import ISSUER, KeySetFile, PublicKeys, SigningKey
from masa_platform.settings import DEFAULT_VERIFIED_TOKENS, AuthSettings

__all__ = [
    "PUBLIC_SERVICES",
    "AuthInterceptor",
    "AuthPolicy",
    "Principal",
    "Role",
    "ServiceTokens",
    "TokenSigner",
    "TokenVerifier",
    "VerifiedTokens",
    "bearer_token",
    "current_principal",
    "require_principal",
    "until_token_expires",
]


T = TypeVar("T")


class Role(StrEnum):
    """Who a caller is: a player, an operator, or one of the services that call others."""

    PLAYER = "player"
    ADMIN = "admin"
    TABLE_ENGINE = "table-engine"
    MATCHMAKING = "matchmaking"


# The roles the issuer's key may grant; a service's key grants its own role only.
ISSUED_ROLES: Final = frozenset({Role.PLAYER, Role.ADMIN})
SERVICE_ROLES: Final = frozenset({Role.TABLE_ENGINE, Role.MATCHMAKING})

# Probes and tooling must work without a token: health checks from orchestrators, grpcurl.
PUBLIC_SERVICES: tuple[str, ...] = (
    "grpc.health.v1.Health",
    "grpc.reflection.v1alpha.ServerReflection",
    "grpc.reflection.v1.ServerReflection",
)

# A JWT is a few hundred bytes; one far larger is refused before it is parsed.
MAX_TOKEN_BYTES: Final = 4 * 1024
_ALGORITHM: Final = "EdDSA"


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the player, operator or service id (``sub``), the roles the token
    grants, and when the token stops being accepted (epoch seconds, leeway included), which a
    long stream checks."""

    subject: str
    roles: frozenset[Role]
    expires_at: float = math.inf

    def has_any(self, roles: Iterable[Role]) -> bool:
        return not self.roles.isdisjoint(roles)

    @property
    def is_player_only(self) -> bool:
        """A player and nothing more: the caller per-caller quotas and seat checks are for."""
        return self.roles == {Role.PLAYER}

    def check_not_expired(self) -> None:
        if time.time() >= self.expires_at:
            raise TokenExpired("the token expired: call again with a new one")


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


async def until_token_expires(source: AsyncIterator[T]) -> AsyncIterator[T]:
    """The items of ``source`` (a stream a caller opened) until the caller's token expires;
    then :class:`TokenExpired`, which ends the stream UNAUTHENTICATED, reason TOKEN_EXPIRED.

    A token is checked when a call comes; a stream outlives that moment, so each item is
    checked against the token's expiry before it goes, and a wait for the next item is cut
    short when the token expires meanwhile. The client resumes with a new token from the last
    item it had.

    One timer serves the whole stream (issue 22: an ``asyncio.timeout`` per item cost 3.8 µs,
    this under one): when it fires during a wait it cancels the waiting task, and that
    cancellation, and no other, becomes :class:`TokenExpired`, as ``asyncio.timeout`` tells its
    own from a caller's.
    """
    principal = require_principal()
    loop = asyncio.get_running_loop()
    expired = TokenExpired("the token expired while the stream was open: resume it with a new one")
    expiry = _StreamExpiry(loop, loop.time() + (principal.expires_at - time.time()), expired)
    try:
        while True:
            # A source with an item ready answers without waiting, so that the timer never
            # fires: the deadline is checked before each item as well as while waiting for one.
            if expiry.passed:
                raise expired
            try:
                item = await expiry.next_item(source)
            except StopAsyncIteration:
                return
            if expiry.passed:
                raise expired
            yield item
    finally:
        expiry.stop()


class _StreamExpiry:
    """The one timer of a stream (:func:`until_token_expires`): it cancels a wait for the next
    item in progress when the token expires, and tells that cancellation from any other the
    way ``asyncio.Timeout`` does (the task's cancellation requests counted when the wait began;
    the timer's own withdrawn however the wait ended)."""

    __slots__ = ("_cancelled", "_deadline", "_expired", "_fired", "_loop", "_timer", "_waiting")

    def __init__(
        self, loop: asyncio.AbstractEventLoop, deadline: float, expired: TokenExpired
    ) -> None:
        self._loop = loop
        self._deadline = deadline
        self._expired = expired
        self._fired = False
        self._waiting: asyncio.Task[Any] | None = None
        self._cancelled = False
        self._timer = loop.call_at(deadline, self._expire)

    @property
    def passed(self) -> bool:
        # The loop's clock and its timers round differently: the timer having fired counts.
        return self._fired or self._loop.time() >= self._deadline

    def stop(self) -> None:
        self._timer.cancel()

    def _expire(self) -> None:
        self._fired = True
        if self._waiting is not None:
            self._cancelled = True
            self._waiting.cancel()

    async def next_item(self, source: AsyncIterator[T]) -> T:
        """``source``'s next item; :class:`TokenExpired` when the timer cut the wait short."""
        task = asyncio.current_task(self._loop)
        before = task.cancelling() if task is not None else 0
        self._waiting, self._cancelled = task, False
        try:
            return await anext(source)
        except asyncio.CancelledError:
            if self._cancelled and task is not None:
                self._cancelled = False
                if task.uncancel() <= before:
                    raise self._expired from None
            raise
        finally:
            self._waiting = None
            if self._cancelled and task is not None:
                # The source swallowed the timer's cancellation, or ended otherwise meanwhile.
                self._cancelled = False
                task.uncancel()


@dataclass(frozen=True, slots=True)
class AuthPolicy:
    """Which methods skip auth, and which roles may call every other method.

    Keys of ``allowed`` are full method names (``/masa.table.v1.TableService/CreateTable``) or
    service names (``masa.table.v1.TableService``) for the whole service; a method named by
    neither is refused to every caller.
    """

    allowed: Mapping[str, frozenset[Role]] = field(default_factory=dict)
    public: frozenset[str] = frozenset(PUBLIC_SERVICES)

    def is_public(self, method: str) -> bool:
        return method in self.public or split_method(method)[0] in self.public

    def roles_for(self, method: str) -> frozenset[Role]:
        found = self.allowed.get(method)
        if found is None:
            found = self.allowed.get(split_method(method)[0])
        return found or frozenset()


class TokenSigner:
    """Mints tokens with one signing key: the issuer's (players and admins) or a service's own
    (that service's token, and only that)."""

    def __init__(self, key: SigningKey, settings: AuthSettings) -> None:
        self._key = key
        self._issuer = settings.jwt_issuer
        self._audience = settings.jwt_audience

    @property
    def identity(self) -> str:
        return self._key.identity

    def mint(
        self,
        subject: str,
        roles: Collection[Role | str] = (Role.PLAYER,),
        *,
        ttl_seconds: float = 3600.0,
        now: float | None = None,
    ) -> str:
        wanted = frozenset(Role(role) for role in roles)
        if self._key.identity == ISSUER:
            if not wanted or not wanted <= ISSUED_ROLES:
                raise ValueError(f"the issuer grants {sorted(ISSUED_ROLES)} only, not {wanted}")
            issuer = self._issuer
        else:
            own = Role(self._key.identity)
            if subject != own.value or wanted != {own}:
                raise ValueError(f"the {own} key signs the {own} identity only")
            issuer = own.value
        issued = time.time() if now is None else now
        claims = {
            "sub": subject,
            "iss": issuer,
            "aud": self._audience,
            "iat": int(issued),
            "exp": int(issued + ttl_seconds),
            "roles": sorted(role.value for role in wanted),
        }
        return jwt.encode(
            claims, self._key.private, algorithm=_ALGORITHM, headers={"kid": self._key.kid}
        )


class ServiceTokens:
    """A service's own token for its calls to other services, minted once per period.

    A token per call would cost a signature here and a verification at the callee for every
    call; one token reused until shortly before it expires costs one of each per period, since
    the callee keeps the tokens it has verified.
    """

    def __init__(
        self,
        signer: TokenSigner,
        *,
        ttl_seconds: float = 300.0,
        renew_before_seconds: float = 60.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._signer = signer
        self._role = Role(signer.identity)
        self._ttl = ttl_seconds
        self._renew_before = renew_before_seconds
        self._clock = clock
        self._token = ""
        self._renew_at = -math.inf

    def token(self) -> str:
        now = self._clock()
        if now >= self._renew_at:
            self._token = self._signer.mint(
                self._role.value, (self._role,), ttl_seconds=self._ttl, now=now
            )
            self._renew_at = now + self._ttl - self._renew_before
        return self._token

    def metadata(self) -> tuple[tuple[str, str]]:
        """The call metadata with the current token."""
        return (("authorization", f"Bearer {self.token()}"),)


class TokenVerifier:
    """Checks tokens against the JWK set of ``MASA_JWT_JWKS_FILE``, read again when a token
    names a key it does not hold (a rotation added one) or the file changed (one removed).

    Without a JWK set no token is accepted: a server that was not given the public keys
    refuses every authenticated call rather than trusting anything.
    """

    def __init__(self, settings: AuthSettings, *, clock: Callable[[], float] = time.monotonic):
        self._settings = settings
        path = settings.jwt_jwks_file
        self._keys = KeySetFile(path, clock=clock) if path is not None else None

    @property
    def generation(self) -> int:
        """Bumped whenever the trusted keys change (tokens verified before are checked again);
        looking at it looks at the file when it is due, so a retired key stops being trusted
        within 30 s even for tokens verified before."""
        if self._keys is None:
            return 0
        self._keys.current()
        return self._keys.generation

    def _current(self, kid: str | None = None) -> PublicKeys:
        if self._keys is None:
            return PublicKeys({})
        return self._keys.current(kid)

    def verify(self, token: str) -> Principal:
        return self.verify_until(token)[0]

    def verify_until(self, token: str) -> tuple[Principal, float]:
        """The principal of a valid token and the epoch time it stops being accepted."""
        if len(token) > MAX_TOKEN_BYTES:
            raise Unauthenticated("invalid token: too long")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError as error:
            raise Unauthenticated(f"invalid token: {error}") from None
        if header.get("alg") != _ALGORITHM:
            raise Unauthenticated(f"invalid token: algorithm must be {_ALGORITHM}")
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            raise Unauthenticated("invalid token: no key id (kid)")
        keys = self._current(kid)
        key, identity = keys.key(kid), keys.identity_of(kid)
        if key is None or identity is None:
            raise Unauthenticated("invalid token: signed with a key this server does not trust")
        expected_issuer = self._settings.jwt_issuer if identity == ISSUER else identity
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=[_ALGORITHM],
                audience=self._settings.jwt_audience,
                issuer=expected_issuer,
                leeway=self._settings.jwt_leeway_seconds,
                options={"require": ["exp", "sub", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise TokenExpired("token expired") from None
        except jwt.InvalidTokenError as error:
            # PyJWT's message says which check failed and never echoes a key.
            raise Unauthenticated(f"invalid token: {error}") from None
        principal = Principal(
            _subject(claims), _roles(claims, identity), _expiry(claims, self._settings)
        )
        return principal, principal.expires_at


def _subject(claims: Mapping[str, Any]) -> str:
    subject = claims["sub"]
    if not isinstance(subject, str) or not subject or len(subject) > 128:
        raise Unauthenticated("invalid token: the subject must be 1 to 128 characters")
    return subject


def _roles(claims: Mapping[str, Any], identity: str) -> frozenset[Role]:
    raw = claims.get("roles", [])
    if not isinstance(raw, list) or not all(isinstance(role, str) for role in raw):
        raise Unauthenticated("invalid token: roles must be a list of names")
    known = {role.value for role in Role}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise Unauthenticated(f"invalid token: unknown roles {unknown}")
    roles = frozenset(Role(role) for role in raw)
    if identity == ISSUER:
        allowed = ISSUED_ROLES
    else:
        own = Role(identity) if identity in known else None
        if own is None or claims["sub"] != own.value:
            raise Unauthenticated(f"invalid token: the {identity} key signs its own identity only")
        allowed = frozenset({own})
    if not roles or not roles <= allowed:
        raise Unauthenticated(f"invalid token: the {identity} key may not grant {sorted(roles)}")
    # One set per combination (at most 2 ** len(Role)), shared by every token kept verified.
    return _ROLE_SETS.setdefault(roles, roles)


_ROLE_SETS: dict[frozenset[Role], frozenset[Role]] = {}


def _expiry(claims: Mapping[str, Any], settings: AuthSettings) -> float:
    # PyJWT refuses a token once exp <= now - leeway.
    return float(claims["exp"]) + settings.jwt_leeway_seconds


class VerifiedTokens:
    """Tokens verified already, each kept until it expires, so a client's repeated token is
    checked once rather than on every call (a signature check costs as much as a small RPC).

    The kept tokens are dropped whenever the trusted keys change (a rotation that removed a
    key must not leave its tokens accepted), and every use checks the expiry: a kept token is
    accepted exactly as long as verifying it again would accept it. At most ``max_entries``
    are kept (``MASA_VERIFIED_TOKENS``), the oldest verification going first, each under a
    128-bit digest of the token keyed with this process's own secret rather than the token
    itself: about half the memory, and finding another token with a kept one's digest is out of
    reach (a second preimage, against a key nobody outside sees).
    """

    def __init__(
        self,
        verifier: TokenVerifier,
        *,
        max_entries: int = DEFAULT_VERIFIED_TOKENS,
        on_check: Callable[[], None] | None = None,
    ) -> None:
        self._verifier = verifier
        self._max_entries = max_entries
        # Told of every signature check (masa_token_signature_checks_total).
        self._on_check = on_check
        self._generation = verifier.generation
        self._secret = secrets.token_bytes(16)
        self._tokens: dict[bytes, Principal] = {}

    def __len__(self) -> int:
        return len(self._tokens)

    @property
    def max_entries(self) -> int:
        return self._max_entries

    def principal(self, token: str) -> Principal:
        if self._generation != self._verifier.generation:
            self._tokens.clear()
            self._generation = self._verifier.generation
        key = hashlib.blake2b(token.encode(), digest_size=16, key=self._secret).digest()
        kept = self._tokens.get(key)
        if kept is not None and time.time() < kept.expires_at:
            return kept
        if self._on_check is not None:
            self._on_check()
        principal, _ = self._verifier.verify_until(token)
        self._tokens.pop(key, None)
        if len(self._tokens) >= self._max_entries:
            # Insertion order: the oldest verification goes first.
            del self._tokens[next(iter(self._tokens))]
        self._tokens[key] = principal
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
    """Authenticates every non-public call and lets only the policy's roles through."""

    def __init__(
        self,
        settings: AuthSettings,
        policy: AuthPolicy | None = None,
        *,
        on_check: Callable[[], None] | None = None,
    ) -> None:
        self._policy = policy or AuthPolicy()
        self._tokens = VerifiedTokens(
            TokenVerifier(settings), max_entries=settings.verified_tokens, on_check=on_check
        )
        super().__init__()

    def tokens_kept(self) -> int:
        """How many tokens are kept verified now (``masa_verified_tokens``)."""
        return len(self._tokens)

    def _applies(self, method: str, handler: grpc.RpcMethodHandler[Any, Any]) -> bool:
        return not self._policy.is_public(method)

    def _wrap(
        self, method: str, handler: grpc.RpcMethodHandler[Any, Any]
    ) -> grpc.RpcMethodHandler[Any, Any]:
        allowed = self._policy.roles_for(method)
        tokens = self._tokens

        @contextmanager
        def authenticated(context: Context) -> Iterator[None]:
            # Refusals are raised for the error interceptor, which is installed around this
            # one (standard_interceptors), to turn into the status.
            principal = tokens.principal(bearer_token(context.invocation_metadata()))
            if not principal.has_any(allowed):
                if allowed:
                    wanted = " or ".join(sorted(allowed))
                    raise PermissionDenied(f"{method} is for the {wanted} role")
                raise PermissionDenied(f"{method} is open to no caller")
            # Each RPC runs in its own task with its own context copy, so the value cannot leak
            # into another call; it is deliberately not reset, because a streaming handler's
            # generator may be finalised from another context.
            _principal.set(principal)
            yield

        return wrap_handler(handler, authenticated)
