"""The engine's background loops are counted like every service's (``masa_loop_runs_total``,
``masa_loop_run_seconds``), and what its table drivers log names the table (issue 13)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack

import grpc.aio
import pytest
from engine_support import (
    ADMIN_TOKEN,
    create_table,
    elevator_config,
    running_node,
    seat,
    settings,
    table_stub,
)
from masa.table.v1 import admin_pb2, admin_pb2_grpc
from masa_platform.testing import NatsServer
from masa_rules.table_config import GameKind, GameOptions, SeatConfig, SeatKind, TableConfig
from masa_table_engine.adapters.memory import (
    MemoryBus,
    MemoryDirectory,
    MemoryLog,
    MemoryOwnership,
    MemoryResults,
)
from masa_table_engine.app.ports import NullMetrics
from masa_table_engine.app.runtime import Deps, RuntimeSettings
from masa_table_engine.app.tables import Tables
from masa_table_engine.domain.table import TimerPolicy
from prometheus_client import CollectorRegistry

LOOPS = (
    "health_probe",
    "lease_renewal",
    "registry_heartbeat",
    "takeover_scan",
    "housekeeping",
    "outbox_relay",
    "table_timers",
)
FAST = {"lease_ttl_seconds": 1.5, "takeover_scan_seconds": 0.2, "node_ttl_seconds": 3.0}


@pytest.fixture
def nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    with NatsServer(tmp_path_factory.mktemp("nats"), secure=True) as server:
        yield server


async def test_every_background_loop_of_a_node_counts_its_runs(nats: NatsServer) -> None:
    registry = CollectorRegistry()
    async with AsyncExitStack() as stack:
        node = await stack.enter_async_context(
            running_node(settings(nats, "looping", **FAST), registry)
        )
        async with table_stub(node.address) as stub:
            # Turns of 0.2 s that nobody plays: the turn timer fires, again and again.
            await create_table(
                stub, elevator_config([seat(n, f"p{n}") for n in range(3)], turn_seconds=0.2)
            )
            # A voided table's GameAbandoned goes out through the outbox relay.
            voided = await create_table(
                stub, elevator_config([seat(n, f"v{n}") for n in range(3)], turn_seconds=600)
            )
        async with grpc.aio.insecure_channel(node.address) as channel:
            await admin_pb2_grpc.TableAdminServiceStub(channel).VoidTable(
                admin_pb2.VoidTableRequest(table_id=voided), metadata=ADMIN_TOKEN
            )

        def runs(loop: str) -> float:
            return (
                registry.get_sample_value("masa_loop_runs_total", {"loop": loop, "outcome": "ok"})
                or 0.0
            )

        deadline = time.monotonic() + 10.0
        while not all(runs(loop) for loop in LOOPS):
            assert time.monotonic() < deadline, {loop: runs(loop) for loop in LOOPS}
            await asyncio.sleep(0.1)
        for loop in LOOPS:
            timed = registry.get_sample_value("masa_loop_run_seconds_count", {"loop": loop})
            assert timed is not None and timed >= runs(loop), loop


async def test_a_drivers_log_lines_name_the_table(caplog: pytest.LogCaptureFixture) -> None:
    """On the memory bus with the log away: the driver's failed timer step says which table."""
    bus = MemoryBus()
    deps = Deps(
        log=MemoryLog(bus, "a"),
        results=MemoryResults(bus),
        decider=None,
        metrics=NullMetrics(),
        ownership=MemoryOwnership(bus, "a"),
        clock=bus.clock,
    )
    tables = Tables(
        deps,
        RuntimeSettings(timers=TimerPolicy(), snapshot_every=5, bot_timeout_seconds=0.1),
        directory=MemoryDirectory(bus),
    )
    config = TableConfig(
        game=GameKind.ELEVATOR,
        seats=tuple(SeatConfig(n, SeatKind.HUMAN, f"p{n}", f"p{n}") for n in range(3)),
        turn_seconds=30.0,
        options=GameOptions(),
    )
    table = await tables.create(config)
    await asyncio.sleep(0.05)
    with caplog.at_level(logging.WARNING, logger="masa_table_engine.app.driver"):
        bus.down = True
        bus.clock.advance(31.0)
        for _ in range(200):
            if caplog.records:
                break
            await asyncio.sleep(0.01)
        bus.down = False
    await tables.close()
    failed = [r for r in caplog.records if "a step failed" in r.getMessage()]
    assert failed, caplog.records
    assert all(getattr(r, "table_id", None) == table.table_id for r in failed)
