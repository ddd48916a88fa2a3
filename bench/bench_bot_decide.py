"""How long the bot service takes to decide (issue 23): ``hard`` within its 200 ms, p99, under
50 concurrent requests, in each game; one JSON document.

A real ``python -m masa_bot`` process on free ports, with its default settings
(``MASA_SEARCH_BUDGET_SECONDS`` 0.2, one search worker process), is asked over gRPC, with the
table-engine's token, for decisions on 4-seat Elevator positions and 4-seat salon 51 positions
a few greedy moves into a hand, exactly as the engine asks: a seat view (with Elevator's
tells), a level, a seed, a 1 s budget. Each phase sends
``BENCH_ROUNDS`` rounds of ``concurrency`` requests at once and times every answer as the
caller sees it (the gRPC round trip included). The baseline is the same load at ``normal``
(the greedy policy, no search): the service's own cost per decision. ``fell_back`` counts the
decisions the service answered at a faster level than asked, because no search worker was
free before the deadline or a decider overran the whole budget (read from its
``masa_bot_decisions_total`` counter).
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import floor
import grpc
import grpc.aio
from bench_table_engine import wait_serving
from google.protobuf.duration_pb2 import Duration
from masa.bot.v1 import bot_pb2, bot_pb2_grpc
from masa.common.v1 import game_pb2
from masa.table.v1 import view_pb2
from masa_platform.testing import free_port, keyring, token
from masa_rules import elevator, fiftyone
from masa_rules.elevator.policies import greedy_policy
from masa_rules.fiftyone.policies import greedy_policy as greedy_51
from masa_rules.ruleset import RuleSet
from masa_rules.shuffle import DrawStream
from masa_wire import elevator as wire
from masa_wire import fiftyone as wire51

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "10"))
POSITIONS = 200
GOAL_P99_MS = 200.0


# A request for position ``index`` at a level, with a seed.
Asker = Callable[[int, game_pb2.BotLevel.ValueType, int], bot_pb2.DecideRequest]


def elevator_positions() -> list[elevator.State]:
    """Four-seat hands 0 to 39 greedy moves in (so that the seats have tells to read), each
    on its own seed, and each still being played."""
    found = []
    for index in range(POSITIONS):
        state = elevator.new_game(elevator.ElevatorRules(), 4, f"bench-bot-{index}")
        rng = DrawStream(f"bench-bot-{index}".encode())
        for _ in range(index % 40):
            after, _ = elevator.apply(state, greedy_policy(state, state.turn, rng))
            if after.is_over:
                break
            state = after
        found.append(state)
    return found


def elevator_request(
    state: elevator.State, level: game_pb2.BotLevel.ValueType, seed: int
) -> bot_pb2.DecideRequest:
    table = _table(game_pb2.TableConfig(game=game_pb2.GAME_KIND_ELEVATOR), state.players)
    wire.fill_table_view(table, state)
    # As the engine asks: the view and every seat's tells, which hard deals the cards by.
    observation = bot_pb2.Observation(view=wire.seat_view(table, state, state.turn))
    wire.observe(observation, state)
    return _asked(observation, level, seed)


def fiftyone_positions() -> list[fiftyone.State]:
    """Four-seat salon hands 0 to 59 greedy moves in, each on its own seed, still in play."""
    found = []
    for index in range(POSITIONS):
        state = fiftyone.new_game(RuleSet.salon(), 4, f"bench-bot-51-{index}")
        rng = DrawStream(f"bench-bot-51-{index}".encode())
        for _ in range(index % 60):
            seat = state.to_act[0]
            after, _ = fiftyone.apply(state, greedy_51(state, seat, rng))
            if after.phase is fiftyone.Phase.OVER or after.hands_scored:
                break
            state = after
        found.append(state)
    return found


def fiftyone_request(
    state: fiftyone.State, level: game_pb2.BotLevel.ValueType, seed: int
) -> bot_pb2.DecideRequest:
    config = game_pb2.TableConfig(
        game=game_pb2.GAME_KIND_FIFTYONE,
        preset=game_pb2.PRESET_SALON,
        seats=[game_pb2.SeatAssignment(seat=s) for s in range(state.players)],
    )
    table = _table(config, state.players)
    wire51.fill_table_view(table, state)
    observation = bot_pb2.Observation(view=wire51.seat_view(table, state, state.to_act[0]))
    return _asked(observation, level, seed)


def _table(config: game_pb2.TableConfig, players: int) -> view_pb2.TableView:
    return view_pb2.TableView(
        table=view_pb2.Table(config=config),
        seats=[view_pb2.SeatState(seat=s) for s in range(players)],
    )


def _asked(
    observation: bot_pb2.Observation, level: game_pb2.BotLevel.ValueType, seed: int
) -> bot_pb2.DecideRequest:
    """As the engine asks: the observation, a level, a seed and a 1 s budget."""
    return bot_pb2.DecideRequest(
        observation=observation, level=level, seed=seed, time_budget=Duration(seconds=1)
    )


def askers() -> dict[str, Asker]:
    """Each game's positions, as requests."""
    boards = elevator_positions()
    hands = fiftyone_positions()
    return {
        "elevator": lambda index, level, seed: elevator_request(
            boards[index % len(boards)], level, seed
        ),
        "fiftyone": lambda index, level, seed: fiftyone_request(
            hands[index % len(hands)], level, seed
        ),
    }


def decisions(metrics_url: str, game: str) -> dict[str, float]:
    counts: dict[str, float] = {}
    with urllib.request.urlopen(metrics_url, timeout=5) as response:
        for line in response.read().decode().splitlines():
            if line.startswith("masa_bot_decisions_total{") and f'game="{game}"' in line:
                level = line.split('level="', 1)[1].split('"', 1)[0]
                counts[level] = counts.get(level, 0.0) + float(line.rsplit(" ", 1)[1])
    return counts


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def phase(
    stub: bot_pb2_grpc.BotServiceAsyncStub,
    metrics_url: str,
    game: str,
    ask: Asker,
    level: game_pb2.BotLevel.ValueType,
    concurrency: int,
) -> dict[str, Any]:
    metadata = (("authorization", f"Bearer {token('table-engine', 'table-engine')}"),)
    before = decisions(metrics_url, game)
    timings: list[float] = []

    async def one(index: int) -> None:
        request = ask(index, level, index + 1)
        started = time.perf_counter()
        await stub.Decide(request, metadata=metadata)
        timings.append((time.perf_counter() - started) * 1000)

    for round_no in range(ROUNDS):
        base = round_no * concurrency
        await asyncio.gather(*(one(base + i) for i in range(concurrency)))
    after = decisions(metrics_url, game)
    asked = game_pb2.BotLevel.Name(level).removeprefix("BOT_LEVEL_").lower()
    return {
        "game": game,
        "level": asked,
        "concurrency": concurrency,
        "decisions": len(timings),
        "fell_back": int(sum(after.get(k, 0.0) - before.get(k, 0.0) for k in after if k != asked)),
        "latency_ms": {
            "p50": round(percentile(timings, 0.5), 2),
            "p99": round(percentile(timings, 0.99), 2),
            "max": round(max(timings), 2),
        },
    }


async def run(workdir: Path) -> dict[str, Any]:
    grpc_port, metrics_port = free_port(), free_port()
    env = {
        **os.environ,
        **keyring().env("bot"),
        "MASA_GRPC_PORT": str(grpc_port),
        "MASA_METRICS_PORT": str(metrics_port),
        "MASA_LOG_LEVEL": "WARNING",
    }
    address = f"127.0.0.1:{grpc_port}"
    metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
    games = askers()
    with floor.child([sys.executable, "-m", "masa_bot"], env, workdir / "bot.log") as process:
        await wait_serving(address, process)
        async with grpc.aio.insecure_channel(address) as channel:
            stub = bot_pb2_grpc.BotServiceStub(channel)
            phases = []
            for game, ask in games.items():
                for level, concurrency in (
                    (game_pb2.BOT_LEVEL_NORMAL, 50),
                    (game_pb2.BOT_LEVEL_HARD, 1),
                    (game_pb2.BOT_LEVEL_HARD, 50),
                ):
                    phases.append(await phase(stub, metrics_url, game, ask, level, concurrency))
    summary: dict[str, Any] = {}
    for game in games:
        normal, _, hard = (entry for entry in phases if entry["game"] == game)
        summary[game] = {
            "hard_p99_over_goal": round(hard["latency_ms"]["p99"] / GOAL_P99_MS, 2),
            "hard_p99_over_normal_p99": round(
                hard["latency_ms"]["p99"] / normal["latency_ms"]["p99"], 2
            ),
        }
    return {
        "benchmark": "bot_decide",
        "python": platform.python_version(),
        "machine": {"cpu_cores": os.cpu_count(), "loadavg": Path("/proc/loadavg").read_text()[:14]},
        "games": "elevator, 4 seats; fiftyone, salon, 4 seats",
        "search_budget_ms": 200,
        "phases": phases,
        "goal": {"hard_p99_ms_at_50_concurrent": GOAL_P99_MS},
        "summary": summary,
    }


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="masa-bench-bot-") as folder:
        print(json.dumps(asyncio.run(run(Path(folder))), indent=2))


if __name__ == "__main__":
    main()
