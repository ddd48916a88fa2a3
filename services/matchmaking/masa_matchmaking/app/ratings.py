"""Ratings from finished games: read, and updated once per game whatever the redeliveries.

A game's outcome is computed once and recorded under the game's key (``decide``): whichever
instance rates it first fixes the result, and every later delivery applies that same result.
Each player's rating is then written with compare-and-set and remembers the game, so a player
already updated is skipped; a crash half-way through is finished by the next delivery.

RatingChanged is exactly once: the events are built from the recorded outcome (not from the
ratings as they are now), published after every rating is written under event ids derived
from the game and the player (JetStream drops a repeat within its duplicate window), and only
then is the game marked announced. A delivery of a game not yet announced publishes all its
events again, so an instance killed between writing the ratings and publishing (or while
publishing) leaves the redelivery of the durable consumer to publish them; a publish that
fails fails the delivery, which is redelivered. A game announced is skipped at once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from masa_matchmaking.app.ports import Conflict, Events, RatingStore
from masa_matchmaking.domain.errors import Unavailable
from masa_matchmaking.domain.rating import GameOutcome, PlayerRating, Result, rate_game

__all__ = ["FinishedGame", "Ratings"]

_WRITE_ATTEMPTS: Final = 8


@dataclass(frozen=True, slots=True)
class FinishedGame:
    table_id: str
    game_no: int
    game: str
    training: bool
    teams: bool
    # The human seats: bots are never rated.
    results: tuple[Result, ...]

    @property
    def key(self) -> str:
        return f"{self.table_id}/{self.game_no}"


class Ratings:
    def __init__(self, store: RatingStore, events: Events, clock: Callable[[], float]) -> None:
        self._store = store
        self._events = events
        self._clock = clock

    async def get(self, player_id: str, game: str) -> PlayerRating:
        rating, _ = await self._store.read(player_id, game)
        return rating

    async def apply(self, finished: FinishedGame) -> int:
        """Rate one finished game; returns how many ratings this call changed."""
        if finished.training or len({r.player_id for r in finished.results}) < 2:
            return 0
        if await self._store.announced(finished.key):
            return 0
        outcomes = await self._outcomes(finished)
        changed = 0
        for outcome in outcomes:
            if await self._apply_one(finished, outcome):
                changed += 1
        now = self._clock()
        for outcome in outcomes:
            await self._events.rating_changed(
                PlayerRating(outcome.player_id, finished.game, *outcome.before),
                PlayerRating(outcome.player_id, finished.game, *outcome.after),
                table_id=finished.table_id,
                game_no=finished.game_no,
                place=outcome.place,
                now=now,
            )
        await self._store.mark_announced(finished.key)
        return changed

    async def _outcomes(self, finished: FinishedGame) -> list[GameOutcome]:
        before: dict[str, PlayerRating] = {}
        for result in finished.results:
            before[result.player_id], _ = await self._store.read(result.player_id, finished.game)
        computed = rate_game(finished.results, before, teams=finished.teams)
        recorded = await self._store.decide(finished.key, _encode(computed))
        return _decode(recorded)

    async def _apply_one(self, finished: FinishedGame, outcome: GameOutcome) -> bool:
        for _ in range(_WRITE_ATTEMPTS):
            rating, revision = await self._store.read(outcome.player_id, finished.game)
            if rating.has_applied(finished.key):
                return False
            now = self._clock()
            mu, sigma = outcome.after
            updated = rating.applied(finished.key, mu, sigma, now)
            try:
                await self._store.write(updated, revision)
            except Conflict:
                continue
            return True
        raise Unavailable(f"the rating of {outcome.player_id} changed too often to be written")


def _encode(outcomes: Sequence[GameOutcome]) -> bytes:
    return json.dumps(
        [[o.player_id, o.place, list(o.before), list(o.after)] for o in outcomes]
    ).encode()


def _decode(data: bytes) -> list[GameOutcome]:
    return [
        GameOutcome(player, place, (before[0], before[1]), (after[0], after[1]))
        for player, place, before, after in json.loads(data)
    ]
