"""What a load run counts: latencies in a bounded histogram, calls, refusals, tables.

Latencies go into logarithmic buckets 2 % wide from 0.1 ms to 10 minutes (about 800 of
them), so a run of any length keeps the same small memory and percentiles are read to within
2 %. The report shows them as percentiles, and as a histogram over readable bounds counted
exactly as the samples come.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["REPORT_BOUNDS_MS", "Counts", "LatencyHistogram"]

_SMALLEST_S: Final = 0.0001
_LARGEST_S: Final = 600.0
_GROWTH: Final = 1.02
_BUCKETS: Final = math.ceil(math.log(_LARGEST_S / _SMALLEST_S, _GROWTH)) + 1
# The histogram of the report: upper bounds in milliseconds, and one bucket for the rest.
REPORT_BOUNDS_MS: Final = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)
_REPORT_BOUNDS_S: Final = tuple(bound / 1000 for bound in REPORT_BOUNDS_MS)


def _bucket(seconds: float) -> int:
    if seconds <= _SMALLEST_S:
        return 0
    return min(_BUCKETS - 1, math.ceil(math.log(seconds / _SMALLEST_S, _GROWTH)))


def _upper_ms(bucket: int) -> float:
    return 1000 * _SMALLEST_S * _GROWTH**bucket


class LatencyHistogram:
    """Counts of latencies by bucket; bounded whatever the number of samples."""

    def __init__(self) -> None:
        self._counts = [0] * _BUCKETS
        self._by_bound = [0] * (len(REPORT_BOUNDS_MS) + 1)
        self.count = 0
        self.largest = 0.0

    def add(self, seconds: float) -> None:
        self._counts[_bucket(seconds)] += 1
        self._by_bound[bisect_left(_REPORT_BOUNDS_S, seconds)] += 1
        self.count += 1
        self.largest = max(self.largest, seconds)

    def merge(self, other: LatencyHistogram) -> None:
        """Add ``other``'s samples to this histogram."""
        for bucket, count in enumerate(other._counts):
            self._counts[bucket] += count
        for bound, count in enumerate(other._by_bound):
            self._by_bound[bound] += count
        self.count += other.count
        self.largest = max(self.largest, other.largest)

    def percentile_ms(self, q: float) -> float:
        """The upper bound of the bucket holding the ``q`` quantile (0 when empty)."""
        if not self.count:
            return 0.0
        wanted = max(1, math.ceil(q * self.count))
        seen = 0
        for bucket, count in enumerate(self._counts):
            seen += count
            if seen >= wanted:
                return min(_upper_ms(bucket), 1000 * self.largest)
        return 1000 * self.largest

    def summary(self) -> dict[str, Any]:
        if not self.count:
            return {"count": 0}
        by_bound = self._by_bound
        return {
            "count": self.count,
            "p50": round(self.percentile_ms(0.50), 2),
            "p90": round(self.percentile_ms(0.90), 2),
            "p99": round(self.percentile_ms(0.99), 2),
            "p999": round(self.percentile_ms(0.999), 2),
            "max": round(1000 * self.largest, 2),
            "histogram_ms": {
                **{f"le_{bound}": by_bound[i] for i, bound in enumerate(REPORT_BOUNDS_MS)},
                "above": by_bound[-1],
            },
        }


@dataclass(slots=True)
class Counts:
    """What completed inside the measured window (the warm-up is not counted)."""

    submit: dict[str, LatencyHistogram] = field(default_factory=dict)
    get_table: LatencyHistogram = field(default_factory=LatencyHistogram)
    accepted: int = 0
    tables_created: int = 0
    games_finished: int = 0
    # Times the client's copy of a table disagreed with the engine and was read again.
    resyncs: int = 0
    errors: Counter[str] = field(default_factory=Counter)

    def submitted(self, game: str, seconds: float) -> None:
        histogram = self.submit.get(game)
        if histogram is None:
            histogram = self.submit[game] = LatencyHistogram()
        histogram.add(seconds)
        self.accepted += 1

    def all_submits(self) -> LatencyHistogram:
        merged = LatencyHistogram()
        for histogram in self.submit.values():
            merged.merge(histogram)
        return merged
