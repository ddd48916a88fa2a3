"""The engine-node registry: a running node advertises itself in KV bucket masa_engine_nodes
(address, games, version, live tables, capacity, load), keyed by its node id; a stopping node
leaves, and a dead node's record expires with the bucket's TTL."""

from __future__ import annotations

from engine_support import (
    create_table,
    elevator_config,
    node_record,
    provision_ttls,
    running_node,
    seat,
    settings,
    table_stub,
    wait_until,
)
from masa.common.v1 import game_pb2
from masa_platform.bus import KvBucket, connect
from masa_platform.bus_access import TABLE_ENGINE
from masa_platform.metrics import LoopMetrics
from masa_platform.testing import NatsServer
from masa_table_engine.adapters.registry import NodeRegistry
from prometheus_client import CollectorRegistry


async def test_a_node_advertises_its_tables_and_leaves_when_it_stops(
    nats_server: NatsServer,
) -> None:
    node_settings = settings(nats_server, "registry-a", node_ttl_seconds=1.5, max_tables=10)
    async with running_node(node_settings) as node:
        record = await node_record(nats_server, "registry-a")
        assert record is not None
        assert (record.address, record.capacity, record.tables) == (node.address, 10, 0)
        assert set(record.games) == {game_pb2.GAME_KIND_FIFTYONE, game_pb2.GAME_KIND_ELEVATOR}
        assert not record.draining
        async with table_stub(node.address) as stub:
            await create_table(stub, elevator_config([seat(0, "ann"), seat(1), seat(2)]))

        async def counted() -> bool:
            current = await node_record(nats_server, "registry-a")
            return current is not None and current.tables == 1 and current.load == 0.1

        # Rewritten every third of the TTL, the record follows the node's tables.
        await wait_until(counted, what="the registry to count the table")
    assert await node_record(nats_server, "registry-a") is None


async def test_a_dead_nodes_record_expires(nats_server: NatsServer) -> None:
    """A node that stops rewriting its record (it died) drops out of the registry."""
    provision_ttls(nats_server, node_seconds=1.5)
    nc = await connect(
        nats_server.url,
        name="registry-dead",
        user=TABLE_ENGINE,
        password=nats_server.password(TABLE_ENGINE),
    )
    try:
        registry = NodeRegistry(
            await KvBucket.open(nc, "masa_engine_nodes"),
            node_id="registry-dead",
            address="127.0.0.1:1",
            version="test",
            capacity=10,
            tables=list,
            ttl_seconds=1.5,
            loops=LoopMetrics(CollectorRegistry()),
        )
        await registry.advertise()
        assert await node_record(nats_server, "registry-dead") is not None

        async def gone() -> bool:
            return await node_record(nats_server, "registry-dead") is None

        await wait_until(gone, timeout=15, what="the record to expire")
    finally:
        await nc.close()
