"""``masa-rules tournament`` and the hard Elevator search it seats (issue 23; 51's is in
test_fiftyone_search.py): the search
decides from the seat's view only; a tournament is a function of its seed, however many
processes play it; its figures add up."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import replace

import pytest
from masa_rules.cards import elevator_pack
from masa_rules.elevator import ElevatorRules, apply, legal_actions, new_game, position
from masa_rules.elevator.policies import greedy_policy
from masa_rules.elevator.search import search
from masa_rules.errors import RuleViolation
from masa_rules.shuffle import DrawStream
from masa_rules.tournament import Tournament, play_unit, summary


def tournament(*args: str) -> tuple[int, dict[str, object] | None, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "masa_rules", "tournament", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    return proc.returncode, json.loads(proc.stdout) if proc.stdout else None, proc.stderr


def test_P20_the_hard_search_decides_from_the_seats_view_only() -> None:
    """Two states that differ only in what seat 0 cannot see (the other hands and the stock,
    their sizes kept) get the same decision from the same stream."""
    state = new_game(ElevatorRules(), 4, "view-only")
    # Play a few moves so that the pile and the hands are not the deal's.
    for _ in range(6):
        state, _ = apply(state, greedy_policy(state, state.turn, DrawStream(b"x")))
    seat = state.turn
    others = [other for other in range(4) if other != seat]
    hidden = [card for other in others for card in state.hands[other]] + [*state.stock]
    reordered = list(reversed(hidden))
    hands = list(state.hands)
    taken = 0
    for other in others:
        size = len(state.hands[other])
        hands[other] = tuple(reordered[taken : taken + size])
        taken += size
    twin = replace(state, hands=tuple(hands), stock=tuple(reordered[taken:]))
    assert twin.hands != state.hands
    decisions = {
        search(game, seat, DrawStream(b"same"), budget_seconds=None, samples=4)
        for game in (state, twin)
    }
    assert len(decisions) == 1
    assert decisions.pop() in legal_actions(state, seat)


def test_the_search_is_anytime_and_needs_a_bound() -> None:
    state = new_game(ElevatorRules(), 3, "anytime")
    chosen = search(state, state.turn, DrawStream(b"a"), budget_seconds=0.001)
    assert chosen in legal_actions(state, state.turn)
    with pytest.raises(ValueError, match="budget"):
        search(state, state.turn, DrawStream(b"a"), budget_seconds=None)


def test_levels_rotate_round_the_seats_and_every_seat_unit_is_counted() -> None:
    played = Tournament(game="elevator", seats=("easy", "normal", "normal"), seed="rot")
    assert [played.levels_of(unit) for unit in range(3)] == [
        ("easy", "normal", "normal"),
        ("normal", "normal", "easy"),
        ("normal", "easy", "normal"),
    ]
    outcomes = [play_unit(played, unit) for unit in range(6)]
    figures = summary(played, outcomes)["levels"]
    assert isinstance(figures, dict)
    assert (figures["easy"]["units"], figures["normal"]["units"]) == (6, 12)
    # An Elevator game has one winner (E-11).
    assert sum(outcome.won.count(True) for outcome in outcomes) == 6
    assert figures["easy"]["wins"] + figures["normal"]["wins"] == 6


def test_a_tournament_is_the_same_on_one_process_or_two() -> None:
    args = ("--game", "fiftyone", "--seats", "easy,normal,normal,normal", "--hands", "6")
    code, alone, _ = tournament(*args, "--seed", "jobs", "--jobs", "1")
    assert code == 0 and alone is not None
    code, split, _ = tournament(*args, "--seed", "jobs", "--jobs", "2")
    assert code == 0
    assert split == alone
    assert alone["unit"] == "hands" and alone["units"] == 6
    levels = alone["levels"]
    assert isinstance(levels, dict) and set(levels) == {"easy", "normal"}
    low, high = levels["normal"]["win_rate_ci95"]
    assert low <= levels["normal"]["win_rate"] <= high


def test_hard_plays_elevator_and_51_tournaments_and_a_bad_request_is_exit_2() -> None:
    code, result, _ = tournament(
        "--game",
        "elevator",
        "--seats",
        "hard,normal,normal",
        "--games",
        "3",
        "--seed",
        "h",
        "--budget-ms",
        "5",
    )
    assert code == 0 and result is not None
    assert result["budget_ms"] == 5 and result["levels"]["hard"]["units"] == 3  # type: ignore[index]
    code, result, _ = tournament(
        "--game",
        "fiftyone",
        "--preset",
        "classic",
        "--seats",
        "hard,normal",
        "--hands",
        "4",
        "--seed",
        "h",
    )
    assert code == 0 and result is not None
    assert result["levels"]["hard"]["units"] == 4  # type: ignore[index]
    for bad in (
        ("--game", "fiftyone", "--seats", "hard,expert", "--hands", "2", "--seed", "x"),
        ("--game", "elevator", "--seats", "normal,expert,normal", "--games", "2", "--seed", "x"),
        ("--game", "elevator", "--seats", "normal,normal", "--games", "2", "--seed", "x"),
        ("--game", "elevator", "--seats", "normal,normal,normal", "--games", "0", "--seed", "x"),
    ):
        code, result, error = tournament(*bad)
        assert (code, result) == (2, None) and error.startswith("masa-rules: ")
    with pytest.raises(RuleViolation):
        Tournament(game="fiftyone", seats=("normal",) * 4, seed="t", teams=True, preset="x")


def test_the_search_keeps_its_budget_on_a_hand_of_hundreds_of_orderings() -> None:
    """Eight eights of two packs on a joker make thousands of E-5 orderings; the search counts
    listing them against its budget and checks its clock after every play-out (a round of them
    all took 1 s here, and three times that on a loaded machine)."""
    eights = ["8H", "8S", "8D", "8C", "8H#1", "8S#1", "8D#1", "8C#1"]
    hands = [eights, ["3C"], ["4D"], ["5H"], ["6S"], ["7D"]]
    pile = ["9C", "XR"]
    placed = {code for hand in hands for code in hand} | set(pile)
    stock = [card.code for card in elevator_pack(2) if card.code not in placed]
    state = position(hands, pile=pile, stock=stock, rules=ElevatorRules(decks=2))
    assert len(legal_actions(state, 0)) > 1000
    started = time.thread_time()
    action = search(state, 0, DrawStream(b"orderings"), budget_seconds=0.05)
    assert time.thread_time() - started < 0.5
    assert action in legal_actions(state, 0)


def test_P30_whole_games_for_a_stake_pay_each_level_by_the_ledgers_split() -> None:
    """Every seat stakes 100 on each of 6 Elevator games, paid 70/30 less a 5% rake: the chips
    the levels won add up to minus the rake of every game, and a 51 tournament of single hands
    cannot be played for chips."""
    code, result, _ = tournament(
        "--game", "elevator", "--seats", "normal,normal,easy", "--games", "6", "--seed", "chips",
        "--stake", "100", "--payout", "7000,3000", "--rake", "500",
    )  # fmt: skip
    assert code == 0 and result is not None
    assert (result["stake"], result["rake_basis_points"], result["place_shares"]) == (
        100,
        500,
        [7000, 3000],
    )
    levels = result["levels"]
    assert isinstance(levels, dict)
    won = sum(figures["average_chips"] * figures["units"] for figures in levels.values())
    assert round(won) == -15 * 6
    code, _, error = tournament(
        "--game", "fiftyone", "--seats", "normal,normal", "--preset", "classic",
        "--hands", "2", "--seed", "x", "--stake", "10",
    )  # fmt: skip
    assert code == 2 and "P-30" in error
    code, _, error = tournament(
        "--game", "elevator", "--seats", "normal,normal,normal", "--games", "1", "--seed", "x",
        "--stake", "10", "--payout", "3000,7000",
    )  # fmt: skip
    assert code == 2 and "P-30" in error
    code, _, error = tournament(
        "--game", "elevator", "--seats", "normal,normal,normal", "--games", "1", "--seed", "x",
        "--rake", "500",
    )  # fmt: skip
    assert code == 2 and "needs a stake" in error
