"""``python -m masa_web_gateway``: serve browsers over HTTP/1.1 and HTTP/2 until SIGINT/SIGTERM,
configured from ``MASA_*``.

The HTTP server is granian, embedded in the service's own event loop: its HTTP/1.1 and HTTP/2
parsing and socket work run in Rust, which left the gateway a third of the Python CPU per call
that hypercorn's pure-Python protocol stack cost (bench/bench_web_gateway.py, issue 24).
"""

from __future__ import annotations

import asyncio
import logging
from socket import gethostname

from granian.constants import HTTPModes, Interfaces
from granian.http import HTTP1Settings, HTTP2Settings
from granian.server.embed import Server
from masa_platform import runner, tracing
from masa_platform.lifecycle import Lifecycle
from masa_platform.logs import configure_logging
from masa_platform.metrics import set_build_info, start_metrics_server
from masa_platform.server import wait_for_signal
from masa_platform.settings import load_settings

from masa_web_gateway.bootstrap import bootstrap
from masa_web_gateway.settings import GatewaySettings
from masa_web_gateway.web import Gateway

_log = logging.getLogger("masa_web_gateway")

# Request headers are small (a token, a few protocol headers): a larger block is refused.
_MAX_HEADER_BYTES = 64 * 1024


def http_server(app: Gateway, host: str, port: int) -> Server:
    """granian serving ``app`` (ASGI, no lifespan: the service starts and stops around it)."""
    return Server(
        app,
        address=host,
        port=port,
        interface=Interfaces.ASGINL,
        http=HTTPModes.auto,
        websockets=False,
        backlog=1024,
        http1_settings=HTTP1Settings(header_read_timeout=10_000, max_buffer_size=_MAX_HEADER_BYTES),
        http2_settings=HTTP2Settings(
            max_concurrent_streams=100, max_headers_size=_MAX_HEADER_BYTES
        ),
        # The service's own structured logs; granian would configure logging over them.
        log_enabled=False,
    )


async def serve(settings: GatewaySettings) -> None:
    platform = settings.platform
    set_build_info(platform.service_name, platform.version)
    async with Lifecycle(platform.service_name) as life:
        metrics = start_metrics_server(platform.metrics_host, platform.metrics_port)

        async def close_metrics() -> None:
            metrics.close()

        life.closing("metrics", close_metrics)
        wired = bootstrap(settings)
        life.closing("channels", wired.upstreams.close)
        await wired.health.check_once(timeout=settings.health_interval_seconds)
        life.spawn(wired.health.watch(settings.health_interval_seconds), name="health")
        server = http_server(wired.app, settings.http_host, settings.http_port)
        serving = asyncio.create_task(server.serve())

        async def stop_http(grace: float | None) -> None:
            # NOT_SERVING first, for long enough that a load balancer's probe sees it and sends
            # no one new here; then the listener closes, and the streams open get the grace.
            wired.health.stopping = True
            await asyncio.sleep(settings.drain_seconds)
            server.stop()  # type: ignore[no-untyped-call]  # untyped in granian
            try:
                await asyncio.wait_for(serving, grace)
            except TimeoutError:
                _log.warning("web gateway: streams still open after the grace period")

        life.draining("http", stop_http)
        _log.info(
            "web gateway serving",
            extra={
                "http_address": f"{settings.http_host}:{settings.http_port}",
                "metrics_port": metrics.port,
            },
        )
        signalled = asyncio.create_task(wait_for_signal())
        await asyncio.wait({signalled, serving}, return_when=asyncio.FIRST_COMPLETED)
        if serving.done():
            # The listener never started or died (a port taken): nothing is served, so stop.
            signalled.cancel()
            raise RuntimeError(f"the HTTP server ended: {serving.exception()!r}")
        _log.info("web gateway stopping", extra={"signal": signalled.result().name})


def main() -> None:
    settings = load_settings(GatewaySettings)
    platform = settings.platform
    configure_logging(platform.log_level, service=platform.service_name)
    with tracing.exported(platform.service_name, gethostname(), platform.otlp_endpoint):
        runner.run(serve(settings), event_loop=platform.loop.event_loop)


if __name__ == "__main__":
    main()
