"""Memory a watch stream costs the server, and whether it returns once the stream closes.

Prints one JSON document. A nats-server with JetStream and the masa users, one
``python -m masa_table_engine`` and one ``python -m masa_matchmaking`` process, each its own;
this process opens the streams and reads each server's RSS from /proc.

- ``engine_spectator``: ``STREAMS`` WatchTable streams of players without a seat, spread over
  tables of four human seats (``SPECTATED_TABLES`` of them, under the default cap of spectators
  per table);
- ``engine_seated``: ``STREAMS`` WatchTable streams of seated players, one per seat of
  ``STREAMS / 4`` tables (each stream also records the seat's reconnection in the table log);
- ``matchmaking``: ``STREAMS`` WatchTicket streams, each of its own player's ticket (the first
  of a party of two whose partner never comes, so that the ticket stays open).

Each kind runs ``ROUNDS`` rounds: the streams are opened (every one has read its first
message), the RSS taken once it is steady, then every stream is cancelled and the RSS taken
again once steady. Per stream is (open - before) / STREAMS. The streams are opened by
distinct players, as the per-caller quotas would refuse one player holding them all.
Memory that returns shows as the RSS after closing coming back near the RSS before; what the
allocator keeps for reuse shows as the next round's open RSS not growing past the first's.
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
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import grpc
import grpc.aio
from engine_process import SERVICE, EngineProcess, health, player
from google.protobuf import duration_pb2
from grpc_health.v1 import health_pb2
from masa.common.v1 import game_pb2
from masa.matchmaking.v1 import matchmaking_pb2 as mm
from masa.matchmaking.v1 import matchmaking_pb2_grpc
from masa.table.v1 import table_pb2, table_pb2_grpc
from masa_platform.bus_access import MATCHMAKING
from masa_platform.testing import NatsServer, free_port

STREAMS = int(os.environ.get("BENCH_STREAMS", "2000"))
ROUNDS = 3
SPECTATED_TABLES = max(1, STREAMS // 100)
# Streams opened at once while opening them.
WAVE = 200
# Streams per client channel (one HTTP/2 connection each).
PER_CHANNEL = 500
LOBBIES = """
[[lobby]]
id = "bench"
name = "Bench"
game = "elevator"
mode = "singles"
seats = 4
ticket_ttl_seconds = 3600
"""

Stream = grpc.aio.UnaryStreamCall[Any, Any]
Opener = Callable[[int, Sequence[grpc.aio.Channel]], Stream]


def rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"VmRSS:\s+(\d+) kB", status)
    assert match is not None
    return int(match.group(1)) / 1024


async def steady_rss(pid: int) -> float:
    """The RSS once two readings a second apart agree within 0.5 MiB (30 s at most)."""
    last = rss_mib(pid)
    for _ in range(30):
        await asyncio.sleep(1.0)
        now = rss_mib(pid)
        if abs(now - last) < 0.5:
            return now
        last = now
    return last


def config(players: Sequence[str]) -> game_pb2.TableConfig:
    turn = duration_pb2.Duration(seconds=3600)
    return game_pb2.TableConfig(
        game=game_pb2.GAME_KIND_ELEVATOR,
        mode=game_pb2.MODE_TRAINING,
        turn_time=turn,
        seats=[
            game_pb2.SeatAssignment(
                seat=n, kind=game_pb2.SEAT_KIND_HUMAN, player_id=name, display_name=name
            )
            for n, name in enumerate(players)
        ],
    )


async def opened(call: Stream) -> None:
    first = await call.read()
    assert first is not grpc.aio.EOF, "a stream ended before its first message"


async def rounds(
    pid: int, channels: Sequence[grpc.aio.Channel], open_one: Opener
) -> dict[str, Any]:
    """``ROUNDS`` rounds of ``STREAMS`` streams opened, held, then closed."""
    before = await steady_rss(pid)
    found: list[dict[str, float]] = []
    for _ in range(ROUNDS):
        start = await steady_rss(pid)
        streams: list[Stream] = []
        started = time.monotonic()
        for first in range(0, STREAMS, WAVE):
            wave = [open_one(n, channels) for n in range(first, min(STREAMS, first + WAVE))]
            await asyncio.gather(*(opened(call) for call in wave))
            streams += wave
        seconds = time.monotonic() - started
        held = await steady_rss(pid)
        for call in streams:
            call.cancel()
        streams.clear()
        closed = await steady_rss(pid)
        found.append(
            {
                "rss_before_mib": round(start, 1),
                "rss_open_mib": round(held, 1),
                "per_stream_kib": round((held - start) * 1024 / STREAMS, 1),
                "rss_after_close_mib": round(closed, 1),
                "kept_after_close_per_stream_kib": round((closed - start) * 1024 / STREAMS, 2),
                "open_seconds": round(seconds, 2),
            }
        )
    return {
        "streams": STREAMS,
        "rss_baseline_mib": round(before, 1),
        "rounds": found,
        "rss_growth_over_rounds_mib": round(
            found[-1]["rss_after_close_mib"] - found[0]["rss_after_close_mib"], 1
        ),
    }


@contextlib.asynccontextmanager
async def channels(address: str) -> AsyncIterator[list[grpc.aio.Channel]]:
    opened_channels = [
        grpc.aio.insecure_channel(address) for _ in range(max(1, STREAMS // PER_CHANNEL))
    ]
    try:
        yield opened_channels
    finally:
        for channel in opened_channels:
            await channel.close()


async def engine_figures(engine: EngineProcess) -> dict[str, Any]:
    assert engine.process is not None
    pid = engine.process.pid
    async with channels(engine.address) as chans:
        stub = table_pb2_grpc.TableServiceStub(chans[0])

        async def create(players: Sequence[str]) -> str:
            made = await stub.CreateTable(
                table_pb2.CreateTableRequest(config=config(players)), metadata=SERVICE
            )
            return str(made.table.table_id)

        spectated = [await create([f"s{t}-{n}" for n in range(4)]) for t in range(SPECTATED_TABLES)]
        seated = [await create([f"p{t}-{n}" for n in range(4)]) for t in range(STREAMS // 4)]
        tokens = {n: player(f"fan-{n}") for n in range(STREAMS)}
        seat_tokens = {n: player(f"p{n // 4}-{n % 4}") for n in range(STREAMS)}

        def spectator(n: int, chans: Sequence[grpc.aio.Channel]) -> Stream:
            request = table_pb2.WatchTableRequest(table_id=spectated[n % len(spectated)])
            channel = chans[n % len(chans)]
            return table_pb2_grpc.TableServiceStub(channel).WatchTable(request, metadata=tokens[n])

        def seat(n: int, chans: Sequence[grpc.aio.Channel]) -> Stream:
            request = table_pb2.WatchTableRequest(table_id=seated[n // 4])
            channel = chans[n % len(chans)]
            return table_pb2_grpc.TableServiceStub(channel).WatchTable(
                request, metadata=seat_tokens[n]
            )

        return {
            "tables": len(spectated) + len(seated),
            "spectator": await rounds(pid, chans, spectator),
            "seated": await rounds(pid, chans, seat),
        }


async def matchmaking_figures(address: str, pid: int) -> dict[str, Any]:
    async with channels(address) as chans:
        stub = matchmaking_pb2_grpc.MatchmakingServiceStub(chans[0])
        tokens = {n: player(f"searcher-{n}") for n in range(STREAMS)}
        tickets: dict[int, str] = {}
        for first in range(0, STREAMS, WAVE):
            numbers = range(first, min(STREAMS, first + WAVE))
            made = await asyncio.gather(
                *(
                    stub.CreateTicket(
                        mm.CreateTicketRequest(request_id="t", lobby_id="bench", party_size=2),
                        metadata=tokens[n],
                    )
                    for n in numbers
                )
            )
            tickets.update(
                {n: answer.ticket.ticket_id for n, answer in zip(numbers, made, strict=True)}
            )

        def watch(n: int, chans: Sequence[grpc.aio.Channel]) -> Stream:
            channel = chans[n % len(chans)]
            return matchmaking_pb2_grpc.MatchmakingServiceStub(channel).WatchTicket(
                mm.WatchTicketRequest(ticket_id=tickets[n]), metadata=tokens[n]
            )

        return await rounds(pid, chans, watch)


@contextlib.contextmanager
def matchmaking_process(nats: NatsServer, workdir: Path) -> Iterator[tuple[str, int]]:
    lobbies = workdir / "lobbies.toml"
    lobbies.write_text(LOBBIES)
    port = free_port()
    env = {
        **os.environ,
        "MASA_NATS_URL": nats.url,
        "MASA_NATS_USER": MATCHMAKING,
        "MASA_NATS_PASSWORD": nats.password(MATCHMAKING),
        "MASA_GRPC_PORT": str(port),
        "MASA_INSTANCE_ID": "bench-streams",
        "MASA_LOBBIES_FILE": str(lobbies),
        "MASA_LOG_LEVEL": "WARNING",
    }
    with (workdir / "matchmaking.log").open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "masa_matchmaking"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        yield f"127.0.0.1:{port}", process.pid
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def until_serving(address: str) -> None:
    deadline = time.monotonic() + 90
    while await health(address) != health_pb2.HealthCheckResponse.SERVING:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{address} did not serve")
        await asyncio.sleep(0.1)


async def run(workdir: Path) -> dict[str, Any]:
    load_at_start = round(os.getloadavg()[0], 2)
    with NatsServer(workdir / "nats", secure=True) as nats:
        engine = EngineProcess(nats, workdir)
        engine.start()
        try:
            await until_serving(engine.address)
            engine_result = await engine_figures(engine)
        finally:
            engine.stop()
        with matchmaking_process(nats, workdir) as (address, pid):
            await until_serving(address)
            matchmaking_result = await matchmaking_figures(address, pid)
    return {
        "benchmark": "stream_memory",
        "python": platform.python_version(),
        "machine": {
            "cpu_cores": os.cpu_count(),
            "platform": platform.platform(),
            "load_average_1m_at_start": load_at_start,
        },
        "streams_per_round": STREAMS,
        "engine": engine_result,
        "matchmaking": matchmaking_result,
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
            for name in ("matchmaking.log", *(p.name for p in Path(workdir).glob("*.log"))):
                log = Path(workdir) / name
                if log.exists():
                    sys.stderr.write(f"--- {name} (tail)\n")
                    sys.stderr.write("\n".join(log.read_text().splitlines()[-20:]) + "\n")
            raise
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
