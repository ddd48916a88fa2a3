"""A node's start and stop go through one lifecycle (masa_platform.lifecycle): a start that
fails part way stops what had started, in the stop's order, so a node that could not start
leaves no connection, port or task behind."""

from __future__ import annotations

import dataclasses

import pytest
from engine_support import settings
from masa_platform.metrics import LoopMetrics
from masa_platform.testing import NatsServer
from masa_table_engine.app.tables import Tables
from masa_table_engine.bootstrap import (
    Advertiser,
    Stores,
    jetstream_stores,
    start_node,
)
from masa_table_engine.settings import EngineSettings
from prometheus_client import CollectorRegistry


async def test_a_start_that_fails_after_the_stores_opened_closes_them(
    nats_server: NatsServer,
) -> None:
    closed: list[str] = []

    async def failing_stores(engine: EngineSettings, address: str, loops: LoopMetrics) -> Stores:
        stores = await jetstream_stores(engine, address, loops)
        real_close = stores.close

        async def close() -> None:
            closed.append("stores")
            await real_close()

        def registry(tables: Tables) -> Advertiser:
            raise RuntimeError("the node registry is broken")

        return dataclasses.replace(stores, close=close, registry=registry)

    with pytest.raises(RuntimeError, match="node registry is broken"):
        await start_node(
            settings(nats_server, node_id="broken"),
            registry=CollectorRegistry(),
            stores=failing_stores,
        )
    assert closed == ["stores"]
