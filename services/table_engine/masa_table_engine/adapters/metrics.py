"""The table metrics on Prometheus (names from the issue; never an id as a label value).

The background loops' runs (``masa_loop_runs_total``, ``masa_loop_run_seconds``) are the
platform's :class:`~masa_platform.metrics.LoopMetrics`, as in every service; the engine's loops
are ``health_probe``, ``lease_renewal``, ``registry_heartbeat``, ``takeover_scan``,
``housekeeping``, ``outbox_relay`` (one publish attempt) and ``table_timers`` (the timers due
at one table, fired).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Final

from masa_platform.metrics import LoopMetrics
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from masa_table_engine.domain.games import hosted

__all__ = ["OVERDUE_SLACK_SECONDS", "PrometheusMetrics"]

# A table past its timer by this much has been missed: the timer acts within milliseconds.
OVERDUE_SLACK_SECONDS: Final = 10.0

_FAST = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0)


class PrometheusMetrics:
    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.loops = LoopMetrics(registry)
        self._active = Gauge(
            "masa_tables_active",
            "Tables whose game is in progress on this node.",
            ("game",),
            registry=registry,
        )
        self._actions = Counter(
            "masa_table_actions_total",
            "Actions submitted to tables, by game, action and result (accepted or illegal).",
            ("game", "action", "result"),
            registry=registry,
        )
        self._action_counters: dict[tuple[str, str, str], Counter] = {}
        self._action_seconds = Histogram(
            "masa_table_action_seconds",
            "Time to judge, persist and publish one action.",
            buckets=_FAST,
            registry=registry,
        )
        self._timeouts = Counter(
            "masa_table_timeouts_total", "Turns that timed out (P-10).", registry=registry
        )
        self._autopilot = Gauge(
            "masa_autopilot_seats",
            "Seats the autopilot plays now (P-11, P-12).",
            registry=registry,
        )
        self._frozen = Gauge(
            "masa_tables_frozen",
            "Tables on this node that cannot take input now: their log did not answer, or "
            "another node wrote to it and the table awaits recovery or hand-over.",
            registry=registry,
        )
        self._skipped = Counter(
            "masa_table_recovery_skipped_total",
            "Tables in this node's index that a start did not resume, by reason.",
            ("reason",),
            registry=registry,
        )
        self._outbox = Gauge(
            "masa_outbox_pending_results",
            "Results (HandFinished, GameFinished, GameAbandoned) in the table log that this "
            "node has not published yet.",
            registry=registry,
        )
        self._publishes = Counter(
            "masa_outbox_publishes_total",
            "Result publishes by the outbox relay, by outcome (published, duplicate, failed).",
            ("outcome",),
            registry=registry,
        )
        self._takeovers = Counter(
            "masa_table_takeovers_total",
            "Tables this node took over from another, by reason (expired: the other node's "
            "lease ran out; drained: it handed the table over).",
            ("reason",),
            registry=registry,
        )
        self._overdue = Gauge(
            "masa_tables_overdue",
            "Tables in play on this node whose turn or seat timer ran out more than "
            f"{OVERDUE_SLACK_SECONDS:g} s ago without the engine acting on it: stuck tables.",
            registry=registry,
        )
        self._players = Gauge(
            "masa_players_online",
            "Players connected to a seat of a table in play on this node.",
            registry=registry,
        )
        self._behind = Counter(
            "masa_table_watchers_behind_total",
            "Watch streams ended because their reader fell MASA_WATCH_BACKLOG updates behind "
            "(RESOURCE_EXHAUSTED, OVERLOADED; the client resumes after its last sequence).",
            registry=registry,
        )
        self._persist = Histogram(
            "masa_table_persist_seconds",
            "Time to append one entry to the table log in JetStream.",
            buckets=_FAST,
            registry=registry,
        )

        # Every game's series from the start, so the dashboards read 0 rather than no data.
        for game in hosted():
            self._active.labels(game=game)

    def table_opened(self, game: str) -> None:
        self._active.labels(game=game).inc()

    def table_closed(self, game: str) -> None:
        self._active.labels(game=game).dec()

    def action(self, game: str, action: str, result: str, seconds: float) -> None:
        # The labelled child is looked up once per label set, not on every action: labels()
        # takes a lock and validates the values each time. The label sets are few and fixed
        # (the games' action names by two results), so the dict stays small.
        key = (game, action, result)
        counter = self._action_counters.get(key)
        if counter is None:
            counter = self._action_counters[key] = self._actions.labels(
                game=game, action=action, result=result
            )
        counter.inc()
        self._action_seconds.observe(seconds)

    def timeout(self) -> None:
        self._timeouts.inc()

    def autopilot_seats(self, delta: int) -> None:
        self._autopilot.inc(delta)

    def persisted(self, seconds: float) -> None:
        self._persist.observe(seconds)

    def frozen(self, tables: int) -> None:
        self._frozen.set(tables)

    def recovery_skipped(self, reason: str) -> None:
        self._skipped.labels(reason=reason).inc()

    def outbox_pending(self, results: int) -> None:
        self._outbox.set(results)

    def result_published(self, outcome: str) -> None:
        self._publishes.labels(outcome=outcome).inc()

    def takeover(self, reason: str) -> None:
        self._takeovers.labels(reason=reason).inc()

    def overdue(self, tables: int) -> None:
        self._overdue.set(tables)

    def players_online(self, players: int) -> None:
        self._players.set(players)

    def watcher_behind(self) -> None:
        self._behind.inc()

    def loop(self, name: str) -> AbstractContextManager[None]:
        return self.loops.run(name)
