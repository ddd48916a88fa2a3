"""One NATS user per service (masa_platform.bus_access): the deployment's nats-server config
holds exactly these users, nats-server accepts it, and a result consumer (the ledger) reads the
results but not the table log."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import nats.errors
import pytest
from masa_platform.bus import connect, consume, ensure_stream, publish
from masa_platform.bus_access import (
    LEDGER,
    TABLE_ENGINE,
    bus_users,
    deployment_authorization,
    password_variable,
)
from masa_platform.testing import NatsServer, nats_server_binary
from nats.aio.msg import Msg
from nats.js import api

DEPLOYED = Path(__file__).resolve().parents[3] / "deploy" / "nats" / "nats-server.conf"


def test_the_deployment_config_holds_exactly_the_masa_users_and_is_valid() -> None:
    text = DEPLOYED.read_text()
    assert text.endswith(deployment_authorization())
    env = {**os.environ, **{password_variable(u.name): f"pw-{u.name}" for u in bus_users()}}
    checked = subprocess.run(
        [str(nats_server_binary()), "-c", str(DEPLOYED), "-t"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stderr


async def test_a_result_consumer_reads_the_results_but_not_the_log(tmp_path: Path) -> None:
    with NatsServer(tmp_path / "nats", secure=True) as server:
        engine = await connect(
            server.url, name="engine", user=TABLE_ENGINE, password=server.password(TABLE_ENGINE)
        )
        ledger = await connect(
            server.url, name="ledger", user=LEDGER, password=server.password(LEDGER)
        )
        try:
            js = engine.jetstream()
            await ensure_stream(
                js,
                api.StreamConfig(
                    name="MASA_TABLES", subjects=["masa.table.v1.*.log", "masa.table.v1.*.result"]
                ),
            )
            await publish(js, "masa.table.v1.t1.log", b"seed and hands", msg_id="t1:1")
            await publish(js, "masa.table.v1.t1.result", b"game finished", msg_id="t1:1:game")
            seen: list[bytes] = []
            stop = asyncio.Event()

            async def settle(message: Msg) -> None:
                seen.append(message.data)
                stop.set()

            await asyncio.wait_for(
                consume(
                    ledger.jetstream(),
                    "masa.table.v1.*.result",
                    settle,
                    durable="settlement",
                    stream="MASA_TABLES",
                    fetch_timeout=0.2,
                    stop=stop,
                ),
                10,
            )
            assert seen == [b"game finished"]
            with pytest.raises(nats.errors.Error):
                await ledger.jetstream(timeout=1).get_last_msg(
                    "MASA_TABLES", "masa.table.v1.t1.log"
                )
            # A durable consumer on the log is refused too, whatever name it takes.
            with pytest.raises(nats.errors.Error):
                await consume(
                    ledger.jetstream(timeout=1),
                    "masa.table.v1.*.log",
                    settle,
                    durable="settlement-log",
                    stream="MASA_TABLES",
                )
        finally:
            await ledger.close()
            await engine.close()
