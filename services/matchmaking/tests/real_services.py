"""The real services around matchmaking, started in this test's own event loop the way
``make run`` wires them: a nats-server with the masa users, the ledger on SQLite, a
table-engine node binding stakes in that ledger, and matchmaking through its own bootstrap.

For the placement tests that must see what the real ledger and a real engine answer (P-30): a
test double can only say what its author believed the ledger says. A test may hand matchmaking
an engine port of its own (:class:`LosingAnswers`, :class:`DyingAfterCreate`) that forwards
every CreateTable to the real node and then loses what the node answered.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import grpc.aio
from masa.ledger.v1 import ledger_pb2, ledger_pb2_grpc
from masa.matchmaking.v1 import matchmaking_pb2 as mm
from masa.matchmaking.v1 import matchmaking_pb2_grpc
from masa_ledger.bootstrap import LedgerService, start_ledger
from masa_ledger.settings import LedgerSettings
from masa_matchmaking.adapters.engines import GrpcEngines
from masa_matchmaking.adapters.ledger_client import GrpcLedger
from masa_matchmaking.app.ports import Engines, Unreachable
from masa_matchmaking.bootstrap import MatchmakingService, Overrides, start_matchmaking
from masa_matchmaking.settings import MatchmakingSettings
from masa_platform.auth import ServiceTokens, TokenSigner
from masa_platform.bus_access import LEDGER, MATCHMAKING, TABLE_ENGINE
from masa_platform.bus_plan import BusSettings
from masa_platform.settings import AuthSettings, PlatformSettings
from masa_platform.testing import (
    NatsServer,
    free_port,
    keyring,
    service_settings,
    token,
)
from masa_platform.tls import open_channel
from masa_rules.table_config import TableConfig
from masa_table_engine.bootstrap import Node, start_node
from masa_table_engine.settings import EngineSettings
from prometheus_client import CollectorRegistry

# What the ledger's development welcome gives a player at the first stake, and the lobby's.
WELCOME = 1_000
STAKE = 100
LOBBY = "trio"
LOBBIES_TOML = f"""
[[lobby]]
id = "{LOBBY}"
name = "Elevator for three, {STAKE} chips"
game = "elevator"
seats = 3
stake = {STAKE}
"""
# The lobby leases of these tests' bus: a dead instance's lobby is taken over within this.
LEASE_TTL = 1.5
# A placement this old whose instance is gone is resumed (the least matchmaking allows with a
# ledger timeout of 0.5 s and an engine timeout of 1 s), and given up after four times this.
PLACEMENT_TIMEOUT = 3.0


def _platform(nats: NatsServer, name: str, user: str, port: int = 0) -> PlatformSettings:
    return service_settings(nats, name, user, grpc_port=port)


def matchmaking_tokens() -> ServiceTokens:
    """Matchmaking's own service token, as its bootstrap signs it."""
    return ServiceTokens(TokenSigner(keyring().signer("matchmaking"), AuthSettings()))


def grpc_engines() -> GrpcEngines:
    return GrpcEngines(
        matchmaking_tokens(), lambda address: open_channel(address, None), timeout_seconds=5.0
    )


def grpc_ledger(address: str) -> GrpcLedger:
    return GrpcLedger(open_channel(address, None), matchmaking_tokens(), timeout_seconds=5.0)


async def start_real_ledger(nats: NatsServer, directory: Path, *, port: int = 0) -> LedgerService:
    return await start_ledger(
        LedgerSettings(
            platform=_platform(nats, "ledger", LEDGER, port),
            database_url=f"sqlite:///{directory / 'ledger.sqlite3'}",
            dev_welcome_chips=WELCOME,
            expiry_interval_seconds=0.2,
            result_keys_file=keyring().results_jwks,
        ),
        registry=CollectorRegistry(),
    )


async def start_real_node(
    nats: NatsServer, node_id: str, ledger_address: str, **settings: Any
) -> Node:
    """A table-engine node binding its chip tables' stakes in the ledger at ``ledger_address``,
    its settings changed by ``settings`` (``max_tables`` ...)."""
    return await start_node(
        EngineSettings(
            result_signing_key_file=keyring().results_key,
            log_mac_key_file=keyring().log_mac,
            platform=_platform(nats, "table-engine", TABLE_ENGINE),
            node_id=node_id,
            ledger_address=ledger_address,
            **settings,
        ),
        registry=CollectorRegistry(),
    )


@dataclass
class LosingAnswers:
    """Matchmaking's engine port over the real one: the first ``lose`` CreateTable calls reach
    the node, which makes the table and binds its holds, and their answers are lost on the way
    back (the caller hears Unreachable, as after a timeout)."""

    engines: Engines
    lose: int
    # The table id of every CreateTable asked for, in order.
    asked: list[str] = field(default_factory=list)

    async def create_table(
        self, address: str, table_id: str, request_id: str, config: TableConfig
    ) -> str:
        self.asked.append(table_id)
        answer = await self.engines.create_table(address, table_id, request_id, config)
        if self.lose:
            self.lose -= 1
            raise Unreachable(f"the answer of CreateTable {table_id} was lost")
        return answer


@dataclass
class DyingAfterCreate:
    """Matchmaking's engine port over the real one, in an instance about to be killed: the node
    makes the table and binds its holds, and the answer never comes back."""

    engines: Engines
    created: asyncio.Event = field(default_factory=asyncio.Event)
    asked: list[str] = field(default_factory=list)

    async def create_table(
        self, address: str, table_id: str, request_id: str, config: TableConfig
    ) -> str:
        self.asked.append(table_id)
        await self.engines.create_table(address, table_id, request_id, config)
        self.created.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable: the instance is killed first")


@dataclass
class Stack:
    nats: NatsServer
    directory: Path
    ledger_address: str
    node: Node
    running: AsyncExitStack
    ledger: LedgerService | None = None

    async def start_ledger(self) -> LedgerService:
        """The ledger, on the port the others were told of."""
        port = int(self.ledger_address.rsplit(":", 1)[1])
        self.ledger = await start_real_ledger(self.nats, self.directory, port=port)
        self.running.push_async_callback(self.ledger.stop, 0.2)
        return self.ledger

    async def start_matchmaking(
        self,
        instance_id: str,
        *,
        engines: Engines | None = None,
        registry: CollectorRegistry | None = None,
        **settings: Any,
    ) -> MatchmakingService:
        """A matchmaking instance through its own bootstrap, with the real ledger and node
        registry (and ``engines`` when given), its settings changed by ``settings``; stopped
        with the stack unless killed first."""
        lobbies = self.directory / "lobbies.toml"
        lobbies.write_text(LOBBIES_TOML)
        base = MatchmakingSettings(
            platform=_platform(self.nats, "matchmaking", MATCHMAKING),
            instance_id=instance_id,
            lobbies_file=lobbies,
            ledger_address=self.ledger_address,
            round_seconds=0.2,
            ledger_timeout_seconds=PLACEMENT_TIMEOUT / 6,
            engine_timeout_seconds=PLACEMENT_TIMEOUT / 3,
            placement_timeout_seconds=PLACEMENT_TIMEOUT,
            result_keys_file=keyring().results_jwks,
        )
        service = await start_matchmaking(
            replace(base, **settings),
            registry or CollectorRegistry(),
            overrides=Overrides(engines=engines),
        )

        async def stop() -> None:
            if not service.nats.is_closed:
                await service.stop(0.2)

        self.running.push_async_callback(stop)
        return service


async def kill(service: MatchmakingService) -> None:
    """Matchmaking killed: its NATS connection cut first, so that nothing it does after
    reaches the bus (no lease given up, no ticket written, no event), then its tasks cancelled
    where they stand. (Its stop event is set too: nats-py turns a cancellation inside a fetch
    on a closed connection into ConnectionClosedError, which a consumer would wait out for
    ever.)"""
    await service.nats.close()
    service.stopping.set()
    for task in service.tasks:
        task.cancel()
    for task in service.tasks:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.wait_for(task, 10.0)
    await service.server.stop(0)
    for closer in service.closers:
        with contextlib.suppress(Exception):
            await closer.close()


@asynccontextmanager
async def real_stack(directory: Path, *, ledger_up: bool = True) -> AsyncIterator[Stack]:
    """NATS, the ledger (unless ``ledger_up`` is False: then the others are told its address
    and :meth:`Stack.start_ledger` starts it there later) and one table-engine node."""
    with NatsServer(
        directory / "nats", secure=True, bus=BusSettings(lobby_lease_ttl_seconds=LEASE_TTL)
    ) as nats:
        async with AsyncExitStack() as running:
            ledger = await start_real_ledger(nats, directory) if ledger_up else None
            if ledger is not None:
                running.push_async_callback(ledger.stop, 0.2)
            address = ledger.server.address if ledger else f"127.0.0.1:{free_port()}"
            node = await start_real_node(nats, "placement-node", address)
            running.push_async_callback(node.stop, 0.2)
            yield Stack(nats, directory, address, node, running, ledger)


def _player(player: str) -> tuple[tuple[str, str]]:
    return (("authorization", f"Bearer {token(player)}"),)


async def queue(address: str, players: list[str]) -> dict[str, str]:
    """A ticket in the lobby for each player; player -> ticket id."""
    tickets: dict[str, str] = {}
    async with grpc.aio.insecure_channel(address) as channel:
        stub = matchmaking_pb2_grpc.MatchmakingServiceStub(channel)
        for player in players:
            answer = await stub.CreateTicket(
                mm.CreateTicketRequest(request_id=f"r-{player}", lobby_id=LOBBY),
                metadata=_player(player),
            )
            tickets[player] = answer.ticket.ticket_id
    return tickets


async def tickets_of(address: str, tickets: dict[str, str]) -> dict[str, mm.Ticket]:
    """Each player's ticket as matchmaking answers GetTicket."""
    found: dict[str, mm.Ticket] = {}
    async with grpc.aio.insecure_channel(address) as channel:
        stub = matchmaking_pb2_grpc.MatchmakingServiceStub(channel)
        for player, ticket_id in tickets.items():
            answer = await stub.GetTicket(
                mm.GetTicketRequest(ticket_id=ticket_id), metadata=_player(player)
            )
            found[player] = answer.ticket
    return found


async def holds_of(ledger_address: str, player: str) -> list[ledger_pb2.StakeHold]:
    """Every stake hold the ledger has of the player, in any state."""
    async with grpc.aio.insecure_channel(ledger_address) as channel:
        stub = ledger_pb2_grpc.LedgerServiceStub(channel)
        answer = await stub.ListHolds(ledger_pb2.ListHoldsRequest(), metadata=_player(player))
        return list(answer.holds)


async def balance_of(ledger_address: str, player: str) -> ledger_pb2.Account:
    async with grpc.aio.insecure_channel(ledger_address) as channel:
        stub = ledger_pb2_grpc.LedgerServiceStub(channel)
        answer = await stub.GetBalance(ledger_pb2.GetBalanceRequest(), metadata=_player(player))
        return answer.account


async def until(check: Callable[[], object], what: str, timeout: float = 60.0) -> None:
    """Wait for ``check`` (a coroutine function or a plain one) to be true, generously: the
    machine may be loaded."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        outcome = check()
        if asyncio.iscoroutine(outcome):
            outcome = await outcome
        if outcome:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)
