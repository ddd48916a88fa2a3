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
from masa_table_engine.app.rendezvous import claim_order
from nats.aio.client import Client

NODE_TTL = 6.0
# The lease TTL of the bus plan (6 s) and the directory's margin after it (5 s).
ALERT = 11.0
# How often one node lists every table for the cluster.
PERIOD = 30.0


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
        """The directory of node "me", not in the registry yet (so never the cluster's
        lister: :meth:`directory` makes others)."""
        self.engine = engine
        self.nodes = await KvBucket.open(self.admin, ENGINE_NODES_BUCKET)
        self.leases = await KvBucket.open(self.admin, LEASE_BUCKET)
        self.index = await KvBucket.open(self.admin, INDEX_BUCKET)
        for node, table_id in (("quiet", "t1"), ("quiet", "t2"), ("well", "t3"), ("well", "t4")):
            await self.index.put(f"{node}.{table_id}", b"")
            await self.leases.put(table_id, node.encode())
        await self.heartbeat("quiet")
        await self.heartbeat("well")
        directory = await self.directory("me")
        # A node that starts has not seen who was there before: it lists everything.
        assert await directory.worth_scanning() == Scan()
        assert await directory.unserved() == []
        self.listed = self.monotonic
        await self.later(ALERT + 1, "quiet", "well")
        assert await directory.worth_scanning() is None
        return directory

    async def directory(self, node: str) -> JetStreamDirectory:
        """The directory of ``node``, reading as the table engine's NATS user."""
        return JetStreamDirectory(
            await KvBucket.open(self.engine, INDEX_BUCKET),
            await KvBucket.open(self.engine, LEASE_BUCKET),
            await KvBucket.open(self.engine, ENGINE_NODES_BUCKET),
            node=node,
            node_ttl_seconds=NODE_TTL,
            monotonic=lambda: self.monotonic,
            wall=lambda: self.wall,
        )

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


async def test_one_live_node_a_period_lists_everything_and_takes_what_it_finds(
    registry: tuple[Registry, JetStreamDirectory],
) -> None:
    world, me = registry
    directories = {"me": me, "quiet": await world.directory("quiet")}
    directories["well"] = await world.directory("well")
    nodes = sorted(directories)
    first = claim_order(f"listing/{int(world.wall // PERIOD)}", ["quiet", "well"])[0]
    for node in ("quiet", "well"):
        # Each starts with a listing of everything; the period's lister lists for the cluster.
        assert await directories[node].worth_scanning() == Scan(claim_all=node == first)
        assert await directories[node].unserved() == []

    async def next_period() -> dict[str, Scan | None]:
        await world.later(PERIOD - world.wall % PERIOD + 0.1, *nodes)
        return {node: await d.worth_scanning() for node, d in directories.items()}

    listed: Counter[str] = Counter()
    for period in range(24):
        scans = await next_period()
        lister = claim_order(f"listing/{int(world.wall // PERIOD)}", nodes)[0]
        # The cluster's listing, by one node; the others list nothing, and nor does the
        # lister again within the period once a listing is made.
        assert scans == {node: Scan(claim_all=True) if node == lister else None for node in nodes}
        if period == 0:
            # A listing that failed (it never answered) is made at the next scan.
            await world.later(1.1, *nodes)
            assert {node: await d.worth_scanning() for node, d in directories.items()} == scans
        assert await directories[lister].unserved() == []
        listed[lister] += 1
        await world.later(1.1, *nodes)
        assert [await d.worth_scanning() for d in directories.values()] == [None] * 3
    assert sorted(listed) == nodes
    # A lease given up with every node well: the period's lister finds it, takes it at once,
    # and lists again while it finds some.
    await world.leases.delete("t4")
    scans = await next_period()
    (lister,) = (node for node, scan in scans.items() if scan is not None)
    assert await directories[lister].unserved() == [Unserved("t4", "well")]
    await world.later(1.1, *nodes)
    assert {node: await d.worth_scanning() for node, d in directories.items()} == {
        node: Scan(claim_all=True) if node == lister else None for node in nodes
    }
    await world.leases.put("t4", b"heir")
    assert await directories[lister].unserved() == []
    await world.later(1.1, *nodes)
    assert [await d.worth_scanning() for d in directories.values()] == [None] * 3
    # With a node in trouble, the tables found are shared out by rank, the cluster's listing
    # included; a silent node is not live, so not the period's lister.
    await world.later(PERIOD - world.wall % PERIOD - 4.5, *nodes)
    await world.later(5.0, "me", "well")
    lister = claim_order(f"listing/{int(world.wall // PERIOD)}", ["me", "well"])[0]
    other = "well" if lister == "me" else "me"
    assert await directories[lister].worth_scanning() == Scan(soon=True)
    assert await directories[other].worth_scanning() == Scan(frozenset({"quiet"}), soon=True)


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
