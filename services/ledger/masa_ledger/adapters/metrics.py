"""Prometheus metrics of the ledger (labels hold names, never ids).

- ``masa_ledger_transfers_total{kind,result}``: every write, by kind (grant, hold, bind,
  release, expire, settle, void, settle_rejected) and result (ok: it changed the ledger;
  replayed: a retry answered as the first time; refused: a clear error; error: a failure).
- ``masa_ledger_settlement_seconds``: from the start of a settlement to its commit.
- ``masa_ledger_outbox_lag_seconds``: the age of the oldest event not yet on the bus.
- ``masa_ledger_invariant_violations{check}``: rows breaking each invariant at the last check.
- ``masa_ledger_chips_in_escrow``: the stakes bound to games not yet settled or voided.
- ``masa_ledger_holds_expired_total``: unbound holds the ledger voided at their expiry.
- ``masa_ledger_last_check_timestamp_seconds``: when the invariant check last ran.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from masa_ledger.app.check import CheckReport

__all__ = ["PrometheusLedgerMetrics"]

# A settlement is a few milliseconds; the target p99 is 50 ms.
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


_KINDS = ("grant", "hold", "bind", "release", "expire", "settle", "void", "settle_rejected")
_RESULTS = ("ok", "replayed", "refused", "error")


class PrometheusLedgerMetrics:
    """The use cases' metrics port, and the gauges the background tasks keep."""

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self._transfers = Counter(
            "masa_ledger_transfers_total",
            "Ledger writes by kind and result (ok, replayed, refused, error).",
            ["kind", "result"],
            registry=registry,
        )
        self._settlement = Histogram(
            "masa_ledger_settlement_seconds",
            "Time to settle a game, from its start to the commit.",
            buckets=_BUCKETS,
            registry=registry,
        )
        self.outbox_lag = Gauge(
            "masa_ledger_outbox_lag_seconds",
            "Age of the oldest ledger event written but not yet published.",
            registry=registry,
        )
        self._violations = Gauge(
            "masa_ledger_invariant_violations",
            "Rows breaking each ledger invariant at the last check; 0 when it holds.",
            ["check"],
            registry=registry,
        )
        self._escrow = Gauge(
            "masa_ledger_chips_in_escrow",
            "Chips bound to games that are neither settled nor voided.",
            registry=registry,
        )
        self._expired = Counter(
            "masa_ledger_holds_expired_total",
            "Unbound stake holds voided by the ledger at their expiry.",
            registry=registry,
        )
        self._last_check = Gauge(
            "masa_ledger_last_check_timestamp_seconds",
            "When the invariant check last completed.",
            registry=registry,
        )

        # Every kind and result from the start, so the dashboards read 0 rather than no data.
        for kind in _KINDS:
            for result in _RESULTS:
                self._transfers.labels(kind=kind, result=result)

    def operation(self, kind: str, result: str) -> None:
        self._transfers.labels(kind=kind, result=result).inc()

    def settlement_seconds(self, seconds: float) -> None:
        self._settlement.observe(seconds)

    def holds_expired(self, count: int) -> None:
        self._expired.inc(count)

    def checked(self, report: CheckReport, at: float) -> None:
        counts: Mapping[str, int] = report.counts
        for name, count in counts.items():
            self._violations.labels(check=name).set(count)
        self._escrow.set(report.totals.get("chips_in_escrow", 0))
        self._last_check.set(at)
