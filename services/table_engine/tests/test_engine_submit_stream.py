"""SubmitActions, the moves of a seat over one stream (issue 14), on real gRPC and NATS: each
move is answered in order with SubmitAction's own update or refusal (P-10, E-3, AIP-154/155),
the stream outlives a refused move, and it ends when its token expires or on a message that
does not decode."""

from __future__ import annotations

import asyncio
import time
import uuid

import grpc
import grpc.aio
import pytest
from engine_support import (
    TOKEN_EXPIRED,
    create_table,
    elevator_config,
    error_reason,
    get_view,
    log_entries,
    metadata,
    running_node,
    seat,
    settings,
    table_stub,
)
from masa.table.v1 import table_pb2, view_pb2
from masa_platform.testing import NatsServer
from masa_platform.testing import token as mint
from masa_rules.elevator import legal_actions
from masa_wire.elevator import action_to_proto, state_from_seat_view


class _Stream:
    """One SubmitActions call, a move out and its answer back."""

    def __init__(
        self,
        call: grpc.aio.StreamStreamCall[
            table_pb2.SubmitActionsRequest, table_pb2.SubmitActionsResponse
        ],
    ) -> None:
        self.call = call

    async def send(self, move: table_pb2.SubmitActionRequest) -> table_pb2.SubmitActionsResponse:
        await self.call.write(table_pb2.SubmitActionsRequest(action=move))
        answer = await self.call.read()
        assert isinstance(answer, table_pb2.SubmitActionsResponse), answer
        return answer


def _move(table_id: str, view: view_pb2.SeatView) -> table_pb2.SubmitActionRequest:
    action = legal_actions(state_from_seat_view(view), view.seat)[0]
    return table_pb2.SubmitActionRequest(
        request_id=uuid.uuid4().hex,
        table_id=table_id,
        expected_sequence=view.table.table.sequence,
        action=action_to_proto(action),
    )


async def test_moves_on_one_stream_are_answered_in_order_and_a_refusal_keeps_it_open(
    nats_server: NatsServer,
) -> None:
    async with (
        running_node(settings(nats_server, "stream", bot_delay_seconds=0.0)) as node,
        table_stub(node.address) as stub,
    ):
        table_id = await create_table(stub, elevator_config([seat(0, "ayse"), seat(1), seat(2)]))
        stream = _Stream(stub.SubmitActions(metadata=metadata("ayse")))
        accepted: list[str] = []
        refused_reasons: set[str] = set()
        for _ in range(6):
            view = (await get_view(stub, table_id, "ayse")).seat_view
            if view.table.table.state != view.table.table.STATE_PLAYING:
                break
            if view.table.turn_seat != 0:
                await asyncio.sleep(0.02)
                continue
            move = _move(table_id, view)
            answer = await stream.send(move)
            assert answer.request_id == move.request_id
            assert answer.WhichOneof("result") == "update", answer
            assert answer.update.sequence > view.table.table.sequence
            accepted.append(move.request_id)
            # The same move again is a retry (AIP-155): the first answer, nothing applied.
            again = await stream.send(move)
            assert again.update == answer.update
            # A move judged against a table that moved on is refused, and the stream goes on.
            stale = await stream.send(
                table_pb2.SubmitActionRequest(
                    request_id=uuid.uuid4().hex,
                    table_id=table_id,
                    expected_sequence=view.table.table.sequence,
                    action=move.action,
                )
            )
            assert stale.WhichOneof("result") == "refused"
            assert stale.refused.code == grpc.StatusCode.ABORTED.value[0]
            refused_reasons.add(stale.refused.error.reason)
        # Not this player's table: refused in the stream too.
        foreign = await stream.send(
            table_pb2.SubmitActionRequest(request_id="x", table_id="no-such-table")
        )
        assert foreign.refused.code == grpc.StatusCode.NOT_FOUND.value[0]
        assert foreign.refused.error.reason == "TABLE_NOT_FOUND"
        await stream.call.done_writing()
        assert await stream.call.code() is grpc.StatusCode.OK
        assert accepted and refused_reasons == {"SEQUENCE_MISMATCH"}
        logged = [e.action_applied.request_id for e in await log_entries(nats_server, table_id)]
        assert all(logged.count(request_id) == 1 for request_id in accepted)


async def test_the_stream_ends_when_its_token_expires_with_no_move_sent(
    nats_server: NatsServer,
) -> None:
    """A stream the token opened ends at the token's expiry, whether or not a move comes:
    UNAUTHENTICATED, reason TOKEN_EXPIRED, and nothing applied."""
    async with (
        running_node(settings(nats_server, "expiry")) as node,
        table_stub(node.address) as stub,
    ):
        table_id = await create_table(stub, elevator_config([seat(0, "bora"), seat(1), seat(2)]))
        view = (await get_view(stub, table_id, "bora")).seat_view
        token = mint("bora", ttl_seconds=2.0)
        opened = time.monotonic()
        call = stub.SubmitActions(metadata=(("authorization", f"Bearer {token}"),))
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            async with asyncio.timeout(6.0):
                await call.read()
        assert ended.value.code() is grpc.StatusCode.UNAUTHENTICATED
        assert error_reason(ended.value) == TOKEN_EXPIRED
        # At the expiry (exp is whole seconds), not at some later sweep.
        assert time.monotonic() - opened < 3.5
        after = (await get_view(stub, table_id, "bora")).seat_view
        assert after.table.table.sequence == view.table.table.sequence


async def test_a_message_that_does_not_decode_ends_the_stream_as_a_bad_request(
    nats_server: NatsServer,
) -> None:
    async with (
        running_node(settings(nats_server, "garbage")) as node,
        grpc.aio.insecure_channel(node.address) as channel,
    ):
        raw: grpc.aio.StreamStreamMultiCallable[bytes, bytes]
        raw = channel.stream_stream("/masa.table.v1.TableService/SubmitActions")
        call = raw(metadata=metadata("cem"))
        await call.write(b"\xff\xff\xff")
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            await call.read()
        assert ended.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert "not a valid message" in (ended.value.details() or "")
