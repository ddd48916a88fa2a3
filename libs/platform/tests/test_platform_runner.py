"""masa_platform.runner: the services' event loop is uvloop unless asked for asyncio's own, and
a grpc.aio server and its client work on it (the services run on it in production)."""

from __future__ import annotations

import asyncio

import grpc
import grpc.aio
import pytest
import uvloop
from masa_platform.runner import run


async def _loop_type() -> type[asyncio.AbstractEventLoop]:
    return type(asyncio.get_running_loop())


def test_the_default_loop_is_uvloop_and_asyncio_can_be_asked_for() -> None:
    assert issubclass(run(_loop_type()), uvloop.Loop)
    chosen = run(_loop_type(), event_loop="asyncio")
    assert not issubclass(chosen, uvloop.Loop)
    assert issubclass(chosen, asyncio.BaseEventLoop)


async def _echo_over_grpc() -> list[bytes]:
    async def echo(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        return request[::-1]

    server = grpc.aio.server()
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                "runner.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(echo)}
            ),
        )
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes]
            call = channel.unary_unary("/runner.Echo/Echo")
            return list(await asyncio.gather(*(call(bytes([n, 1])) for n in range(50))))
    finally:
        await server.stop(None)


def test_an_unknown_loop_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'trio' is not one of uvloop, asyncio"):
        run(_loop_type(), event_loop="trio")


@pytest.mark.parametrize("event_loop", ["uvloop", "asyncio"])
def test_grpc_aio_serves_concurrent_calls_on_either_loop(event_loop: str) -> None:
    answers = run(_echo_over_grpc(), event_loop=event_loop)
    assert answers == [bytes([1, n]) for n in range(50)]
