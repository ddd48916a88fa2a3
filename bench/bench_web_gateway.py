"""A move's round trip through the web gateway against the same move over native gRPC (issue
24), with ``BENCH_CLIENTS`` (200) players at once; and the web client's first screen in
headless Chromium. One JSON document.

The set-up is ``make run``'s own stack (the launcher, on free ports, bots without delay) in a
temporary run folder. ``BENCH_CLIENTS / 4`` Elevator tables of four human seats are created
for each phase, and each seat is one client: it follows its table on WatchTable, reads its
seat view (GetTable) at every update, as the web client does, and on its turn thinks for
``BENCH_THINK`` (2 to 8 s, as a person does and as the engine's ``live`` phase paces its
humans; ``0.2,0.6`` is a table of speed players), then sends its greedy move (SubmitAction)
and times the answer. The phases alternate,
``BENCH_ROUNDS`` (2) times each: ``native`` (grpc.aio stubs straight to the engine that owns
the table) and ``gateway`` (connectrpc's client, the Connect protocol over HTTP/1.1 to the
gateway, one HTTP client per player as each browser has its own), so both meet the same
machine's load within minutes. The goal: the gateway's SubmitAction p99 within 10 ms of the
native one's. ``BENCH_WINDOW`` (60 s) is each phase's measured window after ``BENCH_WARMUP``
(5 s). Each phase reports the CPU every process of the stack spent in its window, and the
gateway's CPU per call it forwarded. ``BENCH_PHASES`` picks phases (``native,gateway``); ``BENCH_PYSPY=/tmp/prof`` samples
the gateway with py-spy over each gateway window into ``/tmp/prof-<n>.txt`` (raw).

``first_screen``: Chromium loads the gateway's page ``BENCH_PAGE_LOADS`` (5) times, fresh
each time; the time to the name screen (the page's first contentful paint and the name field
present) from navigation start, and the bundle's gzipped size as served.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import os
import random
import statistics
import subprocess
import tempfile
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import grpc
import grpc.aio
from connectrpc.client import ConnectClient
from connectrpc.compat import google_protobuf_binary_codec
from connectrpc.errors import ConnectError
from connectrpc.protocol import ProtocolType
from google.protobuf.duration_pb2 import Duration
from launched_stack import launched_stack
from masa.common.v1 import game_pb2
from masa.table.v1 import table_pb2, table_pb2_grpc, view_pb2
from masa_client.load.moves import move_from_view, salt
from masa_platform.testing import token
from masa_web_gateway.api import routes
from pyqwest import Client, HTTPTransport, HTTPVersion

ROOT: Final = Path(__file__).resolve().parents[1]
CLIENTS: Final = int(os.environ.get("BENCH_CLIENTS", "200"))
ROUNDS: Final = int(os.environ.get("BENCH_ROUNDS", "2"))
WARMUP: Final = float(os.environ.get("BENCH_WARMUP", "5"))
WINDOW: Final = float(os.environ.get("BENCH_WINDOW", "60"))
PAGE_LOADS: Final = int(os.environ.get("BENCH_PAGE_LOADS", "5"))
KINDS: Final = tuple(os.environ.get("BENCH_PHASES", "native,gateway").split(","))
PYSPY: Final = os.environ.get("BENCH_PYSPY", "")
THINK: Final = tuple(float(part) for part in os.environ.get("BENCH_THINK", "2,8").split(","))
_ROUTES: Final = {
    route.info.name: route for route in routes() if route.service.endswith("TableService")
}


@dataclass
class Timings:
    submit: list[float] = field(default_factory=list)
    read: list[float] = field(default_factory=list)
    refused: int = 0
    measuring: bool = False


class TableApi:
    """One way to the table API: GetTable, SubmitAction and WatchTable for one player."""

    get_table: Callable[[table_pb2.GetTableRequest], Awaitable[table_pb2.GetTableResponse]]
    submit: Callable[[table_pb2.SubmitActionRequest], Awaitable[table_pb2.SubmitActionResponse]]
    watch: Callable[[table_pb2.WatchTableRequest], AsyncIterator[table_pb2.WatchTableResponse]]

    async def close(self) -> None: ...


class Native(TableApi):
    def __init__(self, channel: grpc.aio.Channel, token: str) -> None:
        stub = table_pb2_grpc.TableServiceStub(channel)
        metadata = (("authorization", f"Bearer {token}"),)
        self.get_table = lambda request: stub.GetTable(request, metadata=metadata)
        self.submit = lambda request: stub.SubmitAction(request, metadata=metadata)

        async def watch(
            request: table_pb2.WatchTableRequest,
        ) -> AsyncIterator[table_pb2.WatchTableResponse]:
            async for message in stub.WatchTable(request, metadata=metadata):
                yield message

        self.watch = watch


class Gateway(TableApi):
    def __init__(self, web: str, token: str) -> None:
        self._http = Client(HTTPTransport(http_version=HTTPVersion.HTTP1))
        client = ConnectClient(
            web,
            codec=google_protobuf_binary_codec(),
            protocol=ProtocolType.CONNECT,
            send_compression=None,
            http_client=self._http,
        )
        self._client = client
        headers = {"authorization": f"Bearer {token}"}

        async def get_table(request: table_pb2.GetTableRequest) -> table_pb2.GetTableResponse:
            answer: table_pb2.GetTableResponse = await client.execute_unary(
                request=request, method=_ROUTES["GetTable"].info, headers=headers
            )
            return answer

        async def submit(request: table_pb2.SubmitActionRequest) -> table_pb2.SubmitActionResponse:
            answer: table_pb2.SubmitActionResponse = await client.execute_unary(
                request=request, method=_ROUTES["SubmitAction"].info, headers=headers
            )
            return answer

        def watch(
            request: table_pb2.WatchTableRequest,
        ) -> AsyncIterator[table_pb2.WatchTableResponse]:
            stream: AsyncIterator[table_pb2.WatchTableResponse] = client.execute_server_stream(
                request=request, method=_ROUTES["WatchTable"].info, headers=headers
            )
            return stream

        self.get_table = get_table
        self.submit = submit
        self.watch = watch

    async def close(self) -> None:
        await self._client.close()


async def create_tables(address: str, admin: str, players: list[str]) -> list[tuple[str, str]]:
    """Elevator tables of four human seats for ``players``; (table id, owner) of each."""
    tables = []
    async with grpc.aio.insecure_channel(address) as channel:
        stub = table_pb2_grpc.TableServiceStub(channel)
        for first in range(0, len(players), 4):
            config = game_pb2.TableConfig(
                game=game_pb2.GAME_KIND_ELEVATOR,
                mode=game_pb2.MODE_TRAINING,
                turn_time=Duration(seconds=60),
                seats=[
                    game_pb2.SeatAssignment(
                        seat=seat,
                        kind=game_pb2.SEAT_KIND_HUMAN,
                        player_id=players[first + seat],
                        display_name=players[first + seat],
                    )
                    for seat in range(4)
                ],
            )
            answer = await stub.CreateTable(
                table_pb2.CreateTableRequest(request_id=uuid.uuid4().hex, config=config),
                metadata=(("authorization", f"Bearer {admin}"),),
            )
            tables.append((answer.table.table_id, answer.table.owner_address or address))
    return tables


async def play(
    path: TableApi, table_id: str, seat: int, timings: Timings, rng: random.Random
) -> None:
    """Follow the table and make this seat's moves until the table ends or the task is cancelled."""
    moves = 0
    async for message in path.watch(table_pb2.WatchTableRequest(table_id=table_id)):
        del message
        started = time.perf_counter()
        view: view_pb2.SeatView = (
            await path.get_table(table_pb2.GetTableRequest(table_id=table_id))
        ).seat_view
        if timings.measuring:
            timings.read.append(time.perf_counter() - started)
        if not view.table.HasField("turn_seat") or view.table.turn_seat != seat:
            continue
        sequence = view.table.table.sequence
        action = move_from_view(view, salt(table_id, sequence, moves))
        if action is None:
            continue
        await asyncio.sleep(rng.uniform(*THINK))
        request = table_pb2.SubmitActionRequest(
            request_id=uuid.uuid4().hex,
            table_id=table_id,
            expected_sequence=sequence,
            action=action,
        )
        moves += 1
        started = time.perf_counter()
        try:
            await path.submit(request)
        except (grpc.aio.AioRpcError, ConnectError):
            timings.refused += 1
            continue
        if timings.measuring:
            timings.submit.append(time.perf_counter() - started)


@contextlib.contextmanager
def sampled(state: dict[str, Any] | None) -> Iterator[None]:
    """py-spy on the gateway over the window, when BENCH_PYSPY asks for it."""
    if not PYSPY or state is None:
        yield
        return
    pid = state["services"]["web-gateway"]["pid"]
    output = f"{PYSPY}-{time.monotonic_ns()}.txt"
    command = ["py-spy", "record", "-p", str(pid), "-d", str(int(WINDOW)), "-r", "200"]
    spy = subprocess.Popen(
        [*command, "-f", "raw", "-o", output, "--nonblocking"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield
    finally:
        spy.wait(30)


def cpu_seconds(pid: int) -> float:
    """User and system CPU of a process so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentiles(samples: list[float]) -> dict[str, float | int]:
    if not samples:
        return {"count": 0}
    ordered = sorted(samples)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {
        "count": len(ordered),
        "p50_ms": round(at(0.50) * 1000, 2),
        "p99_ms": round(at(0.99) * 1000, 2),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 2),
    }


async def phase(kind: str, state: dict[str, Any]) -> dict[str, Any]:
    run = uuid.uuid4().hex[:6]
    players = [f"bench-{run}-{index}" for index in range(CLIENTS - CLIENTS % 4)]
    admin = token("bench-operator", "admin")
    tables = await create_tables(state["table_engine"], admin, players)
    timings = Timings()
    channels: dict[str, grpc.aio.Channel] = {}
    paths: list[TableApi] = []
    tasks = []
    rng = random.Random(run)
    for index, player in enumerate(players):
        table_id, owner = tables[index // 4]
        player_token = token(player)
        if kind == "native":
            channel = channels.get(owner) or channels.setdefault(
                owner, grpc.aio.insecure_channel(owner)
            )
            path: TableApi = Native(channel, player_token)
        else:
            path = Gateway(state["web"].rstrip("/"), player_token)
        paths.append(path)
        tasks.append(asyncio.create_task(play(path, table_id, index % 4, timings, rng)))
    await asyncio.sleep(WARMUP)
    timings.measuring = True
    pids = {name: entry["pid"] for name, entry in state["services"].items() if entry.get("pid")}
    cpu_before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    own_before = time.process_time()
    with sampled(state if kind == "gateway" else None):
        await asyncio.sleep(WINDOW)
    own = time.process_time() - own_before
    cpu = {name: round(cpu_seconds(pid) - cpu_before[name], 2) for name, pid in pids.items()}
    timings.measuring = False
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for path in paths:
        await path.close()
    for channel in channels.values():
        await channel.close()
    return {
        "kind": kind,
        "clients": len(players),
        "tables": len(tables),
        "submit_action": percentiles(timings.submit),
        "get_table": percentiles(timings.read),
        "refused": timings.refused,
        "cpu_seconds": {
            **{k: v for k, v in cpu.items() if v >= 0.05},
            "bench_clients": round(own, 2),
        },
        "gateway_cpu_ms_per_call": round(
            1000 * cpu.get("web-gateway", 0.0) / max(1, len(timings.submit) + len(timings.read)), 3
        )
        if kind == "gateway"
        else None,
        "loadavg": Path("/proc/loadavg").read_text().split()[:3],
    }


def first_screen(web: str) -> dict[str, Any]:
    """The name screen's time in headless Chromium, fresh each load; the bundle as served."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    loads = []
    for _ in range(PAGE_LOADS):
        options = webdriver.ChromeOptions()
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
            options.add_argument(flag)
        options.binary_location = "/usr/bin/chromium"
        driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
        try:
            driver.get(web)
            WebDriverWait(driver, 10).until(
                lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="name-input"]')
            )
            timing = driver.execute_script(
                "const [n] = performance.getEntriesByType('navigation');"
                "const paint = performance.getEntriesByName('first-contentful-paint')[0];"
                "return {dom: n.domContentLoadedEventEnd, load: n.loadEventEnd,"
                " paint: paint ? paint.startTime : null, ready: performance.now()};"
            )
            loads.append(timing)
        finally:
            driver.quit()
    sizes = {}
    with urllib.request.urlopen(web, timeout=10) as page:
        html = page.read().decode()
    for asset in [part.split('"')[0] for part in html.split('="/')[1:]]:
        request = urllib.request.Request(f"{web}{asset}", headers={"accept-encoding": "gzip"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            body = answer.read()
            sizes[asset] = {"gzipped": len(body), "plain": len(gzip.decompress(body))}
    return {
        "loads": len(loads),
        "first_contentful_paint_ms": [round(load["paint"] or 0, 1) for load in loads],
        "dom_content_loaded_ms": [round(load["dom"], 1) for load in loads],
        "bundle_gzipped_bytes": sum(size["gzipped"] for size in sizes.values())
        + len(gzip.compress(html.encode())),
        "assets": sizes,
    }


async def measure(state: dict[str, Any]) -> dict[str, Any]:
    phases = []
    for _ in range(ROUNDS):
        for kind in KINDS:
            phases.append(await phase(kind, state))
    native = [
        p["submit_action"]["p99_ms"]
        for p in phases
        if p["kind"] == "native" and p["submit_action"]["count"]
    ]
    through = [
        p["submit_action"]["p99_ms"]
        for p in phases
        if p["kind"] == "gateway" and p["submit_action"]["count"]
    ]
    return {
        "phases": phases,
        "submit_action_p99_ms": {"native": native, "gateway": through},
        "gateway_minus_native_p99_ms": [
            round(g - n, 2) for n, g in zip(native, through, strict=False)
        ],
        "goal_ms": 10,
        "think_seconds": list(THINK),
    }


def main() -> None:
    with (
        tempfile.TemporaryDirectory(prefix="bench-web-") as folder,
        launched_stack(Path(folder), {"MASA_BOT_DELAY_SECONDS": "0"}) as state,
    ):
        web = state["web"]
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{web}healthz", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the gateway never said SERVING")
            time.sleep(0.2)
        result = asyncio.run(measure(state))
        result["first_screen"] = first_screen(web)
        result["cpu_count"] = os.cpu_count()
        print(json.dumps({"bench": "web_gateway", **result}, indent=2))


if __name__ == "__main__":
    main()
