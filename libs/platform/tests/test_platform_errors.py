from __future__ import annotations

import gc
import logging
import weakref
from collections.abc import AsyncIterator

import grpc
import grpc.aio
import pytest
from grpc_health.v1 import health_pb2
from grpc_status import rpc_status
from masa.common.v1 import error_pb2
from masa_platform.errors import (
    STATUS_CODES,
    BadRequest,
    IllegalMove,
    MasaError,
    NotFound,
    NotYourSeat,
    Overloaded,
    TableMoved,
    error_info,
    preview,
    reason_name,
)
from masa_platform.server import standard_interceptors
from masa_platform.testing import auth_settings, token
from masa_rules import refusals
from masa_rules.errors import IllegalAction
from masa_rules.refusals import DomainError, Kind, Reason
from platform_support import (
    PLAYERS_POLICY,
    Handlers,
    ServeFactory,
    unary_stream,
    unary_unary,
)

AUTH = auth_settings()
TOKEN = (("authorization", f"Bearer {token('ayse')}"),)


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


# Each kind of a domain's refusal, raised by a handler: the one status code of its kind, the
# reason it names (or its kind's default) and its metadata.
DOMAIN_CASES: dict[str, tuple[DomainError, grpc.StatusCode, str, dict[str, str]]] = {
    "DomainBadInput": (
        refusals.BadInput("a zero amount"),
        grpc.StatusCode.INVALID_ARGUMENT,
        reason_name(error_pb2.ERROR_REASON_BAD_REQUEST),
        {},
    ),
    "DomainRefused": (
        refusals.Refused("no chips", reason=Reason.INSUFFICIENT_FUNDS, metadata={"required": "5"}),
        grpc.StatusCode.FAILED_PRECONDITION,
        reason_name(error_pb2.ERROR_REASON_INSUFFICIENT_FUNDS),
        {"required": "5"},
    ),
    "DomainRefusedDefault": (
        refusals.Refused("not now"),
        grpc.StatusCode.FAILED_PRECONDITION,
        reason_name(error_pb2.ERROR_REASON_FAILED_PRECONDITION),
        {},
    ),
    "DomainNotFound": (
        refusals.NotFound("no hold h1", reason=Reason.HOLD_NOT_FOUND, metadata={"hold_id": "h1"}),
        grpc.StatusCode.NOT_FOUND,
        reason_name(error_pb2.ERROR_REASON_HOLD_NOT_FOUND),
        {"hold_id": "h1"},
    ),
    "DomainAlreadyExists": (
        refusals.AlreadyExists("request_id r1 made another hold"),
        grpc.StatusCode.ALREADY_EXISTS,
        reason_name(error_pb2.ERROR_REASON_REQUEST_ID_REUSED),
        {},
    ),
    "DomainNotPermitted": (
        refusals.NotPermitted("not your chips", reason=Reason.NOT_YOUR_ACCOUNT),
        grpc.StatusCode.PERMISSION_DENIED,
        reason_name(error_pb2.ERROR_REASON_NOT_YOUR_ACCOUNT),
        {},
    ),
    "DomainUnavailable": (
        refusals.Unavailable("the database is down"),
        grpc.StatusCode.UNAVAILABLE,
        reason_name(error_pb2.ERROR_REASON_UNAVAILABLE),
        {},
    ),
}
CASES.update(DOMAIN_CASES)


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
        serve(handlers, interceptors=standard_interceptors(AUTH, policy=PLAYERS_POLICY)) as server,
        grpc.aio.insecure_channel(server.address) as channel,
    ):
        rpc = unary_unary(channel, name)(b"", metadata=TOKEN)
        with caplog.at_level(logging.ERROR), pytest.raises(grpc.aio.AioRpcError) as raised:
            await rpc
        status = await rpc_status.aio.from_call(rpc)
    assert raised.value.code() == code
    info = error_info(status)
    assert info is not None
    assert (info.reason, info.domain, dict(info.metadata)) == (reason, "masa.dev", metadata)
    if isinstance(error, MasaError | DomainError):
        assert raised.value.details() == error.message
    if code == grpc.StatusCode.INTERNAL:
        assert raised.value.details() == "internal error"
        assert "secret internals" in caplog.text


async def test_a_stream_that_fails_midway_ends_with_the_mapped_status(
    serve: ServeFactory, handlers: dict[str, grpc.RpcMethodHandler[bytes, bytes]]
) -> None:
    async with (
        serve(handlers, interceptors=standard_interceptors(AUTH, policy=PLAYERS_POLICY)) as server,
        grpc.aio.insecure_channel(server.address) as channel,
    ):
        rpc = unary_stream(channel, "Stream")(b"", metadata=TOKEN)
        received = [await rpc.read()]
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await rpc.read()
        status = await rpc_status.aio.from_call(rpc)
    assert received == [b"snapshot"]
    assert raised.value.code() == grpc.StatusCode.NOT_FOUND
    info = error_info(status)
    assert info is not None
    assert info.reason == "NOT_FOUND"


async def test_request_bytes_that_are_not_the_message_are_invalid_argument_not_unknown(
    serve: ServeFactory,
) -> None:
    async def check(
        request: health_pb2.HealthCheckRequest,
        context: grpc.aio.ServicerContext[health_pb2.HealthCheckRequest, bytes],
    ) -> bytes:
        return request.service.encode()

    handler: grpc.RpcMethodHandler[health_pb2.HealthCheckRequest, bytes]
    handler = grpc.unary_unary_rpc_method_handler(
        check, request_deserializer=health_pb2.HealthCheckRequest.FromString
    )
    async with (
        serve(
            {"Check": handler}, interceptors=standard_interceptors(AUTH, policy=PLAYERS_POLICY)
        ) as server,
        grpc.aio.insecure_channel(server.address) as channel,
    ):
        call = unary_unary(channel, "Check")
        good = health_pb2.HealthCheckRequest(service="masa").SerializeToString()
        assert await call(good, metadata=TOKEN) == b"masa"
        # A length-delimited field whose length runs past the end of the message.
        rpc = call(b"\x0a\xff\xff\x03abc", metadata=TOKEN)
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await rpc
        status = await rpc_status.aio.from_call(rpc)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    info = error_info(status)
    assert info is not None and info.reason == "BAD_REQUEST"


async def test_a_mapped_error_lets_go_of_the_frames_that_hold_the_request(
    serve: ServeFactory,
) -> None:
    """The traceback of a refused call (and of the error it chains to) is dropped, so the
    request it refers to is freed by reference counting, without a garbage collector pass."""
    kept: list[BaseException] = []
    big = weakref.WeakSet[Payload]()

    async def refuse(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        payload = Payload(request)
        big.add(payload)
        try:
            raise ValueError(f"cannot read {len(payload.data)} bytes")
        except ValueError:
            error = BadRequest("unreadable")
            kept.append(error)
            raise error from None

    handlers: Handlers = {"Refuse": grpc.unary_unary_rpc_method_handler(refuse)}
    gc.disable()
    try:
        async with (
            serve(
                handlers, interceptors=standard_interceptors(AUTH, policy=PLAYERS_POLICY)
            ) as server,
            grpc.aio.insecure_channel(server.address) as channel,
        ):
            with pytest.raises(grpc.aio.AioRpcError):
                await unary_unary(channel, "Refuse")(b"x" * 50_000, metadata=TOKEN)
        assert kept[0].__traceback__ is None
        assert kept[0].__context__ is not None and kept[0].__context__.__traceback__ is None
        assert len(big) == 0
    finally:
        gc.enable()


class Payload:
    def __init__(self, data: bytes) -> None:
        self.data = data


def test_preview_quotes_a_short_prefix_and_the_length() -> None:
    assert preview("t1") == "'t1'"
    long = preview("x" * 100_000)
    assert long.startswith("'xxxx") and "(100000 characters)" in long and len(long) < 60


def test_every_kind_of_refusal_has_a_status_code_and_every_domain_case_is_served() -> None:
    assert set(STATUS_CODES) == set(Kind)
    assert {error.kind for error, *_ in DOMAIN_CASES.values()} == set(Kind)
    for error, code, *_ in DOMAIN_CASES.values():
        assert STATUS_CODES[error.kind] == code


def test_the_domains_reasons_are_the_proto_error_reasons_name_for_name() -> None:
    """``masa_rules.refusals.Reason`` mirrors masa.common.v1.ErrorReason (a domain imports no
    protobuf): the same names, in the same order, none left out."""
    names = [
        reason_name(number)
        for number in error_pb2.ErrorReason.values()
        if number != error_pb2.ERROR_REASON_UNSPECIFIED
    ]
    assert [member.value for member in Reason] == names
    assert [member.name for member in Reason] == names


def test_a_reason_given_by_a_name_that_is_no_error_reason_is_refused_at_once() -> None:
    with pytest.raises(ValueError, match="NOT_A_REASON"):
        refusals.Refused("not now", reason="NOT_A_REASON")
