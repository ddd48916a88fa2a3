"""Prometheus metrics of the bot: decisions per game and level, and how long they took."""

from __future__ import annotations

from masa_rules.table_config import BotLevel
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram

from masa_bot.domain.games import played

__all__ = ["PrometheusRecorder"]

# Decisions are sub-millisecond for Elevator and up to tens of milliseconds for a dense 51
# hand; the budget fallback sits near one second.
_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class PrometheusRecorder:
    """``masa_bot_decisions_total{game,level}`` and ``masa_bot_decision_seconds{game,level}``."""

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self._decisions = Counter(
            "masa_bot_decisions_total",
            "Decisions made, by game and the level actually played.",
            ["game", "level"],
            registry=registry,
        )
        self._seconds = Histogram(
            "masa_bot_decision_seconds",
            "Time to decide one action, including any fallback.",
            ["game", "level"],
            buckets=_BUCKETS,
            registry=registry,
        )

        # Every game and level from the start, so the dashboards read 0 rather than no data.
        for game in played():
            for level in BotLevel:
                self._decisions.labels(game=game, level=level.value)
                self._seconds.labels(game=game, level=level.value)

    def record(self, game: str, level: BotLevel, seconds: float) -> None:
        self._decisions.labels(game=game, level=level.value).inc()
        self._seconds.labels(game=game, level=level.value).observe(seconds)
