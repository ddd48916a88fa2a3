"""Ratings from finished games (OpenSkill): moved once per game whatever the redeliveries, by
one outcome even when two instances rate the same game at once, and never for training or for
a game every player left (P-12)."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from masa.common.v1 import game_pb2
from masa.events.v1 import matchmaking_event_pb2 as ev
from masa.events.v1 import result_pb2
from masa_matchmaking.adapters.events import STREAM, JetStreamEvents
from masa_matchmaking.adapters.kv_store import KvRatingStore
from masa_matchmaking.adapters.results import finished_game
from masa_matchmaking.app.ports import Events, GameStarted, Unreachable
from masa_matchmaking.app.ratings import FinishedGame, Ratings
from masa_matchmaking.domain.rating import INITIAL_MU, PlayerRating, Result
from masa_matchmaking.domain.ticket import Ticket
from masa_platform.acks import AckedPublisher
from masa_platform.bus import connect, read_subject
from masa_platform.bus_access import ADMIN, MATCHMAKING
from masa_platform.testing import NatsServer
from masa_rules.table_config import GameKind
from matchmaking_support import FakeEvents
from nats.aio.client import Client


def _game(players: list[str], *, table: str, training: bool = False) -> FinishedGame:
    return FinishedGame(
        table_id=table,
        game_no=1,
        game=GameKind.ELEVATOR,
        training=training,
        teams=False,
        results=tuple(Result(p, place) for place, p in enumerate(players, start=1)),
    )


async def test_p30_a_game_moves_ratings_once_however_often_it_is_delivered(
    nats_server: NatsServer,
) -> None:
    nc = await connect(
        nats_server.url,
        name="ratings-test",
        user=MATCHMAKING,
        password=nats_server.password(MATCHMAKING),
    )
    try:
        store = await KvRatingStore.open(
            nc, await AckedPublisher.started(nc, unavailable=Unreachable)
        )
        events = FakeEvents()
        ratings = Ratings(store, events, time.time)
        players = [f"{uuid.uuid4().hex[:6]}-{i}" for i in range(3)]
        game = _game(players, table=f"t{uuid.uuid4().hex[:8]}")
        assert await ratings.apply(game) == 3
        first = [await ratings.get(p, GameKind.ELEVATOR) for p in players]
        assert first[0].mu > INITIAL_MU > first[2].mu
        assert all(rating.games == 1 for rating in first)
        assert await ratings.apply(game) == 0
        assert [await ratings.get(p, GameKind.ELEVATOR) for p in players] == first
        assert len(events.ratings) == 3
        # Training and one-player games rate nobody.
        assert await ratings.apply(_game(players, table="tr", training=True)) == 0
        assert await ratings.apply(_game(players[:1], table="solo")) == 0
    finally:
        await nc.drain()


def _left(table: str, players: list[str], forfeited: set[str]) -> result_pb2.GameFinished:
    """A GameFinished as the engine publishes it for a 2-seat chip game that players left:
    the forfeited seats ranked last (tied), the others by the game."""
    stayed = [p for p in players if p not in forfeited]
    ranking = [
        game_pb2.Standing(seat=n, player_id=p, place=n + 1, hold_id=f"h-{p}")
        for n, p in enumerate(stayed)
    ] + [
        game_pb2.Standing(
            seat=len(stayed) + n,
            player_id=p,
            place=len(stayed) + 1,
            forfeited=True,
            hold_id=f"h-{p}",
        )
        for n, p in enumerate(sorted(forfeited))
    ]
    return result_pb2.GameFinished(
        event_id=f"{table}:1:game",
        table_id=table,
        game_no=1,
        game=game_pb2.GAME_KIND_FIFTYONE,
        mode=game_pb2.MODE_SINGLES,
        stake=100,
        ranking=ranking,
    )


async def test_P12_a_game_every_player_left_rates_nobody_and_one_forfeit_loses(
    nats_server: NatsServer,
) -> None:
    """The ratings consumer copes with the amended P-12: a chip game ended because both
    players left is finished with both forfeited and tied last; nobody played it out, so no
    rating moves. A forfeit while the other stays still counts as that player's loss."""
    nc = await connect(
        nats_server.url,
        name="ratings-left",
        user=MATCHMAKING,
        password=nats_server.password(MATCHMAKING),
    )
    try:
        store = await KvRatingStore.open(
            nc, await AckedPublisher.started(nc, unavailable=Unreachable)
        )
        events = FakeEvents()
        ratings = Ratings(store, events, time.time)
        players = [f"{uuid.uuid4().hex[:6]}-{i}" for i in range(2)]
        both = finished_game(_left(f"t{uuid.uuid4().hex[:8]}", players, set(players)))
        assert [r.forfeited for r in both.results] == [True, True]
        assert await ratings.apply(both) == 0
        assert events.ratings == []
        assert [(await ratings.get(p, GameKind.FIFTYONE)).games for p in players] == [0, 0]
        one = finished_game(_left(f"t{uuid.uuid4().hex[:8]}", players, {players[1]}))
        assert await ratings.apply(one) == 2
        stayed, left = [await ratings.get(p, GameKind.FIFTYONE) for p in players]
        assert stayed.mu > INITIAL_MU > left.mu
    finally:
        await nc.drain()


async def test_p30_two_instances_rating_one_game_apply_one_outcome(nats_server: NatsServer) -> None:
    connections = [
        await connect(
            nats_server.url,
            name=f"ratings-{i}",
            user=MATCHMAKING,
            password=nats_server.password(MATCHMAKING),
        )
        for i in range(2)
    ]
    try:
        instances = [
            Ratings(
                await KvRatingStore.open(
                    nc, await AckedPublisher.started(nc, unavailable=Unreachable)
                ),
                FakeEvents(),
                time.time,
            )
            for nc in connections
        ]
        players = [f"{uuid.uuid4().hex[:6]}-{i}" for i in range(4)]
        game = _game(players, table=f"t{uuid.uuid4().hex[:8]}")
        changed = await asyncio.gather(*(instance.apply(game) for instance in instances))
        assert sum(changed) == 4
        final = [await instances[0].get(p, GameKind.ELEVATOR) for p in players]
        assert all(rating.games == 1 for rating in final)
        alone = Ratings(
            await KvRatingStore.open(
                connections[0],
                await AckedPublisher.started(connections[0], unavailable=Unreachable),
            ),
            FakeEvents(),
            time.time,
        )
        other = _game(list(reversed(players)), table=f"t{uuid.uuid4().hex[:8]}")
        await alone.apply(other)
        again = [await alone.get(p, GameKind.ELEVATOR) for p in players]
        assert [rating.games for rating in again] == [2, 2, 2, 2]
    finally:
        for nc in connections:
            await nc.drain()


class Killed(BaseException):
    """The instance dies here: nothing after this point runs, nothing is acked."""


class DiesAfter:
    """Real events that kill the instance before its ``publishes``-th RatingChanged."""

    def __init__(self, events: Events, publishes: int) -> None:
        self._events = events
        self._left = publishes

    async def ticket_matched(self, ticket: Ticket, now: float) -> None:
        raise AssertionError("not a rating event")

    async def game_started(self, started: GameStarted, now: float) -> None:
        raise AssertionError("not a rating event")

    async def rating_changed(
        self,
        before: PlayerRating,
        after: PlayerRating,
        *,
        table_id: str,
        game_no: int,
        place: int,
        now: float,
    ) -> None:
        if self._left == 0:
            raise Killed
        self._left -= 1
        await self._events.rating_changed(
            before, after, table_id=table_id, game_no=game_no, place=place, now=now
        )


async def _no_tables(table_id: str, lobby_id: str) -> None:
    raise AssertionError("not a table event")


async def test_p30_rating_changed_survives_a_kill_between_the_ratings_and_the_events(
    nats_server: NatsServer,
) -> None:
    """Exactly one RatingChanged per player and game, on the real stream, when the instance
    is killed after writing the ratings and before publishing (then again half-way through
    publishing), and the game is delivered again to a new instance each time."""
    players = [f"{uuid.uuid4().hex[:6]}-{i}" for i in range(3)]
    table = f"t{uuid.uuid4().hex[:8]}"
    game = _game(players, table=table)
    connections: list[Client] = []

    async def instance(publishes: int | None) -> Ratings:
        nc = await connect(
            nats_server.url,
            name=f"ratings-kill-{len(connections)}",
            user=MATCHMAKING,
            password=nats_server.password(MATCHMAKING),
        )
        connections.append(nc)
        publisher = await AckedPublisher.started(nc, unavailable=Unreachable)
        events: Events = JetStreamEvents(publisher, _no_tables)
        if publishes is not None:
            events = DiesAfter(events, publishes)
        return Ratings(await KvRatingStore.open(nc, publisher), events, time.time)

    try:
        with pytest.raises(Killed):
            await (await instance(publishes=0)).apply(game)
        with pytest.raises(Killed):
            # The redelivery: the ratings are written already; one event gets out.
            assert await (await instance(publishes=1)).apply(game) == 0
        survivor = await instance(publishes=None)
        assert await survivor.apply(game) == 0
        assert await survivor.apply(game) == 0  # announced: skipped at once
        ratings = [await survivor.get(p, GameKind.ELEVATOR) for p in players]
        assert [rating.games for rating in ratings] == [1, 1, 1]
        # Read as the operators: matchmaking only writes its events.
        admin = await connect(
            nats_server.url, name="ratings-read", user=ADMIN, password=nats_server.password(ADMIN)
        )
        connections.append(admin)
        stored = await read_subject(admin, STREAM, f"masa.matchmaking.v1.{table}.rating_changed")
        changes = [ev.MatchmakingEvent.FromString(m.data).rating_changed for m in stored]
        assert sorted(c.player_id for c in changes) == sorted(players)
        assert len({c.event_id for c in changes}) == 3
        after = {c.player_id: (c.mu_before, c.mu_after) for c in changes}
        assert all(after[r.player_id] == (INITIAL_MU, r.mu) for r in ratings)
    finally:
        for nc in connections:
            await nc.close()
