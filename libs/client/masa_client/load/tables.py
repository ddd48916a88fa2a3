"""The tables a load run creates: which game each slot plays, its seats and its turn timer.

A game mix names weights (``elevator=3,fiftyone=1``): slot ``n`` plays the game whose share
of the weights covers ``n`` modulo their sum, so any run of consecutive slots follows the mix.
Elevator tables cycle through their seat counts (3 to 6) unless the run fixes one; 51 tables
seat four and cycle through the presets, one hand a game so that tables turn over.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from google.protobuf.duration_pb2 import Duration
from masa.common.v1 import game_pb2

from masa_client.load.credentials import Player

__all__ = ["ELEVATOR", "FIFTYONE", "GameMix", "MixError", "TablePlan", "table_config"]

ELEVATOR: Final = "elevator"
FIFTYONE: Final = "fiftyone"
ELEVATOR_SEATS: Final = (3, 4, 5, 6)
FIFTYONE_SEATS: Final = 4
FIFTYONE_PRESETS: Final = (game_pb2.PRESET_CLASSIC, game_pb2.PRESET_SALON, game_pb2.PRESET_REMI)
_MAX_WEIGHT: Final = 1000


class MixError(ValueError):
    """A game mix or a seat plan that cannot be played."""


@dataclass(frozen=True, slots=True)
class GameMix:
    """Games by weight, in a fixed order."""

    weights: tuple[tuple[str, int], ...]

    @classmethod
    def parse(cls, text: str) -> GameMix:
        """``elevator=3,fiftyone=1`` (a bare name weighs 1)."""
        weights: dict[str, int] = {}
        for part in text.split(","):
            name, _, weight = part.strip().partition("=")
            if name not in (ELEVATOR, FIFTYONE):
                raise MixError(f"unknown game {name!r}: choose {ELEVATOR} or {FIFTYONE}")
            if name in weights:
                raise MixError(f"{name} is named twice")
            try:
                value = int(weight) if weight else 1
            except ValueError:
                raise MixError(f"the weight of {name} must be a whole number") from None
            if not 0 <= value <= _MAX_WEIGHT:
                raise MixError(f"the weight of {name} must be 0 to {_MAX_WEIGHT}")
            weights[name] = value
        if not sum(weights.values()):
            raise MixError("the mix needs a game of positive weight")
        return cls(tuple(weights.items()))

    def game_of(self, slot: int) -> str:
        """The game slot ``slot`` plays; the last slots of each cycle go to the later games."""
        position = slot % sum(weight for _, weight in self.weights)
        for name, weight in self.weights:
            if position < weight:
                return name
            position -= weight
        raise AssertionError("unreachable: the position is below the weights' sum")

    def describe(self) -> dict[str, int]:
        return dict(self.weights)


@dataclass(frozen=True, slots=True)
class TablePlan:
    """How every table of a run is seated and timed."""

    # A fixed seat count for every table (Elevator: 3 to 6; 51 seats four), or 0: cycle.
    seats: int = 0
    # Human seats per table, played from here; the others are bot seats, played by the
    # engine. None: every seat is human.
    humans: int | None = None
    turn_seconds: int = 600

    def seats_of(self, game: str, slot: int, game_no: int) -> int:
        if game == FIFTYONE:
            return FIFTYONE_SEATS
        if self.seats:
            return self.seats
        return ELEVATOR_SEATS[(slot + game_no) % len(ELEVATOR_SEATS)]

    def check(self, mix: GameMix) -> None:
        games = {name for name, weight in mix.weights if weight}
        if self.seats and ELEVATOR in games and not 3 <= self.seats <= 6:
            raise MixError("Elevator seats 3 to 6 players")
        if self.seats and FIFTYONE in games and self.seats != FIFTYONE_SEATS:
            raise MixError("51 tables seat four here; give --seats 4 or leave it out")
        if self.humans is not None and not 1 <= self.humans <= (self.seats or 3):
            raise MixError("--humans must be 1 to the smallest table's seat count")
        if not 5 <= self.turn_seconds <= 3600:
            raise MixError("--turn-seconds must be 5 to 3600")


def table_config(
    game: str, seats: int, players: list[Player], plan: TablePlan, *, slot: int, game_no: int
) -> game_pb2.TableConfig:
    """A training table of ``game``: the first ``plan.humans`` seats human, the rest bots."""
    humans = seats if plan.humans is None else plan.humans
    assignments = [
        game_pb2.SeatAssignment(
            seat=seat,
            kind=game_pb2.SEAT_KIND_HUMAN,
            player_id=players[seat].name,
            display_name=players[seat].name,
        )
        if seat < humans
        else game_pb2.SeatAssignment(
            seat=seat,
            kind=game_pb2.SEAT_KIND_BOT,
            display_name=f"bot-{seat}",
            bot_level=game_pb2.BOT_LEVEL_NORMAL,
        )
        for seat in range(seats)
    ]
    config = game_pb2.TableConfig(
        game=game_pb2.GAME_KIND_ELEVATOR,
        mode=game_pb2.MODE_TRAINING,
        turn_time=Duration(seconds=plan.turn_seconds),
        seats=assignments,
    )
    if game == FIFTYONE:
        config.game = game_pb2.GAME_KIND_FIFTYONE
        config.preset = FIFTYONE_PRESETS[(slot + game_no) % len(FIFTYONE_PRESETS)]
        config.options.fiftyone.hands_per_game = 1
    return config
