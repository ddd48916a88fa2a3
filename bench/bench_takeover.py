"""Takeover after a node's death or drain (issue 12): how long its tables refuse actions.
One JSON.

Everything runs for real: a nats-server with JetStream and the masa users, and three
``python -m masa_table_engine`` processes with ``LEASE_SECONDS`` leases; this process plays.
``TABLES`` human Elevator tables are spread over the nodes. Each round kills (kill -9) one
node, reads which tables it served from the engine-node registry (``EngineNode.table_ids``),
and has every one of them try a move at once and again until one is accepted, following
``TABLE_MOVED`` and asking another node on ``UNAVAILABLE``: the figure is the time from the
kill to that table's first accepted move (p50, p99, max), with the moves refused meanwhile.
The killed node is started again before the next round. Then a rolling restart: each node in
turn gets SIGTERM (it drains, handing its tables over without waiting for their leases), and
the same figure is taken from the signal, whose goal is 2 s; the node is started again before
the next one. The baseline, in the same run, is a move on a live table (GetTable twice and
SubmitAction, as each try does). Every log is read back at the end: one entry per sequence, no
request applied twice.

The leases, node records and scans are those ``make run`` gets (the bus plan's and the
engine's defaults) unless ``BENCH_LEASE_SECONDS``, ``BENCH_NODE_TTL_SECONDS`` and
``BENCH_SCAN_SECONDS`` say otherwise; ``BENCH_TABLES`` and ``BENCH_ROUNDS`` change the tables
and kills. ``BENCH_IDLE_TABLES`` (1,000 by default, 0 for none) first measures what holding
tables costs a node with those settings, in the same run: one engine's CPU over
``BENCH_IDLE_SECONDS`` with no table, then with that many open tables nobody plays (lease
renewals, registry, scans, health), and its cores per thousand tables held.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import random
import statistics
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

import grpc
import grpc.aio
from engine_process import SERVICE, EngineProcess, health, player
from google.protobuf import duration_pb2
from grpc_health.v1 import health_pb2
from masa.common.v1 import game_pb2
from masa.events.v1 import engine_pb2, table_log_pb2
from masa.table.v1 import table_pb2, table_pb2_grpc
from masa_platform.bus import KvBucket, connect, read_subject
from masa_platform.bus_access import ADMIN
from masa_platform.bus_plan import BusSettings
from masa_platform.errors import rpc_error_info
from masa_platform.testing import NatsServer
from masa_rules.elevator import legal_actions
from masa_table_engine.adapters.jetstream import STREAM, log_subject
from masa_table_engine.settings import EngineSettings
from masa_wire.elevator import action_to_proto, state_from_seat_view
from nats.aio.client import Client

NODES = 3
TABLES = int(os.environ.get("BENCH_TABLES", "30"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "6"))
LEASE_SECONDS = float(os.environ.get("BENCH_LEASE_SECONDS", BusSettings().table_lease_ttl_seconds))
NODE_TTL_SECONDS = float(
    os.environ.get("BENCH_NODE_TTL_SECONDS", BusSettings().engine_node_ttl_seconds)
)
SCAN_SECONDS = float(os.environ.get("BENCH_SCAN_SECONDS", EngineSettings().takeover_scan_seconds))
IDLE_TABLES = int(os.environ.get("BENCH_IDLE_TABLES", "1000"))
IDLE_SECONDS = float(os.environ.get("BENCH_IDLE_SECONDS", "20"))
PLAYERS = ("ayse", "bora", "cem")


def node(nats: NatsServer, workdir: Path, number: int) -> EngineProcess:
    return EngineProcess(
        nats,
        workdir,
        f"bench-node-{number}",
        MASA_TAKEOVER_SCAN_SECONDS=str(SCAN_SECONDS),
    )


async def until_serving(engine: EngineProcess) -> None:
    deadline = time.monotonic() + 60
    while await health(engine.address) != health_pb2.HealthCheckResponse.SERVING:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{engine.node_id} did not serve")
        await asyncio.sleep(0.05)


async def move(address: str, table_id: str, request_id: str) -> None:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = table_pb2_grpc.TableServiceStub(channel)
        request = table_pb2.GetTableRequest(table_id=table_id)
        public = await stub.GetTable(request, metadata=player(PLAYERS[0]), timeout=2)
        turn = public.seat_view.table.turn_seat
        mine = (await stub.GetTable(request, metadata=player(PLAYERS[turn]), timeout=2)).seat_view
        await stub.SubmitAction(
            table_pb2.SubmitActionRequest(
                request_id=request_id,
                table_id=table_id,
                expected_sequence=mine.table.table.sequence,
                action=action_to_proto(legal_actions(state_from_seat_view(mine), turn)[0]),
            ),
            metadata=player(PLAYERS[turn]),
            timeout=2,
        )


async def until_accepted(
    addresses: list[str], table_id: str, start: str, rng: random.Random
) -> tuple[float, int]:
    """Move until the table takes one, as a client following the engine's answers would;
    returns when, and how many tries were refused."""
    address, refused = start, 0
    request_id = uuid.uuid4().hex
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            await move(address, table_id, request_id)
        except grpc.aio.AioRpcError as error:
            refused += 1
            info = rpc_error_info(error)
            if info is not None and info.reason == "TABLE_MOVED":
                address = info.metadata["owner_address"]
                continue
            if info is not None and info.reason == "SEQUENCE_MISMATCH":
                # The move landed before its answer was lost: a new one is next.
                request_id = uuid.uuid4().hex
                continue
            address = rng.choice([a for a in addresses if a != address])
            await asyncio.sleep(0.05)
            continue
        return time.monotonic(), refused
    raise TimeoutError(f"table {table_id} never took a move again")


async def served_by(nc: Client, node_id: str) -> list[str]:
    bucket = await KvBucket.open(nc, "masa_engine_nodes")
    entry = await bucket.get(node_id)
    return list(engine_pb2.EngineNode.FromString(entry.value).table_ids) if entry else []


def elevator_config() -> game_pb2.TableConfig:
    turn = duration_pb2.Duration(seconds=3600)
    return game_pb2.TableConfig(
        game=game_pb2.GAME_KIND_ELEVATOR,
        mode=game_pb2.MODE_TRAINING,
        turn_time=turn,
        seats=[
            game_pb2.SeatAssignment(
                seat=n, kind=game_pb2.SEAT_KIND_HUMAN, player_id=p, display_name=p
            )
            for n, p in enumerate(PLAYERS)
        ],
    )


class Rounds:
    """Nodes taken down one after another, each round timed from its signal to every one of
    the node's tables taking a move again."""

    def __init__(
        self,
        admin: Client,
        engines: list[EngineProcess],
        tables: list[str],
        rng: random.Random,
    ) -> None:
        self.admin, self.engines, self.tables, self.rng = admin, engines, tables, rng
        self.addresses = [engine.address for engine in engines]
        self.refused = 0

    async def settled(self) -> None:
        """Until the registry lists every table once, on the node that serves it now: a
        record is rewritten every third of its TTL, so the last round's moves show late."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            listed = [
                t for engine in self.engines for t in await served_by(self.admin, engine.node_id)
            ]
            if sorted(listed) == sorted(self.tables):
                return
            await asyncio.sleep(0.2)
        raise TimeoutError("the registry never listed every table once")

    async def take_down(
        self, victims: list[EngineProcess], *, drain: bool
    ) -> tuple[list[float], list[int]]:
        seconds: list[float] = []
        tables: list[int] = []
        for victim in victims:
            await self.settled()
            theirs = await served_by(self.admin, victim.node_id)
            signalled = time.monotonic()
            if drain:
                victim.terminate()
            else:
                victim.kill()
            answers = await asyncio.gather(
                *(until_accepted(self.addresses, t, victim.address, self.rng) for t in theirs)
            )
            seconds.extend(at - signalled for at, _ in answers)
            self.refused += sum(count for _, count in answers)
            tables.append(len(theirs))
            victim.stop()
            victim.start()
            await until_serving(victim)
        return seconds, tables


def percentiles(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    return {
        "p50": round(statistics.median(ordered), 3),
        "p99": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 3),
        "max": round(ordered[-1], 3),
    }


async def create_tables(addresses: list[str], count: int = TABLES) -> list[str]:
    tables: list[str] = []
    channels = [grpc.aio.insecure_channel(address) for address in addresses]
    try:
        for number in range(count):
            stub = table_pb2_grpc.TableServiceStub(channels[number % len(channels)])
            created = await stub.CreateTable(
                table_pb2.CreateTableRequest(request_id=uuid.uuid4().hex, config=elevator_config()),
                metadata=SERVICE,
            )
            tables.append(created.table.table_id)
    finally:
        for channel in channels:
            await channel.close()
    return tables


def cpu_seconds(engine: EngineProcess) -> float:
    assert engine.process is not None
    fields = Path(f"/proc/{engine.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def idle_cost(bus: BusSettings, workdir: Path) -> dict[str, object]:
    """One engine's CPU over IDLE_SECONDS with no table, then holding IDLE_TABLES, on a NATS
    of its own (its tables, handed over when it stops, must not reach the kill rounds)."""
    with NatsServer(workdir / "nats-idle", secure=True, bus=bus) as nats:
        return await _idle_cost(nats, workdir)


async def _idle_cost(nats: NatsServer, workdir: Path) -> dict[str, object]:
    engine = node(nats, workdir, 9)
    engine.start()
    try:
        await until_serving(engine)

        async def cores() -> float:
            before = cpu_seconds(engine)
            await asyncio.sleep(IDLE_SECONDS)
            return round((cpu_seconds(engine) - before) / IDLE_SECONDS, 4)

        empty = await cores()
        await create_tables([engine.address], IDLE_TABLES)
        # A few renewal passes and scans before the window.
        await asyncio.sleep(2 * LEASE_SECONDS / 3)
        held = await cores()
    finally:
        engine.stop()
    return {
        "tables": IDLE_TABLES,
        "seconds": IDLE_SECONDS,
        "cores_without_tables": empty,
        "cores_holding_tables": held,
        "cores_per_thousand_tables": round((held - empty) * 1000 / IDLE_TABLES, 4),
        "lease_renewals_per_second": round(IDLE_TABLES / (LEASE_SECONDS / 3), 1),
    }


async def run(workdir: Path) -> dict[str, object]:
    loadavg_before = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    bus = BusSettings(
        table_lease_ttl_seconds=LEASE_SECONDS, engine_node_ttl_seconds=NODE_TTL_SECONDS
    )
    idle = await idle_cost(bus, workdir) if IDLE_TABLES else None
    with NatsServer(workdir / "nats", secure=True, bus=bus) as nats:
        engines = [node(nats, workdir, n) for n in range(NODES)]
        for engine in engines:
            engine.start()
        try:
            for engine in engines:
                await until_serving(engine)
            addresses = [engine.address for engine in engines]
            tables = await create_tables(addresses)
            baseline: list[float] = []
            for number, table_id in enumerate(tables):
                started = time.monotonic()
                await move(addresses[number % NODES], table_id, uuid.uuid4().hex)
                baseline.append(time.monotonic() - started)
            admin = await connect(nats.url, name="bench", user=ADMIN, password=nats.password(ADMIN))
            try:
                rounds = Rounds(admin, engines, tables, random.Random(12))
                killed = [engines[n % NODES] for n in range(ROUNDS)]
                deaths, per_kill = await rounds.take_down(killed, drain=False)
                drains, per_drain = await rounds.take_down(engines, drain=True)
                whole = await check_logs(admin, tables)
            finally:
                await admin.close()
        finally:
            for engine in engines:
                engine.stop()
    death = percentiles(deaths)
    return {
        "bench": "takeover",
        "python": platform.python_version(),
        "nodes": NODES,
        "tables": TABLES,
        "lease_seconds": LEASE_SECONDS,
        "node_ttl_seconds": NODE_TTL_SECONDS,
        "scan_seconds": SCAN_SECONDS,
        "loadavg_before": loadavg_before,
        "loadavg_after": " ".join(Path("/proc/loadavg").read_text().split()[:3]),
        "idle_cost": idle,
        "kills": ROUNDS,
        "tables_per_kill": per_kill,
        "death_to_accepting_seconds": death,
        "tables_per_drain": per_drain,
        "drain_to_accepting_seconds": percentiles(drains),
        "drain_goal_seconds": 2.0,
        "refused_while_moving": rounds.refused,
        "baseline_move_seconds_p50": round(statistics.median(baseline), 4),
        "p99_over_lease": round(death["p99"] / LEASE_SECONDS, 2),
        "frozen_goal_seconds": 8.0,
        "logs_whole": whole,
    }


async def check_logs(nc: Client, tables: list[str]) -> bool:
    for table_id in tables:
        raw = await read_subject(nc, STREAM, log_subject(table_id))
        entries = [table_log_pb2.TableLogEntry.FromString(m.data) for m in raw]
        if [e.sequence for e in entries] != list(range(1, len(entries) + 1)):
            return False
        counted = Counter(
            e.action_applied.request_id for e in entries if e.action_applied.request_id
        )
        if any(count > 1 for count in counted.values()):
            return False
    return True


def main() -> None:
    with (
        tempfile.TemporaryDirectory(prefix="bench-takeover-") as workdir,
        contextlib.suppress(KeyboardInterrupt),
    ):
        result = asyncio.run(run(Path(workdir)))
        print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
