"""Ratings: one OpenSkill rating (Plackett-Luce) per player and game, moved by finished games.

A game is rated from its final ranking (F-97, E-11) among its human players: bots and
training games are not rated (a table of bots says nothing about the players against each
other), and a game with fewer than two rated sides changes nothing. Tied players share a rank;
in team mode the partners are one side ranked by the team's place (F-93). A forfeited seat
(P-12) keeps the last place the engine gave it; a game every player forfeited (they all left,
and the engine ended it at once) rates nobody, as nobody played it out against the others.

Applying a game is idempotent: a rating remembers the last games it took in, and a game it
already took in changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final

from openskill.models import PlackettLuce

__all__ = [
    "INITIAL_MU",
    "INITIAL_SIGMA",
    "GameOutcome",
    "PlayerRating",
    "Result",
    "rate_game",
]

INITIAL_MU: Final = 25.0
INITIAL_SIGMA: Final = 25.0 / 3
# The games a rating remembers to refuse a second application; results arrive within minutes
# of each other, so the last few dozen cover any redelivery.
REMEMBERED_GAMES: Final = 64

_MODEL: Final = PlackettLuce(mu=INITIAL_MU, sigma=INITIAL_SIGMA)


@dataclass(frozen=True, slots=True)
class PlayerRating:
    player_id: str
    game: str
    mu: float = INITIAL_MU
    sigma: float = INITIAL_SIGMA
    games: int = 0
    updated_at: float | None = None
    # Keys of the last games applied ("<table_id>/<game_no>"), newest last.
    recent: tuple[str, ...] = ()

    @property
    def ordinal(self) -> float:
        """The conservative skill shown on leaderboards."""
        return self.mu - 3 * self.sigma

    def has_applied(self, game_key: str) -> bool:
        return game_key in self.recent

    def applied(self, game_key: str, mu: float, sigma: float, now: float) -> PlayerRating:
        recent = (*self.recent, game_key)[-REMEMBERED_GAMES:]
        return replace(
            self, mu=mu, sigma=sigma, games=self.games + 1, updated_at=now, recent=recent
        )


@dataclass(frozen=True, slots=True)
class Result:
    """One human seat of a finished game."""

    player_id: str
    place: int
    team: int = 0
    forfeited: bool = False


@dataclass(frozen=True, slots=True)
class GameOutcome:
    """What a rated game does to one player."""

    player_id: str
    place: int
    before: tuple[float, float]
    after: tuple[float, float]


def rate_game(
    results: Sequence[Result], ratings: dict[str, PlayerRating], *, teams: bool
) -> list[GameOutcome]:
    """The new (mu, sigma) of every rated player of one game; empty when the game rates nobody.

    ``ratings`` holds each player's rating before the game.
    """
    if all(result.forfeited for result in results):
        return []
    sides: dict[int, list[Result]] = {}
    for result in results:
        key = result.team if teams else len(sides)
        sides.setdefault(key, []).append(result)
    if len(sides) < 2:
        return []
    ordered = list(sides.values())
    teams_in = [
        [_MODEL.rating(mu=ratings[r.player_id].mu, sigma=ratings[r.player_id].sigma) for r in side]
        for side in ordered
    ]
    ranks = [float(min(result.place for result in side)) for side in ordered]
    rated = _MODEL.rate(teams_in, ranks=ranks)
    outcomes: list[GameOutcome] = []
    for side, new_side in zip(ordered, rated, strict=True):
        for result, new in zip(side, new_side, strict=True):
            old = ratings[result.player_id]
            outcomes.append(
                GameOutcome(
                    result.player_id, result.place, (old.mu, old.sigma), (new.mu, new.sigma)
                )
            )
    return outcomes
