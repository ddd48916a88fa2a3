from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import grpc
import grpc.aio
import pytest
from grpc_status import rpc_status
from masa_platform.auth import mint_token
from masa_platform.errors import (
    BadRequest,
    IllegalMove,
    MasaError,
    NotFound,
    NotYourSeat,
    Overloaded,
    TableMoved,
    error_info,
)
from masa_platform.server import standard_interceptors
from masa_platform.settings import AuthSettings
from masa_rules.errors import IllegalAction
from platform_support import TEST_SERVICE, ServeFactory

AUTH = AuthSettings()
TOKEN = (("authorization", f"Bearer {mint_token(AUTH, 'ayse')}"),)


def raising(error: BaseException) -> grpc.RpcMethodHandler[bytes, bytes]:
    async def behavior(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        raise error

    return grpc.unary_unary_rpc_method_handler(behavior)


async def failing_stream(
    request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]
) -> AsyncIterator[bytes]:
    yield b"snapshot"
    raise NotFound("table t404 does not exist")


CASES: dict[str, tuple[BaseException, grpc.StatusCode, str, dict[str, str]]] = {
    "Bad": (BadRequest("unknown card ZZ"), grpc.StatusCode.INVALID_ARGUMENT, "BAD_REQUEST", {}),
    "Illegal": (
        IllegalMove("F-30", "the opening needs 51 points"),
        grpc.StatusCode.FAILED_PRECONDITION,
        "F-30",
        {},
    ),
    "RuleLibrary": (
        IllegalAction("E-4", "not your turn"),
        grpc.StatusCode.FAILED_PRECONDITION,
        "E-4",
        {},
    ),
    "Moved": (
        TableMoved("t1", "engine-2.masa:7000"),
        grpc.StatusCode.FAILED_PRECONDITION,
        "TABLE_MOVED",
        {"table_id": "t1", "owner_address": "engine-2.masa:7000"},
    ),
    "Seat": (
        NotYourSeat("seat 2 is not yours"),
        grpc.StatusCode.PERMISSION_DENIED,
        "NOT_YOUR_SEAT",
        {},
    ),
    "Busy": (Overloaded("too many tables"), grpc.StatusCode.RESOURCE_EXHAUSTED, "OVERLOADED", {}),
    "Missing": (NotFound("no table t9"), grpc.StatusCode.NOT_FOUND, "NOT_FOUND", {}),
    "Bug": (KeyError("secret internals"), grpc.StatusCode.INTERNAL, "INTERNAL", {}),
}


@pytest.fixture
def handlers() -> dict[str, grpc.RpcMethodHandler[bytes, bytes]]:
    built = {name: raising(error) for name, (error, *_) in CASES.items()}
    built["Stream"] = grpc.unary_stream_rpc_method_handler(failing_stream)
    return built


@pytest.mark.parametrize("name", CASES)
async def test_errors_map_to_status_with_error_info(
    serve: ServeFactory,
    handlers: dict[str, grpc.RpcMethodHandler[bytes, bytes]],
    name: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    error, code, reason, metadata = CASES[name]
    async with (
        serve(handlers, interceptors=standard_interceptors(AUTH)) as server,
        grpc.aio.insecure_channel(server.address) as channel,
    ):
        rpc = channel.unary_unary(f"/{TEST_SERVICE}/{name}")(b"", metadata=TOKEN)
        with caplog.at_level(logging.ERROR), pytest.raises(grpc.aio.AioRpcError) as raised:
            await rpc
        status = await rpc_status.aio.from_call(rpc)
    assert raised.value.code() == code
    info = error_info(status)
    assert info is not None
    assert (info.reason, info.domain, dict(info.metadata)) == (reason, "masa.dev", metadata)
    if isinstance(error, MasaError):
        assert raised.value.details() == error.message
    if code == grpc.StatusCode.INTERNAL:
        assert raised.value.details() == "internal error"
        assert "secret internals" in caplog.text


async def test_a_stream_that_fails_midway_ends_with_the_mapped_status(
    serve: ServeFactory, handlers: dict[str, grpc.RpcMethodHandler[bytes, bytes]]
) -> None:
    async with (
        serve(handlers, interceptors=standard_interceptors(AUTH)) as server,
        grpc.aio.insecure_channel(server.address) as channel,
    ):
        rpc = channel.unary_stream(f"/{TEST_SERVICE}/Stream")(b"", metadata=TOKEN)
        received = [await rpc.read()]
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await rpc.read()
        status = await rpc_status.aio.from_call(rpc)
    assert received == [b"snapshot"]
    assert raised.value.code() == grpc.StatusCode.NOT_FOUND
    info = error_info(status)
    assert info is not None
    assert info.reason == "NOT_FOUND"
