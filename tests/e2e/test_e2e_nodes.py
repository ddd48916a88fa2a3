"""Two table-engine nodes under ``make run`` (architecture.md): ``masa nodes`` lists both from the
engine-node registry, and matchmaking places tables on both."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path

from e2e_stack import Stack, launch_stack
from e2e_terminal import masa, without_uv
from masa.matchmaking.v1 import matchmaking_pb2 as mm
from masa_client.client import TableClient
from masa_client.matchmaking import CLOSED_STATES, MatchmakingClient
from masa_client.nodes import EngineNodeInfo, read_nodes
from masa_client.operator_bus import bus_login, connect_operator
from masa_platform.testing import NatsServer, token
from nats.aio.client import Client

WAIT_SECONDS = 30.0
# At most this many tables in a row before both nodes must have one.
SPREAD_TABLES = 8
# Matchmaking reads the registry at most this often (KvEngineNodes' refresh), with a margin.
REGISTRY_CACHE_SECONDS = 1.0


def run_masa(run_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**without_uv(), "MASA_RUN_DIR": str(run_dir)}
    return subprocess.run(
        [masa(), *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_masa_nodes_lists_both_engine_nodes_of_make_run(running_stack: Stack) -> None:
    state = json.loads((running_stack.run_dir / "run.json").read_text())
    engines = state["table_engines"]
    assert engines == [
        running_stack.addresses["table-engine"],
        running_stack.addresses["table-engine-1"],
    ]
    listed = run_masa(running_stack.run_dir, "nodes")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["NODE", "ADDRESS", "TABLES", "CAPACITY", "HEARD", "STATE"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert set(rows) == {"table-engine-0", "table-engine-1"}
    assert rows["table-engine-0"][1] == engines[0]
    assert rows["table-engine-1"][1] == engines[1]
    assert {row[5] for row in rows.values()} == {"serving"}


def test_masa_nodes_says_so_when_no_node_is_live(tmp_path: Path) -> None:
    with NatsServer(tmp_path / "nats") as server:
        listed = run_masa(tmp_path, "nodes", "--nats", server.url)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith("no live table-engine node")


def test_masa_nodes_says_so_when_nats_is_not_there(tmp_path: Path) -> None:
    listed = run_masa(tmp_path, "nodes", "--nats", "nats://127.0.0.1:1")
    assert listed.returncode == 1
    assert "cannot reach NATS at nats://127.0.0.1:1" in listed.stderr
    assert "Traceback" not in listed.stderr


async def test_matchmaking_places_tables_on_both_nodes(tmp_path: Path) -> None:
    """Placement spreads over both nodes: each table goes to the registry's lowest load.

    A stack of its own: the shared one holds other tests' tables (masa-load's live tables among
    them), which rightly keep every new table on the other node for a long while.
    """
    with launch_stack(tmp_path) as own:
        placed = await _place_training_tables(own)
    assert len({address for _, _, address in placed}) == 2, placed


async def _place_training_tables(running_stack: Stack) -> list[tuple[str, str, str]]:
    """Training tables placed one at a time until both nodes hold one (or SPREAD_TABLES)."""
    matchmaking = running_stack.addresses["matchmaking"]
    login = bus_login(None, running_stack.run_dir / "run.json")
    bus = await connect_operator(login)
    placed: list[tuple[str, str, str]] = []
    try:
        for n in range(SPREAD_TABLES):
            player = f"spread-{n}-{time.monotonic_ns()}"
            player_token = token(player)
            async with MatchmakingClient(matchmaking, player_token) as client:
                created = await client.create_ticket("training-51")
                async for ticket in client.watch_ticket(created.ticket_id):
                    if ticket.state in CLOSED_STATES:
                        break
            assert ticket.state == mm.Ticket.STATE_MATCHED, ticket
            placed.append((player, ticket.table_id, ticket.table_address))
            await _until_advertised(bus, ticket.table_address)
            # Matchmaking reads the registry through a short cache; outlast it.
            await asyncio.sleep(REGISTRY_CACHE_SECONDS)
            if len({address for _, _, address in placed}) == 2:
                break
    finally:
        await bus.close()
        for player, table_id, address in placed:
            async with TableClient(address, token(player)) as table:
                await table.leave_table(table_id)
    return placed


async def _until_advertised(nc: Client, address: str) -> EngineNodeInfo:
    """The node at ``address`` once its registry record counts a table."""
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        for node in await read_nodes(nc):
            if node.address == address and node.tables > 0:
                return node
        await asyncio.sleep(0.2)
    raise AssertionError(f"no registry record of {address} counted its table")
