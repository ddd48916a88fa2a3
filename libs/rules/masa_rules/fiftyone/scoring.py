"""Scoring a hand and a game of 51 (rules.md F-90..F-97). Penalty points: lower is better.

classic and salon (F-90..F-93): the finisher (and in team mode the partner) scores
``finisher_score``; an opened seat the value of its cards in hand; an unopened seat 100, or 200
in a salon *kafa* hand. Finish multipliers (joker, pairs, classic hand finish) and the pair
status multiplier apply to every loser; işlek penalties are added after multiplying.

remi (F-94): the finisher scores −40, −80 for a hand finish, −120 for a hand finish with the
bottom card; the others their cards in hand (jokers 20) or 100 unopened, doubled after a hand
finish.
"""

from __future__ import annotations

from masa_rules.ruleset import GameLength, RuleSet
from masa_rules.solver import hand_penalty

from .events import Finish
from .state import State, counts_opened, partner

__all__ = ["Finish", "eliminated_now", "elimination_limit", "hand_scores", "is_kafa", "ranking"]


def is_kafa(state: State, finisher: int | None) -> bool:
    """F-90 salon: nobody but the finisher opened and nobody declared pairs."""
    if finisher is None or state.rules.kafa_penalty is None:
        return False
    return all(
        not (seat.opened or seat.pair_status)
        for i, seat in enumerate(state.seats)
        if i != finisher and state.active[i]
    )


def _finisher_score(rules: RuleSet, finish: Finish) -> int:
    if finish.by_hand and finish.bottom_card and rules.hand_finish_bottom_card_score is not None:
        return rules.hand_finish_bottom_card_score
    if finish.by_hand and rules.hand_finish_score is not None:
        return rules.hand_finish_score
    return rules.finisher_score


def _finish_multiplier(rules: RuleSet, finish: Finish) -> int:
    """F-91: what a joker, pair or hand finish multiplies the losers' scores by."""
    multiplier = 1
    if finish.joker:
        multiplier *= rules.joker_finish_multiplier
    if finish.pairs:
        multiplier *= rules.pairs_finish_multiplier
    if finish.by_hand:
        multiplier *= rules.hand_finish_multiplier
        if rules.hand_finish_doubles_losers:
            multiplier *= 2
    return multiplier


def hand_scores(state: State, finisher: int | None, finish: Finish) -> tuple[int, ...]:
    """F-90..F-94: each seat's score for the hand that ``state`` ends (0 for inactive seats)."""
    rules = state.rules
    kafa = is_kafa(state, finisher)
    multiplier = 1 if finisher is None else _finish_multiplier(rules, finish)
    scores: list[int] = []
    for i, seat in enumerate(state.seats):
        if not state.active[i]:
            scores.append(0)
            continue
        if finisher is not None and (i == finisher or partner(state, i) == finisher):
            base = _finisher_score(rules, finish) if i == finisher else 0
            fine = seat.islek_penalty if rules.islek_penalty_for_finisher else 0
            scores.append(base + fine)
            continue
        if counts_opened(state, i):
            base = hand_penalty([c.card for c in seat.hand], rules)
        elif kafa and rules.kafa_penalty is not None:
            base = rules.kafa_penalty
        else:
            base = rules.unopened_penalty
        score = base * multiplier
        if seat.pair_status:
            score *= rules.pair_status_multiplier
        scores.append(score + seat.islek_penalty)
    return tuple(scores)


def elimination_limit(rules: RuleSet, hands_scored: int) -> int:
    """F-96: the limit after hand ``n``: 111, 121, 131, ...

    >>> [elimination_limit(RuleSet.salon(), n) for n in (1, 2, 3)]
    [111, 121, 131]
    """
    return rules.elimination_base + rules.elimination_step * (hands_scored - 1)


def _units(state: State) -> list[tuple[int, ...]]:
    if state.teams:
        return [(0, 2), (1, 3)]
    return [(i,) for i in range(state.players)]


def eliminated_now(state: State, totals: tuple[int, ...], hands_scored: int) -> tuple[int, ...]:
    """F-96: the active seats whose total (team: team total) now exceeds the limit."""
    rules = state.rules
    if rules.game_length is not GameLength.ELIMINATION:
        return ()
    limit = elimination_limit(rules, hands_scored)
    out: list[int] = []
    for unit in _units(state):
        if not all(state.active[s] for s in unit):
            continue
        factor = rules.team_elimination_factor if state.teams else 1
        if sum(totals[s] for s in unit) > factor * limit:
            out.extend(unit)
    return tuple(sorted(out))


def _places(units: list[tuple[int, ...]], totals: tuple[int, ...]) -> list[list[int]]:
    """Units sorted by total, lowest first; equal totals share a place (F-95, F-96)."""
    keyed = sorted(units, key=lambda u: (sum(totals[s] for s in u), u))
    places: list[list[int]] = []
    last: int | None = None
    for unit in keyed:
        total = sum(totals[s] for s in unit)
        if places and total == last:
            places[-1].extend(unit)
        else:
            places.append(list(unit))
        last = total
    return places


def ranking(state: State) -> tuple[tuple[int, ...], ...]:
    """F-95..F-97: places, best first; seats (team mode: both partners) that tie share one."""
    units = _units(state)
    totals = state.totals
    if state.rules.game_length is GameLength.HANDS:
        return tuple(tuple(p) for p in _places(units, totals))
    out: list[list[int]] = _places([u for u in units if state.active[u[0]]], totals)
    for group in reversed(state.eliminated):
        out.extend(_places([u for u in units if u[0] in group], totals))
    return tuple(tuple(p) for p in out)
