"""The whole local stack for end-to-end tests, started once for the session and shared by the
end-to-end modules (each test makes its own tables): ``make run`` itself, on free ports and on
a PATH without ``uv``, as the README tells a newcomer to start it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_stack import Stack
from e2e_terminal import ROOT, without_uv

READY_SECONDS = 60.0


@pytest.fixture(scope="session")
def running_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    base = tmp_path_factory.mktemp("stack")
    run_dir = base / ".masa"
    printed = base / "launcher.out"
    env = {
        **without_uv(),
        "MASA_RUN_DIR": str(run_dir),
        "MASA_TABLE_ENGINE_PORT": "0",
        "MASA_BOT_PORT": "0",
        "MASA_LEDGER_PORT": "0",
        "MASA_BOT_DELAY_SECONDS": "0",
        "MASA_LOG_LEVEL": "WARNING",
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
            os.killpg(process.pid, signal.SIGKILL)
            raise RuntimeError(f"the stack did not start: {process.communicate()[1]}")
        time.sleep(0.05)
    services = json.loads(state_file.read_text())["services"]
    addresses = {
        name: entry["grpc"] or f"nats://{entry['nats']}" for name, entry in services.items()
    }
    try:
        yield Stack(addresses, run_dir, printed)
    finally:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(READY_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        _print_logs_on_failure(run_dir / "logs")


@pytest.fixture
def stack(running_stack: Stack) -> dict[str, str]:
    """Addresses of the running services by name ("table-engine", "bot", "ledger", "nats"),
    and the run directory under "run_dir"."""
    return {**running_stack.addresses, "run_dir": str(running_stack.run_dir)}


def _print_logs_on_failure(logs: Path) -> None:
    """Keep the service logs reachable: pytest shows captured output of failed tests."""
    for log in sorted(logs.glob("*.log")):
        tail = log.read_text(errors="replace").splitlines()[-15:]
        print(f"--- {log.name}", *tail, sep="\n")
