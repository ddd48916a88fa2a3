"""The compact hand of the hard search's play-outs agrees with the engine (issue 23): on
thousands of positions reached by random play, under every rule option, it lists the same legal
moves in the same order and reaches the same hand after each move (E-4..E-11)."""

from __future__ import annotations

import pytest
from masa_rules.elevator import ElevatorRules, apply, legal_actions, new_game
from masa_rules.elevator.actions import Action, Give, Pass, Play
from masa_rules.elevator.policies import random_policy
from masa_rules.elevator.rollout import GIVE, PASS, PLAY, Move, Sim
from masa_rules.elevator.state import State
from masa_rules.shuffle import DrawStream

VARIANTS = {
    "book": ElevatorRules(),
    "joker_any": ElevatorRules(joker_on_joker_any_colour=True),
    "no_forced_round": ElevatorRules(kopile_forces_round=False),
    "two_packs_no_sum": ElevatorRules(decks=2, rank_by_sum=False),
    "short_hands": ElevatorRules(hand_size=3),
}


def move_of(action: Action) -> Move:
    if isinstance(action, Play):
        return (PLAY, tuple(card.face_index for card in action.cards))
    if isinstance(action, Give):
        return (GIVE, (action.card.face_index,))
    assert isinstance(action, Pass)
    return (PASS, ())


def fields(sim: Sim) -> tuple[object, ...]:
    # A hand is a multiset: with two packs the engine removes one physical copy of a face and
    # the compact hand another, which changes the order and nothing else.
    return (
        [sorted(hand) for hand in sim.hands], sim.stock, sim.top, sim.up, sim.turn, sim.open_play, sim.after_play,
        sim.forced, sim.receiver, sim.givers, sim.over, sim.winner,
    )  # fmt: skip


def test_sim_of_reads_every_part_of_the_hand() -> None:
    state = new_game(ElevatorRules(), 4, "read")
    sim = Sim.of(state)
    assert sim.hands == [[card.face_index for card in hand] for hand in state.hands]
    # The stock is drawn from the end of the list.
    assert sim.stock[-1] == state.stock[0].face_index
    assert (sim.top, sim.turn, sim.open_play, sim.over) == (state.pile[-1].face_index, 0, -1, False)
    copy = sim.copy()
    copy.step(copy.legal_moves()[0])
    assert fields(sim) == fields(Sim.of(state))


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_E4_to_E11_the_compact_hand_agrees_with_the_engine_move_by_move(variant: str) -> None:
    rules = VARIANTS[variant]
    positions = 0
    for game in range(40):
        players = 3 + game % 4
        state: State = new_game(rules, players, f"agree-{variant}-{game}")
        rng = DrawStream(f"moves-{variant}-{game}".encode())
        sim = Sim.of(state)
        while not state.is_over:
            engine_moves = [move_of(action) for action in legal_actions(state, state.turn)]
            assert sorted(sim.legal_moves()) == sorted(engine_moves)
            greedy = sim.greedy_move()
            assert greedy in engine_moves
            action = random_policy(state, state.turn, rng)
            state, _ = apply(state, action)
            sim.step(move_of(action))
            assert fields(sim) == fields(Sim.of(state))
            positions += 1
        assert sim.legal_moves() == []
    assert positions > 2_000


def test_every_greedy_play_out_ends_within_its_horizon_and_scores_in_range() -> None:
    for game in range(60):
        state = new_game(ElevatorRules(), 3 + game % 4, f"out-{game}")
        sim = Sim.of(state)
        steps = 0
        while not sim.over:
            sim.step(sim.greedy_move())
            steps += 1
            assert steps < 5_000
        worth = Sim.of(state).play_out(0, 16)
        assert worth == 1.0 or -0.02 * 108 <= worth <= 0.0
