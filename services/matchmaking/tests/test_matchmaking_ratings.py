"""Ratings from finished games (OpenSkill): moved once per game whatever the redeliveries, by
one outcome even when two instances rate the same game at once, and never for training."""

from __future__ import annotations

import asyncio
import time
import uuid

from masa_matchmaking.adapters.kv_store import KvRatingStore
from masa_matchmaking.app.ratings import FinishedGame, Ratings
from masa_matchmaking.domain.lobby import Game
from masa_matchmaking.domain.rating import INITIAL_MU, Result
from masa_platform.bus import connect
from masa_platform.bus_access import MATCHMAKING
from masa_platform.testing import NatsServer
from matchmaking_support import FakeEvents


def _game(players: list[str], *, table: str, training: bool = False) -> FinishedGame:
    return FinishedGame(
        table_id=table,
        game_no=1,
        game=Game.ELEVATOR,
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
        store = await KvRatingStore.open(nc.jetstream())
        events = FakeEvents()
        ratings = Ratings(store, events, time.time)
        players = [f"{uuid.uuid4().hex[:6]}-{i}" for i in range(3)]
        game = _game(players, table=f"t{uuid.uuid4().hex[:8]}")
        assert await ratings.apply(game) == 3
        first = [await ratings.get(p, Game.ELEVATOR) for p in players]
        assert first[0].mu > INITIAL_MU > first[2].mu
        assert all(rating.games == 1 for rating in first)
        assert await ratings.apply(game) == 0
        assert [await ratings.get(p, Game.ELEVATOR) for p in players] == first
        assert len(events.ratings) == 3
        # Training and one-player games rate nobody.
        assert await ratings.apply(_game(players, table="tr", training=True)) == 0
        assert await ratings.apply(_game(players[:1], table="solo")) == 0
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
            Ratings(await KvRatingStore.open(nc.jetstream()), FakeEvents(), time.time)
            for nc in connections
        ]
        players = [f"{uuid.uuid4().hex[:6]}-{i}" for i in range(4)]
        game = _game(players, table=f"t{uuid.uuid4().hex[:8]}")
        changed = await asyncio.gather(*(instance.apply(game) for instance in instances))
        assert sum(changed) == 4
        final = [await instances[0].get(p, Game.ELEVATOR) for p in players]
        assert all(rating.games == 1 for rating in final)
        alone = Ratings(
            await KvRatingStore.open(connections[0].jetstream()), FakeEvents(), time.time
        )
        other = _game(list(reversed(players)), table=f"t{uuid.uuid4().hex[:8]}")
        await alone.apply(other)
        again = [await alone.get(p, Game.ELEVATOR) for p in players]
        assert [rating.games for rating in again] == [2, 2, 2, 2]
    finally:
        for nc in connections:
            await nc.drain()
