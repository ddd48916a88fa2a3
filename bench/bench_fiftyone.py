"""Benchmark of the 51 engine; prints one JSON document.

- ``random_hands_per_second`` / ``greedy_hands_per_second``: whole games played by the policies
  (a fixed set of seeds over classic, salon, remi and teams), hands per second of CPU time on
  one core (target: at least 150 and 20);
- ``action_median_us``: the median time of ``legal_actions`` plus ``apply`` for one action
  (target: at most 200 µs), excluding solver calls: the games are played once to fill the
  solver's memo, then replayed with the same choices and timed, so every solver call is a
  cache hit.
"""

from __future__ import annotations

import json
import platform
import statistics
import time

from masa_rules.fiftyone import Action, HandEnded, Phase, State, apply, legal_actions, start
from masa_rules.fiftyone.policies import POLICIES
from masa_rules.policy import policy_stream
from masa_rules.ruleset import RuleSet

TABLES = [("classic", 4, False), ("salon", 4, False), ("remi", 3, False), ("classic", 4, True)]


def play(
    policy: str, seed: str, preset: str, players: int, teams: bool
) -> tuple[int, list[Action]]:
    state, _ = start(RuleSet.preset_named(preset), players, seed, teams=teams)
    rng = policy_stream("fiftyone", seed)
    choose = POLICIES[policy]
    hands = 0
    actions: list[Action] = []
    while state.phase is not Phase.OVER:
        action = choose(state, state.to_act[0], rng)
        actions.append(action)
        state, events = apply(state, action)
        hands += sum(1 for e in events if isinstance(e, HandEnded))
    return hands, actions


def hands_per_second(policy: str, games: int) -> tuple[float, int]:
    """Hands per second of CPU time (one core, whatever else the machine runs)."""
    hands = 0
    began = time.process_time()
    for game in range(games):
        preset, players, teams = TABLES[game % len(TABLES)]
        hands += play(policy, f"bench-{policy}-{game}", preset, players, teams)[0]
    return hands / (time.process_time() - began), hands


def action_times(games: int) -> list[float]:
    times: list[float] = []
    for game in range(games):
        preset, players, teams = TABLES[game % len(TABLES)]
        seed = f"bench-actions-{game}"
        _, actions = play("random", seed, preset, players, teams)
        state: State
        state, _ = start(RuleSet.preset_named(preset), players, seed, teams=teams)
        for action in actions:
            began = time.perf_counter()
            legal_actions(state, action.seat)
            state, _ = apply(state, action)
            times.append(time.perf_counter() - began)
    return times


def main() -> None:
    random_rate, random_hands = hands_per_second("random", 48)
    greedy_rate, greedy_hands = hands_per_second("greedy", 24)
    times = action_times(8)
    print(
        json.dumps(
            {
                "bench": "fiftyone",
                "python": platform.python_version(),
                "random_hands_per_second": round(random_rate, 1),
                "random_hands": random_hands,
                "greedy_hands_per_second": round(greedy_rate, 1),
                "greedy_hands": greedy_hands,
                "action_median_us": round(statistics.median(times) * 1e6, 1),
                "action_p90_us": round(statistics.quantiles(times, n=10)[-1] * 1e6, 1),
                "actions_timed": len(times),
                "targets": {
                    "random_hands_per_second": 150,
                    "greedy_hands_per_second": 20,
                    "action_median_us": 200,
                },
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
