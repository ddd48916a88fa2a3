"""Table-engine under faults (issue 9): NATS outages, restarts, refused requests. One JSON.

Everything runs for real: a nats-server with JetStream and the masa users, and
``python -m masa_table_engine`` as its own process; this process is the client.

- ``outage``: ``TABLES`` human Elevator tables, one move each as a baseline; then NATS is
  paused (SIGSTOP, connections stay open) for ``OUTAGE_SECONDS`` while every table tries a
  move, and resumed; then killed and started again. After each, every table tries moves
  until one is accepted: the figure is how long after NATS answered again the slowest table
  took (the goal: 2 s), against the baseline move latency. Every log is then read back: one
  entry per sequence, no request applied twice.
- ``restart``: one 51 game played by bots until its log holds ``LONG_ENTRIES`` entries (and
  six until each holds 1,000), the engine killed (kill -9) and started again: the time until
  health answers, until SERVING, and the engine's own recovery time, with snapshots every 20
  entries (the default) and without any snapshot after the first (every log read back
  through the consumer and replayed whole). The baseline is reading the same logs and
  replaying them in this process.
- ``refused``: 1,000 refused requests (oversized actions, bad configurations, moves out of
  turn, each with its own request id) and the engine's RSS before and after.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import platform
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import grpc
import grpc.aio
from engine_process import SERVICE, EngineProcess, health, player
from google.protobuf import duration_pb2
from grpc_health.v1 import health_pb2
from masa.common.v1 import card_pb2, game_pb2
from masa.events.v1 import table_log_pb2
from masa.table.v1 import action_pb2, table_pb2, table_pb2_grpc
from masa_platform.bus import connect, read_subject
from masa_platform.bus_access import ADMIN
from masa_platform.testing import NatsServer
from masa_rules.elevator import legal_actions
from masa_rules.lobby import MAX_HANDS_PER_GAME
from masa_table_engine.adapters.convert import input_from_log
from masa_table_engine.adapters.jetstream import STREAM, log_subject
from masa_table_engine.domain.table import TimerPolicy, accept
from masa_wire.elevator import action_to_proto, state_from_seat_view

TABLES = 50
OUTAGE_SECONDS = 8.0
# A 51 game of 25 hands (the most a lobby may ask, F-95) has about 1,300 to 2,000 entries.
LONG_ENTRIES = 1_700
REFUSED = 1_000
PLAYERS = ("ayse", "bora", "cem")
READY_SECONDS = 60.0


# --- processes ------------------------------------------------------------------------------


def engine_of(nats: NatsServer, workdir: Path, **env: str) -> EngineProcess:
    """The engine process, restartable; its log (INFO) is kept for the recovery figures."""
    return EngineProcess(
        nats,
        workdir,
        stop_seconds=10,
        **{"MASA_GRACE_SECONDS": "1", "MASA_LOG_LEVEL": "INFO", **env},
    )


@contextlib.contextmanager
def running(engine: EngineProcess) -> Iterator[EngineProcess]:
    engine.start()
    try:
        yield engine
    finally:
        engine.stop()


async def until_serving(engine: EngineProcess, started: float) -> tuple[float, float]:
    """Seconds from ``started`` until health first answered, and until it said SERVING."""
    answered: float | None = None
    deadline = started + READY_SECONDS
    while time.monotonic() < deadline:
        status = await health(engine.address)
        if status is not None and answered is None:
            answered = time.monotonic() - started
        if status == health_pb2.HealthCheckResponse.SERVING:
            return answered or 0.0, time.monotonic() - started
        await asyncio.sleep(0.02)
    raise TimeoutError("the engine did not serve")


# --- moves -----------------------------------------------------------------------------------


async def move(stub: table_pb2_grpc.TableServiceAsyncStub, table_id: str, request_id: str) -> None:
    public = await stub.GetTable(
        table_pb2.GetTableRequest(table_id=table_id), metadata=player(PLAYERS[0]), timeout=2
    )
    turn = public.seat_view.table.turn_seat
    mine = (
        await stub.GetTable(
            table_pb2.GetTableRequest(table_id=table_id), metadata=player(PLAYERS[turn]), timeout=2
        )
    ).seat_view
    await stub.SubmitAction(
        table_pb2.SubmitActionRequest(
            request_id=request_id,
            table_id=table_id,
            expected_sequence=mine.table.table.sequence,
            action=action_to_proto(legal_actions(state_from_seat_view(mine), turn)[0]),
        ),
        metadata=player(PLAYERS[turn]),
        timeout=1,
    )


async def keep_trying(stub: table_pb2_grpc.TableServiceAsyncStub, table_id: str, tag: str) -> float:
    """Moves until one is accepted; the monotonic time it was."""
    attempt = 0
    while True:
        attempt += 1
        try:
            await move(stub, table_id, f"{table_id}-{tag}-{attempt}")
        except grpc.aio.AioRpcError:
            await asyncio.sleep(0.01)
            continue
        return time.monotonic()


def elevator_config(seats: list[game_pb2.SeatAssignment]) -> game_pb2.TableConfig:
    return game_pb2.TableConfig(
        game=game_pb2.GAME_KIND_ELEVATOR,
        mode=game_pb2.MODE_TRAINING,
        seats=seats,
        turn_time=duration_pb2.Duration(seconds=600),
    )


def humans() -> game_pb2.TableConfig:
    return elevator_config(
        [
            game_pb2.SeatAssignment(
                seat=i, kind=game_pb2.SEAT_KIND_HUMAN, player_id=p, display_name=p
            )
            for i, p in enumerate(PLAYERS)
        ]
    )


async def create(stub: table_pb2_grpc.TableServiceAsyncStub, config: game_pb2.TableConfig) -> str:
    response = await stub.CreateTable(table_pb2.CreateTableRequest(config=config), metadata=SERVICE)
    return response.table.table_id


async def log_of(nats: NatsServer, table_id: str) -> list[table_log_pb2.TableLogEntry]:
    client = await connect(nats.url, name="bench-admin", user=ADMIN, password=nats.password(ADMIN))
    try:
        stored = await read_subject(client, STREAM, log_subject(table_id))
    finally:
        await client.close()
    return [table_log_pb2.TableLogEntry.FromString(message.data) for message in stored]


def whole(entries: list[table_log_pb2.TableLogEntry]) -> bool:
    requests = [
        (e.action_applied.seat, e.action_applied.request_id)
        for e in entries
        if e.WhichOneof("input") == "action_applied" and e.action_applied.request_id
    ]
    in_order = [e.sequence for e in entries] == list(range(1, len(entries) + 1))
    return in_order and len(requests) == len(set(requests))


# --- phases ----------------------------------------------------------------------------------


async def outage(nats: NatsServer, workdir: Path) -> dict[str, Any]:
    engine = engine_of(nats, workdir, MASA_HEALTH_CHECK_SECONDS="0.2")
    results: dict[str, Any] = {"tables": TABLES, "outage_seconds": OUTAGE_SECONDS}
    with running(engine):
        await until_serving(engine, time.monotonic())
        async with grpc.aio.insecure_channel(engine.address) as channel:
            stub = table_pb2_grpc.TableServiceStub(channel)
            tables = [await create(stub, humans()) for _ in range(TABLES)]
            latencies = []
            for table_id in tables:
                started = time.perf_counter()
                await move(stub, table_id, f"{table_id}-baseline")
                latencies.append(time.perf_counter() - started)
            baseline = statistics.median(latencies)
            results["baseline_move_ms_p50"] = round(1000 * baseline, 2)
            for kind in ("pause", "kill"):
                if kind == "pause":
                    nats.pause()
                else:
                    nats.kill()
                # Every table tries to move during the outage and until one is accepted.
                tries = [asyncio.create_task(keep_trying(stub, t, kind)) for t in tables]
                await asyncio.sleep(OUTAGE_SECONDS)
                states = {await health(engine.address)}
                if kind == "pause":
                    nats.resume()
                else:
                    nats.start()
                back = time.monotonic()
                done = await asyncio.gather(*tries)
                seconds = sorted(max(0.0, at - back) for at in done)
                serving_after = None
                while await health(engine.address) != health_pb2.HealthCheckResponse.SERVING:
                    await asyncio.sleep(0.02)
                serving_after = time.monotonic() - back
                results[kind] = {
                    "health_during_outage": sorted(
                        health_pb2.HealthCheckResponse.ServingStatus.Name(s)
                        if s is not None
                        else "no answer"
                        for s in states
                    ),
                    "all_tables_back_seconds": round(seconds[-1], 3),
                    "tables_back_seconds_p50": round(statistics.median(seconds), 3),
                    "serving_again_seconds": round(serving_after, 3),
                    "ratio_slowest_to_baseline_move": round(seconds[-1] / baseline, 1),
                    "meets_2_s_goal": seconds[-1] <= 2.0,
                }
            logs = [await log_of(nats, t) for t in tables]
            results["logs_whole_no_request_twice"] = all(whole(entries) for entries in logs)
    return results


def fiftyone_bots(hands: int) -> game_pb2.TableConfig:
    return game_pb2.TableConfig(
        game=game_pb2.GAME_KIND_FIFTYONE,
        preset=game_pb2.PRESET_CLASSIC,
        mode=game_pb2.MODE_TRAINING,
        options=game_pb2.GameOptions(fiftyone=game_pb2.FiftyOneOptions(hands_per_game=hands)),
        seats=[game_pb2.SeatAssignment(seat=s, kind=game_pb2.SEAT_KIND_BOT) for s in range(4)],
        turn_time=duration_pb2.Duration(seconds=600),
    )


async def long_tables(
    nats: NatsServer, workdir: Path, *, tables: int, entries: int, snapshot_every: int
) -> dict[str, Any]:
    """``tables`` 51 games played by bots until each log holds ``entries`` entries, then a
    kill -9 and a start: how long until health answers, until SERVING, and the recovery."""
    engine = engine_of(
        nats,
        workdir,
        MASA_SNAPSHOT_EVERY=str(snapshot_every),
        # Slow enough for the games to be caught in their middle.
        MASA_BOT_DELAY_SECONDS="0.004",
    )
    with running(engine):
        await until_serving(engine, time.monotonic())
        async with grpc.aio.insecure_channel(engine.address) as channel:
            stub = table_pb2_grpc.TableServiceStub(channel)
            playing = [await create(stub, fiftyone_bots(MAX_HANDS_PER_GAME)) for _ in range(tables)]
            while True:
                await asyncio.sleep(0.05)
                views = [
                    (
                        await stub.GetTable(table_pb2.GetTableRequest(table_id=t), metadata=SERVICE)
                    ).spectator_view.table
                    for t in playing
                ]
                if all(view.sequence >= entries for view in views):
                    break
                # A game can end before its log is long enough: another takes its place.
                for index, view in enumerate(views):
                    if view.state == view.STATE_FINISHED:
                        playing[index] = await create(stub, fiftyone_bots(MAX_HANDS_PER_GAME))
        engine.kill()
        started = engine.start()
        answered, serving = await until_serving(engine, started)
        recovery = engine.last_recovery_seconds()
    logs = [await log_of(nats, table_id) for table_id in playing]
    offline_started = time.perf_counter()
    for entries_of_table in logs:
        table = None
        for entry in entries_of_table:
            table, _ = accept(
                table,
                input_from_log(entry, 20.0),
                entry.occurred_at.ToNanoseconds() / 1e9,
                TimerPolicy(),
            )
    offline = time.perf_counter() - offline_started
    return {
        "tables": tables,
        "snapshot_every": snapshot_every,
        "log_entries_at_kill": [len(entries_of_table) for entries_of_table in logs],
        "health_answers_after_seconds": round(answered, 3),
        "serving_after_seconds": round(serving, 3),
        "engine_recovery_seconds": recovery,
        "baseline_offline_replay_of_whole_logs_seconds": round(offline, 3),
        "ratio_recovery_to_offline_replay": round(recovery / offline, 2),
        # Serving includes starting a Python process and connecting (about 0.6 s here).
        "ratio_serving_to_offline_replay": round(serving / offline, 2),
    }


async def refused(nats: NatsServer, workdir: Path) -> dict[str, Any]:
    engine = engine_of(nats, workdir, MASA_LOG_LEVEL="ERROR")
    with running(engine):
        await until_serving(engine, time.monotonic())
        async with grpc.aio.insecure_channel(engine.address) as channel:
            stub = table_pb2_grpc.TableServiceStub(channel)
            table_id = await create(stub, humans())
            turn = (
                await stub.GetTable(
                    table_pb2.GetTableRequest(table_id=table_id), metadata=player(PLAYERS[0])
                )
            ).seat_view.table
            waiting = PLAYERS[(turn.turn_seat + 1) % 3]
            card = card_pb2.PlacedCard(
                card=card_pb2.Card(rank=card_pb2.RANK_SEVEN, suit=card_pb2.SUIT_CLUBS)
            )
            big = action_pb2.Action(open=action_pb2.Open())
            big.open.melds.add().cards.extend([card] * 5_000)
            bad = humans()
            bad.seats[0].display_name = "☃" * 15_000

            async def refuse(number: int) -> None:
                kind = number % 3
                call: grpc.aio.UnaryUnaryCall[Any, Any]
                if kind == 0:
                    call = stub.SubmitAction(
                        table_pb2.SubmitActionRequest(
                            request_id=f"b{number}", table_id=table_id, action=big
                        ),
                        metadata=player(PLAYERS[0]),
                    )
                elif kind == 1:
                    call = stub.CreateTable(
                        table_pb2.CreateTableRequest(request_id=f"c{number}", config=bad),
                        metadata=SERVICE,
                    )
                else:
                    call = stub.SubmitAction(
                        table_pb2.SubmitActionRequest(
                            request_id=f"e{number}",
                            table_id=table_id,
                            expected_sequence=turn.table.sequence,
                            action=action_pb2.Action(pass_turn=action_pb2.Pass()),
                        ),
                        metadata=player(waiting),
                    )
                with contextlib.suppress(grpc.aio.AioRpcError):
                    await call

            for number in range(200):
                await refuse(number)
            before = engine.rss_bytes()
            started = time.perf_counter()
            for number in range(200, 200 + REFUSED):
                await refuse(number)
            seconds = time.perf_counter() - started
            after = engine.rss_bytes()
    return {
        "refused_requests": REFUSED,
        "request_bytes": {"oversized_action": 5_000 * 8, "bad_create": 45_000, "out_of_turn": 60},
        "rss_before_mib": round(before / 2**20, 1),
        "rss_after_mib": round(after / 2**20, 1),
        "rss_growth_mib": round((after - before) / 2**20, 2),
        "refusals_per_second": round(REFUSED / seconds, 1),
    }


async def run(workdir: Path) -> dict[str, Any]:
    load_at_start = round(os.getloadavg()[0], 2)
    with NatsServer(workdir / "nats", secure=True) as nats:
        outages = await outage(nats, workdir)
        restarts = [
            await long_tables(nats, workdir, tables=1, entries=LONG_ENTRIES, snapshot_every=20),
            await long_tables(
                nats, workdir, tables=1, entries=LONG_ENTRIES, snapshot_every=1_000_000
            ),
            await long_tables(nats, workdir, tables=6, entries=1_000, snapshot_every=20),
            await long_tables(nats, workdir, tables=6, entries=1_000, snapshot_every=1_000_000),
        ]
        refusals = await refused(nats, workdir)
    return {
        "benchmark": "engine_faults",
        "python": platform.python_version(),
        "machine": {
            "cpu_cores": os.cpu_count(),
            "platform": platform.platform(),
            "load_average_1m_at_start": load_at_start,
        },
        "outage": outages,
        "restart_long_table": restarts,
        "refused_requests": refusals,
    }


def _interrupted(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> None:
    signal.signal(signal.SIGTERM, _interrupted)
    # The admin client's own connection notes would clutter the output.
    logging.getLogger("masa_platform.bus").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="masa-bench-") as workdir:
        try:
            result = asyncio.run(run(Path(workdir)))
        except BaseException:
            for log in sorted(Path(workdir).glob("engine-*.log")):
                sys.stderr.write(f"--- {log.name} (tail)\n")
                sys.stderr.write("\n".join(log.read_text().splitlines()[-20:]) + "\n")
            raise
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
