"""The table engine over real gRPC and a real nats-server: whole games, a human seat, hidden
information, auth and bad input (P-10, P-20, architecture.md)."""

from __future__ import annotations

from typing import Any

import grpc
import grpc.aio
import pytest
from engine_support import (
    ADMIN_TOKEN,
    SERVICE,
    create_table,
    elevator_config,
    game_finished,
    get_view,
    log_entries,
    metadata,
    results,
    running_node,
    seat,
    settings,
    table_stub,
    wait_until,
)
from grpc_status import rpc_status
from masa.table.v1 import action_pb2, event_pb2, table_pb2
from masa_platform.errors import error_info
from masa_platform.testing import NatsServer, next_message
from masa_rules.elevator import legal_actions
from masa_wire.elevator import action_to_proto, state_from_seat_view


async def _status(call: grpc.aio.Call) -> tuple[grpc.StatusCode, str]:
    status = await rpc_status.aio.from_call(call)
    info = error_info(status)
    return await call.code(), info.reason if info is not None else ""


async def test_a_bot_only_elevator_game_finishes_with_game_finished_in_jetstream(
    nats_server: NatsServer,
) -> None:
    async with (
        running_node(settings(nats_server, "bots")) as node,
        table_stub(node.address) as stub,
    ):
        table_id = await create_table(stub, elevator_config([seat(s) for s in range(4)]))
        await wait_until(lambda: _finished(nats_server, table_id), what="GameFinished in JetStream")
        finished = await game_finished(nats_server, table_id)
        assert finished is not None
        assert finished.table_id == table_id and finished.game_no == 1
        assert sorted(s.seat for s in finished.ranking) == [0, 1, 2, 3]
        assert finished.ranking[0].place == 1
        kinds = [r.WhichOneof("result") for r in await results(nats_server, table_id)]
        assert kinds == ["hand_finished", "game_finished"]
        entries = await log_entries(nats_server, table_id)
        assert [e.sequence for e in entries] == list(range(1, len(entries) + 1))
        assert entries[0].WhichOneof("input") == "table_created"
        assert len(entries[0].table_created.seed) == 32


async def _finished(server: NatsServer, table_id: str) -> bool:
    return await game_finished(server, table_id) is not None


async def test_a_human_seat_plays_a_whole_game_through_grpc_and_never_sees_other_hands(
    nats_server: NatsServer,
) -> None:
    """A human and a spectator watch; every message each receives is checked for leaks (P-20)."""
    async with (
        running_node(settings(nats_server, "human")) as node,
        table_stub(node.address) as stub,
    ):
        config = elevator_config([seat(0, "ayse"), seat(1), seat(2)])
        table_id = await create_table(stub, config)
        received: dict[str, list[table_pb2.WatchTableResponse]] = {"ayse": [], "spectator": []}
        watch = stub.WatchTable(
            table_pb2.WatchTableRequest(table_id=table_id), metadata=metadata("ayse")
        )
        spectator = stub.WatchTable(
            table_pb2.WatchTableRequest(table_id=table_id), metadata=metadata("kibitzer")
        )
        moves = 0
        async for message in watch:
            received["ayse"].append(message)
            if message.WhichOneof("payload") == "update" and any(
                e.WhichOneof("kind") == "game_finished" for e in message.update.events
            ):
                break
            view = (await get_view(stub, table_id, "ayse")).seat_view
            if view.table.HasField("turn_seat") and view.table.turn_seat == 0:
                state = state_from_seat_view(view)
                action = legal_actions(state, 0)[0]
                try:
                    await stub.SubmitAction(
                        table_pb2.SubmitActionRequest(
                            request_id=f"move-{view.table.table.sequence}",
                            table_id=table_id,
                            expected_sequence=view.table.table.sequence,
                            action=action_to_proto(action),
                        ),
                        metadata=metadata("ayse"),
                    )
                    moves += 1
                except grpc.aio.AioRpcError as error:
                    # The view may be one update old; the next update brings a fresh one.
                    if error.code() != grpc.StatusCode.ABORTED:
                        raise
        async for message in spectator:
            received["spectator"].append(message)
        assert moves > 0
        view = (await get_view(stub, table_id, "ayse")).seat_view
        assert view.table.table.state == view.table.table.STATE_FINISHED
        _assert_no_leaks(received["ayse"], own_seat=0)
        _assert_no_leaks(received["spectator"], own_seat=None)
        assert received["spectator"][0].WhichOneof("payload") == "spectator_view"


def _assert_no_leaks(messages: list[table_pb2.WatchTableResponse], own_seat: int | None) -> None:
    for message in messages:
        payload = message.WhichOneof("payload")
        if payload == "spectator_view":
            assert own_seat is None
        elif payload == "seat_view":
            assert message.seat_view.seat == own_seat
        else:
            for event in message.update.events:
                _assert_event_hidden(event, own_seat)


def _assert_event_hidden(event: event_pb2.TableEvent, own_seat: int | None) -> None:
    kind = event.WhichOneof("kind")
    if kind == "hand_dealt":
        assert bool(event.hand_dealt.hand) == (own_seat is not None)
    elif kind == "passed":
        assert not event.passed.HasField("drawn") or event.passed.seat == own_seat
    elif kind == "kopile_started":
        assert not event.kopile_started.drawn or event.kopile_started.seat == own_seat
    elif kind == "card_given":
        given = event.card_given
        assert not given.HasField("card") or own_seat in (given.from_seat, given.to_seat)
    elif kind == "hand_finished":
        for score in event.hand_finished.scores:
            assert not score.remaining or score.seat == own_seat


async def test_auth_bad_input_and_other_seats_are_refused_and_leave_the_table_unchanged(
    nats_server: NatsServer,
) -> None:
    async with (
        running_node(settings(nats_server, "refusals")) as node,
        table_stub(node.address) as stub,
    ):
        config = elevator_config([seat(0, "ayse"), seat(1, "bora"), seat(2, "cem")])
        table_id = await create_table(stub, config)
        before = (await get_view(stub, table_id, "ayse")).seat_view
        sequence = before.table.table.sequence
        turn = before.table.turn_seat
        player = ["ayse", "bora", "cem"][turn]
        other = ["ayse", "bora", "cem"][(turn + 1) % 3]
        legal = action_to_proto(
            legal_actions(
                state_from_seat_view((await get_view(stub, table_id, player)).seat_view), turn
            )[0]
        )

        def submit(
            who: str,
            action: action_pb2.Action,
            *,
            table_id: str = table_id,
            expected_sequence: int = sequence,
            seat: int | None = None,
        ) -> grpc.aio.UnaryUnaryCall[table_pb2.SubmitActionRequest, table_pb2.SubmitActionResponse]:
            request = table_pb2.SubmitActionRequest(
                table_id=table_id, expected_sequence=expected_sequence, action=action
            )
            if seat is not None:
                request.seat = seat
            return stub.SubmitAction(request, metadata=metadata(who))

        cases: list[tuple[grpc.aio.UnaryUnaryCall[Any, Any], str]] = [
            (stub.GetTable(table_pb2.GetTableRequest(table_id=table_id)), "UNAUTHENTICATED"),
            (
                stub.GetTable(
                    table_pb2.GetTableRequest(table_id=table_id),
                    metadata=(("authorization", "Bearer not.a.token"),),
                ),
                "UNAUTHENTICATED",
            ),
            (
                stub.CreateTable(
                    table_pb2.CreateTableRequest(config=config), metadata=metadata("ayse")
                ),
                "PERMISSION_DENIED",
            ),
            (submit(other, legal), "FAILED_PRECONDITION"),
            (submit(other, legal, seat=turn), "PERMISSION_DENIED"),
            (submit("stranger", legal), "PERMISSION_DENIED"),
            (submit(player, action_pb2.Action()), "INVALID_ARGUMENT"),
            (
                submit(player, action_pb2.Action(draw_from_stock=action_pb2.DrawFromStock())),
                "INVALID_ARGUMENT",
            ),
            (submit(player, legal, expected_sequence=sequence + 5), "ABORTED"),
            (submit(player, legal, table_id="no-such-table"), "NOT_FOUND"),
        ]
        for call, code in cases:
            with pytest.raises(grpc.aio.AioRpcError):
                await call
            got, reason = await _status(call)
            assert got.name == code, (code, reason, call)
            assert reason
        after = (await get_view(stub, table_id, "ayse")).seat_view
        assert after.table.table.sequence == sequence
        assert list(after.hand) == list(before.hand)
        wrong = await _status_of(submit(player, legal, expected_sequence=sequence + 5))
        assert wrong == (grpc.StatusCode.ABORTED, "SEQUENCE_MISMATCH")


async def _status_of(call: grpc.aio.UnaryUnaryCall[Any, Any]) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError):
        await call
    return await _status(call)


async def test_a_retried_request_id_returns_the_first_answer_without_a_second_effect(
    nats_server: NatsServer,
) -> None:
    async with (
        running_node(settings(nats_server, "retries")) as node,
        table_stub(node.address) as stub,
    ):
        table_id = await create_table(
            stub, elevator_config([seat(0, "ayse"), seat(1, "bora"), seat(2, "cem")]), "create-1"
        )
        again = await create_table(
            stub, elevator_config([seat(0, "ayse"), seat(1, "bora"), seat(2, "cem")]), "create-1"
        )
        assert again == table_id
        view = (await get_view(stub, table_id, "ayse")).seat_view
        player = ["ayse", "bora", "cem"][view.table.turn_seat]
        mine = (await get_view(stub, table_id, player)).seat_view
        action = action_to_proto(legal_actions(state_from_seat_view(mine), mine.seat)[0])
        request = table_pb2.SubmitActionRequest(
            request_id="once",
            table_id=table_id,
            expected_sequence=mine.table.table.sequence,
            action=action,
        )
        first = await stub.SubmitAction(request, metadata=metadata(player))
        second = await stub.SubmitAction(request, metadata=metadata(player))
        assert first == second
        after = (await get_view(stub, table_id, "ayse")).seat_view
        assert after.table.table.sequence == mine.table.table.sequence + 1


async def test_p20_a_seats_hand_is_its_players_only_not_a_services_nor_an_operators(
    nats_server: NatsServer,
) -> None:
    """Neither a service nor an operator reads a human's hand or moves for that seat: the seat's
    view is its player's alone (an operator looks on as a spectator)."""
    async with (
        running_node(settings(nats_server, "service")) as node,
        table_stub(node.address) as stub,
    ):
        table_id = await create_table(
            stub, elevator_config([seat(0, "ayse"), seat(1, "bora"), seat(2, "cem")])
        )
        for caller, code in (
            (SERVICE, grpc.StatusCode.PERMISSION_DENIED),
            (ADMIN_TOKEN, grpc.StatusCode.PERMISSION_DENIED),
            (metadata("ayse"), grpc.StatusCode.PERMISSION_DENIED),
        ):
            watch = stub.WatchTable(
                table_pb2.WatchTableRequest(table_id=table_id, seat=1), metadata=caller
            )
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await watch.read()
            assert refused.value.code() == code
        looked = await stub.GetTable(
            table_pb2.GetTableRequest(table_id=table_id), metadata=ADMIN_TOKEN
        )
        assert looked.WhichOneof("view") == "spectator_view"
        for caller in (SERVICE, ADMIN_TOKEN):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.SubmitAction(
                    table_pb2.SubmitActionRequest(request_id="x", table_id=table_id),
                    metadata=caller,
                )
            assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
        own = stub.WatchTable(
            table_pb2.WatchTableRequest(table_id=table_id, seat=1), metadata=metadata("bora")
        )
        assert (await next_message(own, table_pb2.WatchTableResponse)).seat_view.seat == 1
        own.cancel()
        # An operator whose token's subject is a seated player's id is still no player.
        namesake = metadata("bora", "admin")
        looked = await stub.GetTable(
            table_pb2.GetTableRequest(table_id=table_id), metadata=namesake
        )
        assert looked.WhichOneof("view") == "spectator_view"
        watched = stub.WatchTable(table_pb2.WatchTableRequest(table_id=table_id), metadata=namesake)
        payload = (await next_message(watched, table_pb2.WatchTableResponse)).WhichOneof("payload")
        assert payload == "spectator_view"
        watched.cancel()
