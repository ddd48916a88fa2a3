"""Matchmaking's Prometheus metrics (never with ids as label values but the lobby's, a fixed
set from the configuration)."""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["PrometheusMetrics"]

_WAIT_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 1.5, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)
_ROUND_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
_SPREAD_BUCKETS = (0.0, 1.0, 2.0, 5.0, 10.0, 15.0, 20.0, 30.0, 50.0)


class PrometheusMetrics:
    """Every lobby's series exist from the start (at 0), so that rates and quantiles read 0,
    not "no data", until its first ticket."""

    def __init__(self, registry: CollectorRegistry, lobby_ids: Sequence[str] = ()) -> None:
        self._depth = Gauge(
            "masa_matchmaking_queue_depth",
            "Tickets searching in a lobby, as its last round saw them.",
            ["lobby"],
            registry=registry,
        )
        self._wait = Histogram(
            "masa_matchmaking_wait_seconds",
            "How long a ticket searched before it was seated.",
            ["lobby"],
            buckets=_WAIT_BUCKETS,
            registry=registry,
        )
        self._rounds = Counter(
            "masa_matchmaking_rounds_total",
            "Matching rounds run.",
            ["lobby"],
            registry=registry,
        )
        self._round_seconds = Histogram(
            "masa_matchmaking_round_seconds",
            "Time one matching round took: expiring, matching, and starting the placements.",
            ["lobby"],
            buckets=_ROUND_BUCKETS,
            registry=registry,
        )
        self._matched = Counter(
            "masa_matchmaking_matched_total",
            "Tickets seated at a table.",
            ["lobby"],
            registry=registry,
        )
        self._spread = Histogram(
            "masa_matchmaking_rating_spread",
            "The distance in rating (OpenSkill mu) between the highest and lowest rated player "
            "of each table placed.",
            ["lobby"],
            buckets=_SPREAD_BUCKETS,
            registry=registry,
        )
        self._failures = Counter(
            "masa_matchmaking_placement_failures_total",
            "Placements that failed, by reason (insufficient_funds, no_engine, ...).",
            ["reason"],
            registry=registry,
        )

        for lobby_id in lobby_ids:
            for family in (self._depth, self._wait, self._rounds, self._round_seconds):
                family.labels(lobby=lobby_id)
            for family in (self._matched, self._spread):
                family.labels(lobby=lobby_id)

    def queue_depth(self, lobby_id: str, depth: int) -> None:
        self._depth.labels(lobby=lobby_id).set(depth)

    def round_run(self, lobby_id: str, seconds: float) -> None:
        self._rounds.labels(lobby=lobby_id).inc()
        self._round_seconds.labels(lobby=lobby_id).observe(seconds)

    def matched(self, lobby_id: str, waits: Sequence[float], spread: float) -> None:
        histogram = self._wait.labels(lobby=lobby_id)
        for wait in waits:
            histogram.observe(wait)
        self._matched.labels(lobby=lobby_id).inc(len(waits))
        self._spread.labels(lobby=lobby_id).observe(spread)

    def placement_failed(self, reason: str) -> None:
        self._failures.labels(reason=reason).inc()
