"""The baselines a masa call is measured against, in the same run (issue 22).

A masa action is appended to JetStream before it is answered, so its cost has a floor that a
bare gRPC echo does not pay. One server process here answers four methods:

- ``Echo`` / ``Echoes``: a bare ``grpc.aio`` echo (no interceptors), unary and over one
  bidirectional stream (a message and its echo a call);
- ``Persist`` / ``Persists``: the **persist floor**, the same echo appending each request to
  JetStream before it answers: one nats-py ``js.publish`` (a publish that awaits its ack) per
  call to the table-log stream (``masa.table.v1.<table>.log``, one subject per caller, each
  message with a ``Nats-Msg-Id`` as the engine's entries have), unary and streamed.

The benches start it with :func:`floor_server` on the NATS of their run and call it with their
own load generator, so that every masa figure is a ratio to a floor measured beside it on the
same loaded machine. Imported by the ``bench_*.py`` scripts (Python runs them with this folder
on ``sys.path``); ``python bench/floor.py PORT NATS_URL`` is the server itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Final

import grpc
import grpc.aio
import nats
from masa_platform import runner
from masa_platform.settings import LoopSettings, load_settings

ECHO: Final = "/bench.Floor/Echo"
ECHO_STREAM: Final = "/bench.Floor/Echoes"
PERSIST: Final = "/bench.Floor/Persist"
PERSIST_STREAM: Final = "/bench.Floor/Persists"
# A request starts with its caller's table id, this long: the subject the floor appends to.
TABLE_ID_BYTES: Final = 8
READY_TIMEOUT_SECONDS: Final = 90.0


def loadavg() -> str:
    """The 1, 5 and 15 minute load averages as /proc/loadavg gives them: a ratio is only as
    good as the quiet of the machine it was measured on."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def cpu_seconds(pid: int) -> float:
    """The CPU time (user and system) a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 of stat, 12 and 13 after the command name.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def request(slot: int, size: int) -> bytes:
    """A request of ``size`` bytes from caller ``slot``, whose table is named by its start."""
    head = f"{slot:0{TABLE_ID_BYTES}d}".encode()
    return head + b"x" * max(0, size - len(head))


async def serve(port: int, nats_url: str) -> None:
    """Serve the four methods on ``port`` until SIGTERM."""
    nc = await nats.connect(nats_url, name="bench-floor")
    js = nc.jetstream()
    ids = itertools.count()

    async def persist(payload: bytes) -> None:
        table = payload[:TABLE_ID_BYTES].decode()
        await js.publish(
            f"masa.table.v1.bench{table}.log", payload, headers={"Nats-Msg-Id": str(next(ids))}
        )

    async def echo(payload: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        return payload

    async def echoes(
        payloads: AsyncIterator[bytes], context: grpc.aio.ServicerContext[bytes, bytes]
    ) -> AsyncIterator[bytes]:
        async for payload in payloads:
            yield payload

    async def persisted(payload: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        await persist(payload)
        return payload

    async def persisteds(
        payloads: AsyncIterator[bytes], context: grpc.aio.ServicerContext[bytes, bytes]
    ) -> AsyncIterator[bytes]:
        async for payload in payloads:
            await persist(payload)
            yield payload

    server = grpc.aio.server()
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                "bench.Floor",
                {
                    "Echo": grpc.unary_unary_rpc_method_handler(echo),
                    "Echoes": grpc.stream_stream_rpc_method_handler(echoes),
                    "Persist": grpc.unary_unary_rpc_method_handler(persisted),
                    "Persists": grpc.stream_stream_rpc_method_handler(persisteds),
                },
            ),
        )
    )
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    stopped = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopped.set)
    await stopped.wait()
    await server.stop(0)
    await nc.close()


@contextlib.contextmanager
def child(command: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A child process, stopped (SIGTERM, then SIGKILL) however the block ends."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def floor_server(
    nats_url: str, log: Path, port: int
) -> contextlib.AbstractContextManager[subprocess.Popen[bytes]]:
    """The floor server on ``port``, its own process on the run's event loop (``MASA_*``
    passed on), stopped however the block ends."""
    return child([sys.executable, __file__, str(port), nats_url], dict(os.environ), log)


def percentiles(samples: list[float]) -> dict[str, float | int]:
    if not samples:
        return {"count": 0}
    ordered = sorted(samples)

    def at(q: float) -> float:
        return round(1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)

    return {"count": len(ordered), "p50": at(0.5), "p99": at(0.99), "max": at(1.0)}


async def measure(  # noqa: PLR0913 - the server, then how it is called, by keyword
    address: str,
    pid: int,
    *,
    method: str,
    callers: int,
    size: int,
    seconds: float,
    rate: float | None = None,
    streamed: bool = False,
    nats_pid: int | None = None,
) -> dict[str, Any]:
    """Calls/s of ``callers`` calling ``method`` again as soon as answered (or, with ``rate``,
    spread to that total rate), with the server's CPU per call; ``streamed``, each caller
    sends its messages over one stream of ``method`` instead, a message and its answer a
    call. Two seconds of warm-up, then ``seconds`` counted. With ``nats_pid``, the
    nats-server's CPU per call too: what JetStream spends on each stored message."""
    latencies: list[float] = []
    calls = 0
    start = end = float("inf")
    stop = asyncio.Event()
    async with grpc.aio.insecure_channel(address) as channel:
        await asyncio.wait_for(channel.channel_ready(), READY_TIMEOUT_SECONDS)
        call: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(method)
        stream: grpc.aio.StreamStreamMultiCallable[bytes, bytes] = channel.stream_stream(method)
        loop = asyncio.get_running_loop()
        interval = callers / rate if rate else 0.0

        async def caller(slot: int) -> None:
            nonlocal calls
            payload = request(slot, size)
            next_at = loop.time() + interval * slot / callers
            messages = stream() if streamed else None
            while not stop.is_set():
                if interval:
                    await asyncio.sleep(max(0.0, next_at - loop.time()))
                    next_at += interval
                sent = time.perf_counter()
                if messages is None:
                    await call(payload, timeout=10)
                else:
                    await messages.write(payload)
                    await messages.read()
                done = time.perf_counter()
                if start <= done < end:
                    calls += 1
                    latencies.append(done - sent)

        tasks = [asyncio.create_task(caller(slot)) for slot in range(callers)]
        try:
            await asyncio.sleep(2.0)
            cpu = cpu_seconds(pid)
            nats_cpu = cpu_seconds(nats_pid) if nats_pid else 0.0
            start = time.perf_counter()
            end = start + seconds
            await asyncio.sleep(seconds)
            cpu = cpu_seconds(pid) - cpu
            nats_cpu = cpu_seconds(nats_pid) - nats_cpu if nats_pid else 0.0
        finally:
            stop.set()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    return {
        "method": method,
        "callers": callers,
        "offered_calls_per_second": rate,
        "payload_bytes": size,
        "calls_per_second": round(calls / seconds, 1),
        "server_cpu_percent": round(100 * cpu / seconds, 1),
        "server_cpu_ms_per_call": round(1000 * cpu / calls, 3) if calls else None,
        "latency_ms": percentiles(latencies),
        **(
            {"nats_server_cpu_ms_per_call": round(1000 * nats_cpu / calls, 3) if calls else None}
            if nats_pid
            else {}
        ),
    }


def main() -> None:
    runner.run(
        serve(int(sys.argv[1]), sys.argv[2]), event_loop=load_settings(LoopSettings).event_loop
    )


if __name__ == "__main__":
    main()
