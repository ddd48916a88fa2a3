"""A game is a plugin (issue 21): nim, defined only in ``nim.py`` beside this test, is
registered with each layer's registry and played to the end through the real table engine and
the real bot service, over a real nats-server, without a line of either service changed.

The engine and the bot load it as a deployment would, by its module name in their settings
(``MASA_GAME_PLUGINS``). ayse plays seat 0 over gRPC as an outside client would, her moves packed in the ``other_game``
arm of ``Action``; the bot service decides seats 1 and 2 from their seat views (P-20); the
engine judges every move by nim's rules, logs it, and publishes the game's result (P-30).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import grpc
import grpc.aio
import nim
import pytest
from masa.common.v1 import game_pb2
from masa.events.v1 import result_pb2
from masa.matchmaking.v1 import matchmaking_pb2 as mm
from masa.matchmaking.v1 import matchmaking_pb2_grpc
from masa.table.v1 import action_pb2, table_pb2, table_pb2_grpc
from masa_bot.bootstrap import bootstrap as start_bot
from masa_bot.settings import BotSettings
from masa_client.render import Style, board
from masa_matchmaking.bootstrap import start_matchmaking
from masa_matchmaking.settings import MatchmakingSettings
from masa_platform.bus import connect
from masa_platform.bus_access import ADMIN, MATCHMAKING, TABLE_ENGINE
from masa_platform.errors import rpc_error_info
from masa_platform.plugins import load_game_plugins
from masa_platform.settings import PlatformSettings
from masa_platform.testing import NatsServer, keyring, service_settings, token
from masa_rules.table_config import hosted_games
from masa_table_engine.adapters.jetstream import STREAM, result_subject
from masa_table_engine.bootstrap import start_node
from masa_table_engine.settings import EngineSettings
from masa_wire.table_config import config_from_proto
from prometheus_client import CollectorRegistry

PLAYER = "ayse"


def _platform(nats: NatsServer, service: str, user: str = "") -> PlatformSettings:
    # As a deployment names the plugin in MASA_GAME_PLUGINS.
    return service_settings(nats, service, user, game_plugins=("nim",))


def _auth(subject: str, *roles: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token(subject, *roles)}"),)


@asynccontextmanager
async def engine_and_bot(
    directory: Path,
) -> AsyncIterator[tuple[NatsServer, str, CollectorRegistry]]:
    """The engine and the bot service on port 0 over a real nats-server; the engine's address
    and the bot's metrics."""
    with NatsServer(directory / "nats", secure=True) as nats:
        async with AsyncExitStack() as stack:
            bot_metrics = CollectorRegistry()
            bot = start_bot(BotSettings(platform=_platform(nats, "bot")), bot_metrics)
            await bot.start()
            stack.push_async_callback(bot.stop, 0)
            node = await start_node(
                EngineSettings(
                    platform=_platform(nats, "table-engine", TABLE_ENGINE),
                    node_id="plugin",
                    bot_address=bot.address,
                    result_signing_key_file=keyring().results_key,
                    log_mac_key_file=keyring().log_mac,
                ),
                registry=CollectorRegistry(),
            )
            stack.push_async_callback(node.stop, 0.2)
            yield nats, node.server.address, bot_metrics


def nim_config() -> game_pb2.TableConfig:
    """ayse and two bots, named by the plugin's game name (no GameKind value is nim's)."""
    return game_pb2.TableConfig(
        game_name=nim.NAME,
        mode=game_pb2.MODE_TRAINING,
        seats=[
            game_pb2.SeatAssignment(
                seat=0, kind=game_pb2.SEAT_KIND_HUMAN, player_id=PLAYER, display_name=PLAYER
            ),
            *(game_pb2.SeatAssignment(seat=n, kind=game_pb2.SEAT_KIND_BOT) for n in (1, 2)),
        ],
    )


async def _result(nats: NatsServer, table_id: str) -> result_pb2.TableResult:
    """The table's result on the bus, as the ledger would consume it."""
    client = await connect(nats.url, name="plugin-test", user=ADMIN, password=nats.password(ADMIN))
    try:
        raw = await client.jetstream().get_last_msg(STREAM, result_subject(table_id))
        return result_pb2.TableResult.FromString(raw.data or b"")
    finally:
        await client.close()


def test_a_plugin_is_loaded_once_per_process_by_its_module_name() -> None:
    load_game_plugins(["nim"])
    load_game_plugins(["nim"])  # the engine and the bot of one process both load it
    assert nim.NAME in hosted_games()


def test_a_plugins_configuration_round_trips_the_wire_by_its_name() -> None:
    load_game_plugins(["nim"])
    config = config_from_proto(nim_config(), 20.0)
    assert config.game == nim.NAME
    assert config_from_proto(nim_config(), 20.0) == config


async def test_P2_a_toy_game_registered_as_a_plugin_is_played_to_the_end_by_a_player_and_bots(
    tmp_path: Path,
) -> None:
    async with (
        engine_and_bot(tmp_path) as (nats, address, bot_metrics),
        grpc.aio.insecure_channel(address) as channel,
    ):
        tables = table_pb2_grpc.TableServiceStub(channel)
        created = await tables.CreateTable(
            table_pb2.CreateTableRequest(request_id="nim-1", config=nim_config()),
            metadata=_auth("matchmaking", "matchmaking"),
        )
        table_id = created.table.table_id
        assert created.table.config.game_name == nim.NAME
        mine = _auth(PLAYER)
        moves = 0
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            seat_view = (
                await tables.GetTable(table_pb2.GetTableRequest(table_id=table_id), metadata=mine)
            ).seat_view
            if seat_view.table.ranking:
                break
            if seat_view.table.HasField("turn_seat") and seat_view.table.turn_seat == 0:
                pile = nim.unpacked(seat_view.table.other_game, "NimTable").pile
                if moves == 0:
                    # A move the rules forbid is refused by the game's own rule id, and changes
                    # nothing.
                    with pytest.raises(grpc.aio.AioRpcError) as refused:
                        await tables.SubmitAction(
                            table_pb2.SubmitActionRequest(
                                request_id="too-many",
                                table_id=table_id,
                                expected_sequence=seat_view.table.table.sequence,
                                action=action_pb2.Action(
                                    other_game=nim.packed("Take", count=nim.MAX_TAKE + 1)
                                ),
                            ),
                            metadata=mine,
                        )
                    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
                    info = rpc_error_info(refused.value)
                    assert info is not None and info.reason == "NIM-2"
                await tables.SubmitAction(
                    table_pb2.SubmitActionRequest(
                        request_id=f"take-{moves}",
                        table_id=table_id,
                        expected_sequence=seat_view.table.table.sequence,
                        action=action_pb2.Action(other_game=nim.packed("Take", count=min(1, pile))),
                    ),
                    metadata=mine,
                )
                moves += 1
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the nim game did not end in 30 s")

        # The client draws the plugin's board by its registered drawing.
        drawn = board(seat_view, Style(colour=False))
        assert drawn.startswith("Nim · table ") and "pile: 0 stones" in drawn
        ranking = {standing.seat: standing.place for standing in seat_view.table.ranking}
        assert sorted(ranking) == [0, 1, 2] and sorted(ranking.values())[0] == 1
        assert moves >= 1
        # The bots' moves came from the bot service, which decided nim's seats by the
        # plugin's decider.
        decided = bot_metrics.get_sample_value(
            "masa_bot_decisions_total", {"game": nim.NAME, "level": "normal"}
        )
        assert decided is not None and decided >= 2
        result = await _result(nats, table_id)
        assert result.WhichOneof("result") == "game_finished"
        assert {s.seat: s.place for s in result.game_finished.ranking} == ranking


_NIM_LOBBY = """
[[lobby]]
id = "training-nim"
name = "Training nim against bots"
game = "nim"
mode = "training"
seats = 3
"""


async def test_P2_a_plugins_lobby_seats_a_player_at_a_nim_table_through_matchmaking(
    tmp_path: Path,
) -> None:
    """Matchmaking loads a lobby of the plugin's game (MASA_GAME_PLUGINS), lists it under its
    name, and places its table on a node that hosts nim (the node's record names it)."""
    lobbies = tmp_path / "lobbies.toml"
    lobbies.write_text(_NIM_LOBBY)
    async with engine_and_bot(tmp_path) as (nats, address, _):
        matchmaking = await start_matchmaking(
            MatchmakingSettings(
                platform=_platform(nats, "matchmaking", MATCHMAKING),
                instance_id="plugin",
                lobbies_file=lobbies,
                result_keys_file=keyring().results_jwks,
            ),
            CollectorRegistry(),
        )
        try:
            async with grpc.aio.insecure_channel(matchmaking.address) as channel:
                stub = matchmaking_pb2_grpc.MatchmakingServiceStub(channel)
                mine = _auth(PLAYER)
                listed = await stub.ListLobbies(
                    mm.ListLobbiesRequest(filter="game = nim"), metadata=mine
                )
                assert [(lobby.lobby_id, lobby.game_name) for lobby in listed.lobbies] == [
                    ("training-nim", nim.NAME)
                ]
                ticket = (
                    await stub.CreateTicket(
                        mm.CreateTicketRequest(request_id="nim-ticket", lobby_id="training-nim"),
                        metadata=mine,
                    )
                ).ticket
                deadline = time.monotonic() + 30
                while ticket.state != mm.Ticket.STATE_MATCHED:
                    assert time.monotonic() < deadline, f"the ticket stayed {ticket.state}"
                    assert ticket.state in (mm.Ticket.STATE_SEARCHING, mm.Ticket.STATE_PLACING)
                    await asyncio.sleep(0.1)
                    ticket = (
                        await stub.GetTicket(
                            mm.GetTicketRequest(ticket_id=ticket.ticket_id), metadata=mine
                        )
                    ).ticket
            assert ticket.table_address == address
            async with grpc.aio.insecure_channel(address) as channel:
                tables = table_pb2_grpc.TableServiceStub(channel)
                seat_view = (
                    await tables.GetTable(
                        table_pb2.GetTableRequest(table_id=ticket.table_id), metadata=mine
                    )
                ).seat_view
            config = seat_view.table.table.config
            assert (config.game_name, config.lobby_id, seat_view.seat) == (
                nim.NAME,
                "training-nim",
                ticket.seat,
            )
            assert nim.unpacked(seat_view.table.other_game, "NimTable").pile > 0
        finally:
            await matchmaking.stop(0)


async def test_a_game_no_node_hosts_is_refused_by_name(tmp_path: Path) -> None:
    async with (
        engine_and_bot(tmp_path) as (_, address, _),
        grpc.aio.insecure_channel(address) as channel,
    ):
        tables = table_pb2_grpc.TableServiceStub(channel)
        config = nim_config()
        config.game_name = "chess"
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await tables.CreateTable(
                table_pb2.CreateTableRequest(request_id="chess-1", config=config),
                metadata=_auth("matchmaking", "matchmaking"),
            )
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        info = rpc_error_info(refused.value)
        assert info is not None and info.reason == "P-2"
