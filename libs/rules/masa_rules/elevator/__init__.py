"""Elevator, the shedding game of rules.md §3 (E-1..E-11), as a pure engine.

>>> from masa_rules.elevator import ElevatorRules, apply, legal_actions, new_game
>>> state = new_game(ElevatorRules(), 3, "readme")
>>> state, events = apply(state, legal_actions(state, state.turn)[0])
>>> state.action_count
1

See :mod:`masa_rules.elevator.engine` for provable fairness and the termination argument,
and :mod:`masa_rules.elevator.rules` for the decisions.
"""

from masa_rules.elevator.actions import Action, Give, Pass, Play
from masa_rules.elevator.codec import (
    action_from_json,
    action_to_json,
    event_to_json,
    rules_from_json,
    rules_to_json,
    state_from_json,
    state_to_json,
)
from masa_rules.elevator.engine import apply, dealt, legal_actions, new_game
from masa_rules.elevator.events import Dealt, Event, Gave, HandEnded, Kopile, Passed, Played
from masa_rules.elevator.log import GameLog, log_from_json, log_to_json, replay, replay_events
from masa_rules.elevator.observe import seat_state
from masa_rules.elevator.position import position
from masa_rules.elevator.rules import ElevatorRules, JokerStart
from masa_rules.elevator.state import Direction, Phase, State
from masa_rules.elevator.view import view

__all__ = [
    "Action",
    "Dealt",
    "Direction",
    "ElevatorRules",
    "Event",
    "GameLog",
    "Gave",
    "Give",
    "HandEnded",
    "JokerStart",
    "Kopile",
    "Pass",
    "Passed",
    "Phase",
    "Play",
    "Played",
    "State",
    "action_from_json",
    "action_to_json",
    "apply",
    "dealt",
    "event_to_json",
    "legal_actions",
    "log_from_json",
    "log_to_json",
    "new_game",
    "position",
    "replay",
    "replay_events",
    "rules_from_json",
    "rules_to_json",
    "seat_state",
    "state_from_json",
    "state_to_json",
    "view",
]
