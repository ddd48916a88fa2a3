"""OpenTelemetry traces across gRPC calls and NATS messages, off unless configured.

:func:`configure_tracing` installs a tracer provider that exports over OTLP/gRPC to
``MASA_OTLP_ENDPOINT``; without an endpoint nothing is installed and nothing is traced (the
interceptors are not even added, so an untraced call costs nothing). Tests install their own
provider with :func:`install`, e.g. one with an in-memory exporter.

Once tracing is on, :func:`server_interceptors` and :func:`client_interceptors` (from
``opentelemetry-instrumentation-grpc``) trace every call and carry its context in the call's
metadata; :func:`inject` writes the current context into a NATS message's headers and
:func:`consumer_span` continues it where the message is handled. :func:`continued` resumes a
context saved as a W3C ``traceparent`` string, for work that outlives the call that began it
(a ticket placed by a later matching round).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import grpc.aio
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.grpc import aio_client_interceptors, aio_server_interceptor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

__all__ = [
    "client_interceptors",
    "configure_tracing",
    "consumer_span",
    "continued",
    "current_traceparent",
    "enabled",
    "exported",
    "inject",
    "install",
    "server_interceptors",
]

_provider: TracerProvider | None = None


def install(provider: TracerProvider | None) -> None:
    """Trace with ``provider`` from now on (the process' one provider); None stops tracing."""
    global _provider  # noqa: PLW0603 - one provider per process, as OpenTelemetry has it
    _provider = provider


def enabled() -> bool:
    return _provider is not None


def configure_tracing(service: str, node: str, endpoint: str) -> TracerProvider | None:
    """Export spans of ``service`` over OTLP to ``endpoint``; with no endpoint, trace nothing."""
    if not endpoint:
        return None
    provider = TracerProvider(
        resource=Resource.create({"service.name": service, "service.instance.id": node})
    )
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    install(provider)
    return provider


@contextmanager
def exported(service: str, node: str, endpoint: str) -> Iterator[None]:
    """Trace the block's process to ``endpoint`` (nothing when empty), flushing at the end."""
    provider = configure_tracing(service, node, endpoint)
    try:
        yield
    finally:
        if provider is not None:
            provider.shutdown()


def server_interceptors() -> list[grpc.aio.ServerInterceptor]:
    """The tracing server interceptor, outermost, when tracing is on."""
    if _provider is None:
        return []
    interceptor: grpc.aio.ServerInterceptor = aio_server_interceptor(  # type: ignore[no-untyped-call]  # untyped upstream
        tracer_provider=_provider
    )
    return [interceptor]


def client_interceptors() -> list[grpc.aio.ClientInterceptor]:
    """The tracing client interceptors, when tracing is on."""
    if _provider is None:
        return []
    interceptors: list[grpc.aio.ClientInterceptor] = aio_client_interceptors(  # type: ignore[no-untyped-call]  # untyped upstream
        tracer_provider=_provider
    )
    return interceptors


def inject(headers: dict[str, str]) -> None:
    """Write the current trace context into a NATS message's ``headers`` (when tracing)."""
    if _provider is not None:
        propagate.inject(headers)


@contextmanager
def consumer_span(name: str, headers: Mapping[str, str] | None) -> Iterator[None]:
    """Handle a message inside a span continuing the trace its headers carry."""
    if _provider is None:
        yield
        return
    parent = propagate.extract(dict(headers or {}))
    tracer = _provider.get_tracer(__name__)
    with tracer.start_as_current_span(name, context=parent, kind=trace.SpanKind.CONSUMER):
        yield


def current_traceparent() -> str:
    """The current span's context as a W3C ``traceparent``, or "" when not tracing."""
    if _provider is None:
        return ""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier.get("traceparent", "")


@contextmanager
def continued(name: str, traceparent: str, **attributes: Any) -> Iterator[None]:
    """Run the block in a span of the trace ``traceparent`` names (a new trace when empty)."""
    if _provider is None:
        yield
        return
    parent = propagate.extract({"traceparent": traceparent}) if traceparent else None
    token = otel_context.attach(parent) if parent is not None else None
    try:
        with _provider.get_tracer(__name__).start_as_current_span(name, attributes=attributes):
            yield
    finally:
        if token is not None:
            otel_context.detach(token)
