"""Chaos on the real stack (issue 12): three table-engine processes, 60 tables of both games
(one seat each played by a person's client, the others by bots), and a killer that kill -9s a
random node every 10 to 20 s and starts it again, for 3 minutes; on a NATS JetStream cluster
of three servers (replicas 3) it kills a NATS server too, now and then.

Every game finishes; each table's log is a gap-free sequence; every request id the engine
acknowledged is in it once; every result is on the bus once. ``make chaos`` runs the two
variants at the same time (``scripts/chaos.sh``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

import grpc
import grpc.aio
import nats.errors
import pytest
from engine_support import (
    SERVICE,
    EngineProcess,
    elevator_config,
    fiftyone_config,
    seat,
    serving,
    wait_until,
)
from masa.events.v1 import result_pb2, table_log_pb2
from masa.table.v1 import table_pb2, table_pb2_grpc
from masa_platform.bus import StoredMessage, connect, read_subject
from masa_platform.bus_access import ADMIN, TABLE_ENGINE
from masa_platform.bus_plan import BusSettings
from masa_platform.testing import NatsCluster, NatsServer, keyring
from masa_table_engine.adapters.jetstream import STREAM, log_subject, result_subject
from nats.aio.client import Client
from roaming_player import RoamingSeat

pytestmark = pytest.mark.chaos

ENGINES = 3
TABLES = 60
CHAOS_SECONDS = 180.0
# Tables are created over the first two minutes, so that games are under way at every kill.
CREATE_OVER_SECONDS = 120.0
# Every game ends this long after the chaos at the latest.
SETTLE_SECONDS = 60.0
# How long the check waits for a game's result to reach the bus, and for replicas to catch up.
RESULT_WAIT_SECONDS = 30.0
_GAME_ENDS = frozenset({"game_finished", "game_abandoned"})


@dataclass
class Cluster:
    """The NATS side: one server, or a cluster of three."""

    url: str
    passwords: dict[str, str]
    servers: list[NatsServer]


@dataclass
class Chaos:
    engines: list[ChaosEngine]
    addresses: list[str]
    kills: list[str] = field(default_factory=list)
    nats_kills: int = 0


@pytest.fixture(params=["one-nats", "nats-cluster"])
def bus(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    # Short leases and node records, so that a killed node's tables move within seconds.
    fast = BusSettings(table_lease_ttl_seconds=3, engine_node_ttl_seconds=3)
    if request.param == "one-nats":
        with NatsServer(tmp_path / "nats", secure=True, bus=fast) as server:
            yield Cluster(server.url, server.passwords, [server])
    else:
        # Every stream and bucket on all three servers.
        with NatsCluster(
            tmp_path / "nats", secure=True, bus=replace(fast, bus_replicas=3)
        ) as cluster:
            yield Cluster(cluster.url, cluster.passwords, cluster.servers)


class ChaosEngine(EngineProcess):
    """An engine process on a port the OS picks at each start (a port chosen beforehand may be
    taken by another test meanwhile); its address is read from its log once it serves."""

    async def start_serving(self, timeout: float = 60.0) -> str:
        offset = self.log.stat().st_size if self.log.exists() else 0
        self.start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.log.open("rb") as log:
                log.seek(offset)
                for line in log.read().decode(errors="replace").splitlines():
                    if '"table engine serving"' in line:
                        address = str(json.loads(line)["address"])
                        await wait_until(partial(serving, address), timeout=30, what=address)
                        return address
            await asyncio.sleep(0.1)
        raise AssertionError(f"{self.log.name}: the engine did not serve")


def _engines(bus: Cluster, tmp_path: Path) -> list[ChaosEngine]:
    engines: list[ChaosEngine] = []
    for number in range(ENGINES):
        env = {
            **os.environ,
            "MASA_NATS_URL": bus.url,
            "MASA_NATS_USER": TABLE_ENGINE,
            "MASA_NATS_PASSWORD": bus.passwords[TABLE_ENGINE],
            # The public keys, the engine's identity key, the results key and the log's seal.
            **keyring().env(TABLE_ENGINE),
            "MASA_GRPC_PORT": "0",
            "MASA_NODE_ID": f"chaos-{number}",
            "MASA_TAKEOVER_SCAN_SECONDS": "0.25",
            "MASA_BOT_DELAY_SECONDS": "0.5",
            "MASA_SNAPSHOT_EVERY": "10",
            # The players ask and act without a watch stream, so their seats count as
            # disconnected: no game may forfeit them while it plays on under the chaos.
            "MASA_SEAT_PROTECTION_SECONDS": "3600",
            "MASA_LOG_LEVEL": "INFO",
        }
        engines.append(ChaosEngine(env, tmp_path / f"engine-{number}.log"))
    return engines


async def test_tables_survive_nodes_killed_at_random(bus: Cluster, tmp_path: Path) -> None:
    engines = _engines(bus, tmp_path)
    addresses: list[str] = []
    chaos = Chaos(engines, addresses)
    try:
        addresses.extend(await asyncio.gather(*(e.start_serving() for e in engines)))
        started = time.monotonic()
        ends = started + CHAOS_SECONDS + SETTLE_SECONDS
        killer = asyncio.create_task(_kill_at_random(chaos, bus, started + CHAOS_SECONDS))
        tables: list[str] = []
        players: list[RoamingSeat] = []
        playing: list[asyncio.Task[None]] = []
        for number in range(TABLES):
            await _until(started + number * CREATE_OVER_SECONDS / TABLES)
            table_id, player = await _create(number, addresses, ends)
            tables.append(table_id)
            players.append(player)
            playing.append(asyncio.create_task(player.play(ends)))
        await killer
        await asyncio.gather(*playing)
    finally:
        for engine in engines:
            engine.stop()
    await _check(bus, tables, players)
    # Quoted by the closing note: how many kills the run survived, and how long the
    # players went without an answer from any node (from their first refused call).
    outages = sorted(end - start for p in players for start, end in p.outages)
    print(
        json.dumps(
            {
                "kills": len(chaos.kills),
                "nats_kills": chaos.nats_kills,
                "player_outages": len(outages),
                "outage_seconds": _percentiles(outages),
                "calls_refused_while_moving": sum(p.refused for p in players),
            }
        )
    )
    # A kill every 10 to 20 s for CHAOS_SECONDS: at least one per 20 s.
    assert len(chaos.kills) >= CHAOS_SECONDS // 20


def _percentiles(ordered: list[float]) -> dict[str, float]:
    if not ordered:
        return {}
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {
        "p50": round(ordered[len(ordered) // 2], 3),
        "p99": round(p99, 3),
        "max": round(ordered[-1], 3),
    }


async def _until(moment: float) -> None:
    await asyncio.sleep(max(0.0, moment - time.monotonic()))


async def _kill_at_random(chaos: Chaos, bus: Cluster, until: float) -> None:
    rng = random.Random(len(bus.servers))
    # Kills keep to their own timeline, whatever a restart takes on a loaded machine.
    next_kill = time.monotonic() + rng.uniform(10.0, 20.0)
    while next_kill <= until:
        await _until(next_kill)
        next_kill += rng.uniform(10.0, 20.0)
        number = rng.randrange(ENGINES)
        engine = chaos.engines[number]
        # The process dies as in a crash; a new one with the same node id starts at once.
        await asyncio.to_thread(engine.kill)
        chaos.kills.append(f"chaos-{number}")
        if len(bus.servers) > 1 and len(chaos.kills) % 2 == 0:
            server = rng.choice(bus.servers)
            await asyncio.to_thread(server.kill)
            chaos.nats_kills += 1
            await asyncio.sleep(2.0)
            await asyncio.to_thread(server.start)
        # Players find it at its new address, as clients find a restarted pod.
        chaos.addresses[number] = await engine.start_serving()


async def _create(number: int, addresses: list[str], ends: float) -> tuple[str, RoamingSeat]:
    """A table on any node that answers (a killed one does not), created exactly once."""
    player = f"chaos-player-{number}"
    if number % 2:
        config = elevator_config([seat(0, player), seat(1), seat(2)])
    else:
        config = fiftyone_config("salon", [seat(0, player), seat(1), seat(2), seat(3)])
    request = table_pb2.CreateTableRequest(
        request_id=uuid.uuid4().hex,
        table_id=f"chaos-{number}-{uuid.uuid4().hex[:8]}",
        config=config,
    )
    for attempt in range(200):
        address = addresses[(number + attempt) % len(addresses)]
        async with grpc.aio.insecure_channel(address) as channel:
            stub = table_pb2_grpc.TableServiceStub(channel)
            try:
                created = await stub.CreateTable(request, metadata=SERVICE, timeout=3.0)
            except grpc.aio.AioRpcError as error:
                if error.code() not in {
                    grpc.StatusCode.UNAVAILABLE,
                    grpc.StatusCode.DEADLINE_EXCEEDED,
                }:
                    raise
                await asyncio.sleep(0.1)
                continue
        table_id = created.table.table_id
        return table_id, RoamingSeat(
            table_id, player, lambda: addresses, address=address, poll_seconds=0.3
        )
    raise AssertionError(f"table {number} could not be created")


async def _read(nc: Client, subject: str) -> list[StoredMessage]:
    """Every message on ``subject``. Right after a NATS server came back, a cluster may still
    be electing the stream's leader and answer 503 or nothing; a reader waits that out."""
    for _ in range(60):
        try:
            return await read_subject(nc, STREAM, subject)
        except (nats.errors.Error, TimeoutError):
            await asyncio.sleep(0.5)
    return await read_subject(nc, STREAM, subject)


async def _replicas_current(nc: Client) -> None:
    """Wait until every replica of the stream has caught up. A direct get may be answered by
    any replica, and one restarted a moment ago answers from behind until it has: the check
    would see a table's log or results shorter than the stream holds."""
    js = nc.jetstream()
    deadline = time.monotonic() + RESULT_WAIT_SECONDS
    while time.monotonic() < deadline:
        with contextlib.suppress(nats.errors.Error, TimeoutError):
            cluster = (await js.stream_info(STREAM)).cluster
            replicas = (cluster.replicas or []) if cluster is not None else []
            if all(peer.current and not peer.lag for peer in replicas):
                return
        await asyncio.sleep(0.5)
    raise AssertionError(f"the replicas of {STREAM} did not catch up")


async def _game_results(nc: Client, table_id: str) -> list[result_pb2.TableResult]:
    """The table's results once its game's end is among them, or all there are after
    RESULT_WAIT_SECONDS. The relay publishes after the last move was answered, and a result
    whose node was killed first goes out when another node takes the finished table over."""
    deadline = time.monotonic() + RESULT_WAIT_SECONDS
    while True:
        found = [
            result_pb2.TableResult.FromString(m.data)
            for m in await _read(nc, result_subject(table_id))
        ]
        ended = any(r.WhichOneof("result") in _GAME_ENDS for r in found)
        if ended or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.5)


async def _check(bus: Cluster, tables: list[str], players: list[RoamingSeat]) -> None:
    client = await connect(bus.url, name="chaos-check", user=ADMIN, password=bus.passwords[ADMIN])
    try:
        if len(bus.servers) > 1:
            await _replicas_current(client)
        for table_id, player in zip(tables, players, strict=True):
            raw = await _read(client, log_subject(table_id))
            entries = [table_log_pb2.TableLogEntry.FromString(m.data) for m in raw]
            sequences = [entry.sequence for entry in entries]
            assert sequences == list(range(1, len(entries) + 1)), (table_id, sequences)
            logged = Counter(e.action_applied.request_id for e in entries)
            for request_id in player.acknowledged:
                assert logged[request_id] == 1, (table_id, request_id, logged[request_id])
            found = await _game_results(client, table_id)
            ids = Counter(getattr(r, r.WhichOneof("result") or "").event_id for r in found)
            assert all(count == 1 for count in ids.values()), (table_id, ids)
            ends = [r for r in found if r.WhichOneof("result") in _GAME_ENDS]
            # What the seat saw last and how the log ends tell a game still under way at the
            # deadline (a frozen table) from a finished one whose result never reached the bus.
            assert len(ends) == 1, (
                table_id,
                [r.WhichOneof("result") for r in found],
                {"seat_final_state": player.final_state, "seat_last_error": player.last_error},
                [(e.sequence, e.WhichOneof("input")) for e in entries[-3:]],
            )
            assert ends[0].WhichOneof("result") == "game_finished", (table_id, ends[0])
    finally:
        with contextlib.suppress(Exception):
            await client.close()
