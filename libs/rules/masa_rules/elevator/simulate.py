"""Whole games between policies: the ``masa-rules simulate --game elevator`` entry point.

The policies draw from :func:`~masa_rules.policy.policy_stream`, ``SHA-256("masa/elevator/policy/"
+ seed)``, so the game seed decides both the deal and every choice: the same arguments give
the same output.
"""

from __future__ import annotations

from collections.abc import Iterator

from masa_rules.elevator.actions import Action
from masa_rules.elevator.codec import event_to_json
from masa_rules.elevator.engine import apply, dealt, new_game
from masa_rules.elevator.events import Event
from masa_rules.elevator.log import GameLog
from masa_rules.elevator.policies import POLICIES
from masa_rules.elevator.rules import ElevatorRules
from masa_rules.elevator.state import State
from masa_rules.policy import policy_stream
from masa_rules.shuffle import Seed

__all__ = ["play_game", "simulate"]


def play_game(
    rules: ElevatorRules, players: int, seed: Seed, policy: str = "random"
) -> tuple[GameLog, State, list[Event]]:
    """Play one hand with every seat following ``policy``; return its log, end and events."""
    try:
        choose = POLICIES[policy]
    except KeyError:
        raise ValueError(f"unknown policy {policy!r}; use {' or '.join(POLICIES)}") from None
    rng = policy_stream("elevator", seed)
    state = new_game(rules, players, seed)
    events: list[Event] = [dealt(state)]
    actions: list[Action] = []
    while not state.is_over:
        action = choose(state, state.turn, rng)
        state, happened = apply(state, action)
        actions.append(action)
        events.extend(happened)
    return GameLog(rules, players, seed, tuple(actions)), state, events


def simulate(players: int, seed: Seed, policy: str = "random") -> Iterator[dict[str, object]]:
    """Every event of one default-rules game as a JSON-able dict, then a ``game_end`` summary.

    >>> lines = list(simulate(3, "doc"))
    >>> lines[0]["type"], lines[-1]["type"]
    ('deal', 'game_end')
    """
    _, state, events = play_game(ElevatorRules(), players, seed, policy)
    for event in events:
        yield event_to_json(event)
    yield {
        "type": "game_end",
        "winner": state.winner,
        "cards_left": [len(hand) for hand in state.hands],
        "ranking": [list(place) for place in state.ranking],
    }
