"""``masa play`` in a pseudo-terminal against the real stack: the board and hand appear, an
illegal move is explained with its rule id, legal moves go through, help and quit work."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

WAIT_SECONDS = 30.0


class Terminal:
    """A child process on a pseudo-terminal, read with deadlines (never a bare sleep)."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.master, slave = pty.openpty()
        self.process = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True
        )
        os.close(slave)
        self.seen = ""

    def expect(self, pattern: str, timeout: float = WAIT_SECONDS) -> re.Match[str]:
        """Wait until ``pattern`` appears in what was printed after the last match."""
        deadline = time.monotonic() + timeout
        while True:
            found = re.search(pattern, self.seen)
            if found:
                self.seen = self.seen[found.end() :]
                return found
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{pattern!r} not seen; the terminal shows:\n{self.seen}")
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.master, 65536)
                except OSError:  # the child closed the terminal
                    chunk = b""
                if not chunk and self.process.poll() is not None:
                    raise AssertionError(f"exited before {pattern!r}:\n{self.seen}")
                self.seen += chunk.decode(errors="replace").replace("\r\n", "\n")

    def send(self, line: str) -> None:
        os.write(self.master, (line + "\n").encode())

    def close(self) -> int:
        try:
            return self.process.wait(WAIT_SECONDS)
        finally:
            os.close(self.master)


def test_masa_play_elevator_in_a_terminal(stack: dict[str, str]) -> None:
    env = {**os.environ, "NO_COLOR": "1", "TERM": "dumb"}
    terminal = Terminal(
        [
            # The installed console script, as a player runs it.
            str(Path(sys.executable).parent / "masa"),
            "play",
            "--game",
            "elevator",
            "--player",
            "pty",
            "--address",
            stack["table-engine"],
        ],
        env,
    )
    try:
        terminal.expect(r"table \w+ created")
        hand = terminal.expect(r"your hand: ([^\n]+)\n").group(1).split()
        terminal.expect(r"your turn")
        terminal.send("help")
        terminal.expect(r"pass\s+pass and draw a card")
        terminal.send("dance")
        terminal.expect(r"unknown command 'dance'")
        terminal.send("play 8Q")
        terminal.expect(r"'8Q' is not a card")
        # Try each card of the hand: illegal ones are explained with their rule, the first
        # legal one is played (or, if none goes, the pass is legal).
        played = None
        for card in hand:
            terminal.send(f"play {card}")
            outcome = terminal.expect(
                rf"(not allowed \((E-\d+)\)[^\n]*\n  rule E-\d+: \w)|(pty \(you\) plays {card})"
            )
            if outcome.group(3):
                played = card
                break
        if played is None:
            terminal.send("pass")
            terminal.expect(r"pty \(you\) passes")
        terminal.send("look")
        terminal.expect(r"Elevator · table")
        terminal.send("quit")
        terminal.expect(r"bye")
    except BaseException:
        terminal.process.kill()
        raise
    finally:
        code = terminal.close()
    assert code == 0


def test_masa_play_fiftyone_salon_in_a_terminal(stack: dict[str, str]) -> None:
    env = {**os.environ, "NO_COLOR": "1", "TERM": "dumb"}
    terminal = Terminal(
        [
            str(Path(sys.executable).parent / "masa"),
            "play",
            "--game",
            "fiftyone",
            "--preset",
            "salon",
            "--player",
            "pty51",
            "--address",
            stack["table-engine"],
        ],
        env,
    )
    try:
        terminal.expect(r"51 salon · table \w+")
        terminal.expect(r"to open: 51 points or 5 pairs")
        hand = terminal.expect(r"your hand: ([^\n]+)\n").group(1).split()
        # Seat 0 starts the first hand: it discards without drawing (F-20).
        terminal.send("draw")
        terminal.expect(r"not allowed \(F-2\d\)[^\n]*\n  rule F-2\d: \w")
        terminal.send("open 2H")
        terminal.expect(r"not a valid move \(F-10\)[^\n]*\n  rule F-10: a meld has at least 3")
        terminal.send(f"discard {hand[0]}")
        terminal.expect(rf"pty51 \(you\) discards {re.escape(hand[0])}")
        terminal.send("quit")
        terminal.expect(r"bye")
    except BaseException:
        terminal.process.kill()
        raise
    finally:
        code = terminal.close()
    assert code == 0
