"""What the engine benchmarks share: a ``python -m masa_table_engine`` process of their own on
a free port (its log kept for the figures), its gRPC health, and tokens for the players and
the service that creates tables. Imported by the ``bench_*.py`` scripts, which Python runs
with this folder on ``sys.path``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import grpc
import grpc.aio
from grpc_health.v1 import health_pb2
from masa_platform.bus_access import TABLE_ENGINE
from masa_platform.testing import NatsServer, free_port, keyring, token

# The benches seat the same few players at every table and play them as fast as the engine
# answers, as no person does: a player's rate quota would refuse them, so it is lifted here.
BENCH_QUOTAS = {"MASA_CALLER_RATE": "1000000", "MASA_CALLER_BURST": "1000000"}
# Tables are matchmaking's to create, with its own token.
SERVICE = (("authorization", f"Bearer {token('matchmaking', 'matchmaking')}"),)


def player(name: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token(name)}"),)


class EngineProcess:
    """One engine node, restartable; ``env`` (``MASA_*``) on top of the bench's defaults."""

    def __init__(
        self,
        nats: NatsServer,
        workdir: Path,
        node_id: str = "",
        stop_seconds: float = 15.0,
        **env: str,
    ) -> None:
        self.port = free_port()
        self.node_id = node_id or f"bench-{self.port}"
        self.address = f"127.0.0.1:{self.port}"
        self.log = workdir / f"{self.node_id}.log"
        self._stop_seconds = stop_seconds
        self.env = {
            **os.environ,
            "MASA_NATS_URL": nats.url,
            "MASA_NATS_USER": TABLE_ENGINE,
            "MASA_NATS_PASSWORD": nats.password(TABLE_ENGINE),
            **keyring().env(TABLE_ENGINE),
            "MASA_GRPC_PORT": str(self.port),
            "MASA_NODE_ID": self.node_id,
            "MASA_SEAT_PROTECTION_SECONDS": "3600",
            "MASA_LOG_LEVEL": "WARNING",
            **BENCH_QUOTAS,
            **env,
        }
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> float:
        """Start the process; the monotonic time it started at."""
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "masa_table_engine"],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        return time.monotonic()

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def terminate(self) -> None:
        """Send SIGTERM (the engine drains: it hands its tables over) without waiting."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(self._stop_seconds)
            except subprocess.TimeoutExpired:
                self.kill()

    def rss_bytes(self) -> int:
        assert self.process is not None
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        match = re.search(r"VmRSS:\s+(\d+) kB", status)
        assert match is not None
        return int(match.group(1)) * 1024

    def last_recovery_seconds(self) -> float:
        """The recovery time the engine logged at its last start (its log level INFO)."""
        found = [
            json.loads(line)["recovery_seconds"]
            for line in self.log.read_text().splitlines()
            if '"recovery done"' in line
        ]
        return float(found[-1])


async def health(address: str) -> int | None:
    """The gRPC health status at ``address``, or None when nothing answers."""
    async with grpc.aio.insecure_channel(address) as channel:
        check = channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString,
        )
        try:
            answer = await check(health_pb2.HealthCheckRequest(), timeout=0.5)
        except grpc.aio.AioRpcError:
            return None
        status: int = answer.status
        return status
