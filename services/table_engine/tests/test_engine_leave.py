"""Leaving a table (LeaveTable), tables no player is left at (P-1, P-12: finished at once,
never voided), the INFO lines that say when a table starts and ends, and moves submitted
without an expected sequence."""

from __future__ import annotations

import logging

import grpc
import grpc.aio
import pytest
from engine_support import (
    create_table,
    elevator_config,
    fiftyone_config,
    get_view,
    metadata,
    results,
    running_node,
    seat,
    settings,
    table_stub,
    wait_until,
)
from masa.common.v1 import game_pb2
from masa.events.v1 import result_pb2
from masa.table.v1 import action_pb2, event_pb2, table_pb2, table_pb2_grpc, view_pb2
from masa_platform.testing import NatsServer, next_message


async def _leave(
    stub: table_pb2_grpc.TableServiceAsyncStub, table_id: str, player: str, request_id: str
) -> view_pb2.Table:
    response = await stub.LeaveTable(
        table_pb2.LeaveTableRequest(request_id=request_id, table_id=table_id),
        metadata=metadata(player),
    )
    return response.table


async def _kinds(server: NatsServer, table_id: str) -> list[str]:
    return [str(r.WhichOneof("result")) for r in await results(server, table_id)]


async def _game_finished(server: NatsServer, table_id: str) -> list[result_pb2.GameFinished]:
    return [
        r.game_finished
        for r in await results(server, table_id)
        if r.WhichOneof("result") == "game_finished"
    ]


async def test_P1_the_last_player_leaving_a_training_table_ends_it_finished(
    nats_server: NatsServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Decision: a training table its last player left is finished, not voided (P-12 amended):
    the bots ranked as the game stood, the player who left last; it moves no chips (P-1)."""
    caplog.set_level(logging.INFO, logger="masa_table_engine")
    async with (
        running_node(settings(nats_server, "leave-training")) as node,
        table_stub(node.address) as stub,
    ):
        table_id = await create_table(stub, elevator_config([seat(0, "ayse"), seat(1), seat(2)]))
        watch = stub.WatchTable(
            table_pb2.WatchTableRequest(table_id=table_id), metadata=metadata("ayse")
        )
        await watch.read()
        table = await _leave(stub, table_id, "ayse", "leave-1")
        assert table.state == view_pb2.Table.STATE_FINISHED
        events: list[event_pb2.TableEvent] = []
        while isinstance(message := await watch.read(), table_pb2.WatchTableResponse):
            events.extend(message.update.events)
        kinds = [e.WhichOneof("kind") for e in events]
        assert kinds[-3:] == ["seat_forfeited", "autopilot_changed", "game_finished"]
        assert "game_abandoned" not in kinds
        left = next(
            e.seat_connection_changed
            for e in events
            if e.HasField("seat_connection_changed") and e.seat_connection_changed.left
        )
        assert not left.connected and not left.HasField("protection_deadline")
        ranking = events[-1].game_finished.ranking
        assert [(s.seat, s.forfeited) for s in ranking][-1] == (0, True)
        assert {s.seat for s in ranking} == {0, 1, 2}
        # Leaving again, with a new request id, changes nothing and still succeeds.
        again = await _leave(stub, table_id, "ayse", "leave-2")
        assert again.state == view_pb2.Table.STATE_FINISHED and again.sequence == table.sequence
        view = (await get_view(stub, table_id, "ayse")).seat_view
        assert view.table.seats[0].left and view.table.seats[0].forfeited
        assert not view.table.HasField("turn_seat") and view.table.ranking == ranking

        # The stream ends with the entry; the result is published right after it.
        async def published() -> bool:
            return bool(await _game_finished(nats_server, table_id))

        await wait_until(published, what="GameFinished on the result subject")
        (result,) = await _game_finished(nats_server, table_id)
        assert result.table_id == table_id and result.mode == game_pb2.MODE_TRAINING
        assert "game_abandoned" not in await _kinds(nats_server, table_id)
    messages = [record.getMessage() for record in caplog.records]
    assert "table created" in messages
    ended = next(r for r in caplog.records if r.getMessage() == "table finished")
    # What the log line carries beyond the message (its extra fields) is the record's own.
    assert vars(ended)["every_player_left"] is True
    created = next(r for r in caplog.records if r.getMessage() == "table created")
    assert created.levelno == logging.INFO and vars(created)["table_id"] == table_id


def _singles(*players: str) -> game_pb2.TableConfig:
    """A table that is not training: leaving it follows P-12, as at a table with chips. (A
    stake needs the ledger to bind its holds, which these engine tests run without; the rule
    depends on the mode, not on the stake.)"""
    config = elevator_config([seat(n, player) for n, player in enumerate(players)] + [seat(2)])
    config.mode = game_pb2.MODE_SINGLES
    return config


async def test_P12_a_player_who_leaves_a_table_that_is_not_training_keeps_the_seat_a_while(
    nats_server: NatsServer,
) -> None:
    engine = settings(nats_server, "leave-singles", seat_protection_seconds=60.0)
    async with running_node(engine) as node, table_stub(node.address) as stub:
        table_id = await create_table(stub, _singles("ayse", "bora"))
        table = await _leave(stub, table_id, "ayse", "leave")
        assert table.state == view_pb2.Table.STATE_PLAYING
        ayse = (await get_view(stub, table_id, "ayse")).seat_view.table.seats[0]
        assert ayse.left and not ayse.forfeited and ayse.HasField("protection_deadline")
        # Coming back within the protection keeps the seat (P-12).
        watch = stub.WatchTable(
            table_pb2.WatchTableRequest(table_id=table_id), metadata=metadata("ayse")
        )
        back = (await next_message(watch, table_pb2.WatchTableResponse)).seat_view.table.seats[0]
        assert back.connected and not back.left and not back.forfeited
        watch.cancel()


async def test_P12_a_table_every_player_left_is_finished_when_the_protection_ends(
    nats_server: NatsServer,
) -> None:
    engine = settings(nats_server, "leave-all", seat_protection_seconds=0.5)
    async with running_node(engine) as node, table_stub(node.address) as stub:
        table_id = await create_table(stub, _singles("ayse", "bora"))
        await _leave(stub, table_id, "ayse", "leave")
        await _leave(stub, table_id, "bora", "leave")

        async def finished() -> bool:
            return bool(await _game_finished(nats_server, table_id))

        await wait_until(finished, what="GameFinished")
        (result,) = await _game_finished(nats_server, table_id)
        assert result.table_id == table_id and result.game_no == 1
        humans = [s for s in result.ranking if s.player_id]
        assert sorted(s.player_id for s in humans) == ["ayse", "bora"]
        assert all(s.forfeited for s in humans)
        # The bot that played on is ranked ahead of both players who left.
        assert all(s.place > 1 for s in humans)
        assert "game_abandoned" not in await _kinds(nats_server, table_id)
        table = (await get_view(stub, table_id, "ayse")).seat_view.table
        assert table.table.state == view_pb2.Table.STATE_FINISHED
        assert all(s.forfeited for s in table.seats if s.kind == game_pb2.SEAT_KIND_HUMAN)


async def test_leaving_needs_a_seat_at_the_table(nats_server: NatsServer) -> None:
    async with (
        running_node(settings(nats_server, "leave-stranger")) as node,
        table_stub(node.address) as stub,
    ):
        table_id = await create_table(stub, elevator_config([seat(0, "ayse"), seat(1), seat(2)]))
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await _leave(stub, table_id, "kibitzer", "leave")
        assert refused.value.code() is grpc.StatusCode.PERMISSION_DENIED
        with pytest.raises(grpc.aio.AioRpcError) as unknown:
            await _leave(stub, "no-such-table", "ayse", "leave")
        assert unknown.value.code() is grpc.StatusCode.NOT_FOUND


async def test_a_move_without_an_expected_sequence_is_judged_at_the_current_one(
    nats_server: NatsServer,
) -> None:
    """AIP-154: an unset expected_sequence asks for no check; the engine still judges the move."""
    async with (
        running_node(settings(nats_server, "no-sequence")) as node,
        table_stub(node.address) as stub,
    ):
        config = fiftyone_config("salon", [seat(0, "ayse"), seat(1, "bora"), seat(2), seat(3)])
        table_id = await create_table(stub, config)
        view = (await get_view(stub, table_id, "ayse")).seat_view
        draw = table_pb2.SubmitActionRequest(
            request_id="d1",
            table_id=table_id,
            action=action_pb2.Action(draw_from_stock=action_pb2.DrawFromStock()),
        )
        # Judged as usual: the starter's first turn has no draw (F-20).
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.SubmitAction(draw, metadata=metadata("ayse"))
        assert refused.value.code() is grpc.StatusCode.FAILED_PRECONDITION
        discard = table_pb2.SubmitActionRequest(request_id="d2", table_id=table_id)
        discard.action.discard.card.CopyFrom(view.hand[0])
        update = (await stub.SubmitAction(discard, metadata=metadata("ayse"))).update
        assert update.sequence == view.table.table.sequence + 1
        with pytest.raises(grpc.aio.AioRpcError) as stale:
            await stub.SubmitAction(
                table_pb2.SubmitActionRequest(
                    request_id="d3",
                    table_id=table_id,
                    expected_sequence=view.table.table.sequence,
                    action=action_pb2.Action(draw_from_stock=action_pb2.DrawFromStock()),
                ),
                metadata=metadata("bora"),
            )
        assert stale.value.code() is grpc.StatusCode.ABORTED
