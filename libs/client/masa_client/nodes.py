"""The live table-engine nodes, as the engine-node registry and the table leases tell them.

Each node keeps an ``EngineNode`` record in KV bucket ``masa_engine_nodes`` (its address,
tables, capacity, whether it drains), rewritten every few seconds and expiring when the node
dies. Which tables a node serves is in the table leases (``masa_table_leases``: key the table
id, value the node id), which expire the same way. ``masa nodes`` prints the first, ``masa
admin nodes`` both.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Final

import nats.js.errors
from masa.events.v1 import engine_pb2
from masa_platform.bus import KvBucket
from masa_platform.bus_access import ENGINE_NODES_BUCKET
from nats.aio.client import Client

__all__ = ["LEASE_BUCKET", "EngineNodeInfo", "print_nodes", "read_nodes", "table_owners"]

LEASE_BUCKET: Final = "masa_table_leases"
_TIMEOUT_SECONDS: Final = 5.0


@dataclass(frozen=True, slots=True)
class EngineNodeInfo:
    node_id: str
    address: str
    tables: int
    capacity: int
    draining: bool
    version: str
    # When the node last rewrote its record (epoch seconds).
    heard_at: float
    # The tables whose lease the node holds, sorted; empty unless asked for.
    table_ids: tuple[str, ...] = ()


async def _bucket(nc: Client, name: str) -> KvBucket | None:
    """The bucket, or None when the bus was never provisioned (nothing ran yet)."""
    try:
        return await KvBucket.open(nc, name)
    except nats.js.errors.BucketNotFoundError:
        return None


async def table_owners(nc: Client) -> dict[str, str]:
    """Table id -> the node id holding its lease, for every live lease."""
    bucket = await _bucket(nc, LEASE_BUCKET)
    if bucket is None:
        return {}
    return {
        entry.key: entry.value.decode() for entry in await bucket.entries(timeout=_TIMEOUT_SECONDS)
    }


async def read_nodes(nc: Client, *, with_tables: bool = False) -> list[EngineNodeInfo]:
    """The live nodes by node id; with ``with_tables``, each one's leased tables."""
    bucket = await _bucket(nc, ENGINE_NODES_BUCKET)
    if bucket is None:
        return []
    owners = await table_owners(nc) if with_tables else {}
    nodes: list[EngineNodeInfo] = []
    for entry in await bucket.entries(timeout=_TIMEOUT_SECONDS):
        record = engine_pb2.EngineNode.FromString(entry.value)
        node_id = record.node_id or entry.key
        nodes.append(
            EngineNodeInfo(
                node_id=node_id,
                address=record.address,
                tables=record.tables,
                capacity=record.capacity,
                draining=record.draining,
                version=record.version,
                heard_at=record.update_time.ToNanoseconds() / 1e9,
                table_ids=tuple(sorted(t for t, owner in owners.items() if owner == node_id)),
            )
        )
    return sorted(nodes, key=lambda node: node.node_id)


def print_nodes(
    nodes: Sequence[EngineNodeInfo],
    out: IO[str],
    *,
    orphans: Sequence[tuple[str, str]] = (),
    with_tables: bool = False,
    now: float | None = None,
) -> None:
    """One line per node; with ``with_tables`` its tables under it, and the tables leased by a
    node that is no longer in the registry (``orphans``: table id, node id)."""
    if not nodes:
        print(
            "no live table-engine node: none has advertised itself in the last few seconds "
            "(is the stack running? `make run` starts two)",
            file=out,
        )
    at = time.time() if now is None else now
    header = f"{'NODE':<20} {'ADDRESS':<22} {'TABLES':>6} {'CAPACITY':>8}  {'HEARD':>6}  STATE"
    if nodes:
        print(header, file=out)
    for node in nodes:
        heard = f"{max(0.0, at - node.heard_at):.1f}s"
        state = "draining" if node.draining else "serving"
        print(
            f"{node.node_id:<20} {node.address:<22} {node.tables:>6} {node.capacity:>8}  "
            f"{heard:>6}  {state}",
            file=out,
        )
        if with_tables:
            for table_id in node.table_ids:
                print(f"  table {table_id}", file=out)
    if with_tables and orphans:
        print(
            "tables whose node is gone (a live node takes each over when its lease expires):",
            file=out,
        )
        for table_id, node_id in orphans:
            print(f"  table {table_id}  (lease of {node_id})", file=out)
