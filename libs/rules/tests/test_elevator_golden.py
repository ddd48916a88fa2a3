"""Golden replays: complete Elevator games stored as logs, with the events and final state.

Each file in ``golden/elevator/`` holds a game's log (``new_game`` arguments and actions), every
event it produced and its final state. The test replays the log and must reproduce both
exactly, so any change to the engine's behaviour shows up as a diff here.

To regenerate after a deliberate rule change (then review the diff before committing)::

    MASA_REGEN_GOLDEN=1 .venv/bin/pytest libs/rules/tests/test_elevator_golden.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from masa_rules.elevator import (
    ElevatorRules,
    JokerStart,
    event_to_json,
    log_from_json,
    log_to_json,
    replay_events,
    state_to_json,
)
from masa_rules.elevator.simulate import play_game

GOLDEN = Path(__file__).parent / "golden" / "elevator"

# name: (rules, players, seed, policy), picked for what the game shows.
CASES = {
    "giver_gives_last_card_and_wins": (ElevatorRules(), 5, "golden-0", "random"),
    "kopile_repeats_with_an_empty_stock": (ElevatorRules(), 3, "golden-0", "random"),
    "kopile_with_a_short_stock": (ElevatorRules(), 4, "golden-23", "random"),
    "six_players_two_packs": (ElevatorRules(), 6, "golden-6", "random"),
    "five_players_greedy": (ElevatorRules(), 5, "golden-5", "greedy"),
    "buried_joker_start": (ElevatorRules(joker_start=JokerStart.BURY), 5, "golden-33", "greedy"),
}


def _record(name: str) -> dict[str, object]:
    rules, players, seed, policy = CASES[name]
    log, state, events = play_game(rules, players, seed, policy)
    return {
        "log": log_to_json(log),
        "events": [event_to_json(event) for event in events],
        "final_state": state_to_json(state),
    }


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_game_replays_exactly(name: str) -> None:
    path = GOLDEN / f"{name}.json"
    if os.environ.get("MASA_REGEN_GOLDEN"):
        path.write_text(json.dumps(_record(name), indent=1) + "\n")
    golden = json.loads(path.read_text())
    state, events = replay_events(log_from_json(golden["log"]))
    assert [event_to_json(event) for event in events] == golden["events"]
    assert state_to_json(state) == golden["final_state"]
    assert state.is_over


def test_golden_files_match_their_cases() -> None:
    assert sorted(path.stem for path in GOLDEN.glob("*.json")) == sorted(CASES)
