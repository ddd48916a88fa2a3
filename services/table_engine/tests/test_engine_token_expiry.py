"""A token's expiry bounds the streams it opened, and a client with a source of tokens goes on
across renewals (issue 19): on real gRPC and NATS, against tables where nothing moves unless
a test moves it, so that only the expiry can end a stream, and against one where updates never
stop, so that none can slip past the expiry."""

from __future__ import annotations

import asyncio
import time
import uuid

import grpc
import grpc.aio
import jwt
import pytest
from engine_support import (
    TOKEN_EXPIRED,
    create_table,
    elevator_config,
    error_reason,
    fiftyone_config,
    get_view,
    metadata,
    running_node,
    seat,
    settings,
    table_stub,
)
from masa.common.v1 import game_pb2
from masa.table.v1 import table_pb2, table_pb2_grpc, view_pb2
from masa_client.client import TableClient, sequence_of
from masa_client.errors import MasaCallError
from masa_platform.testing import NatsServer, next_message
from masa_platform.testing import token as mint
from masa_rules.elevator import legal_actions
from masa_wire.elevator import action_to_proto, state_from_seat_view
from roaming_player import RoamingSeat

# Three people and no bot: the table waits for them (a turn lasts a minute).
PLAYERS = ("ayse", "bora", "cem")


def _idle_table() -> game_pb2.TableConfig:
    return elevator_config([seat(n, name) for n, name in enumerate(PLAYERS)], turn_seconds=60)


async def _move(stub: table_pb2_grpc.TableServiceAsyncStub, table_id: str) -> int:
    """One move by whoever's turn it is (each with a long-lived token); the new sequence."""
    for player in PLAYERS:
        view = (await get_view(stub, table_id, player)).seat_view
        if view.table.turn_seat != view.seat:
            continue
        action = legal_actions(state_from_seat_view(view), view.seat)[0]
        answer = await stub.SubmitAction(
            table_pb2.SubmitActionRequest(
                request_id=uuid.uuid4().hex,
                table_id=table_id,
                expected_sequence=view.table.table.sequence,
                action=action_to_proto(action),
            ),
            metadata=metadata(player),
        )
        return answer.update.sequence
    raise AssertionError("no seat has the turn")


@pytest.mark.parametrize("watcher", ["ayse", "kibitzer"])
async def test_a_watch_ends_with_token_expired_when_its_token_does_while_nothing_happens(
    nats_server: NatsServer, watcher: str
) -> None:
    """A seat's watch and a spectator's (P-20's two views) end at the expiry of the token that
    opened them, UNAUTHENTICATED with reason TOKEN_EXPIRED, though no update came: a stream
    is not a way to outlive a revoked or stolen token."""
    async with (
        running_node(settings(nats_server, f"watch-expiry-{watcher}")) as node,
        table_stub(node.address) as stub,
    ):
        table_id = await create_table(stub, _idle_table())
        token = mint(watcher, ttl_seconds=2.0)
        opened = time.monotonic()
        call = stub.WatchTable(
            table_pb2.WatchTableRequest(table_id=table_id),
            metadata=(("authorization", f"Bearer {token}"),),
        )
        first = await next_message(call, table_pb2.WatchTableResponse)
        assert first.WhichOneof("payload") in ("seat_view", "spectator_view")
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            async with asyncio.timeout(6.0):
                await call.read()
        assert ended.value.code() is grpc.StatusCode.UNAUTHENTICATED
        assert error_reason(ended.value) == TOKEN_EXPIRED
        assert time.monotonic() - opened < 3.5


async def test_a_client_with_a_token_source_watches_across_renewals_losing_and_repeating_nothing(
    nats_server: NatsServer,
) -> None:
    """TableClient given a source of 2-second tokens: its watch is ended by each expiry, with
    updates in between or none, and resumes with the next token from the last sequence it
    delivered, so that every update of moves made across several renewals arrives once, in
    order."""
    minted: list[float] = []

    def tokens() -> str:
        minted.append(time.monotonic())
        return mint("ayse", ttl_seconds=2.0)

    async with (
        running_node(settings(nats_server, "renewals")) as node,
        table_stub(node.address) as stub,
        TableClient(node.address, tokens) as client,
    ):
        table_id = await create_table(stub, _idle_table())
        received: list[table_pb2.WatchTableResponse] = []

        async def follow() -> None:
            async for message in client.watch(table_id):
                received.append(message)

        follower = asyncio.create_task(follow())
        made: list[int] = []
        try:
            # Moves between expiries, then two expiries with nothing to deliver, then more.
            for pause in (1.3, 1.3, 4.5, 1.3):
                await asyncio.sleep(pause)
                made.append(await _move(stub, table_id))
            async with asyncio.timeout(10.0):
                while not received or sequence_of(received[-1]) < made[-1]:
                    await asyncio.sleep(0.05)
            # Its own calls go on with the current token too.
            assert (await client.get_table(table_id)).WhichOneof("view") == "seat_view"
        finally:
            follower.cancel()
            await asyncio.gather(follower, return_exceptions=True)
        # The first token and a renewal at least every two seconds, the stream resumed on each.
        assert len(minted) >= 5, minted
        updates = [sequence_of(m) for m in received if m.WhichOneof("payload") == "update"]
        assert updates == sorted(set(updates))
        assert set(made) <= set(updates)
        # One snapshot: a resumed stream goes on after the last sequence, it does not start over.
        assert [m.WhichOneof("payload") for m in received].count("seat_view") == 1


async def test_a_fixed_token_that_expires_ends_the_watch_with_token_expired(
    nats_server: NatsServer,
) -> None:
    """A client given a token rather than a source cannot renew: the expiry reaches the caller
    as MasaCallError, reason TOKEN_EXPIRED, not as an endless reconnection."""
    async with (
        running_node(settings(nats_server, "fixed")) as node,
        table_stub(node.address) as stub,
        TableClient(node.address, mint("bora", ttl_seconds=2.0)) as client,
    ):
        table_id = await create_table(stub, _idle_table())
        received: list[table_pb2.WatchTableResponse] = []

        async def follow() -> None:
            async for message in client.watch(table_id):
                received.append(message)

        with pytest.raises(MasaCallError) as ended:
            await asyncio.wait_for(follow(), 6.0)
        assert ended.value.reason == TOKEN_EXPIRED
        assert [m.WhichOneof("payload") for m in received] == ["seat_view"]


async def test_a_call_refused_as_expired_is_made_once_more_with_a_fresh_token(
    nats_server: NatsServer,
) -> None:
    """A token the client thinks good but the server finds expired (a clock behind the
    server's): the call is refused TOKEN_EXPIRED, asked for again with the next token, and
    answered; a source that keeps giving expired tokens gets the refusal after one retry."""
    stale = mint("cem", ttl_seconds=-5.0, now=time.time())
    given = iter([stale, mint("cem")])
    async with (
        running_node(settings(nats_server, "skew")) as node,
        table_stub(node.address) as stub,
    ):
        table_id = await create_table(stub, _idle_table())
        async with TableClient(node.address, lambda: next(given)) as client:
            answer = await client.get_table(table_id)
            assert answer.seat_view.seat == 2
        async with TableClient(node.address, lambda: stale) as always_stale:
            with pytest.raises(MasaCallError) as refused:
                await always_stale.get_table(table_id)
            assert refused.value.reason == TOKEN_EXPIRED


# How late after its token's expiry the stream's end may be received: the server's and the
# test's clocks are the same clock, so this is the time a message takes through gRPC on a
# busy two-core machine, not a grace the rule allows. Whether an update came too late is told
# by the server's own time of it (occurred_at), which no lag of the test can move.
CLOCK_SLACK = 0.3
END_SLACK = 2.0


def _busy_table() -> game_pb2.TableConfig:
    """Ayse and three bots, a classic 51 game of three hands: some 300 moves, never more than
    about 0.1 s apart, over 8 to 14 s, which outlasts a token of 3 s (a single hand, or an
    Elevator game, can be over in under 2)."""
    return fiftyone_config(
        "classic", [seat(0, "ayse"), seat(1), seat(2), seat(3)], hands=3, turn_seconds=60
    )


async def _follow(
    call: grpc.aio.UnaryStreamCall[table_pb2.WatchTableRequest, table_pb2.WatchTableResponse],
    received: list[tuple[str, float]],
    seconds: float,
) -> grpc.aio.AioRpcError | None:
    """Each message of the watch with the server's wall-clock time of it (an update's
    occurred_at; a token's expiry is a wall-clock time) or, for a view, when it was received,
    for at most ``seconds``; the error that ended the stream, or None if it ended without one
    or was still open (then cancelled)."""
    try:
        async with asyncio.timeout(seconds):
            async for message in call:
                kind = message.WhichOneof("payload") or ""
                at = (
                    message.update.occurred_at.ToMicroseconds() / 1e6
                    if kind == "update"
                    else time.time()
                )
                received.append((kind, at))
    except grpc.aio.AioRpcError as error:
        return error
    except TimeoutError:
        call.cancel()
    return None


@pytest.mark.parametrize("watcher", ["ayse", "kibitzer"])
async def test_a_watch_on_a_busy_table_ends_at_its_token_expiry_and_delivers_nothing_after(
    nats_server: NatsServer, watcher: str
) -> None:
    """Issue 19 ("open streams outlive their token: 50 updates arrived on a WatchTable stream
    after its token had expired"), on a table where updates never stop: a seat's watch and a
    spectator's (P-20's two views) end UNAUTHENTICATED, reason TOKEN_EXPIRED, shortly after
    the expiry of the token that opened them, and no update is received after that instant,
    though the table goes on playing for the other tokens."""
    async with (
        running_node(
            settings(nats_server, f"busy-expiry-{watcher}", bot_delay_seconds=0.05)
        ) as node,
        table_stub(node.address) as stub,
    ):
        table_id = await create_table(stub, _busy_table())
        # Ayse plays her seat with tokens of an hour, as soon as she has the turn.
        ayse = RoamingSeat(table_id, "ayse", lambda: [node.address], poll_seconds=0.01)
        player = asyncio.create_task(ayse.play(time.monotonic() + 30.0))
        try:
            # Expires 2 to 3 s from now: a token's expiry is a whole second (its exp claim).
            token = mint(watcher, ttl_seconds=3.0)
            expiry = float(jwt.decode(token, options={"verify_signature": False})["exp"])
            call = stub.WatchTable(
                table_pb2.WatchTableRequest(table_id=table_id),
                metadata=(("authorization", f"Bearer {token}"),),
            )
            received: list[tuple[str, float]] = []
            ended = await _follow(call, received, expiry - time.time() + 5.0)
            ended_at = time.time()
            state = (await get_view(stub, table_id, "ayse")).seat_view.table.table.state
        finally:
            player.cancel()
            await asyncio.gather(player, return_exceptions=True)
    # The symptom first: what the stream delivered that happened after its token was
    # gone (an update is sent once it happened, so none of these can be a late delivery of an
    # earlier one).
    updates = [at for kind, at in received if kind == "update"]
    late = [round(at - expiry, 3) for at in updates if at > expiry + 0.05]
    assert late == [], f"{len(late)} updates of after the expiry"
    assert ended is not None, "the stream was still open 5 s after its token expired"
    # The game was still on: only the expiry can have ended the stream.
    assert state == view_pb2.Table.STATE_PLAYING
    assert ended.code() is grpc.StatusCode.UNAUTHENTICATED
    assert error_reason(ended) == TOKEN_EXPIRED
    assert expiry - CLOCK_SLACK <= ended_at < expiry + END_SLACK, ended_at - expiry
    # Busy up to the expiry: the stream carried the game's moves while its token held.
    assert len(updates) >= 5, len(updates)
    assert updates[-1] > expiry - 1.5, expiry - updates[-1]
