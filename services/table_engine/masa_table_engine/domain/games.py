"""One protocol over the ``masa_rules`` engines, so the table never judges a move itself.

A :class:`Game` starts a game from the table's configuration and secret seed, says who must
act, lists and applies actions (the engine raises ``RuleViolation`` for an illegal one), and
ranks the seats at the end. Engine states, actions and events pass through the table as opaque
objects; only the game adapter and the wire layer look inside.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from masa_rules import elevator
from masa_rules.elevator.policies import POLICIES as ELEVATOR_POLICIES
from masa_rules.errors import RuleViolation
from masa_rules.shuffle import DrawStream

from masa_table_engine.domain.model import BotLevel, GameKind, TableConfig

__all__ = ["ElevatorGame", "Game", "HandOutcome", "game_for"]


@dataclass(frozen=True, slots=True)
class HandOutcome:
    """The places of a finished game before forfeits are applied: groups of tied seats, best
    first, and each seat's total (lower is better)."""

    places: tuple[tuple[int, ...], ...]
    totals: tuple[int, ...]
    hands_played: int


class Game(Protocol):
    kind: GameKind

    def start(self, config: TableConfig, seed: bytes) -> tuple[object, list[object]]:
        """The first state and the deal's events; raises ``RuleViolation`` for a bad config."""
        ...

    def actor(self, state: object) -> int | None:
        """The seat the game waits for, or None once the game is over."""
        ...

    def phase(self, state: object) -> str:
        """The step the actor is in, a TurnPhase name in lower case (``play``, ``give`` ...)."""
        ...

    def legal(self, state: object, seat: int) -> list[object]: ...

    def apply(self, state: object, action: object) -> tuple[object, list[object]]: ...

    def seat_of(self, action: object) -> int: ...

    def name_of(self, action: object) -> str:
        """A short action name for metrics labels."""
        ...

    def is_over(self, state: object) -> bool: ...

    def ends_hand(self, events: Sequence[object]) -> bool: ...

    def choose(self, state: object, seat: int, level: BotLevel, salt: bytes) -> object:
        """The in-process safe policy: a legal action for ``seat``, deterministic in ``salt``."""
        ...

    def outcome(self, state: object) -> HandOutcome: ...

    def state_to_json(self, state: object) -> dict[str, object]: ...

    def state_from_json(self, data: Mapping[str, object]) -> object: ...

    def action_to_json(self, action: object) -> dict[str, object]: ...

    def action_from_json(self, data: Mapping[str, object]) -> object: ...


class ElevatorGame:
    """Elevator (RULES.md §3). A game is one hand, as the engine defines it."""

    kind = GameKind.ELEVATOR

    def start(self, config: TableConfig, seed: bytes) -> tuple[object, list[object]]:
        rules = elevator.ElevatorRules(decks=config.options.decks)
        state = elevator.new_game(rules, len(config.seats), seed.hex())
        return state, [elevator.dealt(state)]

    def actor(self, state: object) -> int | None:
        game = _elevator(state)
        return None if game.is_over else game.turn

    def phase(self, state: object) -> str:
        return "give" if _elevator(state).phase is elevator.Phase.GIVE else "play"

    def legal(self, state: object, seat: int) -> list[object]:
        return list(elevator.legal_actions(_elevator(state), seat))

    def apply(self, state: object, action: object) -> tuple[object, list[object]]:
        if not isinstance(action, elevator.Play | elevator.Pass | elevator.Give):
            raise RuleViolation("E-3", "not an Elevator action")
        after, events = elevator.apply(_elevator(state), action)
        return after, list(events)

    def seat_of(self, action: object) -> int:
        if not isinstance(action, elevator.Play | elevator.Pass | elevator.Give):
            raise TypeError(f"not an Elevator action: {action!r}")
        return action.seat

    def name_of(self, action: object) -> str:
        return {elevator.Play: "play", elevator.Pass: "pass", elevator.Give: "give_card"}.get(
            type(action), "unknown"
        )

    def is_over(self, state: object) -> bool:
        return _elevator(state).is_over

    def ends_hand(self, events: Sequence[object]) -> bool:
        return any(isinstance(event, elevator.HandEnded) for event in events)

    def choose(self, state: object, seat: int, level: BotLevel, salt: bytes) -> object:
        game = _elevator(state)
        actions = elevator.legal_actions(game, seat)
        if not actions:
            raise RuleViolation("E-3", f"seat {seat} has nothing to do now")
        policy = ELEVATOR_POLICIES["greedy" if level is BotLevel.NORMAL else "random"]
        rng = DrawStream(hashlib.sha256(b"masa/table/fallback/" + salt).digest())
        return policy(game, actions, rng)

    def outcome(self, state: object) -> HandOutcome:
        game = _elevator(state)
        return HandOutcome(
            places=game.ranking,
            totals=tuple(len(hand) for hand in game.hands),
            hands_played=1,
        )

    def state_to_json(self, state: object) -> dict[str, object]:
        return elevator.state_to_json(_elevator(state))

    def state_from_json(self, data: Mapping[str, object]) -> object:
        return elevator.state_from_json(data)

    def action_to_json(self, action: object) -> dict[str, object]:
        if not isinstance(action, elevator.Play | elevator.Pass | elevator.Give):
            raise TypeError(f"not an Elevator action: {action!r}")
        return elevator.action_to_json(action)

    def action_from_json(self, data: Mapping[str, object]) -> object:
        return elevator.action_from_json(data)


def _elevator(state: object) -> elevator.State:
    if not isinstance(state, elevator.State):
        raise TypeError(f"not an Elevator state: {type(state).__name__}")
    return state


_GAMES: dict[GameKind, Game] = {GameKind.ELEVATOR: ElevatorGame()}


def game_for(kind: GameKind) -> Game:
    """The adapter of ``kind``; raises ``RuleViolation`` (P-2) for a game not hosted yet."""
    try:
        return _GAMES[kind]
    except KeyError:
        raise RuleViolation("P-2", f"{kind.value} tables are not hosted yet") from None
