"""What the session's stack fixture (``conftest.running_stack``) hands the end-to-end tests.

(Kept out of conftest.py so that tests import it by a unique name.)
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from e2e_terminal import ROOT, without_uv
from masa_platform.testing import keyring

# make run waits for as long as its services keep becoming ready (MASA_RUN_STALL_SECONDS, 180,
# without one); in the suite they start while the chaos runs and five other workers share two
# cores, so the fixture gives the whole stack a budget of its own as well.
READY_SECONDS = 180.0
STOP_SECONDS = 60.0


@dataclass(frozen=True)
class Stack:
    """A running stack: service addresses by name, its run folder, what the launcher printed."""

    addresses: dict[str, str]
    run_dir: Path
    printed: Path


@contextlib.contextmanager
def launch_stack(base: Path, extra_env: Mapping[str, str] | None = None) -> Iterator[Stack]:
    """``make run`` on free ports with its run folder in ``base``, ``extra_env`` on top; stopped
    on the way out like a Ctrl-C, with the tails of its logs printed for a failing test."""
    run_dir = base / ".masa"
    printed = base / "launcher.out"
    # The stack keeps its keys in its run folder: give it this test process's, so that the
    # tests sign players', operators' and services' tokens as the stack trusts them.
    shutil.copytree(keyring().directory, run_dir / "keys", dirs_exist_ok=True)
    env = {
        **without_uv(),
        "MASA_RUN_DIR": str(run_dir),
        "MASA_TABLE_ENGINE_PORT": "0",
        "MASA_TABLE_ENGINE_1_PORT": "0",
        "MASA_BOT_PORT": "0",
        "MASA_LEDGER_PORT": "0",
        "MASA_MATCHMAKING_PORT": "0",
        "MASA_WEB_PORT": "0",
        "MASA_BOT_DELAY_SECONDS": "0",
        "MASA_LOG_LEVEL": "WARNING",
        **(extra_env or {}),
    }
    with printed.open("w") as sink:
        # Its own process group, which gets the SIGINT a Ctrl-C in its terminal would send.
        process = subprocess.Popen(
            ["make", "--no-print-directory", "run"],
            cwd=ROOT,
            env=env,
            stdout=sink,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
    state_file = run_dir / "run.json"
    deadline = time.monotonic() + READY_SECONDS
    while not state_file.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            # The launcher may have ended already, its process group with it.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            stderr = process.communicate()[1]
            raise RuntimeError(f"the stack did not start: {stderr}\n{_story(printed, run_dir)}")
        time.sleep(0.05)
    services = json.loads(state_file.read_text())["services"]
    addresses = {name: _address(entry) for name, entry in services.items()}
    try:
        yield Stack(addresses, run_dir, printed)
    finally:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        _print_logs_on_failure(run_dir / "logs")


def _address(entry: Mapping[str, str | None]) -> str:
    """A gRPC service's host:port, the gateway's http:// address, or NATS's nats:// one."""
    if entry["grpc"]:
        return entry["grpc"]
    if entry.get("http"):
        return f"http://{entry['http']}"
    return f"nats://{entry['nats']}"


def _print_logs_on_failure(logs: Path) -> None:
    """Keep the service logs reachable: pytest shows captured output of failed tests."""
    for log in sorted(logs.glob("*.log")):
        tail = log.read_text(errors="replace").splitlines()[-15:]
        print(f"--- {log.name}", *tail, sep="\n")


def _story(printed: Path, run_dir: Path) -> str:
    """What the launcher printed and the last lines of each service's log: which one hung."""
    parts = [f"launcher printed:\n{printed.read_text(errors='replace')}"]
    for log in sorted((run_dir / "logs").glob("*.log")):
        tail = log.read_text(errors="replace").splitlines()[-15:]
        parts.append(f"{log.name} (last lines):\n" + "\n".join(tail))
    return "\n".join(parts)
