"""E-8: what a forced pass shows everyone of a hand, kept in the state for the hard search to
sample the hidden cards consistently with it."""

from __future__ import annotations

import random

from masa_rules.cards import PhysicalCard
from masa_rules.elevator import ElevatorRules, Give, Pass, Play, apply, legal_actions, new_game
from masa_rules.elevator.codec import state_from_json, state_to_json
from masa_rules.elevator.moves import can_start
from masa_rules.elevator.policies import random_policy
from masa_rules.elevator.position import position
from masa_rules.elevator.rollout import Sim
from masa_rules.elevator.search import _deal_unseen, _voids
from masa_rules.elevator.state import Direction, Void
from masa_rules.shuffle import DrawStream


def test_E8_a_forced_pass_shows_a_void_that_plays_and_gives_wear_down() -> None:
    # Nothing of seat 0's goes on KS going up (E-4: red and higher), so it must pass.
    state = position([["3C", "4D", "2H"], ["5C"], ["9D"]], pile=["KS"], stock=["7S", "8C"])
    assert legal_actions(state, 0) == [Pass(0)]
    passed, _ = apply(state, Pass(0))
    top = PhysicalCard.parse("KS")
    assert passed.voids == (Void(top, Direction.ASCENDING, 3), None, None)
    # Round trip, and a state written before voids existed has none.
    assert state_from_json(state_to_json(passed)) == passed
    old = state_to_json(passed)
    del old["voids"]
    assert state_from_json(old).voids == ()


def test_E8_voids_count_down_by_the_cards_played_and_vanish_at_zero() -> None:
    voided = 0
    for game in range(30):
        state = new_game(ElevatorRules(), 4, f"voids-{game}")
        rng = DrawStream(f"voids-{game}".encode())
        while not state.is_over:
            seat = state.turn
            action = random_policy(state, seat, rng)
            before = state.voids[seat] if state.voids else None
            forced = isinstance(action, Pass) and legal_actions(state, seat) == [action]
            hand = len(state.hands[seat])
            state, _ = apply(state, action)
            after = state.voids[seat] if state.voids else None
            if forced and not state.is_over:
                assert after is not None and after.held == hand
                voided += 1
            elif isinstance(action, Play) and before is not None:
                left = before.held - len(action.cards)
                assert (after.held if after else 0) == max(left, 0)
            elif isinstance(action, Give) and before is not None and not state.is_over:
                assert (after.held if after else 0) == max(before.held - 1, 0)
    assert voided > 20


def test_P20_samples_deal_a_voided_seat_cards_that_could_not_go_on_its_top() -> None:
    rules = ElevatorRules()
    for game in range(20):
        state = new_game(rules, 4, f"sample-{game}")
        rng = DrawStream(f"sample-{game}".encode())
        while not state.is_over and not any(
            void is not None and other != state.turn for other, void in enumerate(state.voids)
        ):
            state, _ = apply(state, random_policy(state, state.turn, rng))
        if state.is_over:
            continue
        seat = state.turn
        root = Sim.of(state)
        unseen = [f for o in range(4) if o != seat for f in root.hands[o]] + root.stock
        voids = _voids(state, seat)
        for draw in range(20):
            sample = _deal_unseen(root, seat, unseen, voids, random.Random(draw))
            assert [len(h) for h in sample.hands] == [len(h) for h in state.hands]
            for other, void in enumerate(state.voids):
                if void is None or other == seat:
                    continue
                unable = [
                    face
                    for face in sample.hands[other]
                    if not can_start(PhysicalCard(face), void.top, void.direction, False)
                ]
                assert len(unable) >= min(void.held, len(state.hands[other]))
