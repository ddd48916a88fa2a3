"""What the benches that need the whole stack share: ``make run``'s launcher on free ports,
with its run folder in a folder of the bench's and this process's keys (so that
``masa_platform.testing.token`` signs tokens the stack trusts), stopped like a Ctrl-C.
Imported by the ``bench_*.py`` scripts, which Python runs with this folder on ``sys.path``."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from masa_platform.testing import keyring

__all__ = ["launched_stack"]

ROOT: Final = Path(__file__).resolve().parents[1]
_PORTS: Final = ("TABLE_ENGINE", "TABLE_ENGINE_1", "BOT", "LEDGER", "MATCHMAKING", "WEB")
_START_SECONDS: Final = 180.0


@contextlib.contextmanager
def launched_stack(workdir: Path, env: Mapping[str, str] | None = None) -> Iterator[dict[str, Any]]:
    """The stack's run.json once it is written (every service ready), ``env`` on top of the
    launcher's environment; the stack is stopped on the way out, errors included."""
    run_dir = workdir / ".masa"
    shutil.copytree(keyring().directory, run_dir / "keys", dirs_exist_ok=True)
    process = subprocess.Popen(
        [sys.executable, "-m", "masa_client.launcher"],
        cwd=ROOT,
        env={
            **os.environ,
            "MASA_RUN_DIR": str(run_dir),
            "MASA_LOG_LEVEL": "WARNING",
            **{f"MASA_{name}_PORT": "0" for name in _PORTS},
            **(env or {}),
        },
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        # Its own process group: the SIGINT a Ctrl-C would send reaches it alone.
        start_new_session=True,
    )
    state = run_dir / "run.json"
    try:
        deadline = time.monotonic() + _START_SECONDS
        while not state.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the stack did not start")
            time.sleep(0.1)
        yield json.loads(state.read_text())
    finally:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
