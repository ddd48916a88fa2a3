"""Every simulated game ends, within a bound on events (E-9, E-11, F-52, F-63, F-64, F-96,
issue 8).

2,000 games of each kind are played by the built-in policies, across presets, player counts,
team mode, both policies and text and integer seeds:

- 51: every table the presets allow (classic 2-4 and teams, salon 4 and teams, remi 2-4).
  1,960 games are one hand long (``hands=1``); every 50th game is a whole game (11 hands,
  or salon's elimination to the end). Hands are dealt independently, so one-hand games cover
  hands as well as whole games do, at a tenth of the cost; the whole games cover what only a
  game has (the dealer rotating, totals, eliminations and the end of the game). Every hand
  must end within :func:`fiftyone_hand_bound` events, every game within
  :func:`fiftyone_game_hands` hands, and so within their product of events, with its ranking.
- Elevator: a game is one hand; every one must end within the engine's own bound
  (:func:`elevator_action_bound`, argued in ``masa_rules.elevator.engine``) with a winner who
  holds no cards: E-9's repeated Kopile leaves no hand blocked with cards everywhere.

The games run on every core (two here), so the 4,000 games take about half a minute.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from masa_rules import elevator, fiftyone
from masa_rules.elevator import ElevatorRules, JokerStart
from masa_rules.elevator.policies import POLICIES as ELEVATOR_POLICIES
from masa_rules.fiftyone.policies import POLICIES as FIFTYONE_POLICIES
from masa_rules.policy import policy_stream
from masa_rules.ruleset import DeckExhausted, GameLength, RuleSet
from masa_rules.shuffle import Seed

GAMES = 2000
WHOLE_GAME_EVERY = 50
FIFTYONE_TABLES = [
    ("classic", 2, False),
    ("classic", 3, False),
    ("classic", 4, False),
    ("classic", 4, True),
    ("salon", 4, False),
    ("salon", 4, True),
    ("remi", 2, False),
    ("remi", 3, False),
    ("remi", 4, False),
]
ELEVATOR_RULES = [
    ElevatorRules(),
    ElevatorRules(joker_start=JokerStart.BURY),
    ElevatorRules(kopile_forces_round=False, joker_on_joker_any_colour=True),
]
POLICIES = ("random", "greedy")


def fiftyone_hand_bound(rules: RuleSet, players: int) -> int:
    """Events in one 51 hand, at most; a proof that every hand ends.

    - Stock draws: at most 106 + 105 (the pack, and in remi one reshuffle of the pile, F-63).
    - Turns: F-64 ends the hand once ``stall_rounds`` rounds of turns pass without a stock
      draw, so there are fewer than ``stall_rounds * players`` turns after each draw and
      before the first: ``turns <= (draws + 1) * stall_rounds * players``.
    - Events per turn, outside play: the draw or take (with a query: one per asked seat, the
      query and its end, a pair declaration) and the discard: at most ``players + 5``.
    - Play: every lay-down or lay-off moves a card from a hand to the table, and every joker
      retrieval leaves a natural card there; cards never leave the table but for retrieved
      jokers, so there are at most 2 * 106 of these in a hand; declarations, gösterge and
      bottom-card claims at most 3 per seat; the deal, reveal, hand end and game end 4.
    """
    draws = 106 + 105
    turns = (draws + 1) * rules.stall_rounds * players
    return turns * (players + 5) + 2 * 106 + 3 * players + 4


def fiftyone_game_hands(rules: RuleSet, hands: int | None) -> int:
    """Hands dealt in one 51 game, at most; with :func:`fiftyone_hand_bound`, a proof that
    every game ends.

    - A game of ``hands`` (or ``hands_per_game``, F-95) ends when that many hands are scored;
      with elimination (F-96) it ends at the latest after ``elimination_max_hands`` scored
      hands (or ``hands``, when fewer).
    - Every hand ends (:func:`fiftyone_hand_bound`) scored or replayed; only classic replays
      (F-63), and at most ``max_replays`` hands of a game.
    """
    if rules.game_length is GameLength.HANDS:
        scored = hands or rules.hands_per_game
    else:
        scored = min(hands or rules.elimination_max_hands, rules.elimination_max_hands)
    replays = (
        rules.max_replays if rules.deck_exhausted is DeckExhausted.REPLAY_IF_NONE_OPENED else 0
    )
    return scored + replays


def elevator_action_bound(state: elevator.State) -> int:
    """The bound ``masa_rules.elevator.engine`` argues: C cards, p players."""
    cards, players = 54 * state.decks, state.players
    return (
        cards + players * cards + (cards + 1) * (2 * players + cards * (2 * players - 1)) + players
    )


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one game showed: the most events in one of its hands (or actions, Elevator), the
    bound, the hands it scored, and whether it ended as it must."""

    case: int
    longest_hand: int
    bound: int
    hands_scored: int
    ended: bool
    whole_game_of: int | None = None
    winner_cards: int | None = None
    hands_dealt: int = 1
    hands_bound: int = 1


def seed_of(case: int, text: bool) -> Seed:
    return f"termination-{case}" if text else case


def play_fiftyone(case: int) -> Outcome:
    preset, players, teams = FIFTYONE_TABLES[case % len(FIFTYONE_TABLES)]
    policy = FIFTYONE_POLICIES[POLICIES[case // len(FIFTYONE_TABLES) % 2]]
    seed = seed_of(case, text=case % 2 == 0)
    whole = case % WHOLE_GAME_EVERY == 0
    rules = RuleSet.preset_named(preset)
    bound = fiftyone_hand_bound(rules, players)
    hands = None if whole else 1
    hands_bound = fiftyone_game_hands(rules, hands)
    state, events = fiftyone.start(rules, players, seed, teams=teams, hands=hands)
    rng = policy_stream("fiftyone", seed)
    in_hand, longest = len(events), 0
    while (
        state.phase is not fiftyone.Phase.OVER and in_hand <= bound and state.hand_no <= hands_bound
    ):
        state, events = fiftyone.apply(state, policy(state, state.to_act[0], rng))
        in_hand += len(events)
        if any(isinstance(e, fiftyone.HandEnded) for e in events):
            longest, in_hand = max(longest, in_hand), 0
    over = state.phase is fiftyone.Phase.OVER
    ranked = sorted(s for place in state.ranking for s in place) == list(range(players))
    length = rules.hands_per_game if rules.game_length is GameLength.HANDS else 0
    return Outcome(
        case,
        max(longest, in_hand),
        bound,
        state.hands_scored,
        over and ranked,
        whole_game_of=length if whole else None,
        hands_dealt=state.hand_no,
        hands_bound=hands_bound,
    )


def play_elevator(case: int) -> Outcome:
    rules = ELEVATOR_RULES[case % len(ELEVATOR_RULES)]
    players = 3 + case % 4
    policy = ELEVATOR_POLICIES[POLICIES[case // 4 % 2]]
    seed = seed_of(case, text=case // 8 % 2 == 0)
    state = elevator.new_game(rules, players, seed)
    rng = policy_stream("elevator", seed)
    bound = elevator_action_bound(state)
    while not state.is_over and state.action_count <= bound:
        state, _ = elevator.apply(state, policy(state, state.turn, rng))
    winner = None if state.winner is None else len(state.hands[state.winner])
    ended = state.end_reason == "out"
    return Outcome(case, state.action_count, bound, 1, ended, winner_cards=winner)


def played(game: str) -> Iterator[Outcome]:
    play = play_fiftyone if game == "fiftyone" else play_elevator
    # Spawned, not forked: a test worker may hold threads (gRPC, NATS clients of earlier
    # tests), and a child forked from it can inherit a held lock and never finish.
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(4, os.cpu_count() or 1), mp_context=spawn) as pool:
        yield from pool.map(play, range(GAMES), chunksize=25)


def test_E9_E11_2000_elevator_games_end_with_a_winner_holding_no_cards() -> None:
    outcomes = list(played("elevator"))
    assert len(outcomes) == GAMES
    for outcome in outcomes:
        assert outcome.longest_hand <= outcome.bound, outcome
        assert outcome.ended and outcome.winner_cards == 0, outcome


def test_F52_F63_F64_F96_2000_fiftyone_games_end_within_the_bound() -> None:
    outcomes = list(played("fiftyone"))
    assert len(outcomes) == GAMES
    for outcome in outcomes:
        assert outcome.longest_hand <= outcome.bound, outcome
        assert outcome.hands_dealt <= outcome.hands_bound, outcome
        assert outcome.ended, outcome
    whole = [o for o in outcomes if o.whole_game_of is not None]
    assert len(whole) == GAMES // WHOLE_GAME_EVERY
    for outcome in whole:
        # Classic and remi play 11 scored hands; salon plays to the last seat or team standing.
        assert outcome.hands_scored == (outcome.whole_game_of or outcome.hands_scored)
        assert outcome.hands_scored >= 1
