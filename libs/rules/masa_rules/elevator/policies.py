"""Simple players for simulations and bots: ``random`` and ``greedy``.

Each is a :data:`~masa_rules.policy.Policy`, ``(state, seat, rng) -> action``, choosing among
the seat's legal actions. Randomness comes only from the
:class:`~masa_rules.shuffle.DrawStream` passed in, so a seeded game plays the same every time.

>>> from masa_rules.elevator.position import position
>>> state = position([["9H", "KD", "XR"], ["3C"], ["4D"]], pile=["8S"])
>>> [card.code for card in greedy_policy(state, 0, DrawStream(b"doc")).cards]
['9H']
"""

from __future__ import annotations

from typing import Final

from masa_rules.cards import Rank
from masa_rules.elevator.actions import Action, Give, Pass, Play
from masa_rules.elevator.engine import legal_actions
from masa_rules.elevator.moves import POINTS, RANK, is_joker
from masa_rules.elevator.state import State
from masa_rules.errors import RuleViolation
from masa_rules.policy import Policy
from masa_rules.shuffle import DrawStream

__all__ = ["POLICIES", "greedy_policy", "random_policy"]

# The random policy passes voluntarily once in this many chances: often enough to exercise
# E-8 and Kopile, rarely enough that games still look like games.
_VOLUNTARY_PASS_ODDS: Final = 8
# The greedy policy spends its jokers, aces and 2s freely once it holds this few cards.
_ENDGAME_HAND: Final = 2


def _legal(state: State, seat: int) -> list[Action]:
    actions = legal_actions(state, seat)
    if not actions:
        raise RuleViolation("E-3", f"seat {seat} has nothing to do now")
    return actions


def random_policy(state: State, seat: int, rng: DrawStream) -> Action:
    """Uniform among the plays; a voluntary pass only once in eight chances."""
    actions = _legal(state, seat)
    plays = [action for action in actions if isinstance(action, Play)]
    if plays and len(plays) < len(actions):
        if rng.below(_VOLUNTARY_PASS_ODDS) == 0:
            return actions[-1]
        return plays[rng.below(len(plays))]
    return actions[rng.below(len(actions))]


def greedy_policy(state: State, seat: int, rng: DrawStream) -> Action:
    """Shed as many cards as possible, keeping jokers, aces and 2s for when they are needed.

    Ordinary plays come first, the most cards, then the smallest step from the top (leaving
    room for the next play). Special cards are played only when nothing else goes, and then
    only if a voluntary pass is not allowed or the hand is nearly empty. A giver parts with
    its highest-ranking ordinary card, which also lowers its E-11 rank sum.
    """
    actions = _legal(state, seat)
    if isinstance(actions[0], Give):
        gives = [action for action in actions if isinstance(action, Give)]
        return min(
            gives, key=lambda give: (_special(give.card.face_index), -POINTS[give.card.face_index])
        )
    plays = [action for action in actions if isinstance(action, Play)]
    if not plays:
        return actions[0]
    top = RANK[state.pile[-1].face_index]
    ordinary = [play for play in plays if not _special(play.cards[0].face_index)]
    if ordinary:
        return min(
            ordinary,
            key=lambda play: (-len(play.cards), abs(RANK[play.cards[0].face_index] - top)),
        )
    can_pass = isinstance(actions[-1], Pass)
    if can_pass and len(state.hands[state.turn]) > _ENDGAME_HAND:
        return actions[-1]
    return min(plays, key=lambda play: (is_joker(play.cards[0]), -len(play.cards)))


def _special(face: int) -> bool:
    """Jokers, aces and 2s: the cards that free or turn the pile (E-6, E-7)."""
    return RANK[face] in (0, Rank.ACE, Rank.TWO)


POLICIES: Final[dict[str, Policy[State, Action]]] = {
    "random": random_policy,
    "greedy": greedy_policy,
}
