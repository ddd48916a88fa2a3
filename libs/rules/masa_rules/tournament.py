"""Bots against bots, for measuring a level's strength: the ``masa-rules tournament`` command.

A tournament seats a mix of levels (``easy``: the weighted random policy, ``normal``: the
greedy one, ``hard``: the search of :mod:`masa_rules.elevator.search` or
:mod:`masa_rules.fiftyone.search`) and plays units: single
51 hands (each dealt from its own seed and scored alone), whole 51 games, or Elevator games (a
game is one hand). The levels rotate round the seats from one unit to the next, so no level
keeps a seat. Each unit ``i`` is a function of ``(seed, i)`` only: its deal is seeded
``"{seed}-{i}"`` and its players draw from that seed's policy stream, so a tournament split
over processes gives the same figures as one played in a row (``hard`` under a time budget
excepted, whose samples depend on the machine).

Per level: the seat-units played, how many it won (finished the hand first, its team's finish
counting for both partners; won the game), the win rate with its 95% Wilson interval, the
average place (1 is best; tied seats share a place) and the average points (51: the hand's
score or the game's total, lower is better; Elevator: the cards left). Whole games may be
played for a ``stake``: every seat stakes it, the pot is split by the game's ranking and the
``payout`` rule exactly as the ledger pays a chip game (:mod:`masa_rules.payout`, P-30), and
each level's average chips won per game (its payout less its stake) is reported.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from masa_rules import elevator, fiftyone
from masa_rules.elevator.policies import POLICIES as ELEVATOR_POLICIES
from masa_rules.elevator.search import hard_policy as elevator_hard
from masa_rules.errors import RuleViolation
from masa_rules.fiftyone.policies import POLICIES as FIFTYONE_POLICIES
from masa_rules.fiftyone.search import hard_policy as fiftyone_hard
from masa_rules.payout import Standing, split_pot
from masa_rules.policy import policy_stream
from masa_rules.ruleset import RuleSet
from masa_rules.shuffle import DrawStream
from masa_rules.table_config import MAX_STAKE, PayoutRule, check_payout

__all__ = ["LEVELS", "Outcome", "Tournament", "chips", "play_unit", "summary", "wilson"]

LEVELS: Final = ("easy", "normal", "hard")
_POLICY_NAMES: Final = {"easy": "random", "normal": "greedy"}


@dataclass(frozen=True, slots=True)
class Tournament:
    """What is played: ``game`` (``fiftyone`` or ``elevator``), the levels of the seats in
    seat order (rotated per unit), single ``hands`` or whole games, and the search budget."""

    game: str
    seats: tuple[str, ...]
    seed: str
    hands: bool = True
    preset: str = "salon"
    teams: bool = False
    budget_seconds: float = 0.05
    # P-30: what every seat stakes on a whole game, and how the pot is paid by the ranking.
    stake: int = 0
    payout: PayoutRule = field(default_factory=PayoutRule)

    def __post_init__(self) -> None:
        if self.game not in ("fiftyone", "elevator"):
            raise RuleViolation("P-2", f"no tournament of {self.game!r}: fiftyone or elevator")
        unknown = [level for level in self.seats if level not in LEVELS]
        if unknown:
            raise RuleViolation("P-2", f"unknown levels {unknown}; use {', '.join(LEVELS)}")
        if self.game == "fiftyone":
            RuleSet.preset_named(self.preset)
        if self.teams and (self.game != "fiftyone" or len(self.seats) != 4):
            raise RuleViolation("F-2", "team mode is 51 with 4 seats")
        if not 0 < self.budget_seconds <= 10:
            raise RuleViolation("P-2", "the search budget is above 0 and at most 10 s")
        if not 0 <= self.stake <= MAX_STAKE:
            raise RuleViolation("P-30", f"the stake is 0 to {MAX_STAKE} chips")
        if self.stake and self.hands and self.game == "fiftyone":
            raise RuleViolation("P-30", "chips are paid on whole games (--games), not hands")
        if not self.stake and self.payout != PayoutRule():
            raise RuleViolation("P-30", "a payout table or a rake needs a stake to pay")
        check_payout(self.payout, places=len(self.seats))

    def levels_of(self, unit: int) -> tuple[str, ...]:
        """The level of each seat in unit ``unit``: the seat list rotated by the unit."""
        count = len(self.seats)
        return tuple(self.seats[(seat + unit) % count] for seat in range(count))


@dataclass(frozen=True, slots=True)
class Outcome:
    """One unit, seat by seat: each seat's level, whether it won, its place and points."""

    levels: tuple[str, ...]
    won: tuple[bool, ...]
    places: tuple[int, ...]
    points: tuple[int, ...]


def play_unit(tournament: Tournament, unit: int) -> Outcome:
    """Play unit ``unit`` of ``tournament`` (see the module doc)."""
    levels = tournament.levels_of(unit)
    seed = f"{tournament.seed}-{unit}"
    if tournament.game == "elevator":
        return _elevator_game(tournament, levels, seed)
    return _fiftyone(tournament, levels, seed)


def _elevator_game(tournament: Tournament, levels: tuple[str, ...], seed: str) -> Outcome:
    hard = elevator_hard(tournament.budget_seconds)
    choose: list[Callable[[elevator.State, int, DrawStream], elevator.Action]] = [
        hard if level == "hard" else ELEVATOR_POLICIES[_POLICY_NAMES[level]] for level in levels
    ]
    rng = policy_stream("elevator", seed)
    state = elevator.new_game(elevator.ElevatorRules(), len(levels), seed)
    while not state.is_over:
        state, _ = elevator.apply(state, choose[state.turn](state, state.turn, rng))
    places = _places(state.ranking, len(levels))
    return Outcome(
        levels=levels,
        won=tuple(place == 1 for place in places),
        places=places,
        points=tuple(len(hand) for hand in state.hands),
    )


def _fiftyone(tournament: Tournament, levels: tuple[str, ...], seed: str) -> Outcome:
    hard = fiftyone_hard(tournament.budget_seconds)
    choose: list[Callable[[fiftyone.State, int, DrawStream], fiftyone.Action]] = [
        hard if level == "hard" else FIFTYONE_POLICIES[_POLICY_NAMES[level]] for level in levels
    ]
    rules = RuleSet.preset_named(tournament.preset)
    state, _ = fiftyone.start(
        rules,
        len(levels),
        seed,
        teams=tournament.teams,
        hands=1 if tournament.hands else None,
    )
    rng = policy_stream("fiftyone", seed)
    while state.phase is not fiftyone.Phase.OVER:
        seat = state.to_act[0]
        state, events = fiftyone.apply(state, choose[seat](state, seat, rng))
        ended = next((e for e in events if isinstance(e, fiftyone.HandEnded)), None)
        if tournament.hands and ended is not None:
            return _hand_outcome(levels, ended, tournament.teams)
    places = _places(state.ranking, len(levels))
    return Outcome(
        levels=levels,
        won=tuple(place == 1 for place in places),
        places=places,
        points=state.totals,
    )


def _hand_outcome(levels: tuple[str, ...], ended: fiftyone.HandEnded, teams: bool) -> Outcome:
    """A single 51 hand: won by its finisher (and, in teams, the finisher's partner), placed by
    its scores, lower first."""
    finisher = ended.finisher
    seats = range(len(levels))

    def won(seat: int) -> bool:
        if finisher is None:
            return False
        return seat == finisher or (teams and seat % 2 == finisher % 2)

    order = sorted(set(ended.scores))
    return Outcome(
        levels=levels,
        won=tuple(won(seat) for seat in seats),
        places=tuple(order.index(ended.scores[seat]) + 1 for seat in seats),
        points=ended.scores,
    )


def _places(ranking: Sequence[Sequence[int]], seats: int) -> tuple[int, ...]:
    """Each seat's place from a ranking of tied groups, best first; a seat the ranking leaves
    out (none should) is last."""
    place = {seat: number for number, tied in enumerate(ranking, 1) for seat in tied}
    return tuple(place.get(seat, len(ranking) + 1) for seat in range(seats))


def wilson(wins: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a win rate (95% by default).

    >>> wilson(50, 100)
    (0.4038, 0.5962)
    >>> wilson(0, 0)
    (0.0, 1.0)
    """
    if n == 0:
        return (0.0, 1.0)
    rate = wins / n
    centre = (rate + z * z / (2 * n)) / (1 + z * z / n)
    spread = z * math.sqrt(rate * (1 - rate) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (round(max(0.0, centre - spread), 4), round(min(1.0, centre + spread), 4))


def summary(tournament: Tournament, outcomes: Sequence[Outcome]) -> dict[str, object]:
    """The JSON document of a tournament: what was played and, per level, its figures."""
    levels: dict[str, dict[str, object]] = {}
    for level in dict.fromkeys(tournament.seats):
        seats = [
            (outcome, seat)
            for outcome in outcomes
            for seat, played in enumerate(outcome.levels)
            if played == level
        ]
        count = len(seats)
        wins = sum(outcome.won[seat] for outcome, seat in seats)
        levels[level] = {
            "units": count,
            "wins": wins,
            "win_rate": round(wins / count, 4) if count else 0.0,
            "win_rate_ci95": list(wilson(wins, count)),
            "average_place": round(sum(o.places[s] for o, s in seats) / count, 3) if count else 0,
            "average_points": round(sum(o.points[s] for o, s in seats) / count, 2) if count else 0,
        }
        if tournament.stake:
            won = sum(chips(tournament, outcome)[seat] for outcome, seat in seats)
            levels[level]["average_chips"] = round(won / count, 2) if count else 0
    return {
        "game": tournament.game,
        "preset": tournament.preset if tournament.game == "fiftyone" else None,
        "teams": tournament.teams,
        "seats": list(tournament.seats),
        "unit": "hands" if tournament.hands and tournament.game == "fiftyone" else "games",
        "units": len(outcomes),
        "seed": tournament.seed,
        "budget_ms": round(tournament.budget_seconds * 1000),
        **(
            {
                "stake": tournament.stake,
                "rake_basis_points": tournament.payout.rake_basis_points,
                "place_shares": list(tournament.payout.shares),
            }
            if tournament.stake
            else {}
        ),
        "levels": levels,
    }


def chips(tournament: Tournament, outcome: Outcome) -> tuple[int, ...]:
    """What each seat of one whole game won: its share of the pot (P-30, by the ledger's own
    split: ties share, teams split) less its stake. Sums to minus the rake.

    >>> game = Tournament("elevator", ("normal",) * 3, "doc", hands=False, stake=100,
    ...                   payout=PayoutRule(500, (7000, 3000)))
    >>> chips(game, Outcome(("normal",) * 3, (True, False, False), (1, 2, 3), (0, 2, 5)))
    (100, -15, -100)
    """
    seats = len(outcome.places)
    standings = [
        Standing(
            seat=seat,
            player_id=f"seat-{seat}",
            place=outcome.places[seat],
            team=seat % 2 if tournament.teams else 0,
            hold_id=f"hold-{seat}",
        )
        for seat in range(seats)
    ]
    split = split_pot(
        tournament.stake * seats, standings, tournament.payout, teams=tournament.teams
    )
    paid = {payout.seat: payout.amount for payout in split.payouts}
    return tuple(paid.get(seat, 0) - tournament.stake for seat in range(seats))
