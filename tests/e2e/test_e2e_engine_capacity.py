"""A table-engine node at MASA_MAX_TABLES, as matchmaking's engine adapter sees it.

The node refuses a new table with RESOURCE_EXHAUSTED and reason NODE_AT_CAPACITY before
anything is written; matchmaking's ``GrpcEngines`` reads that as ``EngineFull`` (place the
table on another node, or keep the players queued), and a retry of a table the node runs is
still answered with that table. A real node on a real nats-server, in-process."""

from __future__ import annotations

from pathlib import Path

import pytest
from masa_matchmaking.adapters.engines import GrpcEngines
from masa_matchmaking.app.ports import EngineFull
from masa_matchmaking.domain.catalog import parse_lobbies
from masa_platform.auth import ServiceTokens, TokenSigner
from masa_platform.bus_access import TABLE_ENGINE
from masa_platform.settings import AuthSettings, PlatformSettings, ServerSettings
from masa_platform.testing import NatsServer, auth_settings, keyring
from masa_platform.tls import open_channel
from masa_rules.table_config import SeatConfig, SeatKind
from masa_table_engine.bootstrap import start_node
from masa_table_engine.settings import EngineSettings
from prometheus_client import CollectorRegistry

LOBBY = """
[[lobby]]
id = "training"
name = "Training Elevator"
game = "elevator"
mode = "training"
seats = 3
"""


async def test_a_full_node_is_engine_full_to_matchmaking(tmp_path: Path) -> None:
    (lobby,) = parse_lobbies(LOBBY)
    bots = (SeatConfig(n, SeatKind.BOT, bot_level=lobby.bot_fill.level) for n in (1, 2))
    config = lobby.table_config((SeatConfig(0, SeatKind.HUMAN, "ayse", "Ayşe"), *bots))
    with NatsServer(tmp_path / "nats", secure=True) as nats:
        platform = PlatformSettings(
            auth=auth_settings("table-engine"),
            nats_url=nats.url,
            nats_user=TABLE_ENGINE,
            nats_password=nats.password(TABLE_ENGINE),
            server=ServerSettings(grace_seconds=0),
        )
        node = await start_node(
            EngineSettings(
                result_signing_key_file=keyring().results_key,
                log_mac_key_file=keyring().log_mac,
                platform=platform,
                node_id="full",
                max_tables=1,
            ),
            registry=CollectorRegistry(),
        )
        engines = GrpcEngines(
            ServiceTokens(TokenSigner(keyring().signer("matchmaking"), AuthSettings())),
            lambda address: open_channel(address, None),
            timeout_seconds=10,
        )
        try:
            assert await engines.create_table(node.address, "cap-t1", "cap-t1", config)
            with pytest.raises(EngineFull):
                await engines.create_table(node.address, "cap-t2", "cap-t2", config)
            # A retry of the table the node runs is answered, full or not.
            assert await engines.create_table(node.address, "cap-t1", "cap-t1", config)
        finally:
            await engines.close()
            await node.stop()
