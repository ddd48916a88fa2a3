"""What a takeover scan lists (issue 22, services/table_engine/README.md): the registry says
which nodes are in trouble (silent, draining, gone), and the directory then lists only their
indexes and those tables' leases, and asks for the next scan soon while their leases run out;
the node's own start, tables left over and a listing grown old list everything. Real NATS, as
the table engine's own NATS user; the directory's clocks are the test's."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator

import pytest
from engine_support import bus_client
from google.protobuf import timestamp_pb2
from masa.events.v1 import engine_pb2
from masa_platform.bus import KvBucket
from masa_platform.bus_access import TABLE_ENGINE
from masa_platform.testing import NatsServer
from masa_table_engine.adapters.jetstream import INDEX_BUCKET, LEASE_BUCKET, JetStreamDirectory
from masa_table_engine.adapters.registry import ENGINE_NODES_BUCKET
from masa_table_engine.app.ports import Scan, Unserved
from masa_table_engine.app.takeover import claim_order
from nats.aio.client import Client

NODE_TTL = 6.0
# The lease TTL of the bus plan (6 s) and the directory's margin after it (5 s).
ALERT = 11.0


class Registry:
    """Two nodes, "quiet" and "well", with two tables each, every one leased; the directory
    reads them as the table engine's NATS user, on the test's clocks, and has just started
    (its first listing, of everything, found nothing)."""

    def __init__(self, admin: Client) -> None:
        self.admin = admin
        self.monotonic = 1_000.0
        self.wall = 1_800_000_000.0
        self.listed = self.monotonic

    async def open(self, engine: Client) -> JetStreamDirectory:
        self.nodes = await KvBucket.open(self.admin, ENGINE_NODES_BUCKET)
        self.leases = await KvBucket.open(self.admin, LEASE_BUCKET)
        self.index = await KvBucket.open(self.admin, INDEX_BUCKET)
        for node, table_id in (("quiet", "t1"), ("quiet", "t2"), ("well", "t3"), ("well", "t4")):
            await self.index.put(f"{node}.{table_id}", b"")
            await self.leases.put(table_id, node.encode())
        await self.heartbeat("quiet")
        await self.heartbeat("well")
        directory = JetStreamDirectory(
            await KvBucket.open(engine, INDEX_BUCKET),
            await KvBucket.open(engine, LEASE_BUCKET),
            await KvBucket.open(engine, ENGINE_NODES_BUCKET),
            node_ttl_seconds=NODE_TTL,
            monotonic=lambda: self.monotonic,
            wall=lambda: self.wall,
        )
        # A node that starts has not seen who was there before: it lists everything.
        assert await directory.worth_scanning() == Scan()
        assert await directory.unserved() == []
        self.listed = self.monotonic
        await self.later(ALERT + 1, "quiet", "well")
        assert await directory.worth_scanning() is None
        return directory

    async def heartbeat(self, node: str, *, draining: bool = False) -> None:
        stamp = timestamp_pb2.Timestamp()
        stamp.FromNanoseconds(int(self.wall * 1e9))
        record = engine_pb2.EngineNode(node_id=node, update_time=stamp, draining=draining)
        await self.nodes.put(node, record.SerializeToString())

    async def moved(self, node: str, *table_ids: str) -> None:
        """An heir took ``table_ids`` over from ``node``: its lease, out of ``node``'s index."""
        for table_id in table_ids:
            await self.leases.put(table_id, b"heir")
            await self.index.delete(f"{node}.{table_id}")

    async def later(self, seconds: float, *alive: str) -> None:
        """``seconds`` pass; the ``alive`` nodes rewrite their records."""
        self.monotonic += seconds
        self.wall += seconds
        for node in alive:
            await self.heartbeat(node)


@pytest.fixture
async def registry(nats: NatsServer) -> AsyncIterator[tuple[Registry, JetStreamDirectory]]:
    admin = await bus_client(nats)
    engine = await bus_client(nats, TABLE_ENGINE)
    try:
        world = Registry(admin)
        yield world, await world.open(engine)
    finally:
        await engine.close()
        await admin.close()


async def test_a_silent_node_gets_its_own_index_listed_soon_while_its_leases_run_out(
    registry: tuple[Registry, JetStreamDirectory],
) -> None:
    world, directory = registry
    # "quiet" misses two rewrites of its record: its own index, soon.
    await world.later(NODE_TTL * 2 / 3 + 0.1, "well")
    assert await directory.worth_scanning() == Scan(frozenset({"quiet"}), soon=True)
    await world.leases.delete("t1")
    await world.leases.delete("t4")
    # t4 (a lease a node that is well gave up) is for the listing of everything.
    assert await directory.unserved(frozenset({"quiet"})) == [Unserved("t1", "quiet")]
    # Its record expires: it is still in trouble, and the scans come soon for a lease's life
    # after it first went silent.
    await world.nodes.delete("quiet")
    await world.later(1.1, "well")
    assert await directory.worth_scanning() == Scan(frozenset({"quiet"}), soon=True)
    assert await directory.unserved(frozenset({"quiet"})) == [Unserved("t1", "quiet")]
    await world.later(ALERT - 1, "well")
    assert await directory.worth_scanning() == Scan(frozenset({"quiet"}), soon=False)
    assert await directory.unserved(frozenset({"quiet"})) == [Unserved("t1", "quiet")]
    # It stays in trouble while its index lists tables, for a lease's life after (its
    # vanishing alone would have kept it for a lease's life until 12.1 s from its silence).
    await world.later(1.9, "well")
    assert await directory.worth_scanning() == Scan(frozenset({"quiet"}), soon=False)
    assert await directory.unserved(frozenset({"quiet"})) == [Unserved("t1", "quiet")]
    await world.moved("quiet", "t1", "t2")
    assert await directory.unserved(frozenset({"quiet"})) == []
    await world.later(ALERT + 0.1, "well")
    # Its trouble over, one listing of everything closes it, and finds t4.
    assert await directory.worth_scanning() == Scan()
    assert await directory.unserved() == [Unserved("t4", "well")]
    await world.moved("well", "t4")
    await world.later(1.1, "well")
    assert await directory.worth_scanning() == Scan()
    assert await directory.unserved() == []
    await world.later(1.1, "well")
    assert await directory.worth_scanning() is None


async def test_a_listing_of_everything_is_made_when_it_grew_old_and_again_while_it_finds_some(
    registry: tuple[Registry, JetStreamDirectory],
) -> None:
    world, directory = registry
    await world.leases.delete("t4")
    await world.later(30 - 0.1 - (world.monotonic - world.listed), "quiet", "well")
    assert await directory.worth_scanning() is None
    await world.later(0.2, "quiet", "well")
    assert await directory.worth_scanning() == Scan()
    assert await directory.unserved() == [Unserved("t4", "well")]
    await world.later(1.1, "quiet", "well")
    assert await directory.worth_scanning() == Scan()
    await world.leases.put("t4", b"heir")
    assert await directory.unserved() == []
    await world.later(1.1, "quiet", "well")
    assert await directory.worth_scanning() is None


async def test_a_drain_is_news_once_and_its_index_is_listed_while_it_lists_tables(
    registry: tuple[Registry, JetStreamDirectory],
) -> None:
    world, directory = registry
    await world.heartbeat("well", draining=True)
    await world.later(1.1, "quiet")
    await world.heartbeat("well", draining=True)
    assert await directory.worth_scanning() == Scan(frozenset({"well"}), soon=True)
    await world.leases.delete("t3")
    assert await directory.unserved(frozenset({"well"})) == [Unserved("t3", "well")]
    await world.later(ALERT - 0.5, "quiet")
    await world.heartbeat("well", draining=True)
    assert await directory.worth_scanning() == Scan(frozenset({"well"}), soon=True)
    assert await directory.unserved(frozenset({"well"})) == [Unserved("t3", "well")]
    await world.later(1.0, "quiet")
    await world.heartbeat("well", draining=True)
    assert await directory.worth_scanning() == Scan(frozenset({"well"}), soon=False)
    # Every table handed over, it stays drained: nothing more to list after one listing of
    # everything.
    await world.moved("well", "t3", "t4")
    assert await directory.unserved(frozenset({"well"})) == []
    await world.later(ALERT, "quiet")
    await world.heartbeat("well", draining=True)
    assert await directory.worth_scanning() == Scan()
    assert await directory.unserved() == []
    await world.later(1.1, "quiet")
    await world.heartbeat("well", draining=True)
    assert await directory.worth_scanning() is None
    # Resumed and draining again: news again.
    await world.later(1.1, "quiet", "well")
    assert await directory.worth_scanning() is None
    await world.heartbeat("well", draining=True)
    await world.later(1.1, "quiet")
    await world.heartbeat("well", draining=True)
    assert await directory.worth_scanning() == Scan(frozenset({"well"}), soon=True)


@pytest.mark.parametrize("nodes", [1, 2, 3, 5])
def test_the_claim_order_spreads_tables_evenly_and_a_node_leaving_moves_only_its_own(
    nodes: int,
) -> None:
    table_ids = [f"t{n:04}" for n in range(3000)]
    node_ids = [f"node-{n}" for n in range(nodes)]
    orders = {table_id: claim_order(table_id, node_ids) for table_id in table_ids}
    assert all(sorted(order) == node_ids for order in orders.values())
    # Every node computes the same order, whatever order it saw the nodes in.
    assert all(claim_order(t, reversed(node_ids)) == order for t, order in orders.items())
    firsts = Counter(order[0] for order in orders.values())
    even = len(table_ids) / nodes
    assert all(abs(firsts[node] - even) < 0.1 * even for node in node_ids)
    # Without one node, each table keeps its order among the others.
    gone = node_ids[-1]
    rest = node_ids[:-1]
    for table_id, order in orders.items():
        assert claim_order(table_id, rest) == [node for node in order if node != gone]
    assert claim_order("t1", []) == []
