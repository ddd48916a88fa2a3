from __future__ import annotations

import asyncio
import contextlib
import urllib.request
from collections.abc import AsyncIterator

import grpc
import grpc.aio
import pytest
from masa_platform.errors import IllegalMove
from masa_platform.metrics import (
    GrpcMetrics,
    LoopMetrics,
    go_code_name,
    set_build_info,
    start_metrics_server,
)
from masa_platform.server import standard_interceptors
from masa_platform.testing import auth_settings, token
from platform_support import (
    PLAYERS_POLICY,
    TEST_SERVICE,
    Handlers,
    ServeFactory,
    unary_stream,
    unary_unary,
)
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

AUTH = auth_settings()
TOKEN = (("authorization", f"Bearer {token('ayse')}"),)


async def submit(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
    if request == b"bad":
        raise IllegalMove("F-30", "too few points")
    return b"ok"


async def watch(
    request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]
) -> AsyncIterator[bytes]:
    for n in range(3):
        yield str(n).encode()


HANDLERS: Handlers = {
    "SubmitAction": grpc.unary_unary_rpc_method_handler(submit),
    "WatchTable": grpc.unary_stream_rpc_method_handler(watch),
}


def scrape(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def labels(kind: str, method: str, **extra: str) -> frozenset[tuple[str, str]]:
    return frozenset(
        {"grpc_type": kind, "grpc_service": TEST_SERVICE, "grpc_method": method, **extra}.items()
    )


async def test_grpc_metrics_are_exposed_over_http_with_go_grpc_prometheus_names(
    serve: ServeFactory,
) -> None:
    registry = CollectorRegistry()
    metrics = GrpcMetrics(registry)
    set_build_info("table-engine", "1.2.3", registry)
    endpoint = start_metrics_server(port=0, registry=registry)
    try:
        interceptors = standard_interceptors(AUTH, policy=PLAYERS_POLICY, metrics=metrics)
        async with (
            serve(HANDLERS, interceptors=interceptors) as server,
            grpc.aio.insecure_channel(server.address) as channel,
        ):
            submit_call = unary_unary(channel, "SubmitAction")
            await submit_call(b"good", metadata=TOKEN)
            with pytest.raises(grpc.aio.AioRpcError):
                await submit_call(b"bad", metadata=TOKEN)
            with pytest.raises(grpc.aio.AioRpcError):
                await submit_call(b"good")
            stream = unary_stream(channel, "WatchTable")(b"", metadata=TOKEN)
            assert [m async for m in stream] == [b"0", b"1", b"2"]
        samples = await asyncio.to_thread(scrape, endpoint.port)
    finally:
        endpoint.close()

    assert endpoint.port > 0
    unary = labels("unary", "SubmitAction")
    assert samples["grpc_server_started_total", unary] == 3
    assert samples["grpc_server_msg_received_total", unary] == 3
    assert samples["grpc_server_msg_sent_total", unary] == 1
    assert (
        samples["grpc_server_handled_total", labels("unary", "SubmitAction", grpc_code="OK")] == 1
    )
    failed = labels("unary", "SubmitAction", grpc_code="FailedPrecondition")
    assert samples["grpc_server_handled_total", failed] == 1
    denied = labels("unary", "SubmitAction", grpc_code="Unauthenticated")
    assert samples["grpc_server_handled_total", denied] == 1
    assert samples["grpc_server_handling_seconds_count", unary] == 3

    streamed = labels("server_stream", "WatchTable")
    assert samples["grpc_server_started_total", streamed] == 1
    assert samples["grpc_server_msg_sent_total", streamed] == 3
    ok_stream = labels("server_stream", "WatchTable", grpc_code="OK")
    assert samples["grpc_server_handled_total", ok_stream] == 1

    build = frozenset({"service": "table-engine", "version": "1.2.3"}.items())
    assert samples["masa_build_info", build] == 1
    label_names = {name for _, label_set in samples for name, _ in label_set}
    assert label_names <= {
        "grpc_type",
        "grpc_service",
        "grpc_method",
        "grpc_code",
        "le",
        "service",
        "version",
    }


@pytest.mark.parametrize(
    ("code", "name"),
    [
        (grpc.StatusCode.OK, "OK"),
        (grpc.StatusCode.CANCELLED, "Canceled"),
        (grpc.StatusCode.INVALID_ARGUMENT, "InvalidArgument"),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, "ResourceExhausted"),
        (grpc.StatusCode.UNAUTHENTICATED, "Unauthenticated"),
    ],
)
def test_codes_are_spelled_as_go_spells_them(code: grpc.StatusCode, name: str) -> None:
    assert go_code_name(code) == name


async def test_a_loop_run_is_counted_by_outcome_and_timed() -> None:
    registry = CollectorRegistry()
    loops = LoopMetrics(registry)

    async def fails() -> None:
        raise RuntimeError("database busy")

    with loops.run("prune"):
        await asyncio.sleep(0)
    with pytest.raises(RuntimeError):
        await loops.timed("prune", fails)()
    with pytest.raises(asyncio.CancelledError), loops.run("prune"):
        raise asyncio.CancelledError
    assert (
        registry.get_sample_value("masa_loop_runs_total", {"loop": "prune", "outcome": "ok"}) == 1
    )
    error = {"loop": "prune", "outcome": "error"}
    assert registry.get_sample_value("masa_loop_runs_total", error) == 1
    # Cancellation is not a run: two runs timed.
    assert registry.get_sample_value("masa_loop_run_seconds_count", {"loop": "prune"}) == 2


def test_the_metrics_endpoint_leaves_out_the_created_series() -> None:
    registry = CollectorRegistry()
    with LoopMetrics(registry).run("prune"):
        pass
    with contextlib.closing(start_metrics_server(registry=registry)) as server:
        names = {name for name, _ in scrape(server.port)}
    assert "masa_loop_runs_total" in names
    assert not [name for name in names if name.endswith("_created")]
