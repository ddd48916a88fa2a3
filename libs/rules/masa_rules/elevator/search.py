"""The ``hard`` Elevator player: determinised Monte Carlo over one seat's view.

A decision reads only what the seat may know: :func:`~masa_rules.elevator.view.view` of the
state for that seat, turned back into a state (:func:`~masa_rules.elevator.observe.seat_state`).
Each sample then deals the cards the seat has not seen (the other hands and the stock, their
sizes public) at random, consistently with what the other seats' moves showed if they play
like ``normal`` (``State.tells``: a seat that had to pass, E-8, holds no card that could go
on that top; one that played a 9 on a 7 held no 8 of the colour; and since it last took or
gave a card, ``normal`` with the hand the sample deals it would have made each of its moves:
see :func:`_readings` and :func:`_deal_unseen`). Every legal action is tried on the sample in
turn and the hand is played on by the ``normal`` (greedy) policy for every seat, for at most
``horizon`` moves, on the compact hand of :mod:`masa_rules.elevator.rollout` (seven times
faster than the engine's immutable state, and checked against it move by move). A play-out is
worth 1 when the seat finished first and otherwise loses 0.02 for each card the seat still
holds. The action worth most over the samples is chosen (ties: the greedy choice). Tells are
public, so the real hidden cards can never change a decision: two states that differ only in
them give the same decision for the same stream.

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
from dataclasses import dataclass
from typing import Final

from masa_rules.elevator.actions import Action, Give, Play
from masa_rules.elevator.engine import legal_actions
from masa_rules.elevator.moves import RANK
from masa_rules.elevator.observe import seat_state
from masa_rules.elevator.policies import greedy_policy
from masa_rules.elevator.rollout import (
    GIVE,
    JOKER,
    PASS,
    PLAY,
    SPECIAL,
    Move,
    Sim,
    greedy_kind,
    move_kind,
    starting_on,
)
from masa_rules.elevator.state import Direction, State, Tell
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
    readings = _readings(known, seat)
    # The play-outs draw from a seeded stdlib generator: the stream's HMAC draws cost more
    # than a whole play-out.
    chance = random.Random(rng.below(1 << 62))
    worth = dict.fromkeys(candidates, 0.0)
    tried = dict.fromkeys(candidates, 0)
    rounds = 0
    spent = False
    while not spent and (samples is None or rounds < samples):
        sample = _deal_unseen(root, seat, unseen, readings, chance)
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


# How many deals a sample may take to find one that leaves no cohort short and that the other
# seats' exact moves agree with; past that it keeps the deal that misses least (a seat may not
# play like normal at all).
_DEAL_TRIES: Final = 30


@dataclass(frozen=True, slots=True)
class _Reading:
    """What the tells of one other seat say of its hand now.

    ``cohorts``: as many of its cards as the count were in its hand at some move and are still
    held, each with the faces that move (or a later one) shows it did not hold, oldest first
    (the counts grow: a later move's hand held every card the earlier one still holds).
    ``exact``: its moves since it last took or gave a card, as (top, going up, may pass,
    played faces): its hand at each was its hand now plus what it played since.
    """

    seat: int
    cohorts: tuple[tuple[int, tuple[bool, ...]], ...]
    exact: tuple[tuple[int, bool, bool, tuple[int, ...]], ...]


def _readings(known: State, seat: int) -> list[_Reading]:
    """What every other seat's tells say of its hand, if it plays like ``normal`` (a forced
    pass says what it says whoever made it: E-8)."""
    joker_any = known.rules.joker_on_joker_any_colour
    readings: list[_Reading] = []
    for other, tells in enumerate(known.tells):
        if other == seat or not tells:
            continue
        size = len(known.hands[other])
        masks = [_excluded(tell, joker_any) for tell in tells]
        cohorts: list[tuple[int, tuple[bool, ...]]] = []
        union: tuple[bool, ...] = (False,) * 54
        # Newest first: a card held since an older move was held at every later one too.
        for tell, mask in zip(reversed(tells), reversed(masks), strict=True):
            if mask is not None:
                union = tuple(a or b for a, b in zip(union, mask, strict=True))
            if any(union):
                cohorts.append((min(tell.held, size), union))
        exact = tuple(
            (
                tell.top.face_index,
                tell.direction is Direction.ASCENDING,
                tell.may_pass,
                tuple(card.face_index for card in tell.played),
            )
            for tell in tells
            if tell.exact
        )
        readings.append(_Reading(other, tuple(reversed(cohorts)), exact))
    return readings


def _excluded(tell: Tell, joker_any: bool) -> tuple[bool, ...] | None:
    """By face, the cards a seat that plays like ``normal`` did not hold when it made ``tell``
    (None: the move says nothing that simple)."""
    starts = starting_on(tell.top.face_index, tell.direction is Direction.ASCENDING, joker_any)
    if not tell.played:
        if not tell.may_pass:
            # Forced (E-8): nothing could go, whoever passed.
            return starts
        # A voluntary pass: nothing ordinary could go (normal passes so only with a joker, an
        # ace or a 2 kept back for later).
        return tuple(start and not SPECIAL[face] for face, start in enumerate(starts))
    first = tell.played[0].face_index
    if first >= JOKER:
        # Jokers last: nothing else could go (the other joker perhaps).
        return tuple(start and face < JOKER for face, start in enumerate(starts))
    if SPECIAL[first]:
        return tuple(start and not SPECIAL[face] for face, start in enumerate(starts))
    if len(tell.played) > 1:
        return None
    # A single ordinary card: no ordinary card could go in a smaller step.
    top_rank = RANK[tell.top.face_index]
    step = abs(RANK[first] - top_rank)
    return tuple(
        start and not SPECIAL[face] and abs(RANK[face] - top_rank) < step
        for face, start in enumerate(starts)
    )


def _deal_unseen(
    root: Sim, seat: int, unseen: list[int], readings: list[_Reading], chance: random.Random
) -> Sim:
    """``root`` with the cards ``seat`` has not seen dealt at random, the sizes kept, each
    other seat's cohorts dealt from the cards its tells allow, and dealt again (up to
    ``_DEAL_TRIES`` times) until no cohort is short of such cards and every seat's exact
    moves are what ``normal`` would have made with the hand the deal gives it; otherwise the
    deal that misses least."""
    best: tuple[int, Sim] | None = None
    for _ in range(_DEAL_TRIES):
        sample, short = _deal_once(root, seat, unseen, readings, chance)
        wrong = short + sum(not _agrees(sample, reading) for reading in readings if reading.exact)
        if not wrong:
            return sample
        if best is None or wrong < best[0]:
            best = (wrong, sample)
    assert best is not None
    return best[1]


def _deal_once(
    root: Sim, seat: int, unseen: list[int], readings: list[_Reading], chance: random.Random
) -> tuple[Sim, int]:
    """One deal, and how many cohorts it left short. The seats' cohorts are dealt in a
    random order: a seat dealt first may take the cards another's cohort needs."""
    pool = list(unseen)
    chance.shuffle(pool)
    order = list(readings)
    chance.shuffle(order)
    sample = root.copy()
    dealt: dict[int, list[int]] = {}
    short = 0
    for reading in order:
        own: list[int] = []
        for count, excluded in reading.cohorts:
            rest: list[int] = []
            for face in pool:
                (rest if len(own) >= count or excluded[face] else own).append(face)
            pool = rest
            short += len(own) < count
        dealt[reading.seat] = own
    taken = 0
    for other in range(sample.players):
        if other == seat:
            continue
        own = dealt.get(other, [])
        size = len(root.hands[other]) - len(own)
        sample.hands[other] = own + pool[taken : taken + size]
        taken += size
    sample.stock = pool[taken:]
    return sample, short


def _agrees(sample: Sim, reading: _Reading) -> bool:
    """Whether ``normal`` with the hands ``sample`` deals would have made the seat's exact
    moves (of the same kind: ties between equal plays may break either way)."""
    hand = list(sample.hands[reading.seat])
    for *_, played in reading.exact:
        hand.extend(played)
    for top, up, may_pass, played in reading.exact:
        if greedy_kind(hand, top, up, sample.joker_any, may_pass) != move_kind(played, top):
            return False
        for face in played:
            hand.remove(face)
    return True
