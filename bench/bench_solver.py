"""Meld validation and best-opening speed (issue 2). Prints one JSON document.

Limits: validation <= 20 us per meld; best opening p99 <= 0.5 ms (15 random cards),
p99 <= 3 ms (22 random cards), dense adversarial 22 cards median <= 5 ms and max <= 25 ms.
"""

from __future__ import annotations

import functools
import json
import platform
import random
import statistics
import time
from collections.abc import Callable, Sequence

from masa_rules.cards import JOKER_BLACK, JOKER_RED, Card, fiftyone_pack, parse_cards
from masa_rules.melds import default_reading
from masa_rules.ruleset import RuleSet
from masa_rules.solver import best_opening

PACK = [p.card for p in fiftyone_pack()]
DENSE_POOL = [c for c in PACK if not c.is_joker and c.natural_rank() <= 7]
MELDS = [
    "QS KS AS",
    "8H 9H XR",
    "10S 10D XR",
    "7C 8C 9C 10C JC",
    "5H 5S 5D 5C",
    "XB 4D 5D",
    "2S 3S 4S 5S 6S 7S",
    "JH JD XR XB",
    "9S 9H 9D",
    "6D XR 8D",
]


def quantile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def timed(function: Callable[[], object]) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def bench_validation(rules: RuleSet) -> dict[str, float]:
    groups = [parse_cards(m.split()) for m in MELDS]
    for group in groups * 200:
        default_reading(group, rules)
    rounds = 2000
    start = time.perf_counter()
    for _ in range(rounds):
        for group in groups:
            default_reading(group, rules)
    per_meld = (time.perf_counter() - start) / (rounds * len(groups))
    return {"validate_us_per_meld": round(per_meld * 1e6, 2)}


def opening_stats(hands: list[list[Card]], rules: RuleSet) -> dict[str, float]:
    for hand in hands[:20]:
        best_opening(hand, rules)
    times = [timed(functools.partial(best_opening, hand, rules)) * 1e3 for hand in hands]
    return {
        "hands": len(hands),
        "median_ms": round(statistics.median(times), 3),
        "p99_ms": round(quantile(times, 0.99), 3),
        "max_ms": round(max(times), 3),
    }


def main() -> None:
    rng = random.Random(2026)
    report: dict[str, object] = {"benchmark": "solver", "python": platform.python_version()}
    for rules in (RuleSet.salon(), RuleSet.classic(), RuleSet.remi()):
        hands15 = [rng.sample(PACK, 15) for _ in range(2000)]
        hands22 = [rng.sample(PACK, 22) for _ in range(1000)]
        dense = [[*rng.sample(DENSE_POOL, 20), JOKER_RED, JOKER_BLACK] for _ in range(300)]
        report[rules.preset] = {
            **bench_validation(rules),
            "best_opening_15": opening_stats(hands15, rules),
            "best_opening_22": opening_stats(hands22, rules),
            "best_opening_dense_22": opening_stats(dense, rules),
        }
    report["limits"] = {
        "validate_us_per_meld": 20,
        "best_opening_15_p99_ms": 0.5,
        "best_opening_22_p99_ms": 3,
        "best_opening_dense_22_median_ms": 5,
        "best_opening_dense_22_max_ms": 25,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
