"""kill -9 of the ledger between the commit of a settlement and the ack of its GameFinished,
then a restart: the game is settled once, and the outbox still delivers (P-30, P-31).

A TCP proxy between the ledger process and nats-server lets the test hold back everything the
ledger sends after the GameFinished reached it, so the settlement commits but neither its ack
nor its GameSettled reaches the bus; then the process is killed. No hook in the service.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import nats
from ledger_support import (
    Clock,
    TcpProxy,
    assert_consistent,
    database_url,
    eventually,
    game_finished,
    ledger_events,
    ledger_nats_env,
    make_ledger,
    operator_connection,
    publish_result,
)
from masa_ledger.adapters.sql import SqlStore
from masa_ledger.app.holds import StakeRequest
from masa_ledger.domain.model import GameKey
from masa_platform.bus_plan import BusSettings
from masa_platform.testing import NatsServer, free_port
from nats.js.api import ConsumerInfo
from test_ledger_cli import _open


@asynccontextmanager
async def _ledger_process(
    url: str, server: NatsServer, log: Path, *, through: str = ""
) -> AsyncIterator[asyncio.subprocess.Process]:
    """The ledger as a process, on ``server`` (or on ``through``, a proxy in front of it)."""
    env = {
        **os.environ,
        "MASA_DATABASE_URL": url,
        **ledger_nats_env(server),
        **({"MASA_NATS_URL": through} if through else {}),
        "MASA_GRPC_PORT": str(free_port()),
        "MASA_METRICS_PORT": "0",
        # A long pull request, so that one is waiting when the result is published (the
        # consumer's short ack wait is the bus plan's: see the test).
        "MASA_RESULTS_FETCH_SECONDS": "30",
    }
    with log.open("ab") as sink:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "masa_ledger", env=env, stdout=sink, stderr=sink
        )
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def _stage(store: SqlStore, table: str) -> list[str]:
    ledger, _ = make_ledger(store, Clock(time.time()))
    for player in ("ayse", "mehmet"):
        await ledger.grant(f"w-{player}", player, 1000, "")
    holds = await ledger.hold_stakes(
        [StakeRequest(hold_id=f"{table}-{p}", player_id=p, amount=100) for p in ("ayse", "mehmet")]
    )
    await ledger.bind_holds(table, 1, 100, [h.hold_id for h in holds])
    return [h.hold_id for h in holds]


async def test_p31_kill_9_between_commit_and_ack_settles_once_and_the_outbox_delivers(
    tmp_path: Path, backend: str
) -> None:
    table = "crash1"
    # A short ack wait, so that the unacknowledged result comes back soon after the crash.
    quick = BusSettings(results_ack_wait_seconds=2)
    with NatsServer(tmp_path / "nats", secure=True, bus=quick) as server:
        nc = await operator_connection(server)
        js = nc.jetstream()
        proxy = TcpProxy(server.port)
        await proxy.start()
        try:
            async with database_url(backend, tmp_path) as url:
                store = await _open(url)
                try:
                    holds = await _stage(store, table)
                    log = tmp_path / "ledger.log"
                    async with _ledger_process(
                        url, server, log, through=f"nats://127.0.0.1:{proxy.port}"
                    ) as first:

                        async def pulling() -> bool:
                            try:
                                info = await js.consumer_info("MASA_TABLES", "ledger-settlement")
                            except nats.js.errors.NotFoundError:
                                return False
                            return (info.num_waiting or 0) >= 1

                        await eventually(pulling, timeout=60, what="the ledger's pull request")
                        # From now on the ledger's acks and publishes stay in the proxy.
                        proxy.hold_back()
                        await publish_result(
                            js,
                            game_finished(
                                table, 100, [(0, "ayse", 1, holds[0]), (1, "mehmet", 2, holds[1])]
                            ),
                        )

                        async def committed() -> bool:
                            return (
                                await store.settlement(GameKey(table_id=table, game_no=1))
                            ) is not None

                        await eventually(committed, what="the settlement's commit")
                        first.send_signal(signal.SIGKILL)
                        await first.wait()
                    info = await js.consumer_info("MASA_TABLES", "ledger-settlement")
                    assert info.num_ack_pending == 1, "the GameFinished was acknowledged"
                    before = await ledger_events(js, f"masa.ledger.v1.game.{table}.>")
                    assert not [e for e in before if e.HasField("game_settled")]

                    async with _ledger_process(url, server, log):

                        async def redelivered_and_acked() -> bool:
                            info: ConsumerInfo = await js.consumer_info(
                                "MASA_TABLES", "ledger-settlement"
                            )
                            return info.num_ack_pending == 0 and info.num_pending == 0

                        await eventually(
                            redelivered_and_acked, timeout=60, what="the redelivery's ack"
                        )

                        async def announced() -> bool:
                            events = await ledger_events(js, f"masa.ledger.v1.game.{table}.>")
                            return any(e.HasField("game_settled") for e in events)

                        await eventually(announced, timeout=60, what="GameSettled from the outbox")
                    events = await ledger_events(js, f"masa.ledger.v1.game.{table}.>")
                    assert [e.WhichOneof("event") for e in events] == [
                        "holds_bound",
                        "game_settled",
                    ]
                    ledger, _ = make_ledger(store, Clock())
                    assert (await ledger.wallet("ayse")).balance == 1100
                    assert (await ledger.wallet("mehmet")).balance == 900
                    await assert_consistent(store)
                finally:
                    await store.close()
        finally:
            await proxy.close()
            await nc.close()
