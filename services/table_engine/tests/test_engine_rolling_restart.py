"""A rolling restart (issue 12, Drain): each of three nodes in turn drains (SIGTERM's path,
``Node.drain``), stops and comes back, while people and bots play. No acknowledged action is
lost or applied twice, every game finishes, and no table waits for a lease to expire: leases
here last 30 s, and no table may wait across a restart more than 10 s longer than it waits
between moves anyway (its own pauses, measured in the same logs away from the restarts, are
the baseline). The margin is wide on purpose: a shared machine pauses for seconds, and a timed
bound this test asserted at 2 s failed there. The 2 s goal is measured, beside its baseline, by
``bench/bench_takeover.py`` (its drain rounds)."""

from __future__ import annotations

import asyncio
import itertools
import json
import time

from engine_support import (
    create_table,
    elevator_config,
    fiftyone_config,
    log_entries,
    results,
    seat,
    settings,
    table_stub,
)
from masa_platform.testing import NatsServer
from masa_table_engine.bootstrap import Node, start_node
from prometheus_client import CollectorRegistry
from roaming_player import RoamingSeat

NODES = ("roll-a", "roll-b", "roll-c")
TABLES_PER_NODE = 3
LEASE_SECONDS = 30.0
MAX_STALL_SECONDS = 10.0


async def _start(server: NatsServer, name: str) -> Node:
    return await start_node(
        settings(
            server,
            name,
            lease_ttl_seconds=LEASE_SECONDS,
            takeover_scan_seconds=0.2,
            node_ttl_seconds=LEASE_SECONDS,
            bot_delay_seconds=0.05,
            turn_seconds=30.0,
        ),
        registry=CollectorRegistry(),
    )


async def test_a_rolling_restart_loses_no_action_and_stalls_no_table(nats: NatsServer) -> None:
    nodes = {name: await _start(nats, name) for name in NODES}
    seats: list[RoamingSeat] = []
    tables: list[str] = []
    try:
        for number, node in enumerate(list(nodes.values()) * TABLES_PER_NODE):
            player = f"player-{number}"
            if number % 2:
                config = elevator_config([seat(0, player), seat(1), seat(2)])
            else:
                config = fiftyone_config("salon", [seat(0, player), seat(1), seat(2), seat(3)])
            async with table_stub(node.address) as stub:
                table_id = await create_table(stub, config)
            tables.append(table_id)
            seats.append(
                RoamingSeat(
                    table_id,
                    player,
                    lambda: [n.address for n in nodes.values() if not n.stopped],
                    address=node.address,
                )
            )
        deadline = time.monotonic() + 150
        playing = [asyncio.create_task(s.play(deadline)) for s in seats]
        rolls: list[tuple[float, float]] = []
        for name in NODES:
            await asyncio.sleep(1.5)
            began = time.time()
            await nodes[name].drain()
            await nodes[name].stop(0.1)
            nodes[name] = await _start(nats, name)
            rolls.append((began, time.time()))
        await asyncio.gather(*playing)
    finally:
        for node in nodes.values():
            await node.stop(0.1)
    stalls: list[float] = []
    baseline = 0.0
    for table_id, roaming in zip(tables, seats, strict=True):
        entries = await log_entries(nats, table_id)
        assert [e.sequence for e in entries] == list(range(1, len(entries) + 1))
        logged = [e.action_applied.request_id for e in entries if e.action_applied.request_id]
        for request_id in roaming.acknowledged:
            assert logged.count(request_id) == 1, (table_id, request_id)
        finished = [r for r in await results(nats, table_id) if r.HasField("game_finished")]
        assert len(finished) == 1, table_id
        times = [e.occurred_at.ToNanoseconds() / 1e9 for e in entries]
        gaps = list(itertools.pairwise(times))
        during = [b - a for a, b in gaps if any(a < end and b > start for start, end in rolls)]
        away = [b - a for a, b in gaps if not any(a < end and b > start for start, end in rolls)]
        stalls.append(max(during, default=0.0))
        baseline = max([baseline, *away])
    # A game that has started moves on every few tenths of a second (bots, and a player who
    # answers at once); a gap across a restart longer than the longest elsewhere is a table
    # that waited for a node.
    print(
        json.dumps(
            {
                "max_stall_seconds": round(max(stalls), 3),
                "baseline_gap_seconds": round(baseline, 3),
                "tables": len(tables),
            }
        )
    )
    assert len(rolls) == len(NODES)
    assert max(stalls) <= baseline + MAX_STALL_SECONDS, (sorted(stalls), baseline)
