"""Table-engine speed and capacity (issues 5 and 14), driven by ``masa-load``; one JSON document.

The set-up is the real one: a nats-server with JetStream (temporary store) and
``python -m masa_table_engine`` processes, each on free ports, a fresh engine for each phase.
The load comes from ``masa-load`` (libs/client), run as its own process against the engine's
public API, exactly as an operator would run it; this process only reads the engine's own
counters (accepted actions from ``/metrics``, CPU and RSS from ``/proc``) over each window.
Every accepted action is appended to JetStream before SubmitAction answers.

Phases (``BENCH_PHASES`` picks some, all by default):

- ``echo``: the baselines of issue 22 (bench/floor.py), on a NATS of their own: a bare
  ``grpc.aio`` echo server (its own process, no interceptors) called by ``BENCH_TABLES``
  callers as fast as answered, again at a light paced rate, and over one bidirectional stream
  per caller; then the **persist floor**: the same server appending each request to JetStream
  (one nats-py publish awaiting its ack) before it answers, unary and streamed. A masa action
  is logged before it is answered, so the floor is what it cannot cost less than, and every
  phase is given as a multiple of the floor (``vs_floor``): each closed phase measures its own
  floor (unary or streamed) right before it, since the machine is shared and its load moves
  within a run, and again after it paced to the rate the phase reached (``floor_at_rate``,
  ``cpu_over_floor_at_rate``: a server's CPU per call falls as its load rises, and the
  saturated floor answers several times masa's rate); the run's baselines are given beside
  it. Like for like, the server and its
  callers run on the event loop the engines and masa-load run on (``MASA_EVENT_LOOP``,
  uvloop unless set).
- ``elevator`` / ``fiftyone``: ``BENCH_TABLES`` closed tables of one game, saturated: the
  engine's CPU per accepted action and its actions/s. A 51 move starts from the actor's view
  (GetTable), so its CPU is counted "from the actor's view": both calls.
- ``elevator_stream`` / ``fiftyone_stream``: the same, each player's moves sent over one
  ``SubmitActions`` stream (``masa-load --moves stream``) instead of a call per move.
- ``live``: ``BENCH_LIVE_TABLES`` live 4-seat tables on one engine (one in four 51), two
  human seats each on watch streams acting 2-8 s after their turn starts, two bot seats the
  engine plays, 20 s turn timers: SubmitAction p99, the engine's CPU and RSS per live table,
  and its CPU per action over the floor paced to its rate right after it
  (``cpu_over_floor_at_rate``: the machine's speed moves between runs by more than a small
  change does).
- ``scaleout``: two engines (two node ids, one NATS), each with its own ``masa-load``, holding
  ``BENCH_SCALE_FACTOR`` (1.7) times the live tables between them, to compare the p99 with
  the one-engine ``live`` phase.

``BENCH_WARMUP``/``BENCH_WINDOW`` shorten the closed phases, ``BENCH_LIVE_WARMUP``/
``BENCH_LIVE_WINDOW`` the live ones; ``BENCH_PROFILE`` (for example ``-m cProfile -o
/tmp/engine.prof``) runs the engines under a profiler (with ``MASA_EVENT_LOOP=asyncio`` a
sampling profiler such as py-spy sees the loop's own work too); ``BENCH_PYSPY=/tmp/prof``
samples each engine with py-spy (``uv pip install py-spy``) over the measured window only,
into ``/tmp/prof-<pid>.txt`` (raw, native frames included). The load average
(/proc/loadavg) is recorded at the start and end of the run and of each phase. Every process
started here is stopped on the way out, errors included.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable
from pathlib import Path
from types import FrameType
from typing import Any

import floor
import grpc
import grpc.aio
from grpc_health.v1 import health_pb2
from masa.table.v1 import table_pb2
from masa_platform import runner
from masa_platform.bus_access import TABLE_ENGINE
from masa_platform.keys import ISSUER
from masa_platform.settings import LoopSettings, load_settings
from masa_platform.testing import NatsServer, free_port, keyring

# The closed phases: each game with a SubmitAction call per move, and with the moves of each
# player over one SubmitActions stream.
CLOSED_PHASES = ("elevator", "elevator_stream", "fiftyone", "fiftyone_stream")
PHASES = tuple(
    os.environ.get("BENCH_PHASES", ",".join(("echo", *CLOSED_PHASES, "live", "scaleout"))).split(
        ","
    )
)
TABLES = int(os.environ.get("BENCH_TABLES", "200"))
LIVE_TABLES = int(os.environ.get("BENCH_LIVE_TABLES", "1000"))
SCALE_FACTOR = float(os.environ.get("BENCH_SCALE_FACTOR", "1.7"))
WARMUP_SECONDS = float(os.environ.get("BENCH_WARMUP", "8"))
WINDOW_SECONDS = float(os.environ.get("BENCH_WINDOW", "20"))
LIVE_WARMUP_SECONDS = float(os.environ.get("BENCH_LIVE_WARMUP", "20"))
LIVE_WINDOW_SECONDS = float(os.environ.get("BENCH_LIVE_WINDOW", "30"))
ECHO_SECONDS = float(os.environ.get("BENCH_ECHO_SECONDS", "10"))
EVENT_LOOP = load_settings(LoopSettings).event_loop
ECHO_PACED_PER_SECOND = 400
PYSPY = os.environ.get("BENCH_PYSPY", "")
THINK_SECONDS = (2.0, 8.0)
LIVE_TURN_SECONDS = 20
# Closed tables must never time out: the load is the clients' actions only.
CLOSED_TURN_SECONDS = 600
# Generous: on a shared machine under load an engine can take this long to import and start.
READY_TIMEOUT_SECONDS = 90.0
# masa-load's own start (imports, tokens) before its warm-up begins.
LOAD_START_SECONDS = 2.0

# Issue 22's goals, each a ratio to the baselines of the same run: the engine's CPU per
# accepted action over the floor's server CPU per call (unary for a call per move, streamed
# for SubmitActions; a 51 action counts its GetTable too), matchmaking's in
# bench_matchmaking_tickets.py; the live tables' p99 and cores are absolute.
GOALS = {
    "elevator_cpu_over_floor": 1.5,
    "elevator_stream_cpu_over_stream_floor": 1.5,
    "fiftyone_cpu_over_floor": 2.5,
    "live_submit_action_p99_ms": 50.0,
    "live_engine_cpu_cores": 0.45,
    "scaleout_tables_ratio": 1.7,
}


# --- the engine's own counters -----------------------------------------------------------------


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise LookupError(f"no VmRSS for {pid}")


def accepted_actions(metrics_url: str) -> float:
    with urllib.request.urlopen(metrics_url, timeout=5) as answer:
        text = answer.read().decode()
    return sum(
        float(match.group(1))
        for match in re.finditer(
            r'^masa_table_actions_total\{[^}]*result="accepted"[^}]*\} (\S+)$', text, re.M
        )
    )


class Engine:
    """A running engine process and its counters."""

    def __init__(self, process: subprocess.Popen[bytes], address: str, metrics_url: str) -> None:
        self.process = process
        self.address = address
        self.metrics_url = metrics_url

    def counters(self) -> dict[str, float]:
        return {
            "accepted": accepted_actions(self.metrics_url),
            "cpu_seconds": floor.cpu_seconds(self.process.pid),
            "rss_bytes": rss_bytes(self.process.pid),
        }


def over_window(engine: Engine, before: dict[str, float], seconds: float) -> dict[str, Any]:
    after = engine.counters()
    accepted = after["accepted"] - before["accepted"]
    cpu = after["cpu_seconds"] - before["cpu_seconds"]
    return {
        "engine_accepted_actions_per_second": round(accepted / seconds, 1),
        "engine_cpu_percent": round(100 * cpu / seconds, 1),
        "engine_cpu_ms_per_action": round(1000 * cpu / accepted, 3) if accepted else None,
        "engine_rss_mib": round(after["rss_bytes"] / 2**20, 1),
    }


# --- processes -------------------------------------------------------------------------------


async def wait_serving(address: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    async with grpc.aio.insecure_channel(address) as channel:
        check = channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString,
        )
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the engine exited at start with {process.returncode}")
            with contextlib.suppress(grpc.aio.AioRpcError):
                answer = await check(health_pb2.HealthCheckRequest(), timeout=0.5)
                if answer.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            if time.monotonic() > deadline:
                raise TimeoutError("the engine did not report SERVING")
            await asyncio.sleep(0.1)


@contextlib.asynccontextmanager
async def engines(workdir: Path, count: int) -> Any:
    """``count`` fresh engine processes on a fresh NATS, each with its own node id.

    A fresh NATS each time: an engine started with the node id of an earlier one would
    recover that one's unfinished tables, and play them on besides the phase's load.
    """
    with contextlib.ExitStack() as stack:
        nats_url = stack.enter_context(NatsServer(workdir / f"nats-{time.monotonic_ns()}")).url
        started = []
        for index in range(count):
            grpc_port, metrics_port = free_port(), free_port()
            env = {
                **os.environ,
                "MASA_NATS_URL": nats_url,
                **keyring().env(TABLE_ENGINE),
                "MASA_GRPC_PORT": str(grpc_port),
                "MASA_METRICS_PORT": str(metrics_port),
                "MASA_NODE_ID": f"bench-engine-{index}",
                "MASA_GRACE_SECONDS": "1",
                "MASA_LOG_LEVEL": "WARNING",
            }
            command = [
                sys.executable,
                *os.environ.get("BENCH_PROFILE", "").split(),
                "-m",
                "masa_table_engine",
            ]
            log = workdir / f"engine-{time.monotonic_ns()}-{index}.log"
            process = stack.enter_context(floor.child(command, env, log))
            started.append(
                Engine(
                    process,
                    f"127.0.0.1:{grpc_port}",
                    f"http://127.0.0.1:{metrics_port}/metrics",
                )
            )
        for engine in started:
            await wait_serving(engine.address, engine.process)
        yield started


def masa_load(address: str, tables: int, *extra: str, warmup: float, window: float) -> list[str]:
    return [
        str(Path(sys.executable).parent / "masa-load"),
        "--quiet",
        "--address", address,
        "--tables", str(tables),
        "--warmup", str(warmup),
        "--duration", str(window),
        *extra,
    ]  # fmt: skip


async def drive(
    loads: list[tuple[Engine, list[str]]], warmup: float, window: float
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Run the ``masa-load`` commands at once; the reports and each engine's window figures.

    The engines' counters are read over masa-load's window (its start, then warm-up); the CPU
    per action is the engine's own count over its own CPU, so a slightly shifted window
    changes neither.
    """
    # masa-load signs its players' and its operator's tokens as the issuer would.
    env = {**os.environ, "MASA_JWT_ISSUER_KEY_FILE": str(keyring().private(ISSUER))}
    processes = [
        await asyncio.create_subprocess_exec(
            *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env
        )
        for _, command in loads
    ]
    try:
        await asyncio.sleep(LOAD_START_SECONDS + warmup)
        before = [engine.counters() for engine, _ in loads]
        profiles = [await profiled(engine, window) for engine, _ in loads] if PYSPY else []
        await asyncio.sleep(window)
        figures = [
            over_window(engine, counted, window)
            for (engine, _), counted in zip(loads, before, strict=True)
        ]
        for figure, (profiler, path) in zip(figures, profiles, strict=False):
            await profiler.wait()
            figure["profile"] = str(path)
        outputs = [
            await asyncio.wait_for(process.communicate(), warmup + window + 60)
            for process in processes
        ]
    finally:
        for process in processes:
            if process.returncode is None:
                process.kill()
                await process.wait()
    reports = []
    for process, (out, err) in zip(processes, outputs, strict=True):
        if process.returncode != 0:
            raise RuntimeError(f"masa-load failed: {err.decode()[-2000:]}")
        reports.append(json.loads(out))
    return reports, figures


async def profiled(engine: Engine, window: float) -> tuple[asyncio.subprocess.Process, Path]:
    """py-spy sampling ``engine`` over the window (``BENCH_PYSPY``: where its raw profiles go,
    one file per engine process, native frames included)."""
    path = Path(f"{PYSPY}-{engine.process.pid}.txt")
    profiler = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(engine.process.pid),
        "--duration", str(int(window)), "--native", "--format", "raw", "-o", str(path),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    return profiler, path


def summary(report: dict[str, Any]) -> dict[str, Any]:
    """What a phase keeps of a masa-load report."""
    kept = (
        "tables", "game_mix", "tables_kind", "accepted_actions", "actions_per_second",
        "submit_action_ms", "submit_action_ms_by_game", "get_table_ms", "tables_created",
        "games_finished", "client_resyncs", "refused", "load_generator_cpu_percent",
    )  # fmt: skip
    return {key: report[key] for key in kept}


# --- the baselines: the bare echo and the persist floor (floor.py) -------------------------


def payload_size() -> int:
    """The size of a typical SubmitActionRequest, for the echo calls."""
    request = table_pb2.SubmitActionRequest(
        request_id="0123456789abcdef0123456789abcdef/2/42",
        table_id="0123456789abcdef0123456789abcdef",
        expected_sequence=42,
    )
    request.action.play.cards.add(rank=5, suit=2)
    return request.ByteSize()


# --- phases ----------------------------------------------------------------------------------


async def floor_beside(workdir: Path, streamed: bool, rate: float | None = None) -> dict[str, Any]:
    """The persist floor (unary, or ``streamed``) measured right before a phase, on a NATS of
    its own: on a shared machine whose load moves, the ratio to it is the one that holds.
    With ``rate``, its callers are paced to that many calls a second in all."""
    with contextlib.ExitStack() as stack:
        nats = stack.enter_context(NatsServer(workdir / f"nats-{time.monotonic_ns()}"))
        port = free_port()
        server = stack.enter_context(floor.floor_server(nats.url, workdir / "floor.log", port))
        return await floor.measure(
            f"127.0.0.1:{port}", server.pid,
            method=floor.PERSIST_STREAM if streamed else floor.PERSIST,
            callers=TABLES, size=payload_size(), seconds=ECHO_SECONDS, streamed=streamed,
            rate=rate, nats_pid=nats.pid,
        )  # fmt: skip


async def closed_phase(workdir: Path, game: str, moves: str) -> dict[str, Any]:
    beside = await floor_beside(workdir, streamed=moves == "stream")
    async with engines(workdir, 1) as (engine,):
        command = masa_load(
            engine.address, TABLES, "--mix", game, "--turn-seconds", str(CLOSED_TURN_SECONDS),
            "--moves", moves, warmup=WARMUP_SECONDS, window=WINDOW_SECONDS,
        )  # fmt: skip
        (report,), (figures,) = await drive([(engine, command)], WARMUP_SECONDS, WINDOW_SECONDS)
    # The saturated floor answers several times the calls a second masa does, and a server's
    # CPU per call falls as its load rises (more messages per write and per wake-up): the
    # floor paced to masa's own rate of calls is the like-for-like one, given beside it. A 51
    # action is two calls (GetTable, then the move), paced as two, each persisted by the
    # floor though masa persists only the move: the ratio to it is the harder one to meet.
    calls_per_action = 2 if game == "fiftyone" else 1
    rate = figures["engine_accepted_actions_per_second"] * calls_per_action
    # A phase that made no move has no rate to pace the floor to.
    at_rate = await floor_beside(workdir, streamed=moves == "stream", rate=rate) if rate else None
    return {**figures, "floor_beside": beside, "floor_at_rate": at_rate, "load": summary(report)}


def live_command(engine: Engine, tables: int, seed: int) -> list[str]:
    return masa_load(
        engine.address, tables, "--mix", "elevator=3,fiftyone=1", "--seats", "4",
        "--humans", "2", "--live", str(THINK_SECONDS[0]), str(THINK_SECONDS[1]),
        "--turn-seconds", str(LIVE_TURN_SECONDS), "--seed", str(seed),
        "--player-prefix", f"live{seed}",
        warmup=LIVE_WARMUP_SECONDS, window=LIVE_WINDOW_SECONDS,
    )  # fmt: skip


async def live_phase(workdir: Path, nodes: int, tables: int) -> dict[str, Any]:
    async with engines(workdir, nodes) as started:
        idle_rss = [rss_bytes(engine.process.pid) for engine in started]
        share = [tables // nodes + (1 if index < tables % nodes else 0) for index in range(nodes)]
        loads = [
            (engine, live_command(engine, count, seed=index))
            for index, (engine, count) in enumerate(zip(started, share, strict=True))
        ]
        reports, figures = await drive(loads, LIVE_WARMUP_SECONDS, LIVE_WINDOW_SECONDS)
    per_node = []
    for count, idle, report, figure in zip(share, idle_rss, reports, figures, strict=True):
        rss_growth = figure["engine_rss_mib"] * 2**20 - idle
        per_node.append(
            {
                **figure,
                "live_tables": count,
                "engine_idle_rss_mib": round(idle / 2**20, 1),
                "rss_kib_per_live_table": round(rss_growth / 1024 / count, 1),
                "load": summary(report),
            }
        )
    worst_p99 = max(node["load"]["submit_action_ms"].get("p99", 0.0) for node in per_node)
    # The machine's speed moves between runs by more than a change of a few percent: the floor
    # paced to one engine's rate of actions, right after it, is the yardstick of its run.
    rate = per_node[0]["engine_accepted_actions_per_second"] if nodes == 1 else 0.0
    at_rate = await floor_beside(workdir, streamed=False, rate=rate) if rate else None
    return {
        "nodes": nodes,
        "live_tables": tables,
        "submit_action_p99_ms": worst_p99,
        "per_node": per_node,
        "floor_at_rate": at_rate,
    }


async def baselines(workdir: Path) -> dict[str, Any]:
    """The bare echo and the persist floor (bench/floor.py), called by ``TABLES`` callers
    sending requests the size of a SubmitActionRequest."""
    with contextlib.ExitStack() as stack:
        nats_url = stack.enter_context(NatsServer(workdir / f"nats-{time.monotonic_ns()}")).url
        port = free_port()
        server = stack.enter_context(floor.floor_server(nats_url, workdir / "floor.log", port))
        address = f"127.0.0.1:{port}"

        async def measure(method: str, **how: Any) -> dict[str, Any]:
            return await floor.measure(
                address, server.pid, method=method, callers=TABLES, size=payload_size(),
                seconds=ECHO_SECONDS, **how,
            )  # fmt: skip

        return {
            "echo": await measure(floor.ECHO),
            "echo_paced": await measure(floor.ECHO, rate=ECHO_PACED_PER_SECOND),
            "echo_stream": await measure(floor.ECHO_STREAM, streamed=True),
            "floor": await measure(floor.PERSIST),
            "floor_stream": await measure(floor.PERSIST_STREAM, streamed=True),
        }


async def run(workdir: Path) -> dict[str, Any]:
    result: dict[str, Any] = {
        "benchmark": "table_engine",
        "python": platform.python_version(),
        "event_loop": EVENT_LOOP,
        "machine": {
            "cpu_cores": os.cpu_count(),
            "platform": platform.platform(),
            # The cores are shared: other work on the machine shows here and in the figures.
            "loadavg_at_start": floor.loadavg(),
        },
        "persistence": "every action appended to JetStream before SubmitAction answers",
        "load": "masa-load (libs/client), its own process, through the public API only",
        "goals": GOALS,
    }

    async def phase(key: str, measured: Awaitable[dict[str, Any]]) -> None:
        before = floor.loadavg()
        result[key] = {**await measured, "loadavg_before": before, "loadavg_after": floor.loadavg()}

    if "echo" in PHASES:
        await phase("baselines", baselines(workdir))
    for closed in CLOSED_PHASES:
        if closed in PHASES:
            game, _, streamed = closed.partition("_")
            moves = "stream" if streamed else "call"
            await phase(f"saturated_{closed}", closed_phase(workdir, game, moves))
    if "live" in PHASES:
        await phase("live_one_engine", live_phase(workdir, 1, LIVE_TABLES))
    if "scaleout" in PHASES:
        tables = round(SCALE_FACTOR * LIVE_TABLES)
        await phase("live_two_engines", live_phase(workdir, 2, tables))
    result["machine"]["loadavg_at_end"] = floor.loadavg()
    result["vs_floor"] = ratios(result)
    return result


def ratio(value: float | None, base: float | None) -> float | None:
    return round(value / base, 2) if value and base else None


def ratios(result: dict[str, Any]) -> dict[str, Any]:
    """Each closed phase as a multiple of the floor measured right before it (and of the
    run's own baselines, when the ``echo`` phase ran): the engine's CPU per accepted action
    over the floor's server CPU per call (the unary floor for a call per move, the streamed one
    for SubmitActions), and its actions/s as a share of the floor's calls/s; the live phases'
    p99 and cores, which the goals give in absolute terms."""
    base = result.get("baselines", {})
    out: dict[str, Any] = {
        name: {
            "calls_per_second": base[name]["calls_per_second"],
            "server_cpu_ms_per_call": base[name]["server_cpu_ms_per_call"],
        }
        for name in ("echo", "echo_stream", "floor", "floor_stream")
        if name in base
    }
    if base:
        out["floor_cpu_over_echo"] = ratio(
            base["floor"]["server_cpu_ms_per_call"], base["echo"]["server_cpu_ms_per_call"]
        )
    for closed in CLOSED_PHASES:
        phase = result.get(f"saturated_{closed}")
        if phase is not None:
            out[closed] = closed_ratios(phase, base, streamed=closed.endswith("_stream"))
    echo_p99 = base["echo_paced"]["latency_ms"].get("p99") if base else None
    for key in ("live_one_engine", "live_two_engines"):
        phase = result.get(key)
        if phase is None:
            continue
        p99 = phase["submit_action_p99_ms"]
        out[key] = {
            "live_tables": phase["live_tables"],
            "submit_action_p99_ms": p99,
            "p99_over_echo_paced_p99": ratio(p99, echo_p99),
            "engine_cpu_cores": [
                round(n["engine_cpu_percent"] / 100, 2) for n in phase["per_node"]
            ],
            "rss_kib_per_live_table": [n["rss_kib_per_live_table"] for n in phase["per_node"]],
        }
        at_rate = (phase.get("floor_at_rate") or {}).get("server_cpu_ms_per_call")
        if at_rate:
            cpu = phase["per_node"][0]["engine_cpu_ms_per_action"]
            out[key] |= {
                "cpu_ms_per_action": cpu,
                "floor_at_rate_cpu_ms_per_call": at_rate,
                "cpu_over_floor_at_rate": ratio(cpu, at_rate),
            }
    if "live_one_engine" in out and "live_two_engines" in out:
        out["scaleout_tables_ratio"] = ratio(
            out["live_two_engines"]["live_tables"], out["live_one_engine"]["live_tables"]
        )
    return out


def closed_ratios(phase: dict[str, Any], base: dict[str, Any], *, streamed: bool) -> dict[str, Any]:
    cpu = phase["engine_cpu_ms_per_action"]
    rate = phase["engine_accepted_actions_per_second"]
    beside = phase["floor_beside"]
    at_rate = (phase["floor_at_rate"] or {}).get("server_cpu_ms_per_call")
    figures = {
        "cpu_ms_per_action": cpu,
        "floor_beside_cpu_ms_per_call": beside["server_cpu_ms_per_call"],
        "cpu_over_floor": ratio(cpu, beside["server_cpu_ms_per_call"]),
        "floor_at_rate_cpu_ms_per_call": at_rate,
        "cpu_over_floor_at_rate": ratio(cpu, at_rate),
        "actions_per_second": rate,
        "rate_share_of_floor": ratio(rate, beside["calls_per_second"]),
    }
    if base:
        run_floor = base["floor_stream" if streamed else "floor"]["server_cpu_ms_per_call"]
        echo = base["echo_stream" if streamed else "echo"]["server_cpu_ms_per_call"]
        figures["cpu_over_run_floor"] = ratio(cpu, run_floor)
        figures["cpu_over_echo"] = ratio(cpu, echo)
    return figures


def _interrupted(signum: int, frame: FrameType | None) -> None:
    # SIGTERM becomes an exception, so every child process and temporary file is cleaned up.
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> None:
    signal.signal(signal.SIGTERM, _interrupted)
    with tempfile.TemporaryDirectory(prefix="masa-bench-") as workdir:
        try:
            result = runner.run(run(Path(workdir)), event_loop=EVENT_LOOP)
        except BaseException:
            for log in sorted(Path(workdir).glob("*.log")):
                sys.stderr.write(f"--- {log.name} (tail)\n")
                sys.stderr.write("\n".join(log.read_text().splitlines()[-20:]) + "\n")
            raise
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
