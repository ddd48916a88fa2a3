"""Table-engine memory (issue 9): RSS per live table, after every table finished, and across
identical load runs. Prints one JSON document.

A nats-server with JetStream and the masa users, and ``python -m masa_table_engine`` as its
own process; this process is the client and reads the engine's RSS from /proc.

- ``live``: ``LIVE_TABLES`` Elevator tables and as many 51 tables, every seat human and
  nobody moving (turns of ten minutes): RSS per live table over the empty engine (the
  baseline, measured in the same run). Then every seat's protection runs out (P-12), bots play
  every game at once to its end (the peak RSS per table in play: a table keeps its latest
  128 entries), and the finished tables leave memory after their retention time: RSS after
  all tables finished, against the baseline. What stays above the baseline is bounded: the
  rules library's LRU caches of meld readings and solver results, filled by the games, and
  what the allocator keeps for reuse; the load runs show it does not grow.
- ``load_runs``: three identical runs of ``RUN_TABLES`` Elevator tables played to the end
  through SubmitAction (every move with its own request id, as clients do), and the RSS after
  each run once the tables are gone (the issue measured 61 -> 157 -> 205 -> 259 MB).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import grpc
import grpc.aio
from engine_process import BENCH_QUOTAS
from google.protobuf import duration_pb2
from grpc_health.v1 import health_pb2
from masa.common.v1 import game_pb2
from masa.table.v1 import table_pb2, table_pb2_grpc
from masa_platform.bus_access import TABLE_ENGINE
from masa_platform.testing import NatsServer, free_port, token
from masa_rules.elevator import legal_actions
from masa_wire.elevator import action_to_proto, state_from_seat_view

LIVE_TABLES = 150
RUN_TABLES = 60
RUNS = 3
# Seats forfeit this long after their table was created; long enough to create every table.
PROTECTION_SECONDS = 60
RETENTION_SECONDS = 3
PLAYERS = ("ayse", "bora", "cem", "deniz")
SERVICE = (("authorization", f"Bearer {token('matchmaking', 'matchmaking')}"),)
TOKENS = {name: (("authorization", f"Bearer {token(name)}"),) for name in PLAYERS}


@contextlib.contextmanager
def engine_process(nats: NatsServer, port: int, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    env = {
        **os.environ,
        "MASA_NATS_URL": nats.url,
        "MASA_NATS_USER": TABLE_ENGINE,
        "MASA_NATS_PASSWORD": nats.password(TABLE_ENGINE),
        "MASA_GRPC_PORT": str(port),
        "MASA_NODE_ID": "bench-memory",
        "MASA_LOG_LEVEL": "WARNING",
        "MASA_SEAT_PROTECTION_SECONDS": str(PROTECTION_SECONDS),
        "MASA_FINISHED_RETENTION_SECONDS": str(RETENTION_SECONDS),
        **BENCH_QUOTAS,
    }
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "masa_table_engine"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"VmRSS:\s+(\d+) kB", status)
    assert match is not None
    return int(match.group(1)) / 1024


async def wait_serving(address: str) -> None:
    deadline = time.monotonic() + 60
    async with grpc.aio.insecure_channel(address) as channel:
        check = channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString,
        )
        while time.monotonic() < deadline:
            with contextlib.suppress(grpc.aio.AioRpcError):
                answer = await check(health_pb2.HealthCheckRequest(), timeout=0.5)
                if answer.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            await asyncio.sleep(0.1)
    raise TimeoutError("the engine did not serve")


def config(game: game_pb2.GameKind.ValueType, seats: int) -> game_pb2.TableConfig:
    fiftyone = game == game_pb2.GAME_KIND_FIFTYONE
    return game_pb2.TableConfig(
        game=game,
        preset=game_pb2.PRESET_SALON if fiftyone else game_pb2.PRESET_UNSPECIFIED,
        mode=game_pb2.MODE_TRAINING,
        seats=[
            game_pb2.SeatAssignment(
                seat=i, kind=game_pb2.SEAT_KIND_HUMAN, player_id=name, display_name=name
            )
            for i, name in enumerate(PLAYERS[:seats])
        ],
        turn_time=duration_pb2.Duration(seconds=600),
    )


async def create(stub: table_pb2_grpc.TableServiceAsyncStub, table: game_pb2.TableConfig) -> str:
    response = await stub.CreateTable(table_pb2.CreateTableRequest(config=table), metadata=SERVICE)
    return response.table.table_id


async def finished(stub: table_pb2_grpc.TableServiceAsyncStub, table_id: str) -> bool:
    try:
        view = await stub.GetTable(table_pb2.GetTableRequest(table_id=table_id), metadata=SERVICE)
    except grpc.aio.AioRpcError:
        # Forgotten after its retention time: finished long ago.
        return True
    resource = view.spectator_view.table
    return resource.state == resource.STATE_FINISHED


async def settled(pid: int) -> float:
    """RSS once the finished tables' retention has passed (and a little more)."""
    await asyncio.sleep(RETENTION_SECONDS + 2.5)
    return rss_mib(pid)


async def play_to_the_end(
    stub: table_pb2_grpc.TableServiceAsyncStub, table_id: str, run: int
) -> int:
    moves = 0
    while True:
        public = (
            await stub.GetTable(
                table_pb2.GetTableRequest(table_id=table_id), metadata=TOKENS["ayse"]
            )
        ).seat_view
        if public.table.table.state == public.table.table.STATE_FINISHED:
            return moves
        turn = public.table.turn_seat
        mine = (
            await stub.GetTable(
                table_pb2.GetTableRequest(table_id=table_id), metadata=TOKENS[PLAYERS[turn]]
            )
        ).seat_view
        with contextlib.suppress(grpc.aio.AioRpcError):
            await stub.SubmitAction(
                table_pb2.SubmitActionRequest(
                    request_id=f"{table_id}-{run}-{moves}",
                    table_id=table_id,
                    expected_sequence=mine.table.table.sequence,
                    action=action_to_proto(legal_actions(state_from_seat_view(mine), turn)[0]),
                ),
                metadata=TOKENS[PLAYERS[turn]],
            )
            moves += 1


async def run(workdir: Path) -> dict[str, Any]:
    load_at_start = round(os.getloadavg()[0], 2)
    with NatsServer(workdir / "nats", secure=True) as nats:
        port = free_port()
        address = f"127.0.0.1:{port}"
        with engine_process(nats, port, workdir / "engine.log") as engine:
            await wait_serving(address)
            async with grpc.aio.insecure_channel(address) as channel:
                stub = table_pb2_grpc.TableServiceStub(channel)
                # Warm up: one game played, so that imports and caches are in the baseline.
                await play_to_the_end(
                    stub, await create(stub, config(game_pb2.GAME_KIND_ELEVATOR, 3)), -1
                )
                baseline = await settled(engine.pid)

                started = time.monotonic()
                elevator = [
                    await create(stub, config(game_pb2.GAME_KIND_ELEVATOR, 3))
                    for _ in range(LIVE_TABLES)
                ]
                with_elevator = rss_mib(engine.pid)
                fiftyone = [
                    await create(stub, config(game_pb2.GAME_KIND_FIFTYONE, 4))
                    for _ in range(LIVE_TABLES)
                ]
                with_both = rss_mib(engine.pid)
                assert time.monotonic() - started < PROTECTION_SECONDS, "created too slowly"
                tables = elevator + fiftyone
                # The seats forfeit and bots play every game at once: RSS at its highest.
                peak = with_both
                while not all([await finished(stub, t) for t in tables]):
                    peak = max(peak, rss_mib(engine.pid))
                    await asyncio.sleep(0.5)
                after_live = await settled(engine.pid)

                runs: list[dict[str, Any]] = []
                for number in range(RUNS):
                    run_started = time.monotonic()
                    games = [
                        await create(stub, config(game_pb2.GAME_KIND_ELEVATOR, 3))
                        for _ in range(RUN_TABLES)
                    ]
                    moves = sum(
                        await asyncio.gather(*(play_to_the_end(stub, g, number) for g in games))
                    )
                    runs.append(
                        {
                            "run": number + 1,
                            "moves": moves,
                            "seconds": round(time.monotonic() - run_started, 1),
                            "rss_after_mib": round(await settled(engine.pid), 1),
                        }
                    )
    per_elevator = (with_elevator - baseline) / LIVE_TABLES
    per_fiftyone = (with_both - with_elevator) / LIVE_TABLES
    return {
        "benchmark": "engine_memory",
        "python": platform.python_version(),
        "machine": {
            "cpu_cores": os.cpu_count(),
            "platform": platform.platform(),
            "load_average_1m_at_start": load_at_start,
        },
        "baseline_rss_mib": round(baseline, 1),
        "live": {
            "elevator_tables": LIVE_TABLES,
            "fiftyone_tables": LIVE_TABLES,
            "rss_with_elevator_tables_mib": round(with_elevator, 1),
            "rss_with_all_tables_mib": round(with_both, 1),
            "rss_per_live_elevator_table_kib": round(per_elevator * 1024, 1),
            "rss_per_live_fiftyone_table_kib": round(per_fiftyone * 1024, 1),
            "rss_peak_while_all_play_mib": round(peak, 1),
            "rss_per_table_in_play_kib": round((peak - baseline) * 1024 / (2 * LIVE_TABLES), 1),
            "rss_after_all_finished_mib": round(after_live, 1),
            "ratio_after_finished_to_baseline": round(after_live / baseline, 2),
        },
        "load_runs": runs,
        "rss_growth_from_first_to_last_run_mib": round(
            runs[-1]["rss_after_mib"] - runs[0]["rss_after_mib"], 1
        ),
    }


def _interrupted(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> None:
    signal.signal(signal.SIGTERM, _interrupted)
    logging.getLogger("masa_platform.bus").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="masa-bench-") as workdir:
        try:
            result = asyncio.run(run(Path(workdir)))
        except BaseException:
            log = Path(workdir) / "engine.log"
            if log.exists():
                sys.stderr.write("--- engine.log (tail)\n")
                sys.stderr.write("\n".join(log.read_text().splitlines()[-20:]) + "\n")
            raise
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
