from __future__ import annotations

import asyncio
import time

import grpc
import grpc.aio
import jwt
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status
from masa_platform.auth import (
    INTERNAL_ROLES,
    AuthPolicy,
    Role,
    current_principal,
    mint_token,
    require_principal,
    verify_token,
)
from masa_platform.errors import Unauthenticated, error_info
from masa_platform.server import standard_interceptors
from masa_platform.settings import AuthSettings
from platform_support import TEST_SERVICE, ServeFactory

AUTH = AuthSettings(jwt_secret="s" * 32, jwt_issuer="masa-test", jwt_audience="masa-api")
POLICY = AuthPolicy(required_roles={f"/{TEST_SERVICE}/CreateTable": INTERNAL_ROLES})


async def whoami(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
    principal = require_principal()
    assert current_principal() is principal
    return f"{principal.subject}:{','.join(sorted(principal.roles))}".encode()


HANDLERS = {
    "WhoAmI": grpc.unary_unary_rpc_method_handler(whoami),
    "CreateTable": grpc.unary_unary_rpc_method_handler(whoami),
}


def claims(**overrides: object) -> dict[str, object]:
    now = int(time.time())
    base: dict[str, object] = {
        "sub": "ayse",
        "iss": AUTH.jwt_issuer,
        "aud": AUTH.jwt_audience,
        "exp": now + 60,
        "iat": now,
        "roles": ["player"],
    }
    base.update(overrides)
    return {key: value for key, value in base.items() if value is not None}


async def call(
    serve: ServeFactory, name: str, authorization: str | None
) -> tuple[grpc.StatusCode, bytes | str]:
    metadata = () if authorization is None else (("authorization", authorization),)
    interceptors = standard_interceptors(AUTH, policy=POLICY)
    async with (
        serve(HANDLERS, interceptors=interceptors) as server,
        grpc.aio.insecure_channel(server.address) as channel,
    ):
        rpc = channel.unary_unary(f"/{TEST_SERVICE}/{name}")(b"", metadata=metadata)
        try:
            return grpc.StatusCode.OK, await rpc
        except grpc.aio.AioRpcError as error:
            info = error_info(await rpc_status.aio.from_call(rpc))
            assert info is not None
            assert info.domain == "masa.dev"
            return error.code(), info.reason


async def test_a_valid_token_reaches_the_handler_with_its_principal(serve: ServeFactory) -> None:
    token = mint_token(AUTH, "ayse")
    assert await call(serve, "WhoAmI", f"Bearer {token}") == (grpc.StatusCode.OK, b"ayse:player")


@pytest.mark.parametrize(
    ("authorization", "why"),
    [
        (None, "missing header"),
        ("Basic dXNlcjpwYXNz", "wrong scheme"),
        ("Bearer ", "empty token"),
        ("Bearer not.a.jwt", "garbage"),
        (f"Bearer {jwt.encode(claims(), 'x' * 32, algorithm='HS256')}", "forged signature"),
        (f"Bearer {jwt.encode(claims(), 's' * 64, algorithm='HS512')}", "algorithm not allowed"),
        (f"Bearer {jwt.encode(claims(), None, algorithm='none')}", "alg none"),
        (f"Bearer {jwt.encode(claims(exp=int(time.time()) - 5), 's' * 32)}", "expired"),
        (f"Bearer {jwt.encode(claims(aud='other'), 's' * 32)}", "wrong audience"),
        (f"Bearer {jwt.encode(claims(iss='evil'), 's' * 32)}", "wrong issuer"),
        (f"Bearer {jwt.encode(claims(exp=None), 's' * 32)}", "no expiry"),
        (f"Bearer {jwt.encode(claims(sub=None), 's' * 32)}", "no subject"),
    ],
)
async def test_a_missing_or_invalid_token_is_unauthenticated(
    serve: ServeFactory, authorization: str | None, why: str
) -> None:
    code, reason = await call(serve, "WhoAmI", authorization)
    assert (code, reason) == (grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED"), why


async def test_an_internal_method_refuses_a_player(serve: ServeFactory) -> None:
    token = mint_token(AUTH, "ayse", [Role.PLAYER])
    assert await call(serve, "CreateTable", f"Bearer {token}") == (
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
    )


@pytest.mark.parametrize("role", [Role.SERVICE, Role.ADMIN])
async def test_an_internal_method_accepts_service_and_admin(
    serve: ServeFactory, role: Role
) -> None:
    token = mint_token(AUTH, "matchmaking", [role])
    code, reply = await call(serve, "CreateTable", f"Bearer {token}")
    assert (code, reply) == (grpc.StatusCode.OK, f"matchmaking:{role}".encode())


async def test_health_needs_no_token(serve: ServeFactory) -> None:
    interceptors = standard_interceptors(AUTH, policy=POLICY)
    async with (
        serve(HANDLERS, interceptors=interceptors) as server,
        grpc.aio.insecure_channel(server.address) as channel,
    ):
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
        assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_a_minted_token_verifies_and_unknown_roles_are_dropped() -> None:
    token = jwt.encode(claims(roles=["player", "root"]), AUTH.jwt_secret)
    principal = verify_token(token, AUTH)
    assert principal.subject == "ayse"
    assert principal.roles == {Role.PLAYER}
    expired = mint_token(AUTH, "ayse", ttl_seconds=10, now=time.time() - 60)
    with pytest.raises(Unauthenticated, match="expired"):
        verify_token(expired, AUTH)


def test_outside_an_authenticated_call_there_is_no_principal() -> None:
    assert current_principal() is None
    with pytest.raises(Unauthenticated):
        require_principal()


async def test_a_token_verified_once_is_refused_once_it_expires(serve: ServeFactory) -> None:
    """The server remembers verified tokens, but never past their expiry."""
    expires = int(time.time()) + 2
    authorization = f"Bearer {jwt.encode(claims(exp=expires), 's' * 32)}"
    metadata = (("authorization", authorization),)
    async with (
        serve(HANDLERS, interceptors=standard_interceptors(AUTH, policy=POLICY)) as server,
        grpc.aio.insecure_channel(server.address) as channel,
    ):
        who = channel.unary_unary(f"/{TEST_SERVICE}/WhoAmI")
        assert await who(b"", metadata=metadata) == b"ayse:player"
        assert await who(b"", metadata=metadata) == b"ayse:player"
        await asyncio.sleep(max(0.0, expires - time.time()) + 0.1)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await who(b"", metadata=metadata)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
