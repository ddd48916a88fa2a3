"""A game's log, the arguments of ``new_game`` plus every action, and its exact replay.

Because the deal comes from the seed and ``apply`` is a pure function, the log is all a table
needs to rebuild a game after a crash, and all an auditor needs to check one.

>>> log = GameLog(ElevatorRules(), 3, "doc", ())
>>> log.seed, log_from_json(log_to_json(log)) == log, replay(log).action_count
(b'doc', True, 0)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from masa_rules.elevator.actions import Action
from masa_rules.elevator.codec import (
    action_from_json,
    action_to_json,
    rules_from_json,
    rules_to_json,
)
from masa_rules.elevator.engine import apply, dealt, new_game
from masa_rules.elevator.events import Event
from masa_rules.elevator.rules import ElevatorRules
from masa_rules.elevator.state import State
from masa_rules.shuffle import Seed, game_seed_bytes

__all__ = ["GameLog", "log_from_json", "log_to_json", "replay", "replay_events"]


@dataclass(frozen=True, slots=True)
class GameLog:
    """What :func:`replay` needs: ``new_game``'s arguments and the actions in order."""

    rules: ElevatorRules
    players: int
    # The game seed, kept as bytes (F-5: a text or integer seed stands for its bytes).
    seed: Seed
    actions: tuple[Action, ...]
    hand_no: int = 1
    leader: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "seed", game_seed_bytes(self.seed))

    def extended(self, actions: Iterable[Action]) -> GameLog:
        """This log with more actions appended."""
        return GameLog(
            self.rules,
            self.players,
            self.seed,
            (*self.actions, *actions),
            self.hand_no,
            self.leader,
        )


def replay(log: GameLog) -> State:
    """The state ``log`` leads to; an illegal action in it raises ``IllegalAction``."""
    state = new_game(log.rules, log.players, log.seed, hand_no=log.hand_no, leader=log.leader)
    for action in log.actions:
        state, _ = apply(state, action)
    return state


def replay_events(log: GameLog) -> tuple[State, list[Event]]:
    """Like :func:`replay`, also returning every event from the deal on."""
    state = new_game(log.rules, log.players, log.seed, hand_no=log.hand_no, leader=log.leader)
    events: list[Event] = [dealt(state)]
    for action in log.actions:
        state, happened = apply(state, action)
        events.extend(happened)
    return state, events


def log_to_json(log: GameLog) -> dict[str, object]:
    return {
        "rules": rules_to_json(log.rules),
        "players": log.players,
        "seed_hex": game_seed_bytes(log.seed).hex(),
        "hand_no": log.hand_no,
        "leader": log.leader,
        "actions": [action_to_json(action) for action in log.actions],
    }


def log_from_json(data: Mapping[str, object]) -> GameLog:
    rules, actions = data.get("rules", {}), data.get("actions")
    players, seed = data.get("players"), _seed(data)
    hand_no, leader = data.get("hand_no", 1), data.get("leader", 0)
    if not isinstance(rules, Mapping) or not isinstance(actions, list):
        raise ValueError("a log needs rules and a list of actions")
    if not isinstance(players, int):
        raise ValueError("a log needs players (an integer)")
    if not isinstance(hand_no, int) or not isinstance(leader, int):
        raise ValueError("hand_no and leader must be integers")
    return GameLog(
        rules=rules_from_json(rules),
        players=players,
        seed=seed,
        actions=tuple(action_from_json(action) for action in actions),
        hand_no=hand_no,
        leader=leader,
    )


def _seed(data: Mapping[str, object]) -> bytes | str:
    """The game seed: ``seed_hex``, or a text ``seed`` as older logs wrote it."""
    seed_hex, text = data.get("seed_hex"), data.get("seed")
    if isinstance(seed_hex, str):
        return bytes.fromhex(seed_hex)
    if isinstance(text, str):
        return text
    raise ValueError("a log needs its seed (seed_hex)")
