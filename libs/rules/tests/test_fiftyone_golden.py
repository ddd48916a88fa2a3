"""Golden replays of whole 51 games (temporalio-style determinism tests).

Each file in ``golden/fiftyone/`` is a game log (how the game was created and every action)
with digests of the events and of the final state, recorded when the file was written.
Replaying the log must give the very same events, state, totals and ranking. Regenerate with
``python libs/rules/tests/test_fiftyone_golden.py`` after an intended rule change.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from masa_rules.fiftyone import (
    Action,
    Phase,
    apply,
    event_json,
    game_log,
    replay_events,
    start,
    state_to_json,
)
from masa_rules.fiftyone.events import Event, HandEnded
from masa_rules.fiftyone.policies import POLICIES
from masa_rules.ruleset import RuleSet
from masa_rules.shuffle import DrawStream

GOLDEN = Path(__file__).parent / "golden" / "fiftyone"
GAMES: list[Game] = [
    ("classic_4_greedy", "classic", 4, False, 3, "greedy"),
    ("classic_3_random", "classic", 3, False, 1, "random"),
    ("classic_teams_random", "classic", 4, True, 2, "random"),
    ("salon_greedy", "salon", 4, False, 3, "greedy"),
    ("salon_teams_random", "salon", 4, True, None, "random"),
    ("remi_3_greedy", "remi", 3, False, 3, "greedy"),
    ("remi_2_random", "remi", 2, False, 2, "random"),
]


def digest(items: Any) -> str:
    return hashlib.sha256(json.dumps(items, sort_keys=True).encode()).hexdigest()


def events_digest(events: list[Event]) -> str:
    return digest([event_json(e) for e in events])


Game = tuple[str, str, int, bool, int | None, str]


def record(game: Game) -> dict[str, Any]:
    """Play ``game`` (name, preset, players, teams, hands, policy) and log it."""
    name, preset, players, teams, hands, policy = game
    seed = f"golden/{name}".encode()
    rules = RuleSet.preset_named(preset)
    state, events = start(rules, players, seed, teams=teams, hands=hands)
    rng = DrawStream(name.encode())
    actions: list[Action] = []
    while state.phase is not Phase.OVER:
        action = POLICIES[policy](state, state.to_act[0], rng)
        actions.append(action)
        state, more = apply(state, action)
        events += more
    log = game_log(rules, players, seed, actions, teams=teams, hands=hands)
    return {
        **log,
        "expected": {
            "events": len(events),
            "events_sha256": events_digest(events),
            "state_sha256": digest(state_to_json(state)),
            "totals": list(state.totals),
            "ranking": [list(p) for p in state.ranking],
            "hand_ends": sum(1 for e in events if isinstance(e, HandEnded)),
        },
    }


@pytest.mark.parametrize("name", [g[0] for g in GAMES])
def test_golden_game_replays_exactly(name: str) -> None:
    data = json.loads((GOLDEN / f"{name}.json").read_text())
    state, events = replay_events(data)
    expected = data["expected"]
    assert state.phase is Phase.OVER
    assert len(events) == expected["events"]
    assert [list(p) for p in state.ranking] == expected["ranking"]
    assert list(state.totals) == expected["totals"]
    assert events_digest(events) == expected["events_sha256"]
    assert digest(state_to_json(state)) == expected["state_sha256"]


def test_golden_files_cover_every_preset() -> None:
    presets = {json.loads(p.read_text())["game"]["rules"]["preset"] for p in GOLDEN.glob("*.json")}
    assert presets == {"classic", "salon", "remi"}


if __name__ == "__main__":
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for game in GAMES:
        (GOLDEN / f"{game[0]}.json").write_text(json.dumps(record(game), indent=1) + "\n")
