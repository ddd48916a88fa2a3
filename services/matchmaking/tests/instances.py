"""Matchmaking instances in-process over a real NATS: the stores, the use cases and the rounds,
with the test doubles of matchmaking_support for the ledger and the engines."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from masa_matchmaking.adapters.kv_store import KvLeaseStore, KvRatingStore, KvTicketStore
from masa_matchmaking.app.matcher import MatcherSettings, Matchmaker
from masa_matchmaking.app.placement import PlacementSettings, Placer
from masa_matchmaking.app.ports import LeaseStore, Unreachable
from masa_matchmaking.app.tickets import TicketDesk
from masa_matchmaking.domain.catalog import parse_lobbies
from masa_platform.acks import AckedPublisher
from masa_platform.bus import connect
from masa_platform.bus_access import MATCHMAKING
from masa_platform.bus_plan import BusSettings
from masa_platform.testing import NatsServer
from matchmaking_support import (
    LOBBIES_TOML,
    FakeEngines,
    FakeEvents,
    FakeLedger,
    FakeMetrics,
    FakeNodes,
)
from nats.aio.client import Client


@dataclass
class Instance:
    name: str
    nc: Client
    store: KvTicketStore
    desk: TicketDesk
    matchmaker: Matchmaker
    placer: Placer
    stop: asyncio.Event
    task: asyncio.Task[None] | None = None
    metrics: FakeMetrics = field(default_factory=FakeMetrics)

    async def close(self, *, crash: bool = False) -> None:
        """Stop; ``crash`` leaves the leases to expire instead of releasing them."""
        if crash:
            # The connection goes first, so that nothing (a lease release) reaches NATS after.
            await self.nc.close()
            if self.task is not None:
                self.task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await self.task
        else:
            self.stop.set()
            if self.task is not None:
                await self.task
            await self.nc.drain()
        await self.store.close()


def provision_lease_ttl(server: NatsServer, seconds: float) -> None:
    """Provision ``server``'s bus with lobby leases of ``seconds`` (unless they are already)."""
    current = server.bus or BusSettings()
    if current.lobby_lease_ttl_seconds != seconds:
        server.provision(replace(current, lobby_lease_ttl_seconds=seconds))


async def start_instance(  # noqa: PLR0913 - one keyword per fake or setting a test swaps
    server: NatsServer,
    *,
    name: str,
    ledger: FakeLedger,
    engines: FakeEngines,
    events: FakeEvents,
    nodes: FakeNodes | None = None,
    lobbies_toml: str = LOBBIES_TOML,
    lease_ttl: float = 1.5,
    clock: Callable[[], float] | None = None,
    placement: PlacementSettings | None = None,
    run: bool = True,
    wrap_leases: Callable[[LeaseStore], LeaseStore] | None = None,
) -> Instance:
    import time

    now = clock or time.time
    lobbies = {lobby.lobby_id: lobby for lobby in parse_lobbies(lobbies_toml)}
    # A lobby lease lasts as long as its bucket keeps it: the bus plan's TTL.
    provision_lease_ttl(server, lease_ttl)
    nc = await connect(
        server.url, name=name, user=MATCHMAKING, password=server.password(MATCHMAKING)
    )
    publisher = await AckedPublisher.started(nc, unavailable=Unreachable)
    store = await KvTicketStore.open(nc, publisher)
    store.start()
    await asyncio.wait_for(store.ready.wait(), 10)
    ratings = await KvRatingStore.open(nc, publisher)
    leases: LeaseStore = await KvLeaseStore.open(nc, holder=f"{name}-{uuid.uuid4().hex[:6]}")
    if wrap_leases is not None:
        leases = wrap_leases(leases)
    metrics = FakeMetrics()
    placer = Placer(
        store,
        ledger,
        nodes or FakeNodes(),
        engines,
        events=events,
        metrics=metrics,
        clock=now,
        instance_id=name,
        settings=placement or PlacementSettings(placement_timeout_seconds=3.0),
    )
    matchmaker = Matchmaker(
        lobbies,
        store,
        leases,
        placer,
        metrics=metrics,
        clock=now,
        settings=MatcherSettings(round_seconds=0.2, lease_ttl_seconds=lease_ttl),
    )
    desk = TicketDesk(lobbies, store, ratings, now)
    stop = asyncio.Event()
    instance = Instance(name, nc, store, desk, matchmaker, placer, stop, metrics=metrics)
    if run:
        instance.task = asyncio.get_running_loop().create_task(matchmaker.run(stop))
    return instance


async def until(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    """Wait for ``condition``, generously: the machine may be loaded."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)
