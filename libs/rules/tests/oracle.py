"""A brute-force oracle for the solver: exhaustive search built only on the meld validator.

It knows nothing of the solver's candidates or bitmasks: it tries every subset of the hand as
a meld, asks :func:`masa_rules.melds.readings` whether it is one, and keeps the best.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from itertools import combinations

from masa_rules.cards import Card
from masa_rules.melds import MeldError, readings
from masa_rules.ruleset import RuleSet
from masa_rules.solver import hand_penalty


def _best_value(cards: tuple[Card, ...], rules: RuleSet, opening: bool) -> int | None:
    try:
        return readings(list(cards), rules, opening=opening)[0].value(rules)
    except MeldError:
        return None


def oracle_best(hand: Sequence[Card], rules: RuleSet, *, opening: bool) -> tuple[int, int]:
    """(greatest total meld value, least leftover penalty) over all disjoint meld choices.

    With ``opening`` the value respects F-13; the penalty search never does (it is not an
    opening). Both objectives are computed by the same exhaustive recursion.
    """
    key_order = sorted(hand, key=lambda c: c.index)

    @cache
    def best(rest: tuple[Card, ...], objective: str) -> int:
        if not rest:
            return 0
        first, others = rest[0], rest[1:]
        result = best(others, objective) - (
            hand_penalty([first], rules) if objective == "penalty" else 0
        )
        for size in range(2, len(others) + 1):
            for combo in combinations(range(len(others)), size):
                group = (first, *(others[i] for i in combo))
                value = _best_value(group, rules, opening and objective == "value")
                if value is None:
                    continue
                remaining = tuple(c for i, c in enumerate(others) if i not in combo)
                gain = value if objective == "value" else 0
                result = max(result, gain + best(remaining, objective))
        return result

    start = tuple(key_order)
    return best(start, "value"), -best(start, "penalty")


def oracle_max_pairs(hand: Sequence[Card], rules: RuleSet) -> int:
    """F-15 by exhaustive pairing."""
    from masa_rules.melds import is_pair

    @cache
    def best(rest: tuple[Card, ...]) -> int:
        if len(rest) < 2:
            return 0
        first, others = rest[0], rest[1:]
        result = best(others)
        for i, card in enumerate(others):
            if is_pair(first, card, rules):
                result = max(result, 1 + best(others[:i] + others[i + 1 :]))
        return result

    return best(tuple(sorted(hand, key=lambda c: c.index)))


def oracle_can_open(
    hand: Sequence[Card], rules: RuleSet, threshold: int, forced: Card | None, keep: int
) -> bool:
    """F-30/F-40 by exhaustion: disjoint opening melds worth ``threshold``, holding ``forced``,
    leaving at least ``keep`` cards."""
    ordered = tuple(sorted(hand, key=lambda c: c.index))

    @cache
    def search(rest: tuple[Card, ...], value: int, used_forced: bool, left: int) -> bool:
        if not rest:
            return value >= threshold and (forced is None or used_forced) and left >= keep
        first, others = rest[0], rest[1:]
        if search(others, value, used_forced, left + 1):
            return True
        for size in range(2, len(others) + 1):
            for combo in combinations(range(len(others)), size):
                group = (first, *(others[i] for i in combo))
                meld_value = _best_value(group, rules, True)
                if meld_value is None:
                    continue
                remaining = tuple(c for i, c in enumerate(others) if i not in combo)
                has = used_forced or (forced is not None and forced in group)
                if search(remaining, value + meld_value, has, left):
                    return True
        return False

    return search(ordered, 0, False, 0)
