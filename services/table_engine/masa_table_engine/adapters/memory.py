"""The stores of :mod:`.jetstream` in memory, with the same contract, and a clock tests move.

A :class:`MemoryBus` stands for one NATS: the table logs, snapshots, the index of every node,
the leases (expiring by the :class:`FakeClock`), the engine-node registry and the results.
Each node sees it through its own :class:`MemoryLog`, :class:`MemoryOwnership`,
:class:`MemoryDirectory` and :class:`MemoryResults`, as it sees JetStream through the real
adapters; ``tests/test_engine_store_contract.py`` runs one contract against both. Faults are
switches on the bus: ``down`` (nothing answers), ``lost_acks`` (appends that land but are not
acknowledged, as after a timeout) and ``failing_publishes``.

The tests of takeover, fencing, failed writes and publishes and of the driver's timers run on
these in milliseconds (``tests/test_engine_fakes.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from masa_table_engine.adapters.results import result_event_id, table_results
from masa_table_engine.app.ports import (
    LogConflict,
    LoggedInput,
    LogUnavailable,
    Placement,
    Scan,
    Snapshot,
    Unserved,
)
from masa_table_engine.domain.model import Entry
from masa_table_engine.domain.table import Table

__all__ = [
    "FakeClock",
    "MemoryBus",
    "MemoryDirectory",
    "MemoryLog",
    "MemoryOwnership",
    "MemoryRegistry",
    "MemoryResults",
]


class FakeClock:
    """Epoch seconds that move only when a test says (:meth:`advance`)."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []

    def __call__(self) -> float:
        return self.now

    async def wait(self, event: asyncio.Event, timeout: float | None) -> None:
        if timeout is None:
            await event.wait()
            return
        if timeout <= 0:
            return
        sleeper: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (self.now + timeout, sleeper)
        self._sleepers.append(entry)
        waiter: asyncio.Future[bool] = asyncio.ensure_future(event.wait())
        wakers: set[asyncio.Future[bool] | asyncio.Future[None]] = {waiter, sleeper}
        try:
            await asyncio.wait(wakers, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
            self._sleepers.remove(entry)

    def advance(self, seconds: float) -> None:
        """Move time on, waking every wait whose time has come."""
        self.now += seconds
        for deadline, sleeper in self._sleepers:
            if deadline <= self.now and not sleeper.done():
                sleeper.set_result(None)


@dataclass
class _Stored:
    entry: Entry
    writer: str


@dataclass
class _Saved:
    snapshot: Snapshot
    owner: str
    address: str


@dataclass
class MemoryBus:
    """One NATS for the nodes of a test."""

    clock: FakeClock = field(default_factory=FakeClock)
    lease_seconds: float = 15.0
    logs: dict[str, list[_Stored]] = field(default_factory=dict)
    snapshots: dict[str, _Saved] = field(default_factory=dict)
    index: set[str] = field(default_factory=set)
    # table id -> (holder, expiry by the clock)
    leases: dict[str, tuple[str, float]] = field(default_factory=dict)
    # node id -> (address, draining)
    nodes: dict[str, tuple[str, bool]] = field(default_factory=dict)
    results: dict[str, list[str]] = field(default_factory=dict)
    down: bool = False
    lost_acks: int = 0
    failing_publishes: int = 0

    def check(self) -> None:
        if self.down:
            raise LogUnavailable("the bus does not answer")

    def holder(self, table_id: str) -> str | None:
        lease = self.leases.get(table_id)
        if lease is None or lease[1] <= self.clock():
            return None
        return lease[0]


class MemoryLog:
    """A node's :class:`~masa_table_engine.app.ports.LogStore` on the bus."""

    def __init__(self, bus: MemoryBus, node_id: str, address: str = "") -> None:
        self._bus = bus
        self.writer = node_id
        self._address = address or f"{node_id}:0"

    async def append(self, entry: Entry) -> None:
        bus = self._bus
        bus.check()
        log = bus.logs.setdefault(entry.table_id, [])
        if entry.sequence != len(log) + 1:
            raise LogConflict(f"entry {entry.sequence} is there already")
        log.append(_Stored(entry, self.writer))
        if bus.lost_acks:
            bus.lost_acks -= 1
            raise LogUnavailable("the append landed, but its acknowledgement was lost")

    async def read(self, table_id: str, after_sequence: int) -> list[LoggedInput]:
        self._bus.check()
        return [
            LoggedInput(
                sequence=stored.entry.sequence,
                at=stored.entry.at,
                input=stored.entry.input,
                writer=stored.writer,
                logged_events=str(stored.entry.sequence).encode(),
            )
            for stored in self._bus.logs.get(table_id, [])
            if stored.entry.sequence > after_sequence
        ]

    def matches(self, entry: Entry, logged: LoggedInput) -> bool:
        if logged.logged_events is None:
            return True
        stored = self._bus.logs[entry.table_id][int(logged.logged_events) - 1]
        return stored.entry.events == entry.events

    async def save_snapshot(
        self,
        table: Table,
        *,
        handed_over: bool = False,
        requests: tuple[tuple[int, str, int], ...] = (),
    ) -> None:
        self._bus.check()
        self._bus.snapshots[table.table_id] = _Saved(
            Snapshot(table, handed_over, requests), self.writer, self._address
        )

    async def load_snapshot(self, table_id: str) -> Snapshot | None:
        self._bus.check()
        saved = self._bus.snapshots.get(table_id)
        return saved.snapshot if saved is not None else None

    async def placement(self, table_id: str) -> Placement | None:
        self._bus.check()
        saved = self._bus.snapshots.get(table_id)
        if saved is None:
            return None
        return Placement(saved.owner, saved.address, saved.snapshot.table.finished)

    async def track(self, table_id: str) -> None:
        self._bus.check()
        self._bus.index.add(f"{self.writer}.{table_id}")

    async def untrack(self, table_id: str) -> None:
        self._bus.check()
        self._bus.index.discard(f"{self.writer}.{table_id}")

    async def adopt(self, table_id: str, node: str) -> None:
        await self.track(table_id)
        if node != self.writer:
            self._bus.index.discard(f"{node}.{table_id}")

    async def table_ids(self) -> list[str]:
        self._bus.check()
        prefix = f"{self.writer}."
        return sorted(key[len(prefix) :] for key in self._bus.index if key.startswith(prefix))


class MemoryOwnership:
    """A node's leases on the bus; they expire ``lease_seconds`` after the last :meth:`renew`."""

    def __init__(self, bus: MemoryBus, node_id: str) -> None:
        self._bus = bus
        self._node = node_id
        self._held: set[str] = set()
        self.on_lost: Callable[[str], Awaitable[None]] | None = None

    async def close(self) -> None:
        """Nothing runs in the background: a test renews by hand (:meth:`renew`)."""

    async def claim(self, table_id: str) -> bool:
        bus = self._bus
        bus.check()
        if bus.holder(table_id) not in {None, self._node}:
            return False
        bus.leases[table_id] = (self._node, bus.clock() + bus.lease_seconds)
        self._held.add(table_id)
        return True

    async def release(self, table_id: str) -> None:
        self._held.discard(table_id)
        if self._bus.holder(table_id) == self._node:
            del self._bus.leases[table_id]

    async def holder(self, table_id: str) -> str | None:
        self._bus.check()
        return self._bus.holder(table_id)

    def held(self) -> set[str]:
        return set(self._held)

    def renew(self) -> None:
        """What the renewal task does: every lease still this node's lives on."""
        bus = self._bus
        for table_id in list(self._held):
            if bus.holder(table_id) == self._node:
                bus.leases[table_id] = (self._node, bus.clock() + bus.lease_seconds)
            else:
                self._held.discard(table_id)


class MemoryRegistry:
    """A node's record among the bus's live nodes (the engine-node registry)."""

    def __init__(self, bus: MemoryBus, node_id: str, address: str) -> None:
        self._bus = bus
        self._node = node_id
        self._address = address
        self._draining = False

    async def start(self) -> None:
        await self.advertise()

    async def advertise(self) -> None:
        self._bus.nodes[self._node] = (self._address, self._draining)

    async def drain(self) -> None:
        self._draining = True
        await self.advertise()

    async def resume(self) -> None:
        self._draining = False
        await self.advertise()

    async def stop(self) -> None:
        self._bus.nodes.pop(self._node, None)


class MemoryDirectory:
    def __init__(self, bus: MemoryBus) -> None:
        self._bus = bus
        # In memory a listing costs nothing: every scan lists everything (a test may say how).
        self.scan = Scan()

    async def worth_scanning(self) -> Scan | None:
        return self.scan

    async def unserved(self, nodes: frozenset[str] | None = None) -> list[Unserved]:
        bus = self._bus
        bus.check()
        found: list[Unserved] = []
        for key in sorted(bus.index):
            node, _, table_id = key.partition(".")
            if (nodes is None or node in nodes) and bus.holder(table_id) is None:
                found.append(Unserved(table_id, node))
        return found

    async def live_nodes(self) -> list[str]:
        return [node for node, (_, draining) in self._bus.nodes.items() if not draining]

    async def address_of(self, node: str) -> str | None:
        record = self._bus.nodes.get(node)
        return record[0] if record is not None else None


class MemoryResults:
    """Results on the bus by event id; ids as the real publisher makes them where it can."""

    def __init__(self, bus: MemoryBus) -> None:
        self._bus = bus

    async def publish(self, table: Table, entry: Entry, *, recheck: bool = False) -> list[str]:
        del recheck
        bus = self._bus
        bus.check()
        if bus.failing_publishes:
            bus.failing_publishes -= 1
            raise LogUnavailable("the publish was refused")
        published = bus.results.setdefault(table.table_id, [])
        outcomes: list[str] = []
        for event_id in _result_ids(table, entry):
            outcomes.append("duplicate" if event_id in published else "published")
            if event_id not in published:
                published.append(event_id)
        return outcomes


def _result_ids(table: Table, entry: Entry) -> list[str]:
    return [result_event_id(result) for result in table_results(table, entry)]
