"""Elevator engine throughput: whole simulated games per second on one core.

Prints one JSON document. The issue's target is at least 500 random-policy games per second.
Each game is dealt, played to the end through ``legal_actions`` and ``apply`` (events
included) by the named policy; seats 3 to 6 take turns so every table size counts.
"""

from __future__ import annotations

import json
import platform
import time
from collections import Counter

from masa_rules.elevator import ElevatorRules
from masa_rules.elevator.simulate import play_game

GAMES = 2000
TARGET_RANDOM_GAMES_PER_SECOND = 500


def measure(policy: str) -> tuple[float, dict[str, object]]:
    """Games per second for ``policy``, and the details behind the figure."""
    rules = ElevatorRules()
    actions = 0
    endings: Counter[str] = Counter()
    started = time.perf_counter()
    for n in range(GAMES):
        log, state, _ = play_game(rules, 3 + n % 4, f"bench-{n}", policy)
        actions += len(log.actions)
        endings[state.end_reason or "unfinished"] += 1
    seconds = time.perf_counter() - started
    rate = GAMES / seconds
    return rate, {
        "games_per_second": round(rate, 1),
        "actions_per_second": round(actions / seconds),
        "mean_actions_per_game": round(actions / GAMES, 1),
        "endings": dict(sorted(endings.items())),
    }


def main() -> None:
    random_rate, random = measure("random")
    greedy_rate, greedy = measure("greedy")
    print(
        json.dumps(
            {
                "benchmark": "elevator",
                "python": platform.python_version(),
                "games_per_policy": GAMES,
                "random_games_per_second": round(random_rate, 1),
                "greedy_games_per_second": round(greedy_rate, 1),
                "target_random_games_per_second": TARGET_RANDOM_GAMES_PER_SECOND,
                "meets_target": random_rate >= TARGET_RANDOM_GAMES_PER_SECOND,
                "random": random,
                "greedy": greedy,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
