"""Helpers for the table-engine tests: nodes and the ledger on real servers, tokens, configs,
JetStream reads.

(Kept out of conftest.py so that tests import it by a unique name.)
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import nats.js.errors
from google.protobuf import duration_pb2
from grpc_health.v1 import health_pb2
from masa.common.v1 import error_pb2, game_pb2
from masa.events.v1 import engine_pb2, result_pb2, table_log_pb2
from masa.table.v1 import table_pb2, table_pb2_grpc
from masa_client.errors import from_rpc_error
from masa_ledger.bootstrap import LedgerService, start_ledger
from masa_ledger.settings import LedgerSettings
from masa_platform.bus import connect
from masa_platform.bus_access import ADMIN, LEDGER, TABLE_ENGINE
from masa_platform.bus_plan import BusSettings
from masa_platform.errors import reason_name
from masa_platform.settings import PlatformSettings, ServerSettings
from masa_platform.testing import HealthStub, NatsServer, auth_settings, keyring, token
from masa_table_engine.adapters.jetstream import STREAM, log_subject, result_subject
from masa_table_engine.bootstrap import Node, start_node
from masa_table_engine.settings import EngineSettings
from nats.aio.client import Client
from prometheus_client import CollectorRegistry

TOKEN_EXPIRED = reason_name(error_pb2.ERROR_REASON_TOKEN_EXPIRED)


def error_reason(error: grpc.aio.AioRpcError) -> str:
    """The ErrorInfo reason of a failed call."""
    return from_rpc_error(error).reason


def metadata(subject: str, *roles: str) -> tuple[tuple[str, str], ...]:
    """A player's token (or one of ``roles``: an operator's, or a service's own)."""
    return (("authorization", f"Bearer {token(subject, *roles)}"),)


# CreateTable is matchmaking's (and an operator's); draining and voiding are operators'.
SERVICE = metadata("matchmaking", "matchmaking")
ADMIN_TOKEN = metadata("ops", "admin")


def settings(server: NatsServer, node_id: str = "node-a", **overrides: Any) -> EngineSettings:
    """A node on ``server`` with the table-engine's own NATS user.

    A lease's and a node record's life are the TTLs of their buckets, which the bus plan sets:
    ``lease_ttl_seconds`` and ``node_ttl_seconds`` among ``overrides`` provision the server's
    bus with them (the defaults otherwise), as an operator would for a deployment."""
    provision_ttls(
        server,
        lease_seconds=overrides.pop("lease_ttl_seconds", None),
        node_seconds=overrides.pop("node_ttl_seconds", None),
    )
    platform = PlatformSettings(
        service_name="table-engine",
        auth=auth_settings("table-engine"),
        nats_url=server.url,
        nats_user=TABLE_ENGINE,
        nats_password=server.password(TABLE_ENGINE),
        server=ServerSettings(grpc_port=overrides.pop("grpc_port", 0), grace_seconds=0.2),
    )
    base = EngineSettings(
        platform=platform,
        node_id=node_id,
        turn_seconds=30.0,
        # The engines' own keys: the results key and the log's seal key.
        result_signing_key_file=keyring().results_key,
        log_mac_key_file=keyring().log_mac,
    )
    return replace(base, **overrides)


def provision_ttls(
    server: NatsServer, *, lease_seconds: float | None = None, node_seconds: float | None = None
) -> None:
    """Provision ``server``'s bus with these table-lease and node-record TTLs (the plan's
    defaults for the ones not given)."""
    defaults = BusSettings()
    server.provision(
        replace(
            server.bus or defaults,
            table_lease_ttl_seconds=lease_seconds or defaults.table_lease_ttl_seconds,
            engine_node_ttl_seconds=node_seconds or defaults.engine_node_ttl_seconds,
        )
    )


@asynccontextmanager
async def running_node(
    engine_settings: EngineSettings, registry: CollectorRegistry | None = None
) -> AsyncIterator[Node]:
    node = await start_node(engine_settings, registry=registry or CollectorRegistry())
    try:
        yield node
    finally:
        await node.stop(0.2)


@asynccontextmanager
async def running_ledger(
    server: NatsServer, directory: Path, **overrides: Any
) -> AsyncIterator[LedgerService]:
    """The real ledger on a SQLite file in ``directory``, consuming the engine's results from
    ``server``, its settings changed by ``overrides``."""
    platform = PlatformSettings(
        service_name="ledger",
        auth=auth_settings("ledger"),
        nats_url=server.url,
        nats_user=LEDGER,
        nats_password=server.password(LEDGER),
        server=ServerSettings(grpc_port=0, grace_seconds=0.2),
    )
    ledger_settings = LedgerSettings(
        platform=platform,
        database_url=f"sqlite:///{directory / 'ledger.sqlite3'}",
        result_keys_file=keyring().results_jwks,
    )
    service = await start_ledger(
        replace(ledger_settings, **overrides), registry=CollectorRegistry()
    )
    try:
        yield service
    finally:
        await service.stop(0.2)


@asynccontextmanager
async def table_stub(address: str) -> AsyncIterator[table_pb2_grpc.TableServiceAsyncStub]:
    async with grpc.aio.insecure_channel(address) as channel:
        yield table_pb2_grpc.TableServiceStub(channel)


def seat(
    number: int,
    player: str | None = None,
    level: game_pb2.BotLevel.ValueType = game_pb2.BOT_LEVEL_NORMAL,
) -> game_pb2.SeatAssignment:
    if player is None:
        return game_pb2.SeatAssignment(seat=number, kind=game_pb2.SEAT_KIND_BOT, bot_level=level)
    return game_pb2.SeatAssignment(
        seat=number, kind=game_pb2.SEAT_KIND_HUMAN, player_id=player, display_name=player
    )


def elevator_config(
    seats: Sequence[game_pb2.SeatAssignment], turn_seconds: float = 30.0, stake: int = 0
) -> game_pb2.TableConfig:
    turn_time = duration_pb2.Duration()
    turn_time.FromNanoseconds(round(turn_seconds * 1e9))
    return game_pb2.TableConfig(
        game=game_pb2.GAME_KIND_ELEVATOR,
        mode=game_pb2.MODE_TRAINING,
        seats=list(seats),
        turn_time=turn_time,
        stake=stake,
    )


async def create_table(
    stub: table_pb2_grpc.TableServiceAsyncStub, config: game_pb2.TableConfig, request_id: str = ""
) -> str:
    response = await stub.CreateTable(
        table_pb2.CreateTableRequest(request_id=request_id, config=config), metadata=SERVICE
    )
    return response.table.table_id


async def wait_until(
    check: Callable[[], Awaitable[bool]], timeout: float = 20.0, what: str = "condition"
) -> None:
    """Poll ``check`` until it holds, failing after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def engine_nats_env(server: NatsServer) -> dict[str, str]:
    """The ``MASA_*`` variables of a table-engine process on ``server``."""
    return {
        "MASA_NATS_URL": server.url,
        "MASA_NATS_USER": TABLE_ENGINE,
        "MASA_NATS_PASSWORD": server.password(TABLE_ENGINE),
        **keyring().env(TABLE_ENGINE),
    }


async def bus_client(server: NatsServer, user: str = ADMIN) -> Client:
    """A NATS client as ``user`` (operators by default, who may read everything)."""
    return await connect(server.url, name=f"test-{user}", user=user, password=server.password(user))


async def _messages(server: NatsServer, subject: str) -> list[bytes]:
    nc = await bus_client(server)
    try:
        js = nc.jetstream()
        found: list[bytes] = []
        seq = 1
        while True:
            try:
                raw = await js.get_msg(STREAM, seq=seq, subject=subject, next=True)
            except nats.js.errors.NotFoundError:
                return found
            found.append(raw.data or b"")
            seq = (raw.seq or seq) + 1
    finally:
        await nc.close()


async def results(server: NatsServer, table_id: str) -> list[result_pb2.TableResult]:
    return [
        result_pb2.TableResult.FromString(data)
        for data in await _messages(server, result_subject(table_id))
    ]


async def log_entries(server: NatsServer, table_id: str) -> list[table_log_pb2.TableLogEntry]:
    return [
        table_log_pb2.TableLogEntry.FromString(data)
        for data in await _messages(server, log_subject(table_id))
    ]


async def node_record(server: NatsServer, node_id: str) -> engine_pb2.EngineNode | None:
    """The node's record in the engine-node registry (KV masa_engine_nodes); None if absent."""
    nc = await bus_client(server)
    try:
        bucket = await nc.jetstream().key_value("masa_engine_nodes")
        try:
            entry = await bucket.get(node_id)
        except nats.js.errors.KeyNotFoundError:
            return None
        return engine_pb2.EngineNode.FromString(entry.value) if entry.value else None
    finally:
        await nc.close()


async def game_finished(server: NatsServer, table_id: str) -> result_pb2.GameFinished | None:
    for result in await results(server, table_id):
        if result.WhichOneof("result") == "game_finished":
            return result.game_finished
    return None


async def get_view(
    stub: table_pb2_grpc.TableServiceAsyncStub, table_id: str, player: str
) -> table_pb2.GetTableResponse:
    return await stub.GetTable(
        table_pb2.GetTableRequest(table_id=table_id), metadata=metadata(player)
    )


PRESETS = {
    "classic": game_pb2.PRESET_CLASSIC,
    "salon": game_pb2.PRESET_SALON,
    "remi": game_pb2.PRESET_REMI,
}


def fiftyone_config(
    preset: str,
    seats: list[game_pb2.SeatAssignment],
    *,
    hands: int = 1,
    teams: bool = False,
    turn_seconds: float = 30.0,
) -> game_pb2.TableConfig:
    turn_time = duration_pb2.Duration()
    turn_time.FromNanoseconds(round(turn_seconds * 1e9))
    return game_pb2.TableConfig(
        game=game_pb2.GAME_KIND_FIFTYONE,
        preset=PRESETS[preset],
        mode=game_pb2.MODE_TEAMS if teams else game_pb2.MODE_TRAINING,
        options=game_pb2.GameOptions(fiftyone=game_pb2.FiftyOneOptions(hands_per_game=hands)),
        seats=seats,
        turn_time=turn_time,
    )


class EngineProcess:
    """``python -m masa_table_engine`` as a separate process, killable like a crash."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.env = env
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "masa_table_engine"], env=self.env, stdout=out, stderr=out
            )

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    def rss_bytes(self) -> int:
        """The resident memory of the process, from /proc."""
        assert self.process is not None
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS")


async def serving(address: str) -> bool:
    async with grpc.aio.insecure_channel(address) as channel:
        try:
            reply = await HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=0.5)
        except grpc.aio.AioRpcError:
            return False
        return reply.status == health_pb2.HealthCheckResponse.SERVING


# Short leases, so that a dead or drained node's tables are free within seconds.
FAST_TAKEOVER: dict[str, Any] = {
    "lease_ttl_seconds": 1.5,
    "takeover_scan_seconds": 0.2,
    "node_ttl_seconds": 3.0,
}


@asynccontextmanager
async def running_nodes(
    server: NatsServer, *names: str, **overrides: Any
) -> AsyncIterator[tuple[dict[str, Node], dict[str, CollectorRegistry]]]:
    """Nodes ``names`` on ``server`` with fast takeover (``overrides`` win), each with its
    own metrics registry; all stopped on the way out."""
    registries = {name: CollectorRegistry() for name in names}
    async with AsyncExitStack() as stack:
        nodes = {
            name: await stack.enter_async_context(
                running_node(
                    settings(server, name, **{**FAST_TAKEOVER, **overrides}), registries[name]
                )
            )
            for name in names
        }
        yield nodes, registries
