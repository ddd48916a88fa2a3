"""Matchmaking throughput (issue 11): CreateTicket calls per second, with matching keeping up.

Prints one JSON document. A nats-server (temporary store) and one ``python -m
masa_matchmaking`` process run on free ports; this process is the load generator and also
serves a minimal TableService that answers CreateTable at once, advertised in the engine-node
registry like a real node. The engine is a stand-in on purpose: the figure is matchmaking's
own (the ticket write, the rounds, the claims and the seating of every ticket, each a KV
compare-and-set), not the engine's table creation, which ``bench_matchmaking_seated.py``
counts with the real services.

``PLAYERS`` distinct players each create one ticket in a 4-seat lobby without stakes, with
``CONCURRENCY`` calls in flight. The run reports the CreateTicket rate over the load, the rate
at which tickets were seated over the same window, and how long after the last CreateTicket
the last table was created (matching keeps up when that lag stays small and the seated rate
matches the ticket rate). As a baseline, ``GetLobby`` (authenticated, no write) is called as
often at the same concurrency on the same server: the ratio says what a ticket costs above
gRPC, auth and the interceptors. Both also report the CPU the matchmaking processes spent per
call (from /proc; a ticket's includes its matching and placement), which a loaded machine
moves far less than the rates. ``BENCH_INSTANCES`` (``1,2``) says how many matchmaking
instances each run has (two share the load, as behind a load balancer); ``BENCH_PROFILE``
(for example ``-m cProfile -o /tmp/mm-{instance}.prof``) runs the instances under a profiler,
and ``BENCH_PLAYERS`` changes the number of tickets.

Issue 22's baselines run beside them, called the same way by the same load processes: the
bare gRPC echo and the persist floor of bench/floor.py (the echo appending each request to
JetStream, one acked publish, before it answers), on the run's NATS. ``vs_floor`` gives
CreateTicket's CPU per ticket as a multiple of the floor's CPU per call (goal: at most 2.5)
and GetLobby's as a multiple of the bare echo's (goal: at most 2). Each run records the load
average (/proc/loadavg) before and after.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import floor
import grpc
import grpc.aio
import nats
from grpc_health.v1 import health_pb2
from masa.common.v1 import game_pb2
from masa.events.v1 import engine_pb2
from masa.matchmaking.v1 import matchmaking_pb2 as mm
from masa.matchmaking.v1 import matchmaking_pb2_grpc
from masa.table.v1 import table_pb2, view_pb2
from masa_platform.bus import KvBucket
from masa_platform.testing import NatsServer, free_port, keyring, token
from nats.aio.client import Client

PLAYERS = int(os.environ.get("BENCH_PLAYERS", "12000"))
CONCURRENCY = 200
CLIENT_PROCESSES = 2
# BENCH_PARTY=2 makes every ticket the first of a party of two that never completes: the
# CreateTicket path alone, with no table placed (and a queue that grows to PLAYERS).
PARTY_SIZE = int(os.environ.get("BENCH_PARTY", "1"))
# One instance, then two sharing the load (as behind a load balancer).
INSTANCES = tuple(int(n) for n in os.environ.get("BENCH_INSTANCES", "1,2").split(","))
TARGET_TICKETS_PER_SECOND = 2_000
GOALS = {"create_ticket_cpu_over_floor": 2.5, "get_lobby_cpu_over_echo": 2.0}
# The baselines' requests: about a CreateTicketRequest's size.
BASELINE_REQUEST_BYTES = 24
LOBBIES = """
[[lobby]]
id = "bench"
name = "Bench"
game = "elevator"
mode = "singles"
seats = 4
matching = { base_spread = 1000.0 }
"""


class StubEngine:
    """Answers CreateTable at once and remembers when each table came; serves nothing else."""

    def __init__(self) -> None:
        self.created: dict[str, float] = {}
        self.address = ""

    async def CreateTable(  # noqa: N802
        self, request: table_pb2.CreateTableRequest, context: object
    ) -> table_pb2.CreateTableResponse:
        self.created.setdefault(request.table_id, time.perf_counter())
        return table_pb2.CreateTableResponse(
            table=view_pb2.Table(table_id=request.table_id, owner_address=self.address)
        )


async def advertise(nc: Client, address: str, stop: asyncio.Event) -> None:
    bucket = await KvBucket.open(nc, "masa_engine_nodes")
    while not stop.is_set():
        record = engine_pb2.EngineNode(
            node_id="stub",
            address=address,
            games=[game_pb2.GAME_KIND_ELEVATOR, game_pb2.GAME_KIND_FIFTYONE],
            capacity=1_000_000,
        )
        await bucket.put("stub", record.SerializeToString())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 3)


async def wait_serving(address: str, deadline: float) -> None:
    async with grpc.aio.insecure_channel(address) as channel:
        check = channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString,
        )
        while time.monotonic() < deadline:
            with contextlib.suppress(grpc.aio.AioRpcError):
                answer = await check(health_pb2.HealthCheckRequest(), timeout=1)
                if answer.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            await asyncio.sleep(0.1)
    raise RuntimeError("matchmaking did not start")


async def _closed_loop(address: str, kind: str, tokens: list[str], concurrency: int) -> list[float]:
    """Call ``kind`` once per player (each with its token) with ``concurrency`` calls in
    flight; each latency."""
    latencies: list[float] = []
    queue = iter(tokens)
    async with grpc.aio.insecure_channel(address) as channel:
        stub = matchmaking_pb2_grpc.MatchmakingServiceStub(channel)
        # The baselines (bench/floor.py) get the same calls, the same token included.
        baseline: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(
            floor.PERSIST if kind == "floor" else floor.ECHO
        )

        async def worker(slot: int) -> None:
            payload = floor.request(slot, BASELINE_REQUEST_BYTES)
            for player_token in queue:
                metadata = (("authorization", f"Bearer {player_token}"),)
                started = time.perf_counter()
                if kind in ("echo", "floor"):
                    await baseline(payload, metadata=metadata)
                elif kind == "create":
                    await stub.CreateTicket(
                        mm.CreateTicketRequest(
                            request_id="bench",
                            lobby_id="bench",
                            party_size=PARTY_SIZE,
                        ),
                        metadata=metadata,
                    )
                else:
                    await stub.GetLobby(mm.GetLobbyRequest(lobby_id="bench"), metadata=metadata)
                latencies.append(time.perf_counter() - started)

        await asyncio.gather(*(worker(slot) for slot in range(concurrency)))
    return latencies


def _load_process(
    address: str, kind: str, tokens: list[str], concurrency: int
) -> tuple[float, float, list[float]]:
    """One load process: its start and end (wall clock) and its latencies."""
    started = time.time()
    latencies = asyncio.run(_closed_loop(address, kind, tokens, concurrency))
    return started, time.time(), latencies


def load(
    pool: ProcessPoolExecutor, addresses: list[str], kind: str, tokens: list[str]
) -> tuple[float, float, list[float]]:
    """A call for each of ``tokens``, spread over CLIENT_PROCESSES processes, each calling one
    instance in turn (as a load balancer would spread clients); the span and every latency."""
    share = len(tokens) // CLIENT_PROCESSES
    futures = [
        pool.submit(
            _load_process,
            addresses[k % len(addresses)],
            kind,
            tokens[k * share : (k + 1) * share],
            CONCURRENCY // CLIENT_PROCESSES,
        )
        for k in range(CLIENT_PROCESSES)
    ]
    results = [future.result() for future in futures]
    started = min(r[0] for r in results)
    ended = max(r[1] for r in results)
    return started, ended, [latency for r in results for latency in r[2]]


def cpu_seconds(pids: list[int]) -> float:
    """CPU time (user and system) the processes used so far, from /proc: on a shared machine
    the CPU a call costs moves far less than the calls per second."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        # The fields after the command name, which is in parentheses and may hold spaces.
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        total += int(fields[11]) + int(fields[12])
    return total / ticks


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def baseline(
    pool: ProcessPoolExecutor, address: str, pid: int, kind: str, tokens: list[str]
) -> dict[str, float]:
    """``PLAYERS`` calls of the floor server's ``kind`` (``echo`` or ``floor``), made as the
    masa calls are: their rate and the floor server's CPU per call."""
    cpu = floor.cpu_seconds(pid)
    started, ended, _ = load(pool, [address], kind, tokens)
    cpu = floor.cpu_seconds(pid) - cpu
    return {
        "per_second": round(PLAYERS / (ended - started)),
        "server_cpu_ms_per_call": round(cpu / PLAYERS * 1000, 3),
    }


async def stub_engine() -> tuple[StubEngine, grpc.aio.Server]:
    """The stand-in engine, serving on a free port."""
    engine = StubEngine()
    engine_server = grpc.aio.server()
    engine_server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                "masa.table.v1.TableService",
                {
                    "CreateTable": grpc.unary_unary_rpc_method_handler(
                        engine.CreateTable,
                        request_deserializer=table_pb2.CreateTableRequest.FromString,
                        response_serializer=table_pb2.CreateTableResponse.SerializeToString,
                    )
                },
            ),
        )
    )
    engine_port = engine_server.add_insecure_port("127.0.0.1:0")
    engine.address = f"127.0.0.1:{engine_port}"
    await engine_server.start()
    return engine, engine_server


async def run(workdir: Path, instances: int) -> dict[str, Any]:
    lobbies = workdir / "lobbies.toml"
    lobbies.write_text(LOBBIES)
    loadavg_before = floor.loadavg()
    floor_port = free_port()
    with (
        NatsServer(workdir / f"nats-{instances}") as server,
        floor.floor_server(server.url, workdir / f"floor-{instances}.log", floor_port) as floor_at,
    ):
        nc = await nats.connect(server.url)
        engine, engine_server = await stub_engine()
        stop = asyncio.Event()
        advertiser = asyncio.create_task(advertise(nc, engine.address, stop))
        ports = [free_port() for _ in range(instances)]
        processes = [
            subprocess.Popen(
                [
                    sys.executable,
                    *os.environ.get("BENCH_PROFILE", "").format(instance=index).split(),
                    "-m",
                    "masa_matchmaking",
                ],
                env={
                    **os.environ,
                    "MASA_NATS_URL": server.url,
                    **keyring().env("matchmaking"),
                    "MASA_GRPC_PORT": str(port),
                    "MASA_INSTANCE_ID": f"bench-{index}",
                    "MASA_LOBBIES_FILE": str(lobbies),
                    "MASA_LOG_LEVEL": "WARNING",
                    "MASA_ROUND_SECONDS": "0.2",
                },
            )
            for index, port in enumerate(ports)
        ]
        addresses = [f"127.0.0.1:{port}" for port in ports]
        try:
            for address in addresses:
                await wait_serving(address, time.monotonic() + 60)
            loop = asyncio.get_running_loop()
            # Each player keeps one token, as a client keeps its session's: the baseline
            # pass (each player's first call) pays its verification, and later calls find it
            # verified. Minted here: the load processes do not hold this process's keys.
            issued = float(int(time.time()))
            tokens = [token(f"bench-{n}", ttl_seconds=3600, now=issued) for n in range(PLAYERS)]
            with ProcessPoolExecutor(CLIENT_PROCESSES, mp_context=get_context("spawn")) as pool:
                # Warm-up (processes, channels, and every player's token verified once, as a
                # session's first call does), then the baselines, then the tickets.
                await loop.run_in_executor(None, load, pool, addresses, "lobby", tokens)
                floor_address = f"127.0.0.1:{floor_port}"
                await loop.run_in_executor(
                    None, load, pool, [floor_address], "floor", tokens[:2_000]
                )
                baselines = {
                    kind: await loop.run_in_executor(
                        None, baseline, pool, floor_address, floor_at.pid, kind, tokens
                    )
                    for kind in ("echo", "floor")
                }
                pids = [process.pid for process in processes]
                cpu_before = cpu_seconds(pids)
                base_start, base_end, base_latencies = await loop.run_in_executor(
                    None, load, pool, addresses, "lobby", tokens
                )
                base_cpu, cpu_before = cpu_seconds(pids) - cpu_before, cpu_seconds(pids)
                load_start, load_end, latencies = await loop.run_in_executor(
                    None, load, pool, addresses, "create", tokens
                )
            base_seconds = base_end - base_start
            load_seconds = load_end - load_start
            # The stand-in engine timed its tables with perf_counter; shift to the wall clock.
            shift = time.time() - time.perf_counter()
            deadline = time.monotonic() + 120
            while len(engine.created) < PLAYERS // 4 and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            # Every ticket's CPU: the call and its share of the matching and placement.
            ticket_cpu = cpu_seconds(pids) - cpu_before
            created = sorted(at + shift for at in engine.created.values())
            in_window = sum(1 for at in created if at <= load_end)
            lag = (created[-1] - load_end) if created else float("inf")
        finally:
            for process in processes:
                process.send_signal(signal.SIGINT)
            for process in processes:
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()
            stop.set()
            await advertiser
            await engine_server.stop(0)
            await nc.close()
    rate = PLAYERS / load_seconds
    get_lobby_rate = PLAYERS / base_seconds
    return {
        "instances": instances,
        "players": PLAYERS,
        "concurrency": CONCURRENCY,
        "client_processes": CLIENT_PROCESSES,
        "target_tickets_per_second": TARGET_TICKETS_PER_SECOND,
        "create_ticket": {
            "per_second": round(rate),
            "p50_ms": round(percentile(latencies, 0.5) * 1000, 2),
            "p99_ms": round(percentile(latencies, 0.99) * 1000, 2),
            "matchmaking_cpu_ms_per_ticket": round(ticket_cpu / PLAYERS * 1000, 3),
        },
        "matching": {
            "tables_created": len(created),
            "tickets_seated_during_load_per_second": round(in_window * 4 / load_seconds),
            "seated_share_during_load": round(in_window * 4 / PLAYERS, 3),
            "last_table_after_last_ticket_seconds": round(lag, 3),
            "all_seated": len(created) == PLAYERS // 4,
        },
        "baseline_get_lobby": {
            "per_second": round(get_lobby_rate),
            "p99_ms": round(percentile(base_latencies, 0.99) * 1000, 2),
            "matchmaking_cpu_ms_per_call": round(base_cpu / PLAYERS * 1000, 3),
        },
        "ratio_create_ticket_to_get_lobby": round(rate / get_lobby_rate, 3),
        "cpu_ratio_ticket_to_get_lobby": round(ticket_cpu / base_cpu, 2),
        "baselines": baselines,
        "vs_floor": {
            "create_ticket_cpu_over_floor": round(
                ticket_cpu / PLAYERS * 1000 / baselines["floor"]["server_cpu_ms_per_call"], 2
            ),
            "get_lobby_cpu_over_echo": round(
                base_cpu / PLAYERS * 1000 / baselines["echo"]["server_cpu_ms_per_call"], 2
            ),
            "goals": GOALS,
        },
        "loadavg_before": loadavg_before,
        "loadavg_after": floor.loadavg(),
        "meets_target": rate >= TARGET_TICKETS_PER_SECOND and len(created) == PLAYERS // 4,
    }


def main() -> None:
    runs = []
    with tempfile.TemporaryDirectory(prefix="masa-bench-mm-") as workdir:
        for instances in INSTANCES:
            runs.append(asyncio.run(run(Path(workdir), instances)))
    result = {
        "benchmark": "matchmaking_create_ticket",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "runs": runs,
        "meets_target": any(r["meets_target"] for r in runs),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
