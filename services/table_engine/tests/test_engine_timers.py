"""Timers at short settings: turn timeouts (P-10), autopilot after three (P-11) and taking
control back, seat protection and forfeit (P-12)."""

from __future__ import annotations

from engine_support import (
    create_table,
    elevator_config,
    game_finished,
    metadata,
    running_node,
    seat,
    settings,
    table_stub,
    wait_until,
)
from masa.table.v1 import event_pb2, table_pb2
from masa_platform.testing import NatsServer, next_message


def _events(messages: list[table_pb2.WatchTableResponse]) -> list[event_pb2.TableEvent]:
    return [e for m in messages if m.WhichOneof("payload") == "update" for e in m.update.events]


async def test_three_timeouts_hand_the_seat_to_the_autopilot_until_the_player_resumes(
    nats_server: NatsServer,
) -> None:
    async with (
        running_node(settings(nats_server, "timers", autopilot_after_timeouts=3)) as node,
        table_stub(node.address) as stub,
    ):
        table_id = await create_table(
            stub, elevator_config([seat(0, "ayse"), seat(1), seat(2)], turn_seconds=0.15)
        )
        received: list[table_pb2.WatchTableResponse] = []
        watch = stub.WatchTable(
            table_pb2.WatchTableRequest(table_id=table_id), metadata=metadata("ayse")
        )
        resumed = False
        async for message in watch:
            received.append(message)
            events = _events([message])
            if any(e.WhichOneof("kind") == "game_finished" for e in events):
                break
            took_over = any(
                e.WhichOneof("kind") == "autopilot_changed" and e.autopilot_changed.on
                for e in events
            )
            if took_over and not resumed:
                response = await stub.ResumeControl(
                    table_pb2.ResumeControlRequest(request_id="resume", table_id=table_id),
                    metadata=metadata("ayse"),
                )
                # P-11: control is back and the count of timeouts starts again.
                own = response.seat_view.table.seats[0]
                assert not own.autopilot and own.consecutive_timeouts == 0
                resumed = True
        events = _events(received)
        timeouts = [e.turn_timed_out for e in events if e.WhichOneof("kind") == "turn_timed_out"]
        assert [t.consecutive_timeouts for t in timeouts[:3]] == [1, 2, 3]
        assert all(t.seat == 0 for t in timeouts)
        changes = [
            e.autopilot_changed for e in events if e.WhichOneof("kind") == "autopilot_changed"
        ]
        assert (changes[0].on, changes[0].reason) == (True, event_pb2.AUTOPILOT_REASON_TIMEOUTS)
        assert (changes[1].on, changes[1].reason) == (False, event_pb2.AUTOPILOT_REASON_RESUME)
        assert resumed
        # Every later timeout counts from one again, up to the next hand-over at three (P-11).
        assert all(t.consecutive_timeouts <= 3 for t in timeouts[3:])
        assert await game_finished(nats_server, table_id) is not None


async def test_a_seat_that_stays_away_forfeits_is_ranked_last_and_a_bot_finishes_for_it(
    nats_server: NatsServer,
) -> None:
    """P-12: bora never shows up and forfeits; ayse stays, so a bot plays bora's seat on."""
    node_settings = settings(nats_server, "protection", seat_protection_seconds=1.0)
    async with running_node(node_settings) as node, table_stub(node.address) as stub:
        table_id = await create_table(
            stub, elevator_config([seat(0, "ayse"), seat(1, "bora"), seat(2)], turn_seconds=0.3)
        )
        # ayse stays connected (her turns time out into the autopilot) for the whole game.
        watch = stub.WatchTable(
            table_pb2.WatchTableRequest(table_id=table_id), metadata=metadata("ayse")
        )
        await watch.read()

        async def finished() -> bool:
            return await game_finished(nats_server, table_id) is not None

        await wait_until(finished, what="the game to finish")
        watch.cancel()
        result = await game_finished(nats_server, table_id)
        assert result is not None
        last = result.ranking[-1]
        assert (last.seat, last.player_id, last.forfeited) == (1, "bora", True)
        assert last.place == 3
        assert not any(s.forfeited for s in result.ranking[:-1])


async def test_a_dropped_player_who_comes_back_in_time_keeps_the_seat(
    nats_server: NatsServer,
) -> None:
    node_settings = settings(nats_server, "reconnect", seat_protection_seconds=30)
    async with running_node(node_settings) as node, table_stub(node.address) as stub:
        table_id = await create_table(
            stub, elevator_config([seat(0, "ayse"), seat(1, "bora"), seat(2, "cem")])
        )
        spectator = stub.WatchTable(
            table_pb2.WatchTableRequest(table_id=table_id), metadata=metadata("kibitzer")
        )
        first = await next_message(spectator, table_pb2.WatchTableResponse)
        assert first.WhichOneof("payload") == "spectator_view"
        watch = stub.WatchTable(
            table_pb2.WatchTableRequest(table_id=table_id), metadata=metadata("ayse")
        )
        snapshot = await next_message(watch, table_pb2.WatchTableResponse)
        assert snapshot.seat_view.table.seats[0].connected
        watch.cancel()
        changes: list[event_pb2.SeatConnectionChanged] = []
        while len(changes) < 2:
            message = await next_message(spectator, table_pb2.WatchTableResponse)
            changes += [
                e.seat_connection_changed
                for e in message.update.events
                if e.WhichOneof("kind") == "seat_connection_changed"
            ]
        assert [(c.seat, c.connected) for c in changes] == [(0, True), (0, False)]
        assert changes[1].HasField("protection_deadline")
        again = stub.WatchTable(
            table_pb2.WatchTableRequest(table_id=table_id), metadata=metadata("ayse")
        )
        view = (await next_message(again, table_pb2.WatchTableResponse)).seat_view
        assert view.table.seats[0].connected and not view.table.seats[0].forfeited
        again.cancel()
        spectator.cancel()
