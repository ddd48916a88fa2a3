"""The ``hard`` Elevator player: determinised Monte Carlo over one seat's view.

A decision reads only what the seat may know: :func:`~masa_rules.elevator.view.view` of the
state for that seat, turned back into a state (:func:`~masa_rules.elevator.observe.seat_state`).
Each sample then deals the cards the seat has not seen (the other hands and the stock, their
sizes public) at random, consistently with everything public; every legal action is tried on
the sample in turn and the hand is played on by the ``normal`` (greedy) policy for every seat,
for at most ``_HORIZON`` moves. A play-out is worth 1 when the seat finished first, 0 when
another seat did, and otherwise half a point moved by how many cards the seat holds against the
seat closest to finishing (``_CARD_WEIGHT`` each). The action worth most over the samples is
chosen (ties: the greedy choice). Short play-outs buy several times more samples than whole
hands, and sampling, not depth, is what a decision lacks (docs/bots.md has the measurements).
So the real hidden cards can never change a decision: two states that differ only in them give
the same decision for the same stream.

It is anytime: samples go round the actions until ``budget_seconds`` of the thread's CPU
time are spent (the best so far is kept) or ``samples`` samples per action are done, whichever
comes first; every play-out ends within the horizon, so every decision ends.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Final

from masa_rules.elevator.actions import Action
from masa_rules.elevator.engine import apply, legal_actions
from masa_rules.elevator.observe import seat_state
from masa_rules.elevator.policies import greedy_policy
from masa_rules.elevator.state import State
from masa_rules.elevator.view import view
from masa_rules.policy import Policy
from masa_rules.shuffle import DrawStream

__all__ = ["DEFAULT_BUDGET_SECONDS", "hard_policy", "search"]

# The bot service's default budget per decision (issue: 200 ms of one core).
DEFAULT_BUDGET_SECONDS: Final = 0.2
# How far a play-out looks (a hand is 61 moves on average at 4 seats under greedy play), and
# what a card more or less than the seat closest to finishing is worth at the horizon.
_HORIZON: Final = 16
_CARD_WEIGHT: Final = 0.05


def search(
    state: State,
    seat: int,
    rng: DrawStream,
    *,
    budget_seconds: float | None = DEFAULT_BUDGET_SECONDS,
    samples: int | None = None,
) -> Action:
    """The action ``seat`` takes, by determinised play-outs (see the module doc).

    At least one sample per action is always played; ``budget_seconds`` None and ``samples``
    set make the decision a function of the view and the stream only (the tests' way).

    >>> from masa_rules.elevator import ElevatorRules, new_game
    >>> game = new_game(ElevatorRules(), 3, "doc")
    >>> search(game, game.turn, DrawStream(b"doc"), budget_seconds=None, samples=2) in (
    ...     legal_actions(game, game.turn))
    True
    """
    if budget_seconds is None and samples is None:
        raise ValueError("a search needs a time budget, a number of samples, or both")
    known = seat_state(view(state, seat))
    actions = legal_actions(known, seat)
    if not actions:
        raise ValueError(f"seat {seat} has nothing to do now")
    fallback = greedy_policy(known, seat, rng)
    if len(actions) == 1:
        return actions[0]
    deadline = None if budget_seconds is None else time.thread_time() + budget_seconds
    worth = [0.0] * len(actions)
    rounds = 0
    while samples is None or rounds < samples:
        sample = _deal_unseen(known, seat, rng)
        for index, action in enumerate(actions):
            worth[index] += _play_out(sample, action, seat, rng)
        rounds += 1
        if deadline is not None and time.thread_time() >= deadline:
            break
    best = max(range(len(actions)), key=lambda i: (worth[i], actions[i] == fallback))
    return actions[best]


def hard_policy(budget_seconds: float = DEFAULT_BUDGET_SECONDS) -> Policy[State, Action]:
    """:func:`search` with this budget, as a policy ``(state, seat, rng) -> action``."""

    def policy(state: State, seat: int, rng: DrawStream) -> Action:
        return search(state, seat, rng, budget_seconds=budget_seconds)

    return policy


def _deal_unseen(known: State, seat: int, rng: DrawStream) -> State:
    """``known`` with the cards ``seat`` has not seen dealt at random, the sizes kept."""
    others = [other for other in range(known.players) if other != seat]
    pool = rng.shuffle([card for other in others for card in known.hands[other]] + [*known.stock])
    hands = list(known.hands)
    taken = 0
    for other in others:
        size = len(known.hands[other])
        hands[other] = tuple(pool[taken : taken + size])
        taken += size
    return replace(known, hands=tuple(hands), stock=tuple(pool[taken:]))


def _play_out(sample: State, first: Action, seat: int, rng: DrawStream) -> float:
    """Play ``first`` on ``sample``, then greedy for everyone up to the horizon; what that was
    worth to ``seat`` (see the module doc)."""
    state, _ = apply(sample, first)
    moves = 0
    while not state.is_over and moves < _HORIZON:
        state, _ = apply(state, greedy_policy(state, state.turn, rng))
        moves += 1
    if state.is_over:
        return 1.0 if state.winner == seat else 0.0
    closest = min(len(hand) for other, hand in enumerate(state.hands) if other != seat)
    return 0.5 + _CARD_WEIGHT * (closest - len(state.hands[seat]))
