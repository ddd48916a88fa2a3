"""``masa-load`` against the running stack: the console script, the public API only, a bounded
run, a JSON report; closed tables under a rate cap it never exceeds, and live tables with bot
seats, watch streams and think times."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from masa_platform.testing import token


def _masa_load(run_dir: str, *args: str) -> tuple[dict[str, Any], str, float]:
    """The console script with ``run_dir`` as ``make run``'s run folder: it signs its tokens
    with the issuer key kept there unless given a token file."""
    started = time.monotonic()
    done = subprocess.run(
        [str(Path(sys.executable).parent / "masa-load"), *args],
        env={**os.environ, "MASA_RUN_DIR": run_dir},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr, time.monotonic() - started


@pytest.mark.parametrize("moves", ["call", "stream"])
def test_closed_tables_of_a_mix_stay_under_the_rate_cap(stack: dict[str, str], moves: str) -> None:
    """Moves as SubmitAction calls, or as messages of SubmitActions streams (issue 14)."""
    rate = 40.0
    report, progress, seconds = _masa_load(
        stack["run_dir"], "--address", stack["table-engine"], "--tables", "8", "--mix", "elevator=3,fiftyone=1",
        "--rate", str(rate), "--warmup", "1", "--duration", "4", "--moves", moves,
    )  # fmt: skip
    # It stops by itself: warm-up, window and a short wind-down, not much more.
    assert seconds < 30
    assert report["moves"] == moves
    assert report["address"] == stack["table-engine"]
    assert report["game_mix"] == {"elevator": 3, "fiftyone": 1}
    assert report["refused"] == {}, report["refused"]
    # Never above the cap, yet near it. An action counts when its answer arrives in the window,
    # so besides the send that opens the window, the sends still in flight when it opened (one
    # per table at most) may count: a CI run on a loaded machine counted 162 against 161.
    assert rate * 4 * 0.5 <= report["accepted_actions"] <= rate * 4 + 1 + 8
    submits = report["submit_action_ms"]
    assert submits["count"] == report["accepted_actions"]
    assert sum(submits["histogram_ms"].values()) == submits["count"]
    assert set(report["submit_action_ms_by_game"]) == {"elevator", "fiftyone"}
    assert submits["p50"] <= submits["p99"] <= submits["max"]
    assert "accepted" in progress


def test_live_tables_with_bot_seats_play_through_watch_streams(
    stack: dict[str, str], tmp_path: Path
) -> None:
    # Tokens from a token file, as for a deployment whose issuer key the operator does not
    # hand out: no run folder holds an issuer key to fall back on.
    tokens = {
        "service": token("matchmaking", "matchmaking"),
        "players": [token(f"file-player-{n}") for n in range(8)],
    }
    token_file = tmp_path / "tokens.json"
    token_file.write_text(json.dumps(tokens))
    report, _, _ = _masa_load(
        str(tmp_path / "no-run"), "--address", stack["table-engine"], "--tables", "4", "--seats", "4", "--humans", "2",
        "--live", "0.05", "0.2", "--turn-seconds", "20", "--token-file", str(token_file),
        "--warmup", "1", "--duration", "4", "--quiet",
    )  # fmt: skip
    assert report["tables_kind"] == "live"
    assert report["human_seats"] == 2
    # Each human move reads the seat's view first, then submits it.
    assert report["accepted_actions"] > 4
    assert report["get_table_ms"]["count"] >= report["accepted_actions"]
    assert report["refused"] == {}


def test_bad_options_are_refused_before_any_call() -> None:
    done = subprocess.run(
        [str(Path(sys.executable).parent / "masa-load"), "--address", "127.0.0.1:1",
         "--mix", "poker", "--duration", "1"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "unknown game 'poker'" in done.stderr
