"""Tokens signed with asymmetric keys, each key for one identity (masa_platform.auth, .keys).

A server holds public keys only. The issuer's key signs players and admins; a service's own
key signs that service and nothing else, so a service (the bot included) can mint no admin and
no player. Every way a token can be wrong is UNAUTHENTICATED; a method is open to the roles the
policy names and to no one else.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import shutil
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import grpc
import grpc.aio
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from grpc_health.v1 import health_pb2
from grpc_status import rpc_status
from masa.common.v1 import error_pb2
from masa_platform import auth as auth_module
from masa_platform.auth import (
    AuthPolicy,
    Principal,
    Role,
    ServiceTokens,
    TokenSigner,
    TokenVerifier,
    current_principal,
    require_principal,
    until_token_expires,
)
from masa_platform.errors import TokenExpired, Unauthenticated, error_info, reason_name
from masa_platform.keys import ISSUER, Keyring, SigningKey, jwks_document, key_id
from masa_platform.metrics import GrpcMetrics
from masa_platform.server import standard_interceptors
from masa_platform.settings import AuthSettings, SettingsError
from masa_platform.testing import HealthStub
from platform_support import TEST_SERVICE, Handlers, ServeFactory, unary_stream, unary_unary
from prometheus_client import CollectorRegistry

POLICY = AuthPolicy(
    allowed={
        f"/{TEST_SERVICE}/WhoAmI": frozenset(Role),
        f"/{TEST_SERVICE}/Updates": frozenset(Role),
        f"/{TEST_SERVICE}/Idle": frozenset(Role),
        f"/{TEST_SERVICE}/CreateTable": frozenset({Role.MATCHMAKING, Role.ADMIN}),
    }
)
TOKEN_EXPIRED = reason_name(error_pb2.ERROR_REASON_TOKEN_EXPIRED)
UNAUTHENTICATED = reason_name(error_pb2.ERROR_REASON_UNAUTHENTICATED)
PERMISSION_DENIED = reason_name(error_pb2.ERROR_REASON_PERMISSION_DENIED)


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keyring:
    return Keyring.generate(tmp_path_factory.mktemp("keys"))


@pytest.fixture(scope="module")
def auth(keys: Keyring) -> AuthSettings:
    return AuthSettings(jwt_issuer="masa-test", jwt_audience="masa-api", jwt_jwks_file=keys.jwks)


def signer(keys: Keyring, auth: AuthSettings, identity: str = ISSUER) -> TokenSigner:
    return TokenSigner(keys.signer(identity), auth)


async def whoami(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
    principal = require_principal()
    assert current_principal() is principal
    return f"{principal.subject}:{','.join(sorted(principal.roles))}".encode()


async def always_ready(
    request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]
) -> AsyncIterator[bytes]:
    """A stream whose next item is always ready (a watcher's queue that never empties): the
    source never waits, so only a check before each item can end it."""

    async def ready() -> AsyncIterator[bytes]:
        while True:
            yield b"update"

    async for item in until_token_expires(ready()):
        yield item


# How each stream of the ``Idle`` handler ended on the server: the exception that left it.
IDLE_ENDINGS: list[type[BaseException]] = []


async def never_ready(
    request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]
) -> AsyncIterator[bytes]:
    """A stream whose next item never comes (a quiet table): only the expiry timer can end it,
    and a caller's own cancellation must stay one."""

    async def quiet() -> AsyncIterator[bytes]:
        await asyncio.Event().wait()
        yield b"never"

    try:
        async for item in until_token_expires(quiet()):
            yield item
    except BaseException as error:
        IDLE_ENDINGS.append(type(error))
        raise


HANDLERS: Handlers = {
    "WhoAmI": grpc.unary_unary_rpc_method_handler(whoami),
    "Updates": grpc.unary_stream_rpc_method_handler(always_ready),
    "Idle": grpc.unary_stream_rpc_method_handler(never_ready),
    "CreateTable": grpc.unary_unary_rpc_method_handler(whoami),
    "Unlisted": grpc.unary_unary_rpc_method_handler(whoami),
}


async def call(
    serve: ServeFactory, auth: AuthSettings, name: str, authorization: str | None
) -> tuple[grpc.StatusCode, bytes | str]:
    metadata = () if authorization is None else (("authorization", authorization),)
    async with (
        serve(HANDLERS, interceptors=standard_interceptors(auth, policy=POLICY)) as server,
        grpc.aio.insecure_channel(server.address) as channel,
    ):
        rpc = unary_unary(channel, name)(b"", metadata=metadata)
        try:
            return grpc.StatusCode.OK, await rpc
        except grpc.aio.AioRpcError as error:
            info = error_info(await rpc_status.aio.from_call(rpc))
            assert info is not None
            assert info.domain == "masa.dev"
            return error.code(), info.reason


def claims(auth: AuthSettings, **overrides: object) -> dict[str, object]:
    now = int(time.time())
    base: dict[str, object] = {
        "sub": "ayse",
        "iss": auth.jwt_issuer,
        "aud": auth.jwt_audience,
        "exp": now + 60,
        "iat": now,
        "roles": ["player"],
    }
    base.update(overrides)
    return {key: value for key, value in base.items() if value is not None}


def signed(key: SigningKey, payload: dict[str, object], **header: str) -> str:
    return jwt.encode(payload, key.private, algorithm="EdDSA", headers={"kid": key.kid, **header})


async def test_a_player_token_of_the_issuer_reaches_the_handler(
    serve: ServeFactory, keys: Keyring, auth: AuthSettings
) -> None:
    token = signer(keys, auth).mint("ayse")
    assert await call(serve, auth, "WhoAmI", f"Bearer {token}") == (
        grpc.StatusCode.OK,
        b"ayse:player",
    )


def _bad_tokens(keys: Keyring, auth: AuthSettings) -> list[tuple[str | None, str]]:
    issuer = keys.signer(ISSUER)
    engine = keys.signer("table-engine")
    stranger = SigningKey(Ed25519PrivateKey.generate(), ISSUER, issuer.kid)
    public_pem = issuer.private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    confused = jwt.encode(
        claims(auth),
        base64.b64encode(public_pem).decode(),
        algorithm="HS256",
        headers={"kid": issuer.kid},
    )
    none = jwt.encode(claims(auth), "", algorithm="none", headers={"kid": issuer.kid})
    return [
        (None, "missing header"),
        ("Basic dXNlcjpwYXNz", "wrong scheme"),
        ("Bearer ", "empty token"),
        ("Bearer not.a.jwt", "garbage"),
        (f"Bearer {signed(stranger, claims(auth))}", "forged: another key under the issuer's kid"),
        (f"Bearer {confused}", "algorithm confusion: HS256 keyed with the public key"),
        (f"Bearer {none}", "alg none"),
        (f"Bearer {signed(issuer, claims(auth), kid='nobody-0')}", "unknown key id"),
        (f"Bearer {signed(issuer, claims(auth, aud='other'))}", "wrong audience"),
        (f"Bearer {signed(issuer, claims(auth, iss='evil'))}", "wrong issuer"),
        (f"Bearer {signed(issuer, claims(auth, exp=None))}", "no expiry"),
        (f"Bearer {signed(issuer, claims(auth, sub=None))}", "no subject"),
        (f"Bearer {signed(issuer, claims(auth, roles='player'))}", "roles not a list"),
        (f"Bearer {signed(issuer, claims(auth, roles=['root']))}", "an unknown role"),
        (f"Bearer {signed(issuer, claims(auth, roles=[]))}", "no role"),
        (
            f"Bearer {signed(issuer, claims(auth, sub='matchmaking', roles=['matchmaking']))}",
            "the issuer minting a service",
        ),
        (
            f"Bearer {signed(engine, claims(auth, iss='table-engine', roles=['admin'], sub='table-engine'))}",
            "a service minting an admin",
        ),
        (
            f"Bearer {signed(engine, claims(auth, iss='table-engine', roles=['matchmaking'], sub='matchmaking'))}",
            "a service minting another service",
        ),
        (
            f"Bearer {signed(engine, claims(auth, iss='table-engine', roles=['table-engine'], sub='ayse'))}",
            "a service naming another subject",
        ),
        (f"Bearer {'x' * 5000}", "far too long"),
    ]


async def test_every_kind_of_bad_token_is_unauthenticated(
    serve: ServeFactory, keys: Keyring, auth: AuthSettings
) -> None:
    async with (
        serve(HANDLERS, interceptors=standard_interceptors(auth, policy=POLICY)) as server,
        grpc.aio.insecure_channel(server.address) as channel,
    ):
        who = unary_unary(channel, "WhoAmI")
        for authorization, why in _bad_tokens(keys, auth):
            metadata = () if authorization is None else (("authorization", authorization),)
            rpc = who(b"", metadata=metadata)
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await rpc
            info = error_info(await rpc_status.aio.from_call(rpc))
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED, why
            assert info is not None
            assert info.reason == UNAUTHENTICATED, why


async def test_a_method_is_open_to_the_roles_its_policy_names_and_no_other(
    serve: ServeFactory, keys: Keyring, auth: AuthSettings
) -> None:
    player = signer(keys, auth).mint("ayse", [Role.PLAYER])
    admin = signer(keys, auth).mint("ops", [Role.ADMIN])
    matchmaking = signer(keys, auth, "matchmaking").mint("matchmaking", [Role.MATCHMAKING])
    engine = signer(keys, auth, "table-engine").mint("table-engine", [Role.TABLE_ENGINE])
    expected = {
        player: grpc.StatusCode.PERMISSION_DENIED,
        engine: grpc.StatusCode.PERMISSION_DENIED,
        admin: grpc.StatusCode.OK,
        matchmaking: grpc.StatusCode.OK,
    }
    for token, code in expected.items():
        got, answer = await call(serve, auth, "CreateTable", f"Bearer {token}")
        assert got == code
        if code != grpc.StatusCode.OK:
            assert answer == PERMISSION_DENIED
    # A method the policy does not name is open to nobody, however privileged.
    for token in expected:
        assert await call(serve, auth, "Unlisted", f"Bearer {token}") == (
            grpc.StatusCode.PERMISSION_DENIED,
            PERMISSION_DENIED,
        )


def test_a_signing_key_mints_only_its_own_identity(keys: Keyring, auth: AuthSettings) -> None:
    with pytest.raises(ValueError, match="issuer grants"):
        signer(keys, auth).mint("matchmaking", [Role.MATCHMAKING])
    engine = signer(keys, auth, "table-engine")
    for subject, roles in (
        ("table-engine", [Role.ADMIN]),
        ("ayse", [Role.PLAYER]),
        ("matchmaking", [Role.MATCHMAKING]),
        ("ayse", [Role.TABLE_ENGINE]),
    ):
        with pytest.raises(ValueError, match="signs the table-engine identity only"):
            engine.mint(subject, roles)
    verified = TokenVerifier(auth).verify(engine.mint("table-engine", [Role.TABLE_ENGINE]))
    assert (verified.subject, verified.roles) == ("table-engine", frozenset({Role.TABLE_ENGINE}))


async def test_a_server_without_public_keys_accepts_no_token(
    serve: ServeFactory, keys: Keyring
) -> None:
    bare = AuthSettings(jwt_issuer="masa-test", jwt_audience="masa-api")
    token = TokenSigner(keys.signer(ISSUER), bare).mint("ops", [Role.ADMIN])
    assert await call(serve, bare, "WhoAmI", f"Bearer {token}") == (
        grpc.StatusCode.UNAUTHENTICATED,
        UNAUTHENTICATED,
    )


async def test_health_needs_no_token(serve: ServeFactory, auth: AuthSettings) -> None:
    async with (
        serve(HANDLERS, interceptors=standard_interceptors(auth, policy=POLICY)) as server,
        grpc.aio.insecure_channel(server.address) as channel,
    ):
        reply = await HealthStub(channel).Check(health_pb2.HealthCheckRequest())
        assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_outside_an_authenticated_call_there_is_no_principal() -> None:
    assert current_principal() is None
    with pytest.raises(Unauthenticated):
        require_principal()


async def test_an_expired_token_is_refused_as_expired(
    serve: ServeFactory, keys: Keyring, auth: AuthSettings
) -> None:
    """UNAUTHENTICATED with its own reason, TOKEN_EXPIRED: the one refusal a client answers by
    asking for a new token, where every other means the token is no good at all."""
    expired = signer(keys, auth).mint("ayse", ttl_seconds=10, now=time.time() - 60)
    with pytest.raises(TokenExpired, match="expired"):
        TokenVerifier(auth).verify(expired)
    async with (
        serve(HANDLERS, interceptors=standard_interceptors(auth, policy=POLICY)) as server,
        grpc.aio.insecure_channel(server.address) as channel,
    ):
        rpc = unary_unary(channel, "WhoAmI")(
            b"", metadata=(("authorization", f"Bearer {expired}"),)
        )
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await rpc
        info = error_info(await rpc_status.aio.from_call(rpc))
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert info is not None and info.reason == TOKEN_EXPIRED


async def test_a_token_verified_once_is_refused_once_it_expires(
    serve: ServeFactory, keys: Keyring, auth: AuthSettings
) -> None:
    """The server remembers verified tokens, but never past their expiry."""
    token = signer(keys, auth).mint("ayse", ttl_seconds=2)
    expires = jwt.decode(token, options={"verify_signature": False})["exp"]
    metadata = (("authorization", f"Bearer {token}"),)
    async with (
        serve(HANDLERS, interceptors=standard_interceptors(auth, policy=POLICY)) as server,
        grpc.aio.insecure_channel(server.address) as channel,
    ):
        who = unary_unary(channel, "WhoAmI")
        assert await who(b"", metadata=metadata) == b"ayse:player"
        assert await who(b"", metadata=metadata) == b"ayse:player"
        await asyncio.sleep(max(0.0, expires - time.time()) + 0.1)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await who(b"", metadata=metadata)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_a_server_keeps_as_many_verified_tokens_as_its_setting_says(
    serve: ServeFactory, keys: Keyring, auth: AuthSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MASA_VERIFIED_TOKENS bounds what a server keeps verified: within it every token is
    checked once, beyond it the callers that come round in turn are checked every call."""
    checks: list[str] = []
    check = TokenVerifier.verify_until

    def counted(verifier: TokenVerifier, token: str) -> tuple[Principal, float]:
        checks.append(token)
        return check(verifier, token)

    monkeypatch.setattr(TokenVerifier, "verify_until", counted)
    tokens = [signer(keys, auth).mint(name) for name in ("ayse", "bora", "cem")]
    for kept, expected in ((3, 3), (2, 9)):
        checks.clear()
        bounded = replace(auth, verified_tokens=kept)
        registry = CollectorRegistry()
        interceptors = standard_interceptors(bounded, policy=POLICY, metrics=GrpcMetrics(registry))
        async with (
            serve(HANDLERS, interceptors=interceptors) as server,
            grpc.aio.insecure_channel(server.address) as channel,
        ):
            who = unary_unary(channel, "WhoAmI")
            for _ in range(3):
                for token, name in zip(tokens, ("ayse", "bora", "cem"), strict=True):
                    metadata = (("authorization", f"Bearer {token}"),)
                    assert await who(b"", metadata=metadata) == f"{name}:player".encode()
        assert len(checks) == expected
        # Operators see it: the checks grow with the calls when the tokens do not fit.
        assert registry.get_sample_value("masa_token_signature_checks_total") == expected
        assert registry.get_sample_value("masa_verified_tokens") == kept


async def _read_until_token_expires(
    serve: ServeFactory, keys: Keyring, auth: AuthSettings, method: str
) -> list[bytes]:
    """Read ``method``'s stream with a token of 2 s to its end, which must be UNAUTHENTICATED,
    TOKEN_EXPIRED, because the token expired; the items received."""
    token = signer(keys, auth).mint("ayse", ttl_seconds=2)
    expires = jwt.decode(token, options={"verify_signature": False})["exp"]
    async with (
        serve(HANDLERS, interceptors=standard_interceptors(auth, policy=POLICY)) as server,
        grpc.aio.insecure_channel(server.address) as channel,
    ):
        stream = unary_stream(channel, method)(
            b"", metadata=(("authorization", f"Bearer {token}"),)
        )
        received: list[bytes] = []

        async def read() -> None:
            async for item in stream:
                received.append(item)

        with pytest.raises(grpc.aio.AioRpcError) as ended:
            await asyncio.wait_for(read(), max(0.0, expires - time.time()) + 5)
        info = error_info(await rpc_status.aio.from_call(stream))
        assert ended.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert info is not None and info.reason == TOKEN_EXPIRED
        # Ended by the token's expiry, not by the reader's patience (expiry + 5 s); the slack
        # is for a loaded machine, where a second of scheduling delay has been seen in CI.
        assert time.time() < expires + 3.0
    return received


async def test_a_stream_whose_items_never_wait_still_ends_when_its_token_does(
    serve: ServeFactory, keys: Keyring, auth: AuthSettings
) -> None:
    """A reader that keeps one update always waiting cannot keep its stream past its token."""
    assert await _read_until_token_expires(serve, keys, auth, "Updates")


def test_keys_rotate_without_a_restart(tmp_path: Path, keys: Keyring) -> None:
    """A key added to the JWK set is trusted at the first token that names it; a key removed
    stops being trusted at the next look at the file, its tokens with it."""
    jwks = tmp_path / "jwks.json"
    shutil.copy(keys.jwks, jwks)
    auth = AuthSettings(jwt_jwks_file=jwks)
    now = [0.0]
    verifier = TokenVerifier(auth, clock=lambda: now[0])
    old = SigningKey(keys.signer(ISSUER).private, ISSUER, keys.signer(ISSUER).kid)
    fresh_private = Ed25519PrivateKey.generate()
    fresh = SigningKey(fresh_private, ISSUER, key_id(fresh_private.public_key(), ISSUER))
    old_token = TokenSigner(old, auth).mint("ayse")
    new_token = TokenSigner(fresh, auth).mint("ayse")
    assert verifier.verify(old_token).subject == "ayse"
    with pytest.raises(Unauthenticated, match="does not trust"):
        verifier.verify(new_token)
    # The operators add the new key beside the old one.
    document = json.loads(jwks.read_text())
    document["keys"].append(jwks_document([fresh])["keys"][0])
    jwks.write_text(json.dumps(document))
    now[0] += 2
    assert verifier.verify(new_token).subject == "ayse"
    assert verifier.verify(old_token).subject == "ayse"
    # Then remove the old one: once the file is looked at again, its tokens are refused.
    document["keys"] = [k for k in document["keys"] if k["kid"] != old.kid]
    jwks.write_text(json.dumps(document))
    now[0] += 31
    with pytest.raises(Unauthenticated, match="does not trust"):
        verifier.verify(old_token)
    assert verifier.verify(new_token).subject == "ayse"


def test_service_tokens_are_reused_until_shortly_before_they_expire(
    keys: Keyring, auth: AuthSettings
) -> None:
    now = [time.time()]
    tokens = ServiceTokens(signer(keys, auth, "matchmaking"), clock=lambda: now[0])
    first = tokens.token()
    now[0] += 200
    assert tokens.token() == first
    now[0] += 50
    renewed = tokens.token()
    assert renewed != first
    verified = jwt.decode(renewed, options={"verify_signature": False})
    assert verified["exp"] == int(now[0]) + 300
    assert TokenVerifier(auth).verify(first).roles == {Role.MATCHMAKING}


def test_the_key_files_are_checked_at_start(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="MASA_JWT_JWKS_FILE"):
        AuthSettings(jwt_jwks_file=tmp_path / "nothing.json")
    with pytest.raises(SettingsError, match="MASA_JWT_LEEWAY_SECONDS"):
        AuthSettings(jwt_leeway_seconds=3600)


async def test_a_stream_waiting_for_its_next_item_ends_when_its_token_does(
    serve: ServeFactory, keys: Keyring, auth: AuthSettings
) -> None:
    """One timer per stream cuts a wait short at the token's expiry: UNAUTHENTICATED,
    TOKEN_EXPIRED, though no item ever came."""
    IDLE_ENDINGS.clear()
    await _read_until_token_expires(serve, keys, auth, "Idle")
    assert [TokenExpired] == IDLE_ENDINGS


async def test_a_stream_its_caller_cancels_ends_cancelled_not_expired(
    serve: ServeFactory, keys: Keyring, auth: AuthSettings
) -> None:
    """The expiry timer turns its own cancellation into TOKEN_EXPIRED and no other: a caller
    that goes away long before its token expires ends the stream as cancelled."""
    token = signer(keys, auth).mint("ayse", ttl_seconds=600)
    IDLE_ENDINGS.clear()
    async with (
        serve(HANDLERS, interceptors=standard_interceptors(auth, policy=POLICY)) as server,
        grpc.aio.insecure_channel(server.address) as channel,
    ):
        stream = unary_stream(channel, "Idle")(
            b"", metadata=(("authorization", f"Bearer {token}"),)
        )
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(stream.read(), 0.5)
        deadline = time.monotonic() + 10
        while not IDLE_ENDINGS and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    assert [asyncio.CancelledError] == IDLE_ENDINGS


def _acting_for(seconds: float) -> None:
    """The calling task's principal, its token expiring in ``seconds`` (as AuthInterceptor
    sets it for a call)."""
    auth_module._principal.set(Principal("ayse", frozenset({Role.PLAYER}), time.time() + seconds))


async def _ended(task: asyncio.Task[None]) -> str:
    try:
        await task
    except BaseException as error:
        return type(error).__name__
    return "returned"


async def test_a_cancellation_during_a_wait_stays_one_when_the_token_expires_meanwhile() -> None:
    """Only the expiry timer's own cancellation becomes TokenExpired: a caller's cancellation
    that a source is still handling when the token expires ends the stream cancelled."""

    async def slow_to_stop() -> AsyncIterator[int]:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await asyncio.sleep(0.3)
            raise
        yield 1

    async def read() -> None:
        _acting_for(0.2)
        async for _ in until_token_expires(slow_to_stop()):
            pass

    reader = asyncio.create_task(read())
    await asyncio.sleep(0.05)
    reader.cancel()
    assert await _ended(reader) == "CancelledError"


async def test_a_source_that_swallows_the_expiry_leaves_no_cancellation_behind() -> None:
    """A source that ignores the timer's cancellation and ends: the stream ends, and the task
    is left with no cancellation request of the timer's (a later timeout still works)."""
    states: list[object] = []

    async def swallowing() -> AsyncIterator[int]:
        stopped = asyncio.Event()
        with contextlib.suppress(asyncio.CancelledError):
            await stopped.wait()
        if stopped.is_set():
            yield 1

    async def read() -> None:
        _acting_for(0.1)
        async for _ in until_token_expires(swallowing()):
            pass
        task = asyncio.current_task()
        assert task is not None
        states.append(task.cancelling())
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(0.01):
                await asyncio.sleep(1)
            states.append("no timeout")

    assert await _ended(asyncio.create_task(read())) == "returned"
    assert states == [0]
