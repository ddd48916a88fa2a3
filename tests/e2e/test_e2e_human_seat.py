"""A human seat driven through the SDK against the real stack (nats-server, bot, table-engine
started by the launcher): the player watches, decides from its own view and submits until the
game is over; an illegal move is refused with its rule id and changes nothing."""

from __future__ import annotations

import asyncio

import pytest
from masa.table.v1 import action_pb2, event_pb2
from masa_client.cli import table_config
from masa_client.client import TableClient
from masa_client.errors import MasaCallError
from masa_platform.testing import token
from masa_rules.elevator import legal_actions
from masa_rules.elevator.policies import greedy_policy
from masa_rules.shuffle import DrawStream
from masa_wire import elevator as wire

GAME_SECONDS = 60.0


async def test_a_human_seat_plays_a_whole_elevator_game_through_the_sdk(
    stack: dict[str, str],
) -> None:
    address = stack["table-engine"]
    service = TableClient(address, token("matchmaking", "matchmaking"))
    config = table_config("elevator", "salon", "alice", players=4, level="normal", turn_seconds=30)
    async with service:
        table = await service.create_table(config)
    assert table.owner_address
    async with TableClient(table.owner_address, token("alice")) as alice:
        finished = await asyncio.wait_for(_play_out(alice, table.table_id), GAME_SECONDS)
    assert finished.WhichOneof("kind") == "game_finished"
    assert sorted(standing.seat for standing in finished.game_finished.ranking) == [0, 1, 2, 3]


async def _play_out(client: TableClient, table_id: str) -> event_pb2.TableEvent:
    rng = DrawStream(b"e2e")
    refused_once = False
    async for message in client.watch(table_id):
        if message.WhichOneof("payload") == "update":
            for event in message.update.events:
                if event.WhichOneof("kind") == "game_finished":
                    return event
        view = (await client.get_table(table_id)).seat_view
        state = wire.state_from_seat_view(view)
        actions = legal_actions(state, view.seat)
        if not actions:
            continue
        sequence = view.table.table.sequence
        if not refused_once:
            await _an_illegal_move_is_refused(client, table_id, sequence)
            refused_once = True
        action = greedy_policy(state, view.seat, rng)
        try:
            await client.submit_action(table_id, wire.action_to_proto(action), sequence)
        except MasaCallError as error:
            # A turn timer may beat us to it; anything else is a real failure.
            if error.reason not in ("SEQUENCE_MISMATCH", "E-3"):
                raise
    raise AssertionError("the watch ended without GameFinished")


async def _an_illegal_move_is_refused(client: TableClient, table_id: str, sequence: int) -> None:
    garbage = action_pb2.Action(draw_from_stock=action_pb2.DrawFromStock())
    with pytest.raises(MasaCallError) as caught:
        await client.submit_action(table_id, garbage, sequence)
    assert caught.value.reason
    after = await client.get_table(table_id)
    assert after.seat_view.table.table.sequence == sequence
