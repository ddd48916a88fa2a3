"""The ``hard`` Elevator player: determinised Monte Carlo over one seat's view.

A decision reads only what the seat may know: :func:`~masa_rules.elevator.view.view` of the
state for that seat, turned back into a state (:func:`~masa_rules.elevator.observe.seat_state`).
Each sample then deals the cards the seat has not seen (the other hands and the stock, their
sizes public) at random, consistently with everything public (a seat that had to pass, E-8,
holds cards that could not go on the top it passed on: ``State.voids``); every legal action is tried on
the sample in turn and the hand is played on by the ``normal`` (greedy) policy for every seat,
for at most ``horizon`` moves, on the compact hand of :mod:`masa_rules.elevator.rollout` (seven
times faster than the engine's immutable state, and checked against it move by move). A
play-out is worth 1 when the seat finished first and otherwise loses 0.02 for each card the
seat still holds. The action worth most over the samples is chosen (ties: the greedy choice). So the real hidden
cards can never change a decision: two states that differ only in them give the same decision
for the same stream.

It is anytime: samples go round the actions (each distinct play once, the greedy choice first)
until ``budget_seconds`` of ``clock`` have passed, checked after every play-out (the thread's
CPU time by default; the bot service passes a wall clock and the time left before its
deadline), or ``samples`` samples per action are done, whichever comes first; every play-out
ends within the horizon, so every decision ends. The budget counts from the call, listing the
moves included; it is overrun by at most one play-out, or by the listing itself on a hand of
thousands of orderings.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Final

from masa_rules.elevator.actions import Action, Give, Play
from masa_rules.elevator.engine import legal_actions
from masa_rules.elevator.observe import seat_state
from masa_rules.elevator.policies import greedy_policy
from masa_rules.elevator.rollout import GIVE, PASS, PLAY, Move, Sim, starting_on
from masa_rules.elevator.state import Direction, State
from masa_rules.elevator.view import view
from masa_rules.policy import Policy
from masa_rules.shuffle import DrawStream

__all__ = ["DEFAULT_BUDGET_SECONDS", "HORIZON", "hard_policy", "search"]

# The bot service's default budget per decision (issue: 200 ms of one core).
DEFAULT_BUDGET_SECONDS: Final = 0.2
# How far a play-out looks: a hand is 61 moves on average at 4 seats under greedy play, so
# nearly every play-out is played to the end (docs/bots.md: whole play-outs won more games than
# short ones scored by the cards left, once the compact hand made them affordable).
HORIZON: Final = 300


def search(
    state: State,
    seat: int,
    rng: DrawStream,
    *,
    budget_seconds: float | None = DEFAULT_BUDGET_SECONDS,
    samples: int | None = None,
    horizon: int = HORIZON,
    clock: Callable[[], float] = time.thread_time,
) -> Action:
    """The action ``seat`` takes, by determinised play-outs (see the module doc).

    At least one play-out, of the greedy choice, is always played; ``budget_seconds`` None and
    ``samples`` set make the decision a function of the view and the stream only (the tests'
    way).

    >>> from masa_rules.elevator import ElevatorRules, new_game
    >>> game = new_game(ElevatorRules(), 3, "doc")
    >>> search(game, game.turn, DrawStream(b"doc"), budget_seconds=None, samples=2) in (
    ...     legal_actions(game, game.turn))
    True
    """
    if budget_seconds is None and samples is None:
        raise ValueError("a search needs a time budget, a number of samples, or both")
    # The budget counts from here: listing thousands of orderings of a big hand is part of it.
    deadline = None if budget_seconds is None else clock() + budget_seconds
    known = seat_state(view(state, seat))
    actions = legal_actions(known, seat)
    if not actions:
        raise ValueError(f"seat {seat} has nothing to do now")
    fallback = greedy_policy(known, seat, rng)
    if len(actions) == 1:
        return actions[0]
    root = Sim.of(known)
    moves = [_move(action) for action in actions]
    # Two packs hold two copies of a face: plays of the same faces are one choice. The greedy
    # choice goes first, so that a search cut short has weighed it.
    first_of: dict[Move, int] = {}
    for index, move in enumerate(moves):
        first_of.setdefault(move, index)
    greedy = first_of[_move(fallback)]
    candidates = [greedy, *(index for index in first_of.values() if index != greedy)]
    unseen = [face for other in range(root.players) if other != seat for face in root.hands[other]]
    unseen += root.stock
    voids = _voids(known, seat)
    # The play-outs draw from a seeded stdlib generator: the stream's HMAC draws cost more
    # than a whole play-out.
    chance = random.Random(rng.below(1 << 62))
    worth = dict.fromkeys(candidates, 0.0)
    tried = dict.fromkeys(candidates, 0)
    rounds = 0
    spent = False
    while not spent and (samples is None or rounds < samples):
        sample = _deal_unseen(root, seat, unseen, voids, chance)
        for index in candidates:
            trial = sample.copy()
            trial.step(moves[index])
            worth[index] += trial.play_out(seat, horizon)
            tried[index] += 1
            # Checked after every play-out: a hand of many same-rank cards has hundreds of
            # orderings, and a round of them all would overrun the budget many times.
            if deadline is not None and clock() >= deadline:
                spent = True
                break
        rounds += 1
    best = max(
        (index for index in candidates if tried[index]),
        key=lambda index: (worth[index] / tried[index], index == greedy),
    )
    return actions[best]


def hard_policy(budget_seconds: float = DEFAULT_BUDGET_SECONDS) -> Policy[State, Action]:
    """:func:`search` with this budget, as a policy ``(state, seat, rng) -> action``."""

    def policy(state: State, seat: int, rng: DrawStream) -> Action:
        return search(state, seat, rng, budget_seconds=budget_seconds)

    return policy


def _move(action: Action) -> Move:
    if isinstance(action, Play):
        return (PLAY, tuple(card.face_index for card in action.cards))
    if isinstance(action, Give):
        return (GIVE, (action.card.face_index,))
    return (PASS, ())


# A seat whose forced pass (E-8) says that ``held`` of its cards cannot start on a top: the
# seat, that top's table of faces that can start on it (rollout.starting_on), and ``held``.
_Void = tuple[int, tuple[bool, ...], int]


def _voids(known: State, seat: int) -> list[_Void]:
    """What the other seats' forced passes showed of their hands (public: ``State.voids``)."""
    joker_any = known.rules.joker_on_joker_any_colour
    return [
        (
            other,
            starting_on(void.top.face_index, void.direction is Direction.ASCENDING, joker_any),
            min(void.held, len(known.hands[other])),
        )
        for other, void in enumerate(known.voids)
        if void is not None and other != seat
    ]


def _deal_unseen(
    root: Sim, seat: int, unseen: list[int], voids: list[_Void], chance: random.Random
) -> Sim:
    """``root`` with the cards ``seat`` has not seen dealt at random, the sizes kept and
    consistent with every void: a seat that showed ``held`` cards unable to start on a top
    gets that many such cards (as many as there are), the rest of its hand at random."""
    pool = list(unseen)
    chance.shuffle(pool)
    sample = root.copy()
    dealt: dict[int, list[int]] = {}
    for other, starts, held in voids:
        kept: list[int] = []
        rest: list[int] = []
        for face in pool:
            (rest if len(kept) == held or starts[face] else kept).append(face)
        dealt[other], pool = kept, rest
    taken = 0
    for other in range(sample.players):
        if other == seat:
            continue
        own = dealt.get(other, [])
        size = len(root.hands[other]) - len(own)
        sample.hands[other] = own + pool[taken : taken + size]
        taken += size
    sample.stock = pool[taken:]
    return sample
