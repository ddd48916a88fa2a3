"""What a built-in player is, in every game: a :data:`Policy` and the stream it draws from.

A policy is ``(state, seat, rng) -> action``: it reads what ``seat`` may know of ``state``
(its own cards and everything public; the legal actions depend on nothing else) and draws any
randomness from ``rng``, a :class:`~masa_rules.shuffle.DrawStream`, so that the same state and
stream always give the same action. The simulators, the bot service and the table's autopilot
all call policies this way.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TypeVar

from masa_rules.shuffle import DrawStream, Seed, game_seed_bytes

__all__ = ["Policy", "policy_stream", "weighted_index"]

StateT = TypeVar("StateT")
ActionT = TypeVar("ActionT")

Policy = Callable[[StateT, int, DrawStream], ActionT]


def policy_stream(game: str, seed: Seed) -> DrawStream:
    """The stream the policies of a simulated ``game`` draw from: a function of its seed only.

    >>> policy_stream("elevator", "x").below(1000) == policy_stream("elevator", b"x").below(1000)
    True
    """
    key = b"masa/" + game.encode() + b"/policy/" + game_seed_bytes(seed)
    return DrawStream(hashlib.sha256(key).digest())


def weighted_index(rng: DrawStream, weights: list[int]) -> int:
    """An index drawn with probability proportional to its (positive) integer weight.

    >>> weighted_index(DrawStream(b"w"), [0, 5, 0])
    1
    """
    pick = rng.below(sum(weights))
    for index, weight in enumerate(weights):
        if pick < weight:
            return index
        pick -= weight
    raise ValueError("weights must be non-negative with a positive sum")
