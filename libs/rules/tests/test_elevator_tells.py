"""What every seat's moves show everyone of its hand (E-4..E-9), kept in the state as tells for
the hard search to deal the hidden cards by; and the search's reading of them, checked
against the real hands of seats that play ``normal``."""

from __future__ import annotations

import random

from masa_rules.cards import PhysicalCard
from masa_rules.elevator import ElevatorRules, Give, Pass, Play, apply, legal_actions, new_game
from masa_rules.elevator.codec import state_from_json, state_to_json
from masa_rules.elevator.policies import greedy_policy, random_policy
from masa_rules.elevator.position import position
from masa_rules.elevator.rollout import Sim
from masa_rules.elevator.search import _agrees, _deal_unseen, _readings
from masa_rules.elevator.state import MAX_TELLS, Direction, State, Tell
from masa_rules.shuffle import DrawStream


def test_E8_a_forced_pass_is_told_with_the_cards_then_held() -> None:
    # Nothing of seat 0's goes on KS going up (E-4: red and higher), so it must pass.
    state = position([["3C", "4D", "2H"], ["5C"], ["9D"]], pile=["KS"], stock=["7S", "8C"])
    assert legal_actions(state, 0) == [Pass(0)]
    passed, _ = apply(state, Pass(0))
    top = PhysicalCard.parse("KS")
    # It drew a card since: its hand then is no longer its hand now plus what it played.
    assert passed.tells == ((Tell(top, Direction.ASCENDING, False, (), 3, 3, exact=False),), (), ())
    assert state_from_json(state_to_json(passed)) == passed


def test_E8_a_pass_is_told_voluntary_only_when_the_seat_could_have_played() -> None:
    """After a play a seat may pass (E-8); the pass is public as voluntary or not, and only
    one that was not says that nothing of the seat's could go on the top."""
    hands = [["9C", "3D", "4D"], ["KD"], ["QD"]]
    # 9C goes on 8H going up (black on red, higher): the pass is a choice.
    able = position(hands, pile=["8H"], stock=["6S"], after_play=True, open_play=2)
    passed, _ = apply(able, Pass(0))
    assert passed.tells[0][-1].may_pass
    # On a 10H nothing of seat 0's goes: the same pass was forced.
    unable = position(hands, pile=["TH"], stock=["6S"], after_play=True, open_play=2)
    passed, _ = apply(unable, Pass(0))
    assert not passed.tells[0][-1].may_pass


def test_E8_a_state_written_before_tells_reads_its_voids_as_forced_passes() -> None:
    state = position([["3C", "4D", "2H"], ["5C"], ["9D"]], pile=["KS"], stock=["7S", "8C"])
    written = state_to_json(state)
    del written["tells"]
    assert state_from_json(written).tells == ()
    written["voids"] = [{"top": "KS", "direction": "ascending", "held": 3}, None, None]
    top = PhysicalCard.parse("KS")
    assert state_from_json(written).tells == (
        (Tell(top, Direction.ASCENDING, False, (), 3, 3, exact=False),),
        (),
        (),
    )


def test_E4_E8_E9_tells_count_down_turn_inexact_on_taking_and_stay_bounded() -> None:
    seen = 0
    for game in range(30):
        state = new_game(ElevatorRules(), 4, f"tells-{game}")
        rng = DrawStream(f"tells-{game}".encode())
        while not state.is_over:
            seat = state.turn
            action = random_policy(state, seat, rng)
            before = state.tells[seat] if state.tells else ()
            hand = len(state.hands[seat])
            after_state, _ = apply(state, action)
            if after_state.is_over:
                break
            after = after_state.tells[seat]
            assert all(len(told) <= MAX_TELLS for told in after_state.tells)
            spent = len(action.cards) if isinstance(action, Play) else int(isinstance(action, Give))
            took = isinstance(action, Give) or (isinstance(action, Pass) and bool(state.stock))
            carried = [t for t in before if t.held > spent][-(MAX_TELLS - 1) :]
            assert [(t.held, t.exact) for t in after[: len(carried)]] == [
                (t.held - spent, t.exact and not took) for t in carried
            ]
            if isinstance(action, Play | Pass):
                made = after[-1]
                played = action.cards if isinstance(action, Play) else ()
                assert (made.top, made.direction, made.played, made.hand) == (
                    state.pile[-1],
                    state.direction,
                    played,
                    hand,
                )
                assert made.held == hand - len(played)
                seen += 1
            state = after_state
    assert seen > 500


def _greedy_games(games: int) -> list[State]:
    """Every position of ``games`` four-seat games in which every seat plays ``normal``."""
    positions: list[State] = []
    for game in range(games):
        state = new_game(ElevatorRules(), 4, f"read-{game}")
        rng = DrawStream(f"read-{game}".encode())
        while not state.is_over:
            positions.append(state)
            state, _ = apply(state, greedy_policy(state, state.turn, rng))
    return positions


def test_P20_the_reading_of_normal_seats_tells_holds_for_their_real_hands() -> None:
    """Where every seat plays normal, the real hands are one of the deals the search may
    sample: each seat holds at least as many cards its tells allow as its cohorts count, and
    normal with its real hand makes every one of its exact moves."""
    cohorts = exact = 0
    for state in _greedy_games(25):
        seat = state.turn
        real = Sim.of(state)
        for reading in _readings(state, seat):
            hand = real.hands[reading.seat]
            for count, excluded in reading.cohorts:
                assert sum(not excluded[face] for face in hand) >= count
                cohorts += 1
            assert _agrees(real, reading)
            exact += len(reading.exact)
    assert cohorts > 500 and exact > 500


def test_P20_samples_agree_with_what_normal_seats_showed() -> None:
    """The deals a search samples keep every seat's hand size and, nearly always, agree with
    the other seats' cohorts and exact moves."""
    deals = agreed = 0
    for state in _greedy_games(6)[::7]:
        if state.phase.value != "play":
            continue
        seat = state.turn
        root = Sim.of(state)
        unseen = [f for o in range(4) if o != seat for f in root.hands[o]] + root.stock
        readings = _readings(state, seat)
        for draw in range(5):
            sample = _deal_unseen(root, seat, unseen, readings, random.Random(draw))
            assert [len(h) for h in sample.hands] == [len(h) for h in state.hands]
            dealt = [f for o in range(4) if o != seat for f in sample.hands[o]] + sample.stock
            assert sorted(dealt) == sorted(unseen)
            assert sample.hands[seat] == root.hands[seat]
            deals += 1
            fits = all(_agrees(sample, reading) for reading in readings) and all(
                sum(not excluded[face] for face in sample.hands[reading.seat]) >= count
                for reading in readings
                for count, excluded in reading.cohorts
            )
            agreed += fits
    assert deals > 50
    assert agreed >= 0.97 * deals
