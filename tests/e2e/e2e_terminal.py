"""A command on a real pseudo-terminal, as a player runs it, for the end-to-end tests.

A thread drains the terminal all the time, so a chatty program never blocks on a full terminal
buffer while a test does something else, and :meth:`Terminal.expect` waits for text with a
deadline (never a bare sleep). :func:`screen` turns what was written into the lines a terminal
would show (a carriage return overwrites the line), for checks on the whole transcript.
"""

from __future__ import annotations

import contextlib
import os
import pty
import re
import signal
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

from masa_platform.testing import sigint_as_in_a_terminal

WAIT_SECONDS = 60.0
# The repository's root, where `make` and `.venv` live.
ROOT = Path(__file__).resolve().parents[2]


def without_uv() -> dict[str, str]:
    """This environment as a machine without ``uv`` on PATH has it, and no make around us."""
    folders = [
        folder
        for folder in os.environ["PATH"].split(os.pathsep)
        if folder and not (Path(folder) / "uv").exists()
    ]
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "UV", "VIRTUAL_ENV")
    }
    return {**env, "PATH": os.pathsep.join(folders), "NO_COLOR": "1", "TERM": "dumb"}


def masa() -> str:
    """The installed ``masa`` console script."""
    return str(Path(sys.executable).parent / "masa")


class Terminal:
    """A child process on a pseudo-terminal, read by a thread, matched with deadlines."""

    def __init__(
        self, argv: list[str], env: dict[str, str], *, cwd: Path | None = None, echo: bool = True
    ) -> None:
        self.master, slave = pty.openpty()
        if not echo:
            attributes = termios.tcgetattr(slave)
            attributes[3] &= ~termios.ECHO
            termios.tcsetattr(slave, termios.TCSANOW, attributes)
        # A session of its own: the terminal is its controlling terminal, and closing kills
        # the whole group (make -> uv -> masa), not only the first process.
        with sigint_as_in_a_terminal():
            self.process = subprocess.Popen(
                argv,
                stdin=slave,
                stdout=slave,
                stderr=slave,
                env=env,
                cwd=cwd,
                close_fds=True,
                start_new_session=True,
            )
        os.close(slave)
        # Everything the terminal showed, and how much of it `expect` has consumed.
        self.transcript = ""
        self._cursor = 0
        self._changed = threading.Condition()
        self._closed = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # the child closed the terminal
                chunk = b""
            with self._changed:
                if not chunk:
                    self._closed = True
                    self._changed.notify_all()
                    return
                self.transcript += chunk.decode(errors="replace").replace("\r\n", "\n")
                self._changed.notify_all()

    @property
    def seen(self) -> str:
        """What was printed after the last match."""
        return self.transcript[self._cursor :]

    def expect(self, pattern: str, timeout: float = WAIT_SECONDS) -> re.Match[str]:
        """Wait until ``pattern`` appears in what was printed after the last match."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                found = re.compile(pattern).search(self.transcript, self._cursor)
                if found:
                    self._cursor = found.end()
                    return found
                left = deadline - time.monotonic()
                if self._closed:
                    raise AssertionError(f"exited before {pattern!r}:\n{self.seen[-3000:]}")
                if left <= 0:
                    raise AssertionError(
                        f"{pattern!r} not seen; the terminal shows:\n{self.seen[-3000:]}"
                    )
                self._changed.wait(left)

    def send(self, line: str) -> None:
        os.write(self.master, (line + "\n").encode())

    def send_eof(self) -> None:
        """Ctrl-D at the start of a line: the program reads the end of its input."""
        os.write(self.master, b"\x04")

    def wait(self, timeout: float = WAIT_SECONDS) -> int:
        """The exit code, once the child exits by itself."""
        code = self.process.wait(timeout)
        self._reader.join(timeout)
        return code

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self._reader.join(WAIT_SECONDS)
        os.close(self.master)


def screen(transcript: str) -> list[str]:
    """The lines a terminal shows for ``transcript``: ``\\r`` returns to the line's start."""
    lines = []
    for raw in transcript.split("\n"):
        shown = ""
        for part in raw.split("\r"):
            shown = part + shown[len(part) :]
        lines.append(shown.rstrip())
    return lines


def assert_reads_well(transcript: str, typed: list[str]) -> None:
    """The checks every terminal session must pass.

    - the prompt is never followed by output on its line: only by what the player typed;
    - players are named, never "seat 3";
    - a count of one is singular ("1 card").
    """
    for line in screen(transcript):
        if line.startswith("> "):
            assert line[2:].strip() in typed, f"output after the prompt: {line!r}"
    assert not re.search(r"\bseat \d", transcript), "a player is called by seat number"
    assert not re.search(r"\b1 (card|pair|hand)s\b", transcript), "a plural after 1"
