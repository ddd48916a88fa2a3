"""Prometheus metrics: go-grpc-prometheus ``grpc_server_*`` series, build info, ``/metrics``.

Series and labels match go-grpc-prometheus so its dashboards and alerts work unchanged:
``grpc_type`` is ``unary``/``server_stream``/``client_stream``/``bidi_stream`` and ``grpc_code``
is Go's spelling of the code (``OK``, ``InvalidArgument``, ``ResourceExhausted`` ...). Labels
hold names only, never ids.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, cast
from wsgiref.simple_server import WSGIServer

import grpc
import grpc.aio
from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)
from prometheus_client.exposition import start_http_server

from masa_platform.handlers import (
    Context,
    WrappingInterceptor,
    rpc_type,
    split_method,
    wrap_handler,
)

__all__ = [
    "ConsumerMetrics",
    "GrpcMetrics",
    "LoopMetrics",
    "MetricsInterceptor",
    "MetricsServer",
    "QuotaMetrics",
    "go_code_name",
    "set_build_info",
    "start_metrics_server",
]

# Finer than Prometheus' defaults at the low end, where the SubmitAction p99 target (20 ms) is.
HANDLING_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

_LABELS = ("grpc_type", "grpc_service", "grpc_method")


def go_code_name(code: grpc.StatusCode) -> str:
    """Go's ``codes.Code.String()``: ``INVALID_ARGUMENT`` -> ``InvalidArgument``, ``OK`` stays."""
    if code is grpc.StatusCode.OK:
        return "OK"
    if code is grpc.StatusCode.CANCELLED:
        return "Canceled"
    return "".join(part.capitalize() for part in code.name.split("_"))


class GrpcMetrics:
    """The ``grpc_server_*`` collectors, registered once per registry."""

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.started = Counter(
            "grpc_server_started_total",
            "Total number of RPCs started on the server.",
            _LABELS,
            registry=registry,
        )
        self.handled = Counter(
            "grpc_server_handled_total",
            "Total number of RPCs completed on the server, regardless of success or failure.",
            (*_LABELS, "grpc_code"),
            registry=registry,
        )
        self.received = Counter(
            "grpc_server_msg_received_total",
            "Total number of RPC stream messages received on the server.",
            _LABELS,
            registry=registry,
        )
        self.sent = Counter(
            "grpc_server_msg_sent_total",
            "Total number of gRPC stream messages sent by the server.",
            _LABELS,
            registry=registry,
        )
        self.handling = Histogram(
            "grpc_server_handling_seconds",
            "Histogram of response latency (seconds) of gRPC that had been application-level "
            "handled by the server.",
            _LABELS,
            buckets=HANDLING_BUCKETS,
            registry=registry,
        )
        # The tokens kept verified (masa_platform.auth.VerifiedTokens): a signature check per
        # token while MASA_VERIFIED_TOKENS holds them all, one per call beyond it.
        self.token_checks = Counter(
            "masa_token_signature_checks_total",
            "Bearer tokens checked by their signature (the others were found verified already).",
            registry=registry,
        )
        self.tokens_kept = Gauge(
            "masa_verified_tokens",
            "Bearer tokens kept verified, at most MASA_VERIFIED_TOKENS.",
            registry=registry,
        )


# Background work runs from a millisecond (a KV put) to seconds (an invariant check).
LOOP_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class LoopMetrics:
    """``masa_loop_runs_total{loop,outcome}`` and ``masa_loop_run_seconds{loop}``: one run of a
    background loop (a relay batch, a timer sweep, a health probe, a lease renewal ...).

    ``loop`` is a fixed name chosen in the code, never an id; ``outcome`` is ``ok`` or
    ``error`` (the run raised).
    """

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self._runs = Counter(
            "masa_loop_runs_total",
            "Runs of a background loop, by loop and outcome (ok, error).",
            ("loop", "outcome"),
            registry=registry,
        )
        self._seconds = Histogram(
            "masa_loop_run_seconds",
            "Time one run of a background loop took.",
            ("loop",),
            buckets=LOOP_BUCKETS,
            registry=registry,
        )

    @contextmanager
    def run(self, loop: str) -> Iterator[None]:
        """Count and time the ``with`` block as one run of ``loop``; an exception counts as
        ``error`` and propagates (cancellation is not a run and counts nothing)."""
        started = time.perf_counter()
        try:
            yield
        except asyncio.CancelledError:
            raise
        except BaseException:
            self._record(loop, "error", started)
            raise
        self._record(loop, "ok", started)

    def timed(
        self, loop: str, work: Callable[[], Awaitable[object]]
    ) -> Callable[[], Awaitable[None]]:
        """``work`` counted and timed as runs of ``loop``."""

        async def measured() -> None:
            with self.run(loop):
                await work()

        return measured

    def _record(self, loop: str, outcome: str, started: float) -> None:
        self._runs.labels(loop=loop, outcome=outcome).inc()
        self._seconds.labels(loop=loop).observe(time.perf_counter() - started)


class ConsumerMetrics:
    """What a JetStream consumer did: ``masa_bus_messages_total{consumer,outcome}`` (handled,
    failed and to come back, set aside, foreign: delivered to its inbox by another consumer
    and dropped), ``masa_bus_set_aside_total{consumer,reason}`` (the
    messages it can never handle, kept in the dead-letter stream),
    ``masa_bus_message_seconds{consumer}`` and ``masa_bus_consumer_pending{consumer}``, the
    messages the stream still holds for it as the last delivery told (its lag).

    ``consumer`` is the durable consumer's name, fixed in the bus plan.
    """

    OUTCOMES = ("handled", "failed", "set_aside", "foreign")
    SET_ASIDE_REASONS = ("undecodable", "unverified", "refused", "max_deliveries")

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self._messages = Counter(
            "masa_bus_messages_total",
            "Messages a JetStream consumer took, by consumer and outcome (handled, failed and "
            "to come back, set aside, foreign: another consumer's, dropped).",
            ("consumer", "outcome"),
            registry=registry,
        )
        self._set_aside = Counter(
            "masa_bus_set_aside_total",
            "Messages a JetStream consumer can never handle, set aside in the dead-letter "
            "stream, by consumer and reason.",
            ("consumer", "reason"),
            registry=registry,
        )
        self._seconds = Histogram(
            "masa_bus_message_seconds",
            "Time to handle one message of a JetStream consumer.",
            ("consumer",),
            buckets=LOOP_BUCKETS,
            registry=registry,
        )
        self._pending = Gauge(
            "masa_bus_consumer_pending",
            "Messages the stream holds for a consumer beyond those delivered (its lag).",
            ("consumer",),
            registry=registry,
        )

    def started(self, consumer: str) -> None:
        """The consumer's series exist from its start (at 0), before its first message."""
        for outcome in self.OUTCOMES:
            self._messages.labels(consumer=consumer, outcome=outcome)
        for reason in self.SET_ASIDE_REASONS:
            self._set_aside.labels(consumer=consumer, reason=reason)
        self._seconds.labels(consumer=consumer)
        self._pending.labels(consumer=consumer)

    def handled(self, consumer: str, seconds: float, *, outcome: str) -> None:
        self._messages.labels(consumer=consumer, outcome=outcome).inc()
        self._seconds.labels(consumer=consumer).observe(seconds)

    def set_aside(self, consumer: str, reason: str) -> None:
        self._set_aside.labels(consumer=consumer, reason=reason).inc()

    def pending(self, consumer: str, messages: int) -> None:
        self._pending.labels(consumer=consumer).set(messages)


class QuotaMetrics:
    """``masa_quota_refusals_total{quota}``: calls refused with ``QUOTA_EXCEEDED``, by the quota
    that refused them (masa_platform.quotas names them; a service may add its own, as the
    table-engine's ``table_spectators``). ``quota`` is a fixed name, never a caller."""

    def __init__(
        self, registry: CollectorRegistry = REGISTRY, *, quotas: Iterable[str] = ()
    ) -> None:
        self._refusals = Counter(
            "masa_quota_refusals_total",
            "Calls refused with RESOURCE_EXHAUSTED, QUOTA_EXCEEDED, by the quota that refused.",
            ("quota",),
            registry=registry,
        )
        # Each quota's series exists from the start (at 0), and a refusal finds its child
        # without the label lookup.
        self._children = {quota: self._refusals.labels(quota=quota) for quota in quotas}

    def refused(self, quota: str) -> None:
        child = self._children.get(quota)
        if child is None:
            child = self._children[quota] = self._refusals.labels(quota=quota)
        child.inc()


def set_build_info(service: str, version: str, registry: CollectorRegistry = REGISTRY) -> Gauge:
    """Register ``masa_build_info{service,version} 1``."""
    gauge = Gauge(
        "masa_build_info",
        "Always 1; the labels name the running service and its version.",
        ("service", "version"),
        registry=registry,
    )
    gauge.labels(service=service, version=version).set(1)
    return gauge


class MetricsInterceptor(WrappingInterceptor):
    """Counts and times every RPC; install it outermost so it sees every status."""

    def __init__(self, metrics: GrpcMetrics) -> None:
        self._metrics = metrics
        super().__init__()

    def _wrap(
        self, full_method: str, handler: grpc.RpcMethodHandler[Any, Any]
    ) -> grpc.RpcMethodHandler[Any, Any]:
        service, method = split_method(full_method)
        labels = {"grpc_type": rpc_type(handler), "grpc_service": service, "grpc_method": method}
        metrics = self._metrics
        received = metrics.received.labels(**labels)
        sent = metrics.sent.labels(**labels)
        # The labelled children are looked up once per method, not on every call.
        started_total = metrics.started.labels(**labels)
        handling = metrics.handling.labels(**labels)
        handled: dict[grpc.StatusCode, Counter] = {}

        @contextmanager
        def measured(context: Context) -> Iterator[None]:
            started_total.inc()
            started = time.perf_counter()
            code = grpc.StatusCode.OK
            try:
                yield
                code = _code_set_on(context) or grpc.StatusCode.OK
            except asyncio.CancelledError:
                code = grpc.StatusCode.CANCELLED
                raise
            except BaseException:
                code = _code_set_on(context) or grpc.StatusCode.UNKNOWN
                raise
            finally:
                counter = handled.get(code)
                if counter is None:
                    counter = handled[code] = metrics.handled.labels(
                        **labels, grpc_code=go_code_name(code)
                    )
                counter.inc()
                handling.observe(time.perf_counter() - started)

        return wrap_handler(handler, measured, on_received=received.inc, on_sent=sent.inc)


def _code_set_on(context: Context) -> grpc.StatusCode | None:
    # The stubs promise a code, but grpc returns None until a handler sets or aborts with one.
    return cast("grpc.StatusCode | None", context.code())


@dataclass(frozen=True, slots=True)
class MetricsServer:
    """A running ``/metrics`` HTTP endpoint (a daemon thread, so it never blocks the loop)."""

    host: str
    port: int
    _server: WSGIServer

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def start_metrics_server(
    host: str = "127.0.0.1", port: int = 0, registry: CollectorRegistry = REGISTRY
) -> MetricsServer:
    """Serve ``registry`` over HTTP; port 0 binds a free port, reported in ``.port``.

    Without the ``*_created`` series prometheus_client adds to every counter and histogram:
    they double the series count, and go-grpc-prometheus (whose names we reuse) has none.
    """
    disable_created_metrics()  # type: ignore[no-untyped-call]  # untyped in prometheus_client
    server, _thread = start_http_server(port, addr=host, registry=registry)
    return MetricsServer(host, server.server_port, server)
