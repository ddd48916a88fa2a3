from __future__ import annotations

import asyncio
import os
import signal

import grpc
import grpc.aio
import pytest
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2
from masa_platform.server import create_server, generic_service, serve_until_signalled
from masa_platform.settings import (
    PUBLIC_CALL_ROOM,
    PUBLIC_STREAMS,
    SERVICE_RPC_ROOM,
    QuotaSettings,
    ServerSettings,
)
from masa_platform.testing import HealthStub, next_message
from platform_support import TEST_SERVICE, Handlers, ServeFactory, unary_unary

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


async def echo(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
    return request


def handlers(**extra: grpc.RpcMethodHandler[bytes, bytes]) -> Handlers:
    return {"Echo": grpc.unary_unary_rpc_method_handler(echo), **extra}


async def test_health_reports_the_server_and_each_service_serving(serve: ServeFactory) -> None:
    async with serve(handlers()) as server, grpc.aio.insecure_channel(server.address) as channel:
        stub = HealthStub(channel)
        for name in ("", TEST_SERVICE):
            reply = await stub.Check(health_pb2.HealthCheckRequest(service=name))
            assert reply.status == SERVING
        await server.set_serving(False)
        reply = await stub.Check(health_pb2.HealthCheckRequest(service=TEST_SERVICE))
        assert reply.status == NOT_SERVING


async def test_reflection_lists_the_registered_services(serve: ServeFactory) -> None:
    async with serve(handlers()) as server, grpc.aio.insecure_channel(server.address) as channel:
        # What the generated ServerReflectionStub calls, which types-grpcio types for sync
        # channels only.
        info = channel.stream_stream(
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
            request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
            response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
        )
        request = reflection_pb2.ServerReflectionRequest(list_services="")
        responses = [reply async for reply in info(iter([request]))]
        names = {s.name for s in responses[0].list_services_response.service}
        assert names == {
            TEST_SERVICE,
            "grpc.health.v1.Health",
            "grpc.reflection.v1alpha.ServerReflection",
        }


async def test_grpcs_own_limit_is_the_last_resort_above_the_quotas(serve: ServeFactory) -> None:
    """Past ``grpc_concurrent_rpcs`` (derived from the quotas: callers, the services' room,
    health streams and checks) gRPC itself answers RESOURCE_EXHAUSTED; the quota interceptor,
    absent here, keeps callers well below it (test_platform_quotas)."""
    running = 0
    started, release = asyncio.Event(), asyncio.Event()
    settings = ServerSettings(
        grace_seconds=0.5,
        quotas=QuotaSettings(max_caller_rpcs=2, caller_streams=1, callers_tracked=3),
    )
    limit = settings.grpc_concurrent_rpcs
    assert limit == 2 + SERVICE_RPC_ROOM + PUBLIC_STREAMS + PUBLIC_CALL_ROOM

    async def slow(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        nonlocal running
        running += 1
        if running == limit:
            started.set()
        await release.wait()
        return b"done"

    extra = handlers(Slow=grpc.unary_unary_rpc_method_handler(slow))
    async with (
        serve(extra, settings=settings) as server,
        grpc.aio.insecure_channel(server.address) as channel,
    ):
        held = [asyncio.ensure_future(unary_unary(channel, "Slow")(b"")) for _ in range(limit)]
        await asyncio.wait_for(started.wait(), 30)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await unary_unary(channel, "Echo")(b"x")
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        release.set()
        assert await asyncio.gather(*held) == [b"done"] * limit


async def test_messages_over_the_size_limit_are_refused(serve: ServeFactory) -> None:
    settings = ServerSettings(max_message_bytes=1024)
    async with (
        serve(handlers(), settings=settings) as server,
        grpc.aio.insecure_channel(server.address) as channel,
    ):
        echo_call = unary_unary(channel, "Echo")
        assert await echo_call(b"x" * 512) == b"x" * 512
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await echo_call(b"x" * 4096)
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


async def test_shutdown_goes_not_serving_then_drains_running_calls() -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def slow(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        started.set()
        await release.wait()
        return b"finished"

    server = create_server(
        ServerSettings(grace_seconds=5.0),
        [generic_service(TEST_SERVICE, handlers(Slow=grpc.unary_unary_rpc_method_handler(slow)))],
    )
    await server.start()
    async with grpc.aio.insecure_channel(server.address) as channel:
        watch = HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=TEST_SERVICE))
        assert (await next_message(watch, health_pb2.HealthCheckResponse)).status == SERVING
        running = asyncio.ensure_future(unary_unary(channel, "Slow")(b""))
        await asyncio.wait_for(started.wait(), 10)
        stopping = asyncio.ensure_future(server.stop())
        assert (await next_message(watch, health_pb2.HealthCheckResponse)).status == NOT_SERVING
        assert not stopping.done()
        release.set()
        assert await running == b"finished"
        watch.cancel()
        await asyncio.wait_for(stopping, 10)


async def test_serve_until_signalled_stops_gracefully_on_sigterm() -> None:
    server = create_server(
        ServerSettings(grace_seconds=0.1), [generic_service(TEST_SERVICE, handlers())]
    )
    loop = asyncio.get_running_loop()
    loop.call_later(0.3, os.kill, os.getpid(), signal.SIGTERM)
    received = await asyncio.wait_for(serve_until_signalled(server), 10)
    assert received == signal.SIGTERM
    async with grpc.aio.insecure_channel(server.address) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as gone:
            await unary_unary(channel, "Echo")(b"x", timeout=1)
        assert gone.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
