"""The ``grpc.aio`` server every masa service runs, and its graceful shutdown.

:func:`create_server` binds the port, registers the services with health checking and
reflection, and applies the message size and concurrency limits. Callers' calls are limited
by the quota interceptor (:mod:`masa_platform.quotas`, in :func:`standard_interceptors`);
gRPC's own ``maximum_concurrent_rpcs``, which counts health checks too, is only the last
resort above it (``ServerSettings.grpc_concurrent_rpcs``: the callers' limit, the services'
room, the health and reflection streams and room for health checks), so callers can never
make health answer ``RESOURCE_EXHAUSTED``. Shutting down first reports ``NOT_SERVING`` to
health watchers, then stops accepting calls and gives running calls the grace period to end.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from masa_platform import tracing
from masa_platform.auth import AuthInterceptor, AuthPolicy
from masa_platform.errors import ErrorInterceptor
from masa_platform.handlers import InterceptorChain, WrappingInterceptor
from masa_platform.idempotency import IdempotencyCache, IdempotencyInterceptor
from masa_platform.metrics import GrpcMetrics, MetricsInterceptor
from masa_platform.quotas import CallerQuotas, QuotaInterceptor
from masa_platform.request_logs import LogContextInterceptor
from masa_platform.settings import AuthSettings, ServerSettings, TlsSettings
from masa_platform.tls import server_credentials

__all__ = [
    "GrpcServer",
    "ServiceRegistration",
    "create_server",
    "generic_service",
    "serve_until_signalled",
    "standard_interceptors",
    "wait_for_signal",
]


@dataclass(frozen=True, slots=True)
class ServiceRegistration:
    """A service's full name (for health and reflection) and how to add it to a server.

    With generated stubs: ``ServiceRegistration("masa.table.v1.TableService",
    lambda server: add_TableServiceServicer_to_server(servicer, server))``.
    """

    name: str
    add_to_server: Callable[[grpc.aio.Server], None]


def generic_service(
    name: str, handlers: Mapping[str, grpc.RpcMethodHandler[Any, Any]]
) -> ServiceRegistration:
    """A registration from method handlers keyed by method name (no generated code needed)."""
    generic = grpc.method_handlers_generic_handler(name, dict(handlers))
    return ServiceRegistration(name, lambda server: server.add_generic_rpc_handlers((generic,)))


def standard_interceptors(
    auth: AuthSettings,
    *,
    policy: AuthPolicy | None = None,
    metrics: GrpcMetrics | None = None,
    idempotency: IdempotencyCache | None = None,
    uncached: Collection[str] = (),
    quotas: CallerQuotas | None = None,
) -> list[grpc.aio.ServerInterceptor]:
    """The interceptors in the order they must run, outermost first; all but tracing's are
    installed as one chain (:class:`~masa_platform.handlers.InterceptorChain`: one interceptor
    call per RPC).

    Tracing (when on) wraps everything; metrics see every final status, auth failures
    included; every log line of the call, auth's included, carries the call's identity; errors
    map whatever auth and the handler raise; quotas (every service passes its
    :class:`~masa_platform.quotas.CallerQuotas`) hold the caller that auth established to its
    limits before anything else runs; idempotency keys answers by that caller, except for the
    ``uncached`` methods, which de-duplicate their request ids themselves
    (:class:`~masa_platform.idempotency.IdempotencyInterceptor`).
    """
    chain: list[WrappingInterceptor] = []
    if metrics is not None:
        chain.append(MetricsInterceptor(metrics))
    chain.append(LogContextInterceptor())
    chain.append(ErrorInterceptor())
    authenticating = AuthInterceptor(
        auth, policy, on_check=metrics.token_checks.inc if metrics is not None else None
    )
    if metrics is not None:
        metrics.tokens_kept.set_function(authenticating.tokens_kept)
    chain.append(authenticating)
    if quotas is not None:
        chain.append(QuotaInterceptor(quotas, policy))
    chain.append(IdempotencyInterceptor(idempotency, uncached=uncached))
    return [*tracing.server_interceptors(), InterceptorChain(chain)]


class GrpcServer:
    """A bound, not yet started server with its health service."""

    def __init__(
        self,
        server: grpc.aio.Server,
        *,
        host: str,
        port: int,
        health_servicer: health.aio.HealthServicer,
        service_names: Sequence[str],
        grace_seconds: float,
    ) -> None:
        self.server = server
        self.host = host
        self.port = port
        self.health = health_servicer
        self.service_names = tuple(service_names)
        self.grace_seconds = grace_seconds
        self._after_stop: list[Callable[[], None]] = []
        self._before_serving: list[Callable[[], Awaitable[None]]] = []

    @property
    def address(self) -> str:
        """``host:port`` as a client dials it."""
        return f"{_bracketed(self.host)}:{self.port}"

    async def start(self, *, serving: bool = True) -> None:
        """Accept calls; health says ``serving`` (False while the service still gets ready,
        e.g. recovers its state: health answers, and says NOT_SERVING until then), once what
        :meth:`before_serving` named is ready."""
        await self.server.start()
        if serving and self._before_serving:
            await self.set_serving(False)
            for ready in self._before_serving:
                await ready()
        await self.set_serving(serving)

    def before_serving(self, ready: Callable[[], Awaitable[None]]) -> None:
        """Await ``ready`` in :meth:`start`, health NOT_SERVING meanwhile: what the service
        needs before it can do its job (worker processes starting)."""
        self._before_serving.append(ready)

    async def set_serving(self, serving: bool) -> None:
        """Report the whole server and each service as (not) serving, e.g. while NATS is down."""
        status = (
            health_pb2.HealthCheckResponse.SERVING
            if serving
            else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        for name in ("", *self.service_names):
            await self.health.set(name, status)

    def after_stop(self, release: Callable[[], None]) -> None:
        """Call ``release`` once the server has stopped: what the service's calls used (a
        pool of worker processes) and nothing else does."""
        self._after_stop.append(release)

    async def stop(self, grace_seconds: float | None = None) -> None:
        """Go ``NOT_SERVING`` for good, then drain: running calls get the grace period."""
        await self.health.enter_graceful_shutdown()
        grace = self.grace_seconds if grace_seconds is None else grace_seconds
        try:
            await self.server.stop(grace)
        finally:
            while self._after_stop:
                self._after_stop.pop()()

    async def wait_for_termination(self) -> None:
        await self.server.wait_for_termination()


def create_server(
    settings: ServerSettings,
    services: Sequence[ServiceRegistration],
    *,
    tls: TlsSettings | None = None,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    max_receive_message_bytes: int | None = None,
) -> GrpcServer:
    """Build and bind a server for ``services``; call ``await server.start()`` to serve.

    A request larger than ``max_receive_message_bytes`` (default: the settings' message
    limit) is refused with ``RESOURCE_EXHAUSTED`` by gRPC before anything decodes it.
    """
    options = [
        (
            "grpc.max_receive_message_length",
            max_receive_message_bytes or settings.max_message_bytes,
        ),
        ("grpc.max_send_message_length", settings.max_message_bytes),
    ]
    server = grpc.aio.server(
        interceptors=list(interceptors),
        options=options,
        maximum_concurrent_rpcs=settings.grpc_concurrent_rpcs,
    )
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    for service in services:
        service.add_to_server(server)
    names = [service.name for service in services]
    reflection.enable_server_reflection(
        [*names, health.SERVICE_NAME, reflection.SERVICE_NAME], server
    )
    address = f"{_bracketed(settings.grpc_host)}:{settings.grpc_port}"
    if tls is not None and tls.enabled:
        port = server.add_secure_port(address, server_credentials(tls))
    else:
        port = server.add_insecure_port(address)
    return GrpcServer(
        server,
        host=settings.grpc_host,
        port=port,
        health_servicer=health_servicer,
        service_names=names,
        grace_seconds=settings.grace_seconds,
    )


async def wait_for_signal(
    signals: Sequence[signal.Signals] = (signal.SIGINT, signal.SIGTERM),
) -> signal.Signals:
    """Wait until the process receives one of ``signals``; returns the one received."""
    loop = asyncio.get_running_loop()
    received: asyncio.Future[signal.Signals] = loop.create_future()

    def note(sig: signal.Signals) -> None:
        if not received.done():
            received.set_result(sig)

    for sig in signals:
        loop.add_signal_handler(sig, note, sig)
    try:
        return await received
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)


async def serve_until_signalled(server: GrpcServer) -> signal.Signals:
    """Start ``server``, serve until SIGINT or SIGTERM, then shut it down gracefully."""
    await server.start()
    try:
        return await wait_for_signal()
    finally:
        await server.stop()


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
