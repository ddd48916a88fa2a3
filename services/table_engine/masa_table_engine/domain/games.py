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
from typing import Final, Protocol

from masa_rules import elevator, fiftyone
from masa_rules.elevator.policies import POLICIES as ELEVATOR_POLICIES
from masa_rules.elevator.ranking import rank_seats
from masa_rules.errors import RuleViolation
from masa_rules.fiftyone.policies import POLICIES as FIFTYONE_POLICIES
from masa_rules.shuffle import DrawStream
from masa_rules.table_config import BotLevel, GameKind, Mode, TableConfig, fiftyone_rules

__all__ = [
    "ElevatorGame",
    "FiftyOneGame",
    "Game",
    "HandOutcome",
    "game_for",
    "hosted",
    "register_game",
]


@dataclass(frozen=True, slots=True)
class HandOutcome:
    """The places before forfeits are applied: groups of tied seats, best first, and each
    seat's total (lower is better). A game that is not over is placed as it stands (E-11 by
    the cards left in Elevator, F-95/F-96 by the totals so far in 51): the ranking of a game
    that ended because no player was left (P-12)."""

    places: tuple[tuple[int, ...], ...]
    totals: tuple[int, ...]
    hands_played: int


class Game(Protocol):
    # The game's registered name (masa_rules.table_config.register_game).
    kind: str

    def start(self, config: TableConfig, seed: bytes) -> tuple[object, list[object]]:
        """The first state and the deal's events; raises ``RuleViolation`` for a bad config."""
        ...

    def actor(self, state: object) -> int | None:
        """The seat on turn (or the Elevator giver), or None once the game is over."""
        ...

    def waiting(self, state: object) -> tuple[int, ...]:
        """Every seat that must act now: the actor, or the seats a 51 query asks (F-80)."""
        ...

    def phase(self, state: object) -> str:
        """The step the actor is in, a TurnPhase name in lower case (``play``, ``query`` ...)."""
        ...

    def same_turn(self, before: object, after: object) -> bool:
        """Whether ``after`` is still the turn ``before`` was in (a 51 turn takes many actions)."""
        ...

    def query_seconds(self, state: object) -> float:
        """The lobby's F-80 query window; 0 for a game without queries."""
        ...

    def timeout_action(self, state: object, seat: int) -> object | None:
        """What ``seat``'s silence means when the query window closes (F-80: GIVE), if anything."""
        ...

    def apply(self, state: object, action: object) -> tuple[object, list[object]]: ...

    def hand_size(self, state: object, seat: int) -> int:
        """The cards ``seat`` holds: no action of that seat can name more (plus one taken)."""
        ...

    def seat_of(self, action: object) -> int: ...

    def name_of(self, action: object) -> str:
        """A short action name for metrics labels."""
        ...

    def is_over(self, state: object) -> bool: ...

    def ends_hand(self, events: Sequence[object]) -> bool: ...

    def choose(self, state: object, seat: int, level: BotLevel, salt: bytes) -> object:
        """The in-process safe policy: a legal action for ``seat``, deterministic in ``salt``
        (easy plays easy, every other level the fast ``normal``: the search is the bot's)."""
        ...

    def outcome(self, state: object) -> HandOutcome: ...

    def state_to_json(self, state: object) -> dict[str, object]: ...

    def state_from_json(self, data: Mapping[str, object]) -> object: ...

    def action_to_json(self, action: object) -> dict[str, object]: ...

    def action_from_json(self, data: Mapping[str, object]) -> object: ...


class ElevatorGame:
    """Elevator (rules.md §3). A game is one hand, as the engine defines it."""

    kind: str = GameKind.ELEVATOR

    def start(self, config: TableConfig, seed: bytes) -> tuple[object, list[object]]:
        rules = elevator.ElevatorRules(decks=config.options.decks)
        state = elevator.new_game(rules, len(config.seats), seed.hex())
        return state, [elevator.dealt(state)]

    def actor(self, state: object) -> int | None:
        game = _elevator(state)
        return None if game.is_over else game.turn

    def waiting(self, state: object) -> tuple[int, ...]:
        actor = self.actor(state)
        return () if actor is None else (actor,)

    def phase(self, state: object) -> str:
        return "give" if _elevator(state).phase is elevator.Phase.GIVE else "play"

    def same_turn(self, before: object, after: object) -> bool:
        # Every Elevator action (a play, a pass, a card given) is a turn of its own.
        return False

    def query_seconds(self, state: object) -> float:
        return 0.0

    def timeout_action(self, state: object, seat: int) -> object | None:
        return None

    def apply(self, state: object, action: object) -> tuple[object, list[object]]:
        if not isinstance(action, elevator.Play | elevator.Pass | elevator.Give):
            raise RuleViolation("E-3", "not an Elevator action")
        after, events = elevator.apply(_elevator(state), action)
        return after, list(events)

    def hand_size(self, state: object, seat: int) -> int:
        return len(_elevator(state).hands[seat])

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
        policy = ELEVATOR_POLICIES["random" if level is BotLevel.EASY else "greedy"]
        rng = DrawStream(hashlib.sha256(b"masa/table/fallback/" + salt).digest())
        return policy(game, seat, rng)

    def outcome(self, state: object) -> HandOutcome:
        game = _elevator(state)
        return HandOutcome(
            places=game.ranking if game.is_over else rank_seats(game.hands, game.rules.rank_by_sum),
            totals=tuple(len(hand) for hand in game.hands),
            # A game is one hand: played once it is over.
            hands_played=1 if game.is_over else 0,
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


_FIFTYONE_ACTIONS: Final = (
    fiftyone.Draw,
    fiftyone.TakeDiscard,
    fiftyone.TakeBottom,
    fiftyone.LayDown,
    fiftyone.LayOff,
    fiftyone.RetrieveJoker,
    fiftyone.Discard,
    fiftyone.DeclarePairs,
    fiftyone.ShowPairs,
    fiftyone.ClaimBottom,
    fiftyone.Answer,
)
# Metrics labels, named as the proto actions are (masa.table.v1.Action).
_FIFTYONE_NAMES: Final[dict[type, str]] = {
    fiftyone.Draw: "draw_from_stock",
    fiftyone.TakeDiscard: "take_discard",
    fiftyone.TakeBottom: "take_bottom_card",
    fiftyone.LayDown: "lay_down",
    fiftyone.LayOff: "lay_off",
    fiftyone.RetrieveJoker: "retrieve_joker",
    fiftyone.Discard: "discard",
    fiftyone.DeclarePairs: "declare_pairs",
    fiftyone.ShowPairs: "show_gosterge",
    fiftyone.ClaimBottom: "claim_bottom_card",
    fiftyone.Answer: "answer_query",
}
_FIFTYONE_PHASES: Final = {
    fiftyone.Phase.DRAW: "draw",
    fiftyone.Phase.PLAY: "meld",
    fiftyone.Phase.QUERY: "query",
    fiftyone.Phase.OVER: "",
}


class FiftyOneGame:
    """51 (rules.md §2) in every preset, 2-4 players and team mode (P-1)."""

    kind: str = GameKind.FIFTYONE

    def start(self, config: TableConfig, seed: bytes) -> tuple[object, list[object]]:
        rules, hands = fiftyone_rules(config.preset, config.options)
        teams = config.mode is Mode.TEAMS
        state, events = fiftyone.start(rules, len(config.seats), seed, teams=teams, hands=hands)
        return state, list(events)

    def actor(self, state: object) -> int | None:
        game = _fiftyone(state)
        return None if game.phase is fiftyone.Phase.OVER else game.turn.seat

    def waiting(self, state: object) -> tuple[int, ...]:
        return _fiftyone(state).to_act

    def phase(self, state: object) -> str:
        return _FIFTYONE_PHASES[_fiftyone(state).phase]

    def same_turn(self, before: object, after: object) -> bool:
        first, second = _fiftyone(before), _fiftyone(after)
        return (first.hand_no, first.turn.number) == (second.hand_no, second.turn.number)

    def query_seconds(self, state: object) -> float:
        return float(_fiftyone(state).rules.query_seconds)

    def timeout_action(self, state: object, seat: int) -> object | None:
        return fiftyone.timeout_action(_fiftyone(state), seat)

    def apply(self, state: object, action: object) -> tuple[object, list[object]]:
        if not isinstance(action, _FIFTYONE_ACTIONS):
            raise RuleViolation("F-21", "not a 51 action")
        after, events = fiftyone.apply(_fiftyone(state), action)
        return after, list(events)

    def hand_size(self, state: object, seat: int) -> int:
        return len(_fiftyone(state).seats[seat].hand)

    def seat_of(self, action: object) -> int:
        if not isinstance(action, _FIFTYONE_ACTIONS):
            raise TypeError(f"not a 51 action: {action!r}")
        return action.seat

    def name_of(self, action: object) -> str:
        return _FIFTYONE_NAMES.get(type(action), "unknown")

    def is_over(self, state: object) -> bool:
        return _fiftyone(state).phase is fiftyone.Phase.OVER

    def ends_hand(self, events: Sequence[object]) -> bool:
        return any(isinstance(e, fiftyone.HandEnded) for e in events)

    def choose(self, state: object, seat: int, level: BotLevel, salt: bytes) -> object:
        game = _fiftyone(state)
        # A seat that must act always has a legal action and no other seat has one (the rules'
        # property tests); listing them all here would cost as much as the policy's own choice.
        if seat not in game.to_act:
            raise RuleViolation("F-22", f"seat {seat} has nothing to do now")
        policy = FIFTYONE_POLICIES["random" if level is BotLevel.EASY else "greedy"]
        rng = DrawStream(hashlib.sha256(b"masa/table/fallback/" + salt).digest())
        return policy(game, seat, rng)

    def outcome(self, state: object) -> HandOutcome:
        game = _fiftyone(state)
        places = game.ranking if game.phase is fiftyone.Phase.OVER else fiftyone.ranking(game)
        return HandOutcome(places=places, totals=game.totals, hands_played=game.hands_scored)

    def state_to_json(self, state: object) -> dict[str, object]:
        return fiftyone.state_to_json(_fiftyone(state))

    def state_from_json(self, data: Mapping[str, object]) -> object:
        return fiftyone.state_from_json(data)

    def action_to_json(self, action: object) -> dict[str, object]:
        if not isinstance(action, _FIFTYONE_ACTIONS):
            raise TypeError(f"not a 51 action: {action!r}")
        return fiftyone.action_to_json(action)

    def action_from_json(self, data: Mapping[str, object]) -> object:
        return fiftyone.action_from_json(data)


def _fiftyone(state: object) -> fiftyone.State:
    if not isinstance(state, fiftyone.State):
        raise TypeError(f"not a 51 state: {type(state).__name__}")
    return state


# The engine's one registry of games (docs/architecture.md, "Adding a game").
_GAMES: dict[str, Game] = {
    GameKind.ELEVATOR: ElevatorGame(),
    GameKind.FIFTYONE: FiftyOneGame(),
}


def register_game(game: Game) -> None:
    """Host ``game`` (registered with the rules under ``game.kind``) on this engine; once."""
    if game.kind in _GAMES:
        raise ValueError(f"the engine hosts {game.kind} already")
    _GAMES[game.kind] = game


def hosted() -> tuple[str, ...]:
    """The names of the games this engine hosts, the shipped ones first."""
    return tuple(_GAMES)


def game_for(kind: str) -> Game:
    """The adapter of ``kind``; raises ``RuleViolation`` (P-2) for a game not hosted."""
    try:
        return _GAMES[kind]
    except KeyError:
        raise RuleViolation("P-2", f"{kind} tables are not hosted yet") from None
