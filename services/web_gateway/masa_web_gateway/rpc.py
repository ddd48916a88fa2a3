"""The Connect, gRPC-Web and gRPC endpoints of the exposed methods (connectrpc), each one
forwarding to its service through :class:`~masa_web_gateway.upstreams.Upstreams`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from connectrpc.code import Code
from connectrpc.compat import google_protobuf_codecs
from connectrpc.errors import ConnectError
from connectrpc.request import RequestContext
from connectrpc.server import ConnectASGIApplication, Endpoint
from masa_platform.errors import Overloaded

from masa_web_gateway.api import Route
from masa_web_gateway.errors import from_masa_error
from masa_web_gateway.metrics import GatewayMetrics, protocol_of
from masa_web_gateway.upstreams import Upstreams

__all__ = ["RpcApplication", "rpc_application"]


# connectrpc types the endpoints by kind in classes it does not export.
_Endpoints = Mapping[str, Any]


class RpcApplication(ConnectASGIApplication[_Endpoints]):
    """Every exposed method in one application, found by its path."""

    @property
    def path(self) -> str:
        return "/"


class _Streams:
    """The streams open through the gateway, up to its limit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.open = 0


def rpc_application(
    routes: tuple[Route, ...],
    upstreams: Upstreams,
    metrics: GatewayMetrics,
    *,
    call_timeout_seconds: float,
    max_request_bytes: int,
    max_streams: int,
) -> RpcApplication:
    streams = _Streams(max_streams)
    endpoints: dict[str, Any] = {}
    for route in routes:
        if route.streams:
            endpoints[route.path] = Endpoint.server_stream(
                route.info, _streaming(route, upstreams, metrics, streams)
            )
        else:
            endpoints[route.path] = Endpoint.unary(
                route.info, _unary(route, upstreams, metrics, call_timeout_seconds)
            )
    return RpcApplication(
        service=endpoints,
        endpoints=lambda table: table,
        read_max_bytes=max_request_bytes,
        codecs=google_protobuf_codecs(),
    )


def _unary(
    route: Route, upstreams: Upstreams, metrics: GatewayMetrics, call_timeout_seconds: float
) -> Callable[[Any, RequestContext[Any, Any]], Awaitable[Any]]:
    async def forward(request: Any, ctx: RequestContext[Any, Any]) -> Any:
        protocol = protocol_of(ctx.request_headers.get("content-type", ""))
        left = ctx.timeout_ms
        timeout = call_timeout_seconds if left is None else min(call_timeout_seconds, left / 1000)
        started = time.monotonic()
        code = "UNKNOWN"
        try:
            answer = await upstreams.unary(route, request, ctx, timeout)
        except ConnectError as error:
            code = _code_name(error.code)
            raise
        except asyncio.CancelledError:
            # The browser went away before the answer.
            code = "CANCELLED"
            raise
        else:
            code = "OK"
            return answer
        finally:
            labels = (route.service, route.info.name, protocol)
            metrics.handled.labels(*labels, code).inc()
            metrics.seconds.labels(*labels).observe(time.monotonic() - started)

    return forward


def _streaming(
    route: Route, upstreams: Upstreams, metrics: GatewayMetrics, streams: _Streams
) -> Callable[[Any, RequestContext[Any, Any]], AsyncIterator[Any]]:
    open_gauge = metrics.streams.labels(route.info.name)

    async def forward(request: Any, ctx: RequestContext[Any, Any]) -> AsyncIterator[Any]:
        protocol = protocol_of(ctx.request_headers.get("content-type", ""))
        if streams.open >= streams.limit:
            metrics.handled.labels(
                route.service, route.info.name, protocol, "RESOURCE_EXHAUSTED"
            ).inc()
            raise from_masa_error(
                Overloaded(
                    f"the gateway has {streams.limit} streams open; retry later",
                    metadata={"limit": str(streams.limit)},
                )
            )
        streams.open += 1
        open_gauge.inc()
        code = "UNKNOWN"
        try:
            async for message in upstreams.stream(route, request, ctx):
                yield message
            code = "OK"
        except ConnectError as error:
            code = _code_name(error.code)
            raise
        except (asyncio.CancelledError, GeneratorExit):
            # The browser closed the stream: the way a watch usually ends.
            code = "CANCELLED"
            raise
        finally:
            streams.open -= 1
            open_gauge.dec()
            metrics.handled.labels(route.service, route.info.name, protocol, code).inc()

    return forward


def _code_name(code: Code) -> str:
    """The gRPC spelling of a Connect code, as the services' own metrics name it."""
    return "CANCELLED" if code is Code.CANCELED else code.name
