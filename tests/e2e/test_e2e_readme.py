"""The README's commands, run as a reader would run them: read from README.md itself, never
copied here, and on a PATH without ``uv``.

- every ``masa-rules`` example prints the output the README shows;
- the grpcurl walkthrough runs as written against a live stack, and each of its steps did what
  the README says; so do the ledger's commands. Both find the stack's addresses through
  ``masa endpoints``, never a port written in the README;
- the ``make play`` / ``make watch`` commands of the README, and every command ``make run``
  prints, work as printed (``make run`` itself starts the stack of these tests, see conftest).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess

import pytest
from e2e_stack import Stack
from e2e_terminal import ROOT, Terminal, assert_reads_well, without_uv

README = ROOT / "README.md"
# An address written out, which would hold only while make run has its default ports.
WRITTEN_ADDRESS = re.compile(r"\b\d{1,3}(\.\d{1,3}){3}:\d+|localhost:\d+")
WAIT_SECONDS = 60.0


def shell_blocks() -> list[str]:
    """The README's ```sh blocks, in order."""
    return re.findall(r"^```sh\n(.*?)^```", README.read_text(), re.MULTILINE | re.DOTALL)


def block_with(marker: str) -> str:
    (block,) = [block for block in shell_blocks() if marker in block]
    return block


def rules_examples() -> list[tuple[str, str]]:
    """Each ``$ command`` of the masa-rules block with the output shown under it ("" if none)."""
    examples: list[tuple[str, list[str]]] = []
    for line in block_with("$ masa-rules").splitlines():
        if line.startswith("$ "):
            examples.append((line[2:], []))
        else:
            examples[-1][1].append(line.strip())
    return [(command, "".join(shown)) for command, shown in examples]


@pytest.mark.parametrize(("command", "shown"), rules_examples(), ids=lambda v: str(v)[:40])
def test_every_masa_rules_example_prints_what_the_readme_shows(command: str, shown: str) -> None:
    ran = subprocess.run(
        ["bash", "-c", f". .venv/bin/activate && {command}"],
        cwd=ROOT,
        env=without_uv(),
        capture_output=True,
        text=True,
        timeout=WAIT_SECONDS,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    printed = [json.loads(line) for line in ran.stdout.splitlines()]
    assert printed, "no output"
    if shown:
        # The README wraps long answers over lines; the command prints one line of JSON.
        assert printed == [json.loads(shown)]
    elif command.startswith("masa-rules simulate"):
        assert printed[-1]["type"] == "game_end"


def test_the_grpcurl_walkthrough_runs_as_written(stack: dict[str, str]) -> None:
    """From the repository's root, as the README says; the stack's run folder is elsewhere, so
    ``masa token`` and ``masa endpoints`` are told where (``make run`` in the checkout keeps it
    in ``.masa``)."""
    script = block_with("TableService/$2")
    assert not WRITTEN_ADDRESS.search(script), "the walkthrough must ask masa endpoints"
    ran = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=ROOT,
        env={**without_uv(), "MASA_RUN_DIR": stack["run_dir"]},
        capture_output=True,
        text=True,
        timeout=WAIT_SECONDS,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr
    out = ran.stdout
    assert "masa.table.v1.TableService" in out
    # The create and the watch each answered with alice's seat view of the new table.
    assert out.count('"player_id": "alice"') >= 2
    # alice's discard was accepted, and the watch in the background saw it too.
    assert out.count('"discarded": {') >= 2
    # Leaving ended the training table, finished (P-12), and the watch ended with the game.
    assert '"state": "STATE_FINISHED"' in out
    assert '"game_finished": {' in out and '"game_abandoned"' not in out
    assert "ERROR" not in ran.stderr


def test_the_ledger_commands_run_as_written(running_stack: Stack) -> None:
    """The README's chips example: a grant, the balance it made, and the ledger's own check."""
    run_dir = running_stack.run_dir
    script = block_with("LedgerService/GrantChips")
    assert not WRITTEN_ADDRESS.search(script), "the ledger's commands must ask masa endpoints"
    script = script.replace("sqlite:///.masa/", f"sqlite:///{run_dir}/")
    ran = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", f". .venv/bin/activate\n{script}"],
        cwd=ROOT,
        env={**without_uv(), "MASA_RUN_DIR": str(run_dir)},
        capture_output=True,
        text=True,
        timeout=WAIT_SECONDS,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr
    assert '"player_id": "alice"' in ran.stdout
    assert re.search(r'"available": "?\d', ran.stdout), ran.stdout


def test_the_play_and_watch_commands_of_the_readme_work_without_uv(running_stack: Stack) -> None:
    block = block_with("make play GAME=elevator")
    commands = [line.split("#")[0].strip() for line in block.splitlines()]
    play = next(command for command in commands if command == "make play GAME=elevator")
    watch = next(command for command in commands if command.startswith("make watch"))
    env = {**without_uv(), "MASA_RUN_DIR": str(running_stack.run_dir)}
    terminal = Terminal(["bash", "-c", play], env, cwd=ROOT)
    try:
        table_id = terminal.expect(r"table (\w+) created").group(1)
        terminal.expect(rf"make watch TABLE={table_id}\n")
        terminal.expect(r"your hand: ")
        spectator = Terminal(["bash", "-c", watch.replace("TABLE_ID", table_id)], env, cwd=ROOT)
        try:
            spectator.expect(rf"Elevator · table {table_id}")
        finally:
            spectator.close()
        terminal.send("quit")
        terminal.expect(r"bye")
        assert terminal.wait() == 0
    finally:
        terminal.close()
    assert_reads_well(terminal.transcript, ["quit"])


def test_every_command_make_run_prints_works_as_printed(running_stack: Stack) -> None:
    printed = running_stack.printed.read_text()
    steps = [
        line.split("  #")[0].strip()
        for line in printed.split("Next, in another terminal in this folder:\n", 1)[1].splitlines()
        if line.strip()
    ]
    plays = [step for step in steps if "make play" in step or "make practice" in step]
    rest = [step for step in steps if step not in plays]
    # The stack of these tests runs in another folder, which the printed commands name.
    where = f"MASA_RUN_DIR={running_stack.run_dir} "
    assert [step.removeprefix(where) for step in plays] == [
        "make play",
        "make practice LOBBY=elevator PLAYERS=2",
        "make play LOBBY=elevator",
        "make play LOBBY=training-51",
    ]
    assert [step.removeprefix(where) for step in rest][1:4] == [
        "masa lobbies",
        "masa nodes",
        "masa endpoints",
    ]
    assert len(rest) == 5, steps
    env = without_uv()
    practice: Terminal | None = None
    try:
        for play in plays:
            if "make practice" in play:
                # Practice players go on in the background, for the chip lobby that follows.
                practice = Terminal(["bash", "-c", play], env, cwd=ROOT)
                practice.expect(r"2 practice players in elevator, until Ctrl-C")
                continue
            terminal = Terminal(["bash", "-c", play], env, cwd=ROOT)
            try:
                if play.removeprefix(where) == "make play":
                    terminal.expect(r"pick a lobby by number or id")
                    terminal.send("training-elevator")
                # The Elevator chip lobby seats the player with the two practice players (three
                # players start a table after 10 s); bots never sit at it (P-13).
                terminal.expect(r"seated at table \w+, seat \d+")
                terminal.expect(r"your hand: ")
                terminal.send("quit")
                terminal.expect(r"bye")
                assert terminal.wait() == 0
            finally:
                terminal.close()
    finally:
        if practice is not None:
            try:
                # What a Ctrl-C in its terminal sends: the practice players leave and stop.
                os.killpg(practice.process.pid, signal.SIGINT)
                practice.expect(r"practice players stopped")
            finally:
                practice.close()
    ran = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", "\n".join(rest)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=WAIT_SECONDS,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert "masa.matchmaking.v1.MatchmakingService" in ran.stdout
    assert re.search(r"salon-51 +51 salon, singles, 4 seats, 100 chips", ran.stdout)
    assert re.search(r"table-engine-1 +127\.0\.0\.1:\d+ +\d+ +\d+ .* serving", ran.stdout)
    ledger = running_stack.addresses["ledger"]
    assert re.search(rf"^ledger +{re.escape(ledger)} +http://\S+/metrics +\d+$", ran.stdout, re.M)


def test_the_lobby_and_chips_commands_run_as_written(running_stack: Stack) -> None:
    """``masa lobbies``, ``balance``, ``history``, ``grant``, ``nodes`` and ``endpoints`` as the
    README shows them."""
    ran = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block_with("masa grant alice")],
        cwd=ROOT,
        env={**without_uv(), "MASA_RUN_DIR": str(running_stack.run_dir)},
        capture_output=True,
        text=True,
        timeout=WAIT_SECONDS,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr
    assert re.search(r"training-51 +51 salon, training, 4 seats, no chips", ran.stdout)
    assert re.search(r"granted 500 chips to alice \(grant:\w+\)", ran.stdout)
    assert re.search(r"alice: [\d,]+ chips \(\d+ held, [\d,]+ available\)", ran.stdout)
    assert re.search(r"table-engine-0 +127\.0\.0\.1:\d+ ", ran.stdout)
    assert f"the stack of {running_stack.run_dir} " in ran.stdout
