"""``make run``'s launcher as a subprocess: every service becomes healthy, the endpoints are
written down (and ``masa endpoints`` prints them), and SIGINT stops everything with exit code 0
and no process left behind. One stack owns its run folder; a service that dies is restarted
with backoff while the rest goes on, and one that keeps dying makes the launcher give up; a
start that makes no progress fails."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Final, TypedDict

import grpc
import nats
import nats.errors
import pytest
from grpc_health.v1 import health_pb2
from masa.table.v1 import admin_pb2, admin_pb2_grpc, table_pb2, table_pb2_grpc, view_pb2
from masa_client.cli import table_config
from masa_client.client import TableClient, new_request_id
from masa_client.errors import TABLE_MOVED, from_rpc_error
from masa_client.launcher import ENGINE_SERVICES, ServiceSpec, _Running, _wait_ready
from masa_platform.auth import Role, TokenSigner
from masa_platform.bus_plan import BusSettings
from masa_platform.keys import ISSUER, Keyring
from masa_platform.settings import AuthSettings, load_settings
from masa_platform.testing import free_port
from masa_table_engine.settings import EngineSettings

DEADLINE_SECONDS = 60.0
# The whole stack's start on a loaded machine, as the end-to-end tests allow it.
START_SECONDS = 180.0
SMALL_STACK: Final = {"MASA_BOT_PORT": "0", "MASA_RUN_SERVICES": "nats,bot"}
WHOLE_STACK: Final = {
    "MASA_TABLE_ENGINE_PORT": "0",
    "MASA_TABLE_ENGINE_1_PORT": "0",
    "MASA_BOT_PORT": "0",
    "MASA_LEDGER_PORT": "0",
    "MASA_MATCHMAKING_PORT": "0",
    "MASA_WEB_PORT": "0",
}
# The ``masa`` command as installed in the environment.
MASA: Final = str(Path(sys.executable).parent / "masa")


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
    """Health says SERVING within the deadline: a restarted node says NOT_SERVING while it
    connects and recovers its tables, and one slow answer on a loaded machine is fine."""
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
                time.sleep(0.1)
                continue
            if answer.status == health_pb2.HealthCheckResponse.SERVING:
                return True
            time.sleep(0.1)
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
        "MASA_WEB_PORT": "0",
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
            "web-gateway",
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
    # The killed launcher's hold on its run folder went with it: the next one starts there.
    with launched(tmp_path / ".masa", SMALL_STACK) as again:
        assert {int(entry["pid"]) for entry in again.services().values()}.isdisjoint(pids)


class Service(TypedDict):
    """One service's entry in run.json, as the launcher writes it."""

    pid: int
    grpc: str | None
    nats: str | None
    http: str | None
    metrics_port: int | None
    log: str


class Launched:
    """A launcher started as ``make run`` would start it, its output in files."""

    def __init__(self, run_dir: Path, extra_env: Mapping[str, str]) -> None:
        self.run_dir = run_dir
        self.env = {**os.environ, "MASA_RUN_DIR": str(run_dir), **extra_env}
        run_dir.mkdir(parents=True, exist_ok=True)
        self.out = run_dir.parent / f"launcher-{len(list(run_dir.parent.glob('launcher-*')))}"
        with (
            self.out.with_suffix(".out").open("w") as out,
            self.out.with_suffix(".err").open("w") as err,
        ):
            self.process = subprocess.Popen(
                [sys.executable, "-m", "masa_client.launcher"], env=self.env, stdout=out, stderr=err
            )
        # Every service pid seen, so that none outlives a failed test.
        self.pids: set[int] = set()

    def printed(self) -> str:
        return self.out.with_suffix(".out").read_text()

    def complained(self) -> str:
        return self.out.with_suffix(".err").read_text()

    def state(self) -> dict[str, object]:
        """run.json, once this launcher's stack is up (one killed before may have left its own)."""
        path = self.run_dir / "run.json"
        deadline = time.monotonic() + START_SECONDS
        while True:
            assert self.process.poll() is None, self.printed() + self.complained()
            if path.exists():
                state: dict[str, object] = json.loads(path.read_text())
                if state["launcher_pid"] == self.process.pid:
                    return state
            assert time.monotonic() < deadline, f"{path} never appeared"
            time.sleep(0.05)

    def services(self) -> dict[str, Service]:
        services = self.state()["services"]
        assert isinstance(services, dict)
        self.pids |= {int(entry["pid"]) for entry in services.values()}
        return services

    def stop(self) -> int:
        """A Ctrl-C; the launcher's exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        return self.process.wait(DEADLINE_SECONDS)

    def kill_all(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for pid in self.pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def launched(run_dir: Path, extra_env: Mapping[str, str]) -> Iterator[Launched]:
    """A launcher with its stack up; stopped with a Ctrl-C on the way out, and nothing of it
    left running even when the test failed."""
    launcher = Launched(run_dir, extra_env)
    try:
        launcher.services()
        yield launcher
        assert launcher.stop() == 0, launcher.complained()
        assert [pid for pid in launcher.pids if alive(pid)] == []
    finally:
        launcher.kill_all()


def pid_of(launcher: Launched, name: str) -> int:
    return int(launcher.services()[name]["pid"])


def restarted(launcher: Launched, name: str, old_pid: int) -> int:
    """The pid of ``name`` once run.json names a new process for it."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while (pid := pid_of(launcher, name)) == old_pid:
        assert launcher.process.poll() is None, launcher.complained()
        assert time.monotonic() < deadline, f"{name} was not restarted: {launcher.complained()}"
        time.sleep(0.05)
    return pid


def masa(launcher: Launched, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MASA, *arguments],
        env=launcher.env,
        capture_output=True,
        text=True,
        timeout=DEADLINE_SECONDS,
        check=False,
    )


def test_a_second_launcher_in_the_same_folder_is_refused_and_the_first_goes_on(
    tmp_path: Path,
) -> None:
    """Two stacks in one folder would share run.json, the NATS configuration and passwords and
    one SQLite ledger: the second is refused, naming the first, and changes nothing."""
    run_dir = tmp_path / ".masa"
    with launched(run_dir, SMALL_STACK) as first:
        kept = {
            path: path.read_bytes()
            for path in (
                run_dir / "run.json",
                run_dir / "nats" / "nats-server.conf",
                run_dir / "nats" / "admin-password",
            )
        }
        second = subprocess.run(
            [sys.executable, "-m", "masa_client.launcher"],
            env=first.env,
            capture_output=True,
            text=True,
            timeout=DEADLINE_SECONDS,
            check=False,
        )
        assert second.returncode != 0
        assert f"pid {first.process.pid}" in second.stderr
        assert f"kill {first.process.pid}" in second.stderr
        assert "ready" not in second.stdout
        assert {path: path.read_bytes() for path in kept} == kept
        assert first.process.poll() is None
        assert serving(str(first.services()["bot"]["grpc"]))


@pytest.fixture(scope="module")
def whole_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Launched]:
    with launched(tmp_path_factory.mktemp("stack") / ".masa", WHOLE_STACK) as launcher:
        yield launcher


def test_masa_endpoints_prints_where_the_stack_listens(whole_stack: Launched) -> None:
    state = whole_stack.state()
    services = whole_stack.services()
    shown = masa(whole_stack, "endpoints")
    assert shown.returncode == 0, shown.stderr
    assert f"launcher pid {whole_stack.process.pid}" in shown.stdout
    for name, entry in services.items():
        address = (
            entry["grpc"]
            or (f"nats://{entry['nats']}" if entry["nats"] else None)
            or (f"http://{entry['http']}" if entry["http"] else "-")
        )
        assert re.search(
            rf"^{name} +{re.escape(str(address))} .* {entry['pid']}$", shown.stdout, re.M
        ), shown.stdout
    for name, key in (
        ("table-engine", "table_engine"),
        ("ledger", "ledger"),
        ("matchmaking", "matchmaking"),
    ):
        got = masa(whole_stack, "endpoints", "--get", name)
        assert (got.returncode, got.stdout) == (0, f"{state[key]}\n")
    got = masa(whole_stack, "endpoints", "--get", "nats")
    assert got.stdout == f"nats://{services['nats']['nats']}\n"
    got = masa(whole_stack, "endpoints", "--get", "web-gateway")
    assert got.stdout == f"http://{services['web-gateway']['http']}\n"
    unknown = masa(whole_stack, "endpoints", "--get", "croupier")
    assert unknown.returncode == 2
    assert "croupier" in unknown.stderr and "matchmaking" in unknown.stderr
    assert unknown.stdout == ""


def test_masa_endpoints_without_a_stack_says_how_to_start_one(tmp_path: Path) -> None:
    ran = subprocess.run(
        [MASA, "endpoints", "--get", "ledger"],
        env={**os.environ, "MASA_RUN_DIR": str(tmp_path / ".masa")},
        capture_output=True,
        text=True,
        timeout=DEADLINE_SECONDS,
        check=False,
    )
    assert ran.returncode == 1
    assert ran.stdout == ""
    assert "make run" in ran.stderr


@pytest.mark.parametrize("name", ["ledger", "table-engine-1"])
def test_a_service_killed_with_sigkill_is_restarted_and_the_stack_goes_on(
    whole_stack: Launched, name: str
) -> None:
    """kill -9 of one service: the launcher starts it again (after a backoff), on its address,
    and every other process of the stack runs on untouched. A table-engine node's live table
    is served again within a lease's TTL and a takeover scan (architecture.md): by the other
    node meanwhile, or by the node back on its address taking its tables up again; its seat and
    its moves so far are kept."""
    services = whole_stack.services()
    others = {other: int(entry["pid"]) for other, entry in services.items() if other != name}
    engines = [str(services[engine]["grpc"]) for engine in ENGINE_SERVICES]
    table = (
        asyncio.run(_live_table(whole_stack, str(services[name]["grpc"])))
        if name in ENGINE_SERVICES
        else None
    )
    old_pid = int(services[name]["pid"])
    os.kill(old_pid, signal.SIGKILL)
    killed_at = time.monotonic()
    if table is not None:
        asyncio.run(_served_again(whole_stack, table, engines, killed_at + TAKEOVER_SECONDS))
    new_pid = restarted(whole_stack, name, old_pid)
    assert serving(str(services[name]["grpc"]))
    assert whole_stack.services()[name]["grpc"] == services[name]["grpc"]
    assert alive(new_pid)
    assert whole_stack.process.poll() is None
    assert {other: pid_of(whole_stack, other) for other in others} == others
    assert all(alive(pid) for pid in others.values())
    complained = whole_stack.complained()
    assert f"{name} was killed by SIGKILL" in complained
    assert re.search(rf"restarting {name} in [\d.]+ s", complained)
    if table is not None:
        # The module's stack stops with no table left playing (a draining node would hand it
        # over on the way out).
        asyncio.run(_void(whole_stack, table, engines))


# A live table whose node died is served again once its lease expired (the TTL of the bus's
# lease bucket, as masa-bus provision made it) and a node's takeover scan found it; the margin
# is a node's restart or a slow scan on a loaded machine.
TAKEOVER_SECONDS: Final = (
    load_settings(BusSettings).table_lease_ttl_seconds
    + load_settings(EngineSettings).takeover_scan_seconds
    + DEADLINE_SECONDS
)
# The human seat's turn time: the table is still playing, waiting on that seat, when its node
# is killed and long after (P-10's longest).
TURN_SECONDS: Final = 3_600


def _issuer(launcher: Launched) -> TokenSigner:
    """The development issuer of the launcher's stack (its keyring in the run folder), which
    signs players' and operators' tokens as the stack trusts them."""
    return TokenSigner(Keyring(launcher.run_dir / "keys").signer(ISSUER), AuthSettings())


def _player(table: view_pb2.Table) -> str:
    return table.config.seats[0].player_id


async def _live_table(launcher: Launched, address: str) -> view_pb2.Table:
    """A training table (P-1) made on the node at ``address`` with an operator's token: a
    player on seat 0 and bots on the others, still playing."""
    player = f"taken-over-{time.monotonic_ns()}"
    config = table_config(
        "elevator", "", player, players=3, level="easy", turn_seconds=TURN_SECONDS
    )
    operator = _issuer(launcher).mint("operator", [Role.ADMIN])
    async with TableClient(address, operator) as service:
        table = await service.create_table(config)
    assert table.owner_address == address
    assert table.state == view_pb2.Table.STATE_PLAYING
    return table


async def _served_again(
    launcher: Launched, table: view_pb2.Table, engines: Sequence[str], deadline: float
) -> tuple[str, table_pb2.GetTableResponse]:
    """The engine node that serves ``table`` and its player's view there, asked of every node
    until ``deadline`` (time.monotonic): a node that serves it answers GetTable, one that does
    not points to the owner (TABLE_MOVED), and while no node does (the lease has not expired
    yet, or the restarted node is recovering) the answer is UNAVAILABLE. Anything else fails."""
    player = _issuer(launcher).mint(_player(table), [Role.PLAYER])
    metadata = (("authorization", f"Bearer {player}"),)
    request = table_pb2.GetTableRequest(table_id=table.table_id)
    channels = {address: grpc.aio.insecure_channel(address) for address in engines}
    seen: list[str] = []
    try:
        while time.monotonic() < deadline:
            for address in engines:
                asked = address
                for _ in range(2):
                    stub = table_pb2_grpc.TableServiceStub(channels[asked])
                    try:
                        answer = await stub.GetTable(request, metadata=metadata, timeout=5)
                    except grpc.aio.AioRpcError as error:
                        failure = from_rpc_error(error)
                        seen.append(f"{asked}: {failure}")
                        if failure.reason == TABLE_MOVED:
                            asked = failure.metadata["owner_address"]
                            assert asked in channels, failure
                            continue
                        assert failure.code in (
                            grpc.StatusCode.UNAVAILABLE,
                            grpc.StatusCode.DEADLINE_EXCEEDED,
                        ), failure
                        break
                    view = answer.seat_view
                    assert answer.WhichOneof("view") == "seat_view", answer
                    assert view.seat == 0
                    assert view.table.table.table_id == table.table_id
                    assert view.table.table.state == view_pb2.Table.STATE_PLAYING
                    assert view.table.table.owner_address == asked
                    # The moves made before the kill are kept: the log was not started over.
                    assert view.table.table.sequence >= table.sequence
                    return asked, answer
            await asyncio.sleep(0.2)
    finally:
        for channel in channels.values():
            await channel.close()
    raise AssertionError(f"no node served table {table.table_id} again: {seen[-6:]}")


async def _void(launcher: Launched, table: view_pb2.Table, engines: Sequence[str]) -> None:
    """VoidTable at the node that serves ``table`` now, with an operator's token."""
    owner, _ = await _served_again(launcher, table, engines, time.monotonic() + DEADLINE_SECONDS)
    operator = _issuer(launcher).mint("operator", [Role.ADMIN])
    async with grpc.aio.insecure_channel(owner) as channel:
        voided = await admin_pb2_grpc.TableAdminServiceStub(channel).VoidTable(
            admin_pb2.VoidTableRequest(
                request_id=new_request_id(), table_id=table.table_id, reason="test over"
            ),
            metadata=(("authorization", f"Bearer {operator}"),),
            timeout=DEADLINE_SECONDS,
        )
    assert voided.applied


def test_a_service_that_keeps_dying_makes_the_launcher_give_up(tmp_path: Path) -> None:
    """The bot's port is taken while it restarts, so each new bot dies at once: after
    MASA_RUN_RESTARTS restarts the launcher stops the stack and says why."""
    launcher = Launched(tmp_path / ".masa", {**SMALL_STACK, "MASA_RUN_RESTARTS": "2"})
    try:
        bot = launcher.services()["bot"]
        host, port = str(bot["grpc"]).rsplit(":", 1)
        os.kill(int(bot["pid"]), signal.SIGKILL)
        with taken(host, int(port)):
            code = launcher.process.wait(DEADLINE_SECONDS)
        complained = launcher.complained()
        assert code == 1, complained
        assert re.search(r"restarting bot in 1 s", complained)
        assert re.search(r"restarting bot in 2 s", complained)
        assert "bot exited with 1" in complained
        assert "giving up" in complained
        assert "stopped" in launcher.printed()
        assert [pid for pid in launcher.pids if alive(pid)] == []
        assert not (tmp_path / ".masa" / "run.json").exists()
    finally:
        launcher.kill_all()


@contextlib.contextmanager
def taken(host: str, port: int) -> Iterator[None]:
    """``port`` bound by someone else, as soon as its last holder let it go."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        while True:
            try:
                holder.bind((host, port))
                break
            except OSError:
                assert time.monotonic() < deadline, f"{host}:{port} stayed busy"
                time.sleep(0.01)
        holder.listen()
        yield


def test_a_start_without_progress_for_the_stall_interval_fails(tmp_path: Path) -> None:
    """MASA_RUN_STALL_SECONDS: the launcher waits while services keep becoming ready, and gives
    up once none has for that long (here less than any service takes), naming what hung."""
    launcher = Launched(tmp_path / ".masa", {**SMALL_STACK, "MASA_RUN_STALL_SECONDS": "0.2"})
    try:
        code = launcher.process.wait(DEADLINE_SECONDS)
        complained = launcher.complained()
        assert code == 1, complained
        assert re.search(
            r"no service became ready for 0.2 s: (nats|bot) still starting", complained
        )
        assert "stopped" in launcher.printed()
        assert not (tmp_path / ".masa" / "run.json").exists()
    finally:
        launcher.kill_all()


# A service that becomes ready after a delay: GET /healthz answers 200 once it listens.
_LATE_SERVICE: Final = """
import http.server, sys, time
time.sleep(float(sys.argv[2]))
class Healthz(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Healthz).serve_forever()
"""


# The stall interval of that test: more than a gap between two services (and Python's start
# before the first), less than the whole start.
STALL: Final = 3.0


@pytest.mark.parametrize(
    ("gap", "ready"),
    [(0.8, True), (5.0, False)],
    ids=["progressing-past-the-stall-interval", "stalled"],
)
def test_a_start_that_keeps_making_progress_is_waited_for_however_long_it_takes(
    tmp_path: Path, gap: float, ready: bool
) -> None:
    """MASA_RUN_STALL_SECONDS bounds the time without progress, not the start: six services
    ready one after another every 0.8 s take 4.8 s, past a stall interval of 3 s, and the
    start goes on; the same services 5 s apart stop it at the first gap (issue 20: the
    launcher's fixed 60 s readiness limit failed on a loaded machine)."""
    started: list[_Running] = []
    try:
        for number in range(6):
            port = free_port()
            spec = ServiceSpec(
                name=f"late-{number}",
                command=(sys.executable, "-c", _LATE_SERVICE, str(port), str(gap * (number + 1))),
                http_address=f"127.0.0.1:{port}",
            )
            log = tmp_path / f"{spec.name}.log"
            with log.open("wb") as out:
                process = subprocess.Popen(spec.command, stdout=out, stderr=subprocess.STDOUT)
            started.append(_Running(spec, process, log))
        waiting = list(started)
        printed = io.StringIO()
        began = time.monotonic()
        if ready:
            _wait_ready(waiting, STALL, threading.Event(), printed)
            assert waiting == []
            assert time.monotonic() - began > STALL
            assert printed.getvalue().count(" ready ") == 6
        else:
            with pytest.raises(TimeoutError, match=r"no service became ready for 3 s"):
                _wait_ready(waiting, STALL, threading.Event(), printed)
            assert len(waiting) == 6
    finally:
        for child in started:
            child.process.kill()
            child.process.wait()
