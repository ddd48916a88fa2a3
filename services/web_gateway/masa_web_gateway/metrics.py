"""The gateway's Prometheus series: calls by method, protocol and outcome, their latency, the
streams open, and what else it answers (the web client's files, tokens, health, CORS)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["GatewayMetrics", "protocol_of"]

# Latency buckets (seconds) from 1 ms to 10 s: a move through the gateway is milliseconds.
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def protocol_of(content_type: str) -> str:
    """``connect``, ``grpc-web`` or ``grpc``, as the request's content type says."""
    if content_type.startswith("application/grpc-web"):
        return "grpc-web"
    if content_type.startswith("application/grpc"):
        return "grpc"
    return "connect"


class GatewayMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.handled = Counter(
            "masa_gateway_handled_total",
            "Calls the gateway finished, by method, protocol and status code.",
            ["grpc_service", "grpc_method", "protocol", "grpc_code"],
            registry=registry,
        )
        self.seconds = Histogram(
            "masa_gateway_handling_seconds",
            "Time to the answer of a unary call, gateway and service together.",
            ["grpc_service", "grpc_method", "protocol"],
            buckets=_BUCKETS,
            registry=registry,
        )
        self.streams = Gauge(
            "masa_gateway_streams_open",
            "Server streams open through the gateway (WatchTable, WatchTicket).",
            ["grpc_method"],
            registry=registry,
        )
        self.http = Counter(
            "masa_gateway_http_requests_total",
            "Requests other than calls: the web client's files, tokens, health, CORS preflight.",
            ["kind", "status"],
            registry=registry,
        )
        self.upstream_up = Gauge(
            "masa_gateway_upstream_up",
            "1 while the service at the address says SERVING to the gateway's health checks.",
            ["address"],
            registry=registry,
        )
