"""The real services for the client's tests, started in the test's own event loop the way the
service tests start them: a nats-server with the masa users, the ledger on SQLite with the
development welcome, one table-engine node binding stakes in that ledger (its bots played by
the in-process policy), and matchmaking with two lobbies: ``trio`` (Elevator for three, with a
stake: players only, P-13) and ``training`` (Elevator against bots, P-1). Not the shared
``make run`` stack of the end-to-end tests.

:func:`masa` runs the ``masa`` command against such a stack as a player runs it.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final

from masa_ledger.bootstrap import LedgerService, start_ledger
from masa_ledger.settings import LedgerSettings
from masa_matchmaking.bootstrap import start_matchmaking
from masa_matchmaking.settings import MatchmakingSettings
from masa_platform.bus_access import LEDGER, MATCHMAKING, TABLE_ENGINE
from masa_platform.keys import ISSUER
from masa_platform.settings import PlatformSettings
from masa_platform.testing import NatsServer, keyring, service_settings
from masa_table_engine.bootstrap import start_node
from masa_table_engine.settings import EngineSettings
from prometheus_client import CollectorRegistry

__all__ = ["STAKE", "WELCOME", "Stack", "masa", "started", "until"]

WELCOME: Final = 1_000
STAKE: Final = 20
LOBBIES: Final = f"""
[[lobby]]
id = "trio"
name = "Elevator for three, {STAKE} chips"
game = "elevator"
seats = 3
stake = {STAKE}
rake_basis_points = 500
turn_seconds = 30

[[lobby]]
id = "training"
name = "Elevator against bots"
game = "elevator"
mode = "training"
seats = 3
"""


@dataclass(frozen=True)
class Stack:
    matchmaking: str
    ledger: str
    engine: str
    ledger_service: LedgerService
    # The folder of the stack's files; the commands run there, beside no run.json.
    directory: Path


def _platform(server: NatsServer, name: str, user: str) -> PlatformSettings:
    return service_settings(server, name, user)


@asynccontextmanager
async def started(
    directory: Path, *, seat_protection_seconds: float = 180.0
) -> AsyncIterator[Stack]:
    """NATS, the ledger, a table-engine node and matchmaking, as ``make run`` wires them."""
    lobbies = directory / "lobbies.toml"
    lobbies.write_text(LOBBIES)
    with NatsServer(directory / "nats", secure=True) as nats:
        async with AsyncExitStack() as running:
            ledger = await start_ledger(
                LedgerSettings(
                    platform=_platform(nats, "ledger", LEDGER),
                    database_url=f"sqlite:///{directory / 'ledger.sqlite3'}",
                    results_fetch_seconds=0.5,
                    dev_welcome_chips=WELCOME,
                    result_keys_file=keyring().results_jwks,
                ),
                registry=CollectorRegistry(),
            )
            running.push_async_callback(ledger.stop, 0.2)
            node = await start_node(
                EngineSettings(
                    result_signing_key_file=keyring().results_key,
                    log_mac_key_file=keyring().log_mac,
                    platform=_platform(nats, "table-engine", TABLE_ENGINE),
                    node_id="client-test-node",
                    ledger_address=ledger.server.address,
                    seat_protection_seconds=seat_protection_seconds,
                ),
                registry=CollectorRegistry(),
            )
            running.push_async_callback(node.stop, 0.2)
            matchmaking = await start_matchmaking(
                MatchmakingSettings(
                    platform=_platform(nats, "matchmaking", MATCHMAKING),
                    instance_id="client-test",
                    lobbies_file=lobbies,
                    ledger_address=ledger.server.address,
                    round_seconds=0.2,
                    result_keys_file=keyring().results_jwks,
                ),
                CollectorRegistry(),
            )
            running.push_async_callback(matchmaking.stop, 0.2)
            yield Stack(matchmaking.address, ledger.server.address, node.address, ledger, directory)


async def masa(
    stack: Stack, *argv: str, stdin: int | IO[bytes] | None = asyncio.subprocess.PIPE
) -> asyncio.subprocess.Process:
    """The ``masa`` command started as a player runs it, its output piped: addresses are given
    where the command takes them (not through a run.json), and it signs its tokens with the
    issuer key of the test keyring."""
    addresses = {
        "play": (
            "--matchmaking",
            stack.matchmaking,
            "--ledger",
            stack.ledger,
            "--address",
            stack.engine,
        ),
        "cancel": ("--matchmaking", stack.matchmaking),
        "lobbies": ("--matchmaking", stack.matchmaking),
        "balance": ("--ledger", stack.ledger),
    }
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")
    }
    env |= {
        "MASA_RUN_DIR": str(stack.directory / "no-run"),
        "MASA_JWT_ISSUER_KEY_FILE": str(keyring().private(ISSUER)),
        "NO_COLOR": "1",
        "TERM": "dumb",
    }
    return await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "masa"),
        *argv,
        *addresses.get(argv[0], ()),
        env=env,
        cwd=stack.directory,
        stdin=stdin,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def until(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)
