"""The ``masa-rules`` command-line contract (meld, solve, batch, exit codes)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def run(*args: str, stdin: str = "") -> tuple[int, list[dict[str, object]], str]:
    proc = subprocess.run(
        [sys.executable, "-m", "masa_rules", *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    return proc.returncode, lines, proc.stderr


def test_meld_answers_valid_and_invalid_with_exit_zero() -> None:
    assert run("meld", "QS", "KS", "AS")[:2] == (
        0,
        [{"valid": True, "kind": "run", "value": 31, "cards": ["QS", "KS", "AS"]}],
    )
    code, [answer], _ = run("meld", "--preset", "classic", "AH", "2H", "3H")
    assert code == 0 and answer["valid"] is False and answer["reason"] == "F-11"
    assert isinstance(answer["message"], str) and answer["message"]


def test_meld_annotates_jokers_and_lists_readings_on_request() -> None:
    _, [answer], _ = run("meld", "--readings", "8H", "9H", "XR")
    assert answer["cards"] == ["8H", "9H", "XR=10H"]
    readings = answer["readings"]
    assert isinstance(readings, list)
    assert [r["cards"] for r in readings] == [
        ["8H", "9H", "XR=10H"],
        ["XR=7H", "8H", "9H"],
    ]


def test_solve_reports_the_best_opening_and_pairs() -> None:
    code, [answer], _ = run("solve", "8H", "9H", "10H", "10S", "10D", "XR", "2C")
    assert code == 0
    assert answer["best_value"] == 57
    assert answer["melds"] == [["8H", "9H", "10H"], ["10S", "XR=10H", "10D"]]
    assert answer["leftover"] == ["2C"]
    assert answer["can_open"] is True and answer["threshold"] == 51
    _, [high], _ = run("solve", "--threshold", "81", "8H", "9H", "10H")
    assert high["can_open"] is False and high["threshold"] == 81


def test_F43_F52_solve_can_open_with_five_pairs_and_a_card_to_discard() -> None:
    pairs = ["2S", "2S", "3H", "3H", "4D", "4D", "5C", "5C", "6S", "6S"]
    _, [answer], _ = run("solve", *pairs, "9D")
    assert answer["max_pairs"] == 5 and answer["can_open"] is True
    _, [exact], _ = run("solve", *pairs)
    assert exact["max_pairs"] == 5 and exact["can_open"] is False
    _, [remi], _ = run("solve", "--preset", "remi", *pairs, "9D")
    assert remi["can_open"] is False


@pytest.mark.parametrize(
    "args",
    [
        ("meld", "ZZ"),
        ("solve", "8H", "8H", "8H"),
        ("meld",),
        ("solve", "--preset", "poker", "8H"),
        ("solve", "--threshold", "0", "8H"),
        ("frobnicate",),
    ],
)
def test_unusable_input_exits_two_with_one_line_on_stderr(args: tuple[str, ...]) -> None:
    code, lines, err = run(*args)
    assert code == 2 and lines == []
    assert len(err.strip().splitlines()) == 1


def test_batch_answers_every_line_in_order_and_survives_bad_lines() -> None:
    stdin = (
        "\n".join(
            [
                json.dumps({"preset": "remi", "cards": ["AH", "2H", "3H"]}),
                "not json",
                json.dumps({"cards": ["ZZ"]}),
                json.dumps({"cards": "8H"}),
                json.dumps({"preset": "classic", "cards": ["AH", "2H", "3H"]}),
            ]
        )
        + "\n"
    )
    code, lines, _ = run("meld", "--batch", stdin=stdin)
    assert code == 0 and len(lines) == 5
    assert lines[0]["valid"] is True and lines[0]["value"] == 6
    assert all("error" in line for line in lines[1:4])
    assert lines[4]["reason"] == "F-11"
    requests = [
        {"cards": ["QS", "KS", "AS", "2D"], "threshold": 30},
        # F-52: a hand that melds whole keeps no card to discard, so it cannot open.
        {"cards": ["QS", "KS", "AS"], "threshold": 30},
    ]
    stdin = "".join(json.dumps(request) + "\n" for request in requests)
    code, lines, _ = run("solve", "--batch", stdin=stdin)
    assert code == 0 and lines[0]["can_open"] is True and lines[0]["best_value"] == 31
    assert lines[1]["can_open"] is False and lines[1]["best_value"] == 31


@pytest.mark.parametrize(
    "args",
    [
        ["--preset", "remi", "--players", "2", "--seed", "ref31", "--policy", "greedy"],
        ["--preset", "classic", "--players", "3", "--seed", "ref34", "--policy", "random"],
        [
            "--preset",
            "remi",
            "--players",
            "2",
            "--hands",
            "3",
            "--seed",
            "ref125",
            "--policy",
            "greedy",
        ],
        [
            "--preset",
            "remi",
            "--players",
            "2",
            "--hands",
            "3",
            "--seed",
            "ref130",
            "--policy",
            "random",
        ],
    ],
    ids=["ref31", "ref34", "ref125", "ref130"],
)
def test_F13_F52_F55_F64_the_issue_8_simulations_end_with_a_ranking(args: list[str]) -> None:
    """The commands issue 8 reported never ending (ref31) or crashing (ref34, ref125) or
    breaking F-13 (ref130). The policies now draw another stream, so these are other games;
    the positions those games reached are tests of their own (test_fiftyone_rules.py)."""
    code, lines, err = run("simulate", "--game", "fiftyone", *args)
    assert code == 0, err
    assert lines[-1]["type"] == "game_end" and lines[-1]["ranking"]
