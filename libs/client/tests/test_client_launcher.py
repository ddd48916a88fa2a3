"""``make run``'s launcher as a subprocess: every service becomes healthy, the endpoints are
written down, and SIGINT stops everything with exit code 0 and no process left behind."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import nats
import nats.errors
import pytest
from grpc_health.v1 import health_pb2

DEADLINE_SECONDS = 60.0


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for every purpose but the process table of its parent.
    status = Path(f"/proc/{pid}/stat")
    return not (status.exists() and status.read_text().split(") ")[-1].startswith("Z"))


def wait_for(path: Path, process: subprocess.Popen[str]) -> dict[str, object]:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        if path.exists():
            loaded: dict[str, object] = json.loads(path.read_text())
            return loaded
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


def serving(address: str) -> bool:
    """Health says SERVING within the deadline (one slow answer on a loaded machine is fine)."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    with grpc.insecure_channel(address) as channel:
        check = channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString,
        )
        while time.monotonic() < deadline:
            try:
                answer = check(health_pb2.HealthCheckRequest(), timeout=5)
            except grpc.RpcError:
                continue
            return bool(answer.status == health_pb2.HealthCheckResponse.SERVING)
    return False


def test_the_launcher_starts_the_stack_and_sigint_stops_it_cleanly(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "MASA_RUN_DIR": str(tmp_path / ".masa"),
        "MASA_TABLE_ENGINE_PORT": "0",
        "MASA_TABLE_ENGINE_1_PORT": "0",
        "MASA_BOT_PORT": "0",
        "MASA_LEDGER_PORT": "0",
        "MASA_MATCHMAKING_PORT": "0",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "masa_client.launcher"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    pids: list[int] = []
    try:
        state = wait_for(tmp_path / ".masa" / "run.json", process)
        services = state["services"]
        assert isinstance(services, dict)
        assert set(services) == {
            "nats",
            "bot",
            "ledger",
            "table-engine",
            "table-engine-1",
            "matchmaking",
            "sweep",
        }
        engines = [services["table-engine"]["grpc"], services["table-engine-1"]["grpc"]]
        assert state["table_engines"] == engines
        assert state["table_engine"] == engines[0]
        assert engines[0] != engines[1]
        assert state["ledger"] == services["ledger"]["grpc"]
        assert state["matchmaking"] == services["matchmaking"]["grpc"]
        assert (tmp_path / ".masa" / "ledger.sqlite3").exists()
        pids = [int(entry["pid"]) for entry in services.values()]
        for entry in services.values():
            if entry["grpc"]:
                assert serving(entry["grpc"])
        nats_entry = services["nats"]
        assert isinstance(nats_entry, dict)
        nats_dir = tmp_path / ".masa" / "nats"
        assert asyncio.run(_bus_refuses_strangers(f"nats://{nats_entry['nats']}", nats_dir))
        # The sweep ran once at the start, as the retention user, on a bus with nothing done.
        assert (
            json.loads(_first_line(tmp_path / ".masa" / "logs" / "sweep.log", process))["swept"]
            == 0
        )
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=DEADLINE_SECONDS)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
        leftover = [pid for pid in pids if alive(pid)]
        # A failed run must not leave services behind on the machine.
        for pid in leftover:
            os.kill(pid, signal.SIGKILL)
    assert process.returncode == 0, err
    assert "ready" in out
    assert "make play" in out
    assert "stopped" in out
    assert leftover == []
    assert not (tmp_path / ".masa" / "run.json").exists()


def _first_line(path: Path, process: subprocess.Popen[str]) -> str:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        lines = path.read_text().splitlines() if path.exists() else []
        if lines:
            return lines[0]
        time.sleep(0.05)
    raise AssertionError(f"{path} stayed empty")


async def _bus_refuses_strangers(url: str, nats_dir: Path) -> bool:
    """NATS runs with the masa users: no anonymous client, the operators' user works, and the
    files holding the passwords are the owner's alone."""
    for secret in (nats_dir / "nats-server.conf", nats_dir / "admin-password"):
        assert secret.stat().st_mode & 0o077 == 0
    with pytest.raises(nats.errors.Error):
        await nats.connect(url, allow_reconnect=False, max_reconnect_attempts=0, connect_timeout=2)
    password = (nats_dir / "admin-password").read_text().strip()
    admin = await nats.connect(url, user="admin", password=password, allow_reconnect=False)
    await admin.close()
    return True


def test_services_stop_when_the_launcher_is_killed(tmp_path: Path) -> None:
    """kill -9 of the launcher cannot stop its children itself; they must not outlive it.

    NATS and the bot are enough to show it, and they stop at once on SIGTERM."""
    env = {
        **os.environ,
        "MASA_RUN_DIR": str(tmp_path / ".masa"),
        "MASA_BOT_PORT": "0",
        "MASA_RUN_SERVICES": "nats,bot",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "masa_client.launcher"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    pids: list[int] = []
    try:
        state = wait_for(tmp_path / ".masa" / "run.json", process)
        services = state["services"]
        assert isinstance(services, dict)
        assert set(services) == {"nats", "bot"}
        pids = [int(entry["pid"]) for entry in services.values()]
        process.kill()
        process.communicate()
        deadline = time.monotonic() + DEADLINE_SECONDS
        while [pid for pid in pids if alive(pid)] and time.monotonic() < deadline:
            time.sleep(0.05)
        leftover = [pid for pid in pids if alive(pid)]
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert pids
    assert leftover == []
