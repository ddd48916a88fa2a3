from __future__ import annotations

import asyncio
import gc
import io
import json
import logging
import socket
from collections.abc import Iterator
from typing import Any

import grpc
import grpc.aio
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message
from masa_platform.logs import bound_context, configure_logging
from masa_platform.runner import run
from masa_platform.server import standard_interceptors
from masa_platform.testing import auth_settings, token
from platform_support import PLAYERS_POLICY, ServeFactory, unary_stream, unary_unary


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    buffer = io.StringIO()
    configure_logging("DEBUG", service="table-engine", stream=buffer)
    yield buffer
    root.handlers[:] = saved_handlers
    root.setLevel(saved_level)


def lines(buffer: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in buffer.getvalue().splitlines()]


def test_each_record_is_one_json_object_per_line(stream: io.StringIO) -> None:
    log = logging.getLogger("masa.test")
    log.info("table %s created", "t1", extra={"game": "fiftyone", "seats": 4})
    log.warning("multi\nline")
    first, second = lines(stream)
    assert first["msg"] == "table t1 created"
    assert first["level"] == "INFO"
    assert first["logger"] == "masa.test"
    assert first["service"] == "table-engine"
    assert first["game"] == "fiftyone"
    assert first["seats"] == 4
    assert str(first["ts"]).endswith("+00:00")
    assert second["msg"] == "multi\nline"


def test_bound_context_is_added_inside_the_block_only(stream: io.StringIO) -> None:
    log = logging.getLogger("masa.test")
    with bound_context(table_id="t9", seat=2):
        log.info("inside")
    log.info("outside")
    inside, outside = lines(stream)
    assert inside["table_id"] == "t9"
    assert inside["seat"] == 2
    assert "table_id" not in outside


def test_exceptions_and_unencodable_values_are_still_json(stream: io.StringIO) -> None:
    log = logging.getLogger("masa.test")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        log.exception("failed", extra={"value": object()})
    (entry,) = lines(stream)
    assert "RuntimeError: boom" in str(entry["exc"])
    assert str(entry["value"]).startswith("<object object")


def test_configuring_twice_does_not_duplicate_lines(stream: io.StringIO) -> None:
    second = io.StringIO()
    configure_logging("INFO", stream=second)
    logging.getLogger("masa.test").info("once")
    assert stream.getvalue() == ""
    assert len(second.getvalue().splitlines()) == 1


def test_every_line_names_the_node_and_the_host_by_default(stream: io.StringIO) -> None:
    logging.getLogger("masa.test").info("hello")
    (line,) = lines(stream)
    assert line["node"] == socket.gethostname()
    other = io.StringIO()
    configure_logging("INFO", service="table-engine", node="table-engine-1", stream=other)
    logging.getLogger("masa.test").info("hello")
    assert lines(other)[0]["node"] == "table-engine-1"


def _request_class() -> type[Message]:
    """A request message with the fields a log line picks up, as the masa protos name them."""
    file = descriptor_pb2.FileDescriptorProto(
        name="masa_test_logs.proto", package="masatest", syntax="proto3"
    )
    message = file.message_type.add(name="SubmitRequest")
    string, uint32 = (
        descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
        descriptor_pb2.FieldDescriptorProto.TYPE_UINT32,
    )
    message.field.add(name="request_id", number=1, type=string)
    message.field.add(name="table_id", number=2, type=string)
    message.field.add(name="game_no", number=3, type=uint32)
    message.oneof_decl.add(name="_seat")
    message.field.add(name="seat", number=4, type=uint32, oneof_index=0, proto3_optional=True)
    message.field.add(name="secret", number=5, type=string)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("masatest.SubmitRequest"))


async def test_a_call_logs_its_method_request_table_game_and_seat(
    stream: io.StringIO, serve: ServeFactory
) -> None:
    request_class = _request_class()

    async def submit(request: Message, context: grpc.aio.ServicerContext[Message, bytes]) -> bytes:
        logging.getLogger("masa.test").warning("move refused")
        return b"ok"

    handlers: dict[str, grpc.RpcMethodHandler[Message, bytes]] = {
        "SubmitAction": grpc.unary_unary_rpc_method_handler(
            submit, request_deserializer=request_class.FromString
        )
    }
    authorization = (("authorization", f"Bearer {token('ayse')}"),)
    async with (
        serve(
            handlers, interceptors=standard_interceptors(auth_settings(), policy=PLAYERS_POLICY)
        ) as server,
        grpc.aio.insecure_channel(server.address) as channel,
    ):
        call = unary_unary(channel, "SubmitAction")
        sent = request_class(request_id="r-1", table_id="t-9", seat=0, secret="hidden")
        await call(sent.SerializeToString(), metadata=authorization)
    (line,) = [line for line in lines(stream) if line["msg"] == "move refused"]
    assert line["rpc"] == "SubmitAction"
    assert (line["request_id"], line["table_id"], line["seat"]) == ("r-1", "t-9", 0)
    # An unset game number is not logged, nor a field that is no identity.
    assert "game_no" not in line and "secret" not in line


@pytest.mark.parametrize("event_loop", ["uvloop", "asyncio"])
def test_a_cancelled_stream_logs_no_error_and_its_lines_keep_the_call_identity(
    stream: io.StringIO, serve: ServeFactory, caplog: pytest.LogCaptureFixture, event_loop: str
) -> None:
    """Clients cancel server streams while a response is on its way, on the services' loop
    (uvloop) and asyncio's. The call ends with the handler's generator left at its yield,
    which the event loop closes later from a task of its own; binding the log context across
    that yield failed there ("Token ... was created in a different Context", an ERROR with a
    traceback for every WatchTable cancelled so)."""
    run(_cancel_streams(stream, serve, streams=10), event_loop=event_loop)
    errors = [
        record.getMessage()
        for record in caplog.records
        if record.levelno >= logging.ERROR
        # grpc's own report of a write the cancellation failed first, which comes and goes
        # with the timing: grpc's, none of the interceptors'.
        and not record.getMessage().startswith("ExecuteBatchError raised in core")
    ]
    assert errors == []


async def _cancel_streams(stream: io.StringIO, serve: ServeFactory, *, streams: int) -> None:
    request_class = _request_class()
    log = logging.getLogger("masa.test")

    async def watch(request: Message, context: grpc.aio.ServicerContext[Message, bytes]) -> Any:
        log.info("watching")
        try:
            while True:
                # Larger than the flow-control window: the stream is always mid-response.
                yield b"x" * 200_000
        finally:
            log.info("watch closed")

    handlers: dict[str, grpc.RpcMethodHandler[Message, bytes]] = {
        "WatchTable": grpc.unary_stream_rpc_method_handler(
            watch, request_deserializer=request_class.FromString
        )
    }
    authorization = (("authorization", f"Bearer {token('ayse')}"),)
    async with (
        serve(
            handlers, interceptors=standard_interceptors(auth_settings(), policy=PLAYERS_POLICY)
        ) as server,
        grpc.aio.insecure_channel(server.address) as channel,
    ):
        open_stream = unary_stream(channel, "WatchTable")
        for number in range(streams):
            sent = request_class(table_id=f"t-{number}")
            call = open_stream(sent.SerializeToString(), metadata=authorization)
            await call.read()
            assert call.cancel()
        for _ in range(100):
            closed = [line for line in lines(stream) if line["msg"] == "watch closed"]
            if len(closed) == streams:
                break
            gc.collect()
            await asyncio.sleep(0.02)
    # Tasks whose exception nobody retrieved report it when they are collected.
    gc.collect()
    await asyncio.sleep(0)
    found = lines(stream)
    for message in ("watching", "watch closed"):
        tables = [(line["rpc"], line["table_id"]) for line in found if line["msg"] == message]
        assert sorted(tables) == sorted(("WatchTable", f"t-{n}") for n in range(streams))
