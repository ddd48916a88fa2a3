"""The SDK against real gRPC servers on free ports (a scripted TableService behind masa's own
interceptors): bearer auth, UNAVAILABLE retried with the same request_id, TABLE_MOVED followed,
watch streams resumed from the last sequence without repeats, errors carrying the rule id."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import grpc
import grpc.aio
import pytest
from masa.common.v1 import error_pb2
from masa.table.v1 import action_pb2, event_pb2, table_pb2, table_pb2_grpc, view_pb2
from masa_client.client import RetryPolicy, TableClient, sequence_of
from masa_client.errors import MasaCallError
from masa_platform.auth import AuthPolicy, Role, require_principal
from masa_platform.errors import IllegalMove, MasaError, Overloaded, TableMoved
from masa_platform.server import GrpcServer, ServiceRegistration, create_server
from masa_platform.server import standard_interceptors as interceptors
from masa_platform.settings import ServerSettings
from masa_platform.testing import auth_settings, token

AUTH = auth_settings()
TOKEN = token("alice")
FAST = RetryPolicy(attempts=5, initial_backoff=0.01, max_backoff=0.05)


class Scripted(table_pb2_grpc.TableServiceServicer):
    """A TableService whose answers the test scripts; it records what it was asked."""

    def __init__(self) -> None:
        self.unavailable_first = 0
        self.request_ids: list[str] = []
        self.callers: list[str] = []
        self.moved_to: str | None = None
        # How many calls answer TABLE_MOVED (to moved_to) before this node serves the table.
        self.moved_calls = 1_000_000
        self.watch_requests: list[table_pb2.WatchTableRequest] = []
        # Each stream's messages; None ends it UNAVAILABLE, an error ends it with its status.
        self.watch_script: list[list[table_pb2.WatchTableResponse | MasaError | None]] = []

    async def SubmitAction(
        self,
        request: table_pb2.SubmitActionRequest,
        context: grpc.aio.ServicerContext[
            table_pb2.SubmitActionRequest, table_pb2.SubmitActionResponse
        ],
    ) -> table_pb2.SubmitActionResponse:
        self.request_ids.append(request.request_id)
        self.callers.append(require_principal().subject)
        if self.moved_to is not None and self.moved_calls > 0:
            self.moved_calls -= 1
            raise TableMoved(request.table_id, self.moved_to)
        if self.unavailable_first > 0:
            self.unavailable_first -= 1
            await context.abort(grpc.StatusCode.UNAVAILABLE, "restarting")
        if request.action.WhichOneof("kind") == "pass_turn":
            raise IllegalMove("E-8", "the previous player did not play, so you must play if able")
        return table_pb2.SubmitActionResponse(
            update=event_pb2.TableUpdate(sequence=request.expected_sequence + 1)
        )

    async def WatchTable(
        self,
        request: table_pb2.WatchTableRequest,
        context: grpc.aio.ServicerContext[
            table_pb2.WatchTableRequest, table_pb2.WatchTableResponse
        ],
    ) -> AsyncIterator[table_pb2.WatchTableResponse]:
        self.watch_requests.append(request)
        script = self.watch_script.pop(0)
        for message in script:
            if message is None:
                await context.abort(grpc.StatusCode.UNAVAILABLE, "node going down")
            if isinstance(message, MasaError):
                raise message
            yield message


def scripted() -> Scripted:
    # The generated servicer answers UNIMPLEMENTED for every method Scripted leaves out; only
    # mypy-protobuf's stub declares them abstract.
    return Scripted()  # type: ignore[abstract]


@asynccontextmanager
async def serving(servicer: Scripted) -> AsyncIterator[GrpcServer]:
    server = create_server(
        ServerSettings(),
        [
            ServiceRegistration(
                "masa.table.v1.TableService",
                lambda s: table_pb2_grpc.add_TableServiceServicer_to_server(servicer, s),
            )
        ],
        interceptors=interceptors(
            AUTH,
            policy=AuthPolicy(allowed={"masa.table.v1.TableService": frozenset({Role.PLAYER})}),
        ),
    )
    await server.start()
    try:
        yield server
    finally:
        await server.stop(0)


def snapshot(sequence: int) -> table_pb2.WatchTableResponse:
    view = view_pb2.SeatView(table=view_pb2.TableView(table=view_pb2.Table(sequence=sequence)))
    return table_pb2.WatchTableResponse(seat_view=view)


def update(sequence: int) -> table_pb2.WatchTableResponse:
    return table_pb2.WatchTableResponse(update=event_pb2.TableUpdate(sequence=sequence))


PASS = action_pb2.Action(pass_turn=action_pb2.Pass())
PLAY = action_pb2.Action(play=action_pb2.Play())


async def test_a_write_is_retried_on_unavailable_with_the_same_request_id() -> None:
    servicer = scripted()
    servicer.unavailable_first = 2
    async with serving(servicer) as server, TableClient(server.address, TOKEN, retry=FAST) as c:
        answer = await c.submit_action("t1", PLAY, 4)
    assert answer.sequence == 5
    assert len(servicer.request_ids) == 3
    assert len(set(servicer.request_ids)) == 1
    assert servicer.callers == ["alice"] * 3


async def test_retries_give_up_after_the_policy_attempts() -> None:
    servicer = scripted()
    servicer.unavailable_first = 100
    async with serving(servicer) as server, TableClient(server.address, TOKEN, retry=FAST) as c:
        with pytest.raises(MasaCallError) as caught:
            await c.submit_action("t1", PLAY, 4)
    assert caught.value.code is grpc.StatusCode.UNAVAILABLE
    assert len(servicer.request_ids) == FAST.attempts


async def test_an_illegal_move_is_not_retried_and_carries_the_rule_id() -> None:
    servicer = scripted()
    async with serving(servicer) as server, TableClient(server.address, TOKEN, retry=FAST) as c:
        with pytest.raises(MasaCallError) as caught:
            await c.submit_action("t1", PASS, 4)
    assert caught.value.reason == "E-8"
    assert caught.value.is_illegal_move
    assert len(servicer.request_ids) == 1


async def test_table_moved_is_followed_to_the_owner_and_remembered() -> None:
    old, new = scripted(), scripted()
    async with serving(old) as first, serving(new) as second:
        old.moved_to = second.address
        async with TableClient(first.address, TOKEN, retry=FAST) as client:
            answer = await client.submit_action("t1", PLAY, 1)
            again = await client.submit_action("t1", PLAY, 2)
            assert client.owner_of("t1") == second.address
    assert (answer.sequence, again.sequence) == (2, 3)
    assert len(old.request_ids) == 1
    assert len(new.request_ids) == 2
    # The redirected call is the same request: same idempotency key.
    assert old.request_ids[0] == new.request_ids[0]


async def test_a_watch_resumes_after_a_drop_from_the_last_sequence_without_repeats() -> None:
    servicer = scripted()
    servicer.watch_script = [
        [snapshot(3), update(4), update(5), None],
        [update(5), update(6), update(7)],
    ]
    async with serving(servicer) as server, TableClient(server.address, TOKEN, retry=FAST) as c:
        seen = [message async for message in c.watch("t1")]
    kinds = [(m.WhichOneof("payload"), sequence_of(m)) for m in seen]
    assert kinds == [("seat_view", 3), ("update", 4), ("update", 5), ("update", 6), ("update", 7)]
    first, second = servicer.watch_requests
    assert not first.HasField("after_sequence")
    assert second.after_sequence == 5


def behind(last: int) -> Overloaded:
    """How an engine node ends a stream whose reader fell too far behind."""
    return Overloaded(
        "the stream fell 2 updates behind the table",
        metadata={"quota": "watch_backlog", "limit": "2", "after_sequence": str(last)},
    )


async def test_a_watch_the_node_let_go_as_it_fell_behind_resumes_on_the_same_node() -> None:
    """RESOURCE_EXHAUSTED, OVERLOADED (MASA_WATCH_BACKLOG): the same node is asked again after
    the last sequence delivered, and nothing is lost or repeated."""
    servicer = scripted()
    servicer.watch_script = [
        [snapshot(3), update(4), behind(4)],
        [update(5), update(6), behind(6)],
        [update(7), update(8)],
    ]
    async with serving(servicer) as server, TableClient(server.address, TOKEN, retry=FAST) as c:
        seen = [sequence_of(message) async for message in c.watch("t1")]
    assert seen == [3, 4, 5, 6, 7, 8]
    assert [r.after_sequence for r in servicer.watch_requests[1:]] == [4, 6]


async def test_a_watch_let_go_again_and_again_without_progress_gives_up() -> None:
    servicer = scripted()
    servicer.watch_script = [[behind(0)] for _ in range(FAST.attempts)]
    async with serving(servicer) as server, TableClient(server.address, TOKEN, retry=FAST) as c:
        with pytest.raises(MasaCallError) as caught:
            _ = [message async for message in c.watch("t1")]
    assert caught.value.code is grpc.StatusCode.RESOURCE_EXHAUSTED
    overloaded = error_pb2.ErrorReason.Name(error_pb2.ERROR_REASON_OVERLOADED)
    assert caught.value.reason == overloaded.removeprefix("ERROR_REASON_")
    assert caught.value.metadata["quota"] == "watch_backlog"
    assert len(servicer.watch_requests) == FAST.attempts


async def test_a_watch_without_a_token_fails_with_unauthenticated() -> None:
    servicer = scripted()
    servicer.watch_script = [[snapshot(1)]]
    async with serving(servicer) as server, TableClient(server.address, "forged", retry=FAST) as c:
        with pytest.raises(MasaCallError) as caught:
            _ = [message async for message in c.watch("t1")]
    assert caught.value.code is grpc.StatusCode.UNAUTHENTICATED


async def test_a_table_whose_node_died_is_found_on_another_node_with_the_same_request_id() -> None:
    """Issue 12: the node serving the table dies; the client asks the other nodes it knows,
    one of which serves the table now (or points to the one that does), and re-sends the
    unacknowledged action there with the same request id. on_moved hears of it once."""
    dying, stale, taker = scripted(), scripted(), scripted()
    moves: list[tuple[str, str]] = []
    async with serving(dying) as first, serving(stale) as second, serving(taker) as third:
        # The second node still names the dead one for a while (its takeover under way).
        stale.moved_to = first.address
        stale.moved_calls = 2
        nodes = [second.address, third.address]
        client = TableClient(first.address, TOKEN, retry=FAST, nodes=nodes)
        client.on_moved = lambda table, address: moves.append((table, address))
        async with client:
            await client.submit_action("t1", PLAY, 1)
            await first.stop(0)
            taker.moved_to = second.address
            answer = await client.submit_action("t1", PLAY, 2, request_id="again")
            assert client.owner_of("t1") == second.address
            later = await client.submit_action("t1", PLAY, 3)
    assert answer.sequence == 3 and later.sequence == 4
    assert moves == [("t1", second.address)]
    # Asked again and again while the table moved, always as the same request.
    assert set(stale.request_ids[:3]) == {"again"}
    assert set(taker.request_ids) == {"again"}


async def test_a_table_that_no_node_serves_any_more_gives_up_with_a_clear_error() -> None:
    only = scripted()
    patient = RetryPolicy(attempts=3, initial_backoff=0.01, max_backoff=0.05, follow_seconds=0.5)
    async with serving(only) as server:
        client = TableClient(server.address, TOKEN, retry=patient)
        async with client:
            await client.submit_action("t1", PLAY, 1)
            await server.stop(0)
            with pytest.raises(MasaCallError) as caught:
                await client.submit_action("t1", PLAY, 2)
    assert caught.value.code is grpc.StatusCode.UNAVAILABLE
    assert re.search(
        r"no node has served table t1 for \d s; the table may be gone for good", str(caught.value)
    )


async def test_a_watch_resumes_on_another_node_from_the_last_sequence() -> None:
    """The node hands the table over (its stream ends UNAVAILABLE) and stops answering; the
    stream goes on at the next node after the last sequence seen, with no repeat."""
    leaving, taking = scripted(), scripted()
    leaving.watch_script = [[snapshot(3), update(4), None]]
    taking.watch_script = [[snapshot(4), update(5)]]
    async with serving(leaving) as first, serving(taking) as second:
        client = TableClient(first.address, TOKEN, retry=FAST, nodes=[second.address])
        moves: list[str] = []
        client.on_moved = lambda _table, address: moves.append(address)
        async with client:
            seen: list[tuple[str | None, int]] = []
            async for message in client.watch("t1"):
                seen.append((message.WhichOneof("payload"), sequence_of(message)))
                if sequence_of(message) == 4 and len(seen) == 2:
                    await first.stop(0)
    assert seen == [("seat_view", 3), ("update", 4), ("seat_view", 4), ("update", 5)]
    assert taking.watch_requests[0].after_sequence == 4
    assert moves == [second.address]
