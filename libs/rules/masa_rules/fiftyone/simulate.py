"""Whole games of 51 played by built-in policies: the stable contract behind
``masa-rules simulate --game fiftyone``.

Every event is yielded as a JSON object in order (private data included: the simulator is the
whole table). After each hand comes the ``hand_end`` object, and last ``game_end`` with the
totals and the ranking. The same arguments always give the same objects: the policies draw
from :func:`~masa_rules.policy.policy_stream` of the game seed.
"""

from __future__ import annotations

from collections.abc import Iterator

from masa_rules.errors import RuleViolation
from masa_rules.policy import policy_stream
from masa_rules.ruleset import RuleSet
from masa_rules.shuffle import Seed

from .codec import event_json
from .engine import apply, start
from .policies import POLICIES
from .state import Phase

__all__ = ["simulate"]


def simulate(
    preset: str,
    players: int,
    seed: Seed,
    *,
    teams: bool = False,
    hands: int | None = None,
    policy: str = "random",
) -> Iterator[dict[str, object]]:
    """Play a game; yield every event as a JSON-ready dict.

    >>> events = list(simulate("classic", 4, "doc", hands=1, policy="greedy"))
    >>> events[0]["type"], events[-2]["type"], events[-1]["type"]
    ('deal', 'hand_end', 'game_end')
    """
    try:
        choose = POLICIES[policy]
    except KeyError:
        raise RuleViolation("P-10", f"unknown policy {policy!r}; use random or greedy") from None
    rules = RuleSet.preset_named(preset)
    state, events = start(rules, players, seed, teams=teams, hands=hands)
    rng = policy_stream("fiftyone", seed)
    for event in events:
        yield event_json(event)
    while state.phase is not Phase.OVER:
        seat = state.to_act[0]
        state, events = apply(state, choose(state, seat, rng))
        for event in events:
            yield event_json(event)
