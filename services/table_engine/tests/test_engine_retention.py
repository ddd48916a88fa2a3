"""``masa-bus sweep`` over tables a real node played (issue 19: finished tables' subjects have a
retention the operator sets, after the ledger has settled them).

The result consumers are the provisioned durables, acknowledged (or not) by the platform's own
``DurableConsumer`` as the ledger and matchmaking users, as those services do; the sweep runs as
the ``retention`` NATS user. "Older than the retention" is measured on the results' own stream
timestamps: the retention is set between the ages of two results, no clock is faked.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import partial

import grpc.aio
from engine_support import (
    ADMIN_TOKEN,
    bus_client,
    create_table,
    elevator_config,
    fiftyone_config,
    running_node,
    seat,
    settings,
    table_stub,
    wait_until,
)
from masa.events.v1 import result_pb2
from masa.table.v1 import admin_pb2, admin_pb2_grpc
from masa_platform.bus import KvBucket
from masa_platform.bus_access import (
    LEDGER,
    LEDGER_RESULTS_CONSUMER,
    MATCHMAKING,
    MATCHMAKING_RESULTS_CONSUMER,
    RETENTION,
    TABLES_STREAM,
)
from masa_platform.bus_plan import SNAPSHOTS_BUCKET, TABLE_INDEX_BUCKET
from masa_platform.consumer import DurableConsumer, Poison, SetAside
from masa_platform.direct import last_message, messages_after
from masa_platform.metrics import ConsumerMetrics
from masa_platform.retention import SweepReport, SweepSettings, sweep
from masa_platform.testing import NatsServer
from masa_table_engine.adapters.jetstream import result_subject
from nats.aio.msg import Msg
from prometheus_client import CollectorRegistry

# Between two results whose ages the retention is set between.
_GAP_SECONDS = 3.0


@dataclass(frozen=True, slots=True)
class Held:
    """What the bus holds of one table."""

    stream: int
    snapshot: bool
    index: int


async def _held(nats: NatsServer, table_id: str) -> Held:
    admin = await bus_client(nats)
    try:
        stream = await messages_after(admin, TABLES_STREAM, f"masa.table.v1.{table_id}.>")
        index = await messages_after(
            admin, f"KV_{TABLE_INDEX_BUCKET}", f"$KV.{TABLE_INDEX_BUCKET}.*.{table_id}"
        )
        snapshots = await KvBucket.open(admin, SNAPSHOTS_BUCKET)
        return Held(len(stream), await snapshots.get(table_id) is not None, len(index))
    finally:
        await admin.close()


async def _published_at(nats: NatsServer, table_id: str) -> float:
    """When the table's last result was stored (the stream's timestamp)."""
    admin = await bus_client(nats)
    try:
        stored = await last_message(admin, TABLES_STREAM, result_subject(table_id))
    finally:
        await admin.close()
    assert stored is not None
    stamp = stored.headers["Nats-Time-Stamp"]
    # RFC 3339 with nanoseconds; Python reads microseconds.
    whole, _, fraction = stamp.rstrip("Z").partition(".")
    return datetime.fromisoformat(f"{whole}.{fraction[:6].ljust(6, '0')}+00:00").timestamp()


async def _closed(nats: NatsServer, table_id: str) -> bool:
    """The game is over and its node closed its books: the final result is out, and the
    table left the node's index (after its final snapshot)."""
    admin = await bus_client(nats)
    try:
        stored = await last_message(admin, TABLES_STREAM, result_subject(table_id))
        index = await messages_after(
            admin, f"KV_{TABLE_INDEX_BUCKET}", f"$KV.{TABLE_INDEX_BUCKET}.*.{table_id}"
        )
    finally:
        await admin.close()
    if stored is None or not index:
        return False
    kind = result_pb2.TableResult.FromString(stored.data).WhichOneof("result")
    return kind in {"game_finished", "game_abandoned"} and (
        index[-1].headers.get("KV-Operation") == "PURGE"
    )


async def _ack_floor(nats: NatsServer, durable: str) -> int:
    admin = await bus_client(nats)
    try:
        info = await admin.jetstream().consumer_info(TABLES_STREAM, durable)
    finally:
        await admin.close()
    return int(info.ack_floor.stream_seq or 0) if info.ack_floor else 0


async def _last_result_sequence(nats: NatsServer, table_id: str) -> int:
    admin = await bus_client(nats)
    try:
        stored = await last_message(admin, TABLES_STREAM, result_subject(table_id))
    finally:
        await admin.close()
    assert stored is not None
    return stored.seq


@asynccontextmanager
async def _consuming(
    nats: NatsServer, user: str, durable: str, refuse: Callable[[Msg], bool] = lambda _: False
) -> AsyncIterator[None]:
    """The provisioned ``durable`` taken by its own service's user, each result acknowledged
    (handled) or, where ``refuse`` says so, set aside as the ledger sets aside one it refuses."""

    async def handle(message: Msg) -> None:
        if refuse(message):
            raise Poison(SetAside.REFUSED, "refused by the test")

    nc = await bus_client(nats, user)
    stop = asyncio.Event()
    consumer = DurableConsumer(
        nc.jetstream(),
        handle,
        user=user,
        stream=TABLES_STREAM,
        durable=durable,
        metrics=ConsumerMetrics(CollectorRegistry()),
        fetch_seconds=0.2,
    )
    task = asyncio.create_task(consumer.run(stop))
    try:
        yield
    finally:
        stop.set()
        await task
        await nc.close()


async def _acked(nats: NatsServer, durable: str, table_id: str) -> None:
    sequence = await _last_result_sequence(nats, table_id)

    async def through() -> bool:
        return await _ack_floor(nats, durable) >= sequence

    await wait_until(through, what=f"{durable} to acknowledge the result of {table_id}")


async def _sweep(nats: NatsServer, retention_seconds: float) -> SweepReport:
    nc = await bus_client(nats, RETENTION)
    try:
        return await sweep(nc, SweepSettings(table_retention_seconds=retention_seconds))
    finally:
        await nc.close()


def _retention_between(older: float, younger: float) -> float:
    """A retention that ``older`` (a publication time) has passed and ``younger`` has not."""
    now = time.time()
    return ((now - older) + (now - younger)) / 2


async def test_a_settled_table_past_its_retention_is_swept_and_nothing_else(
    nats: NatsServer,
) -> None:
    """Swept: a finished table both consumers acknowledged, older than the retention (its log,
    results, snapshot and index entry). Untouched: a live table, a finished table the ledger
    has not acknowledged however old, a finished table younger than the retention. A second
    run sweeps nothing; once the ledger has caught up, the unsettled table goes too."""
    async with running_node(settings(nats)) as node, table_stub(node.address) as stub:
        humans = [seat(0, "ayse"), seat(1), seat(2)]
        live = await create_table(stub, elevator_config(humans, turn_seconds=600.0))
        bots = fiftyone_config("salon", [seat(0), seat(1), seat(2), seat(3)], hands=2)
        async with (
            _consuming(nats, MATCHMAKING, MATCHMAKING_RESULTS_CONSUMER),
            _consuming(nats, LEDGER, LEDGER_RESULTS_CONSUMER),
        ):
            settled = await create_table(stub, bots)
            await wait_until(lambda: _closed(nats, settled), what="the settled table's end")
            await _acked(nats, LEDGER_RESULTS_CONSUMER, settled)
            await _acked(nats, MATCHMAKING_RESULTS_CONSUMER, settled)
        async with _consuming(nats, MATCHMAKING, MATCHMAKING_RESULTS_CONSUMER):
            # The ledger is away: this one is rated, not settled.
            unsettled = await create_table(stub, bots)
            await wait_until(lambda: _closed(nats, unsettled), what="the unsettled table's end")
            await _acked(nats, MATCHMAKING_RESULTS_CONSUMER, unsettled)
            unsettled_at = await _published_at(nats, unsettled)
            await asyncio.sleep(max(0.0, unsettled_at + _GAP_SECONDS - time.time()))
            young = await create_table(stub, bots)
            await wait_until(lambda: _closed(nats, young), what="the young table's end")
        young_at = await _published_at(nats, young)

        before = {t: await _held(nats, t) for t in (live, settled, unsettled, young)}
        assert before[settled].stream > 2  # the log, both hands' results and the game's
        assert before[settled].snapshot
        assert before[settled].index == 1  # the index entry's removal marker
        assert before[live].stream > 0
        assert before[live].snapshot

        report = await _sweep(nats, _retention_between(unsettled_at, young_at))
        assert (report.swept, report.kept_unsettled, report.kept_young) == (1, 1, 1)
        assert report.kept_set_aside == 0
        assert report.purged_messages == before[settled].stream + 1 + before[settled].index
        assert not report.more
        assert await _held(nats, settled) == Held(0, False, 0)
        for table_id in (live, unsettled, young):
            assert await _held(nats, table_id) == before[table_id], table_id

        again = await _sweep(nats, _retention_between(unsettled_at, young_at))
        assert (again.swept, again.purged_messages) == (0, 0)
        assert (again.kept_unsettled, again.kept_young) == (1, 1)

        async with _consuming(nats, LEDGER, LEDGER_RESULTS_CONSUMER):
            await _acked(nats, LEDGER_RESULTS_CONSUMER, young)
        caught_up = await _sweep(nats, _retention_between(unsettled_at, young_at))
        assert (caught_up.swept, caught_up.kept_unsettled, caught_up.kept_young) == (1, 0, 1)
        assert await _held(nats, unsettled) == Held(0, False, 0)
        assert await _held(nats, young) == before[young]
        assert await _held(nats, live) == before[live]


async def test_a_voided_table_is_swept_and_one_whose_result_was_set_aside_is_kept(
    nats: NatsServer,
) -> None:
    """A table an operator voided ends with GameAbandoned and is swept like a finished one; a
    table whose result the ledger set aside (terminated, so under its ack floor, yet never
    settled) is kept while the dead letter is. The command itself, as the retention user,
    prints each run's JSON document, and a run stops at its limit of tables, saying more are
    left."""
    async with running_node(settings(nats)) as node, table_stub(node.address) as stub:
        humans = [seat(0, "ayse"), seat(1), seat(2)]
        voided = await create_table(stub, elevator_config(humans, turn_seconds=600.0))
        async with grpc.aio.insecure_channel(node.address) as channel:
            await admin_pb2_grpc.TableAdminServiceStub(channel).VoidTable(
                admin_pb2.VoidTableRequest(table_id=voided, reason="stuck"), metadata=ADMIN_TOKEN
            )
        bots = elevator_config([seat(0), seat(1), seat(2)])
        refused = await create_table(stub, bots)
        for table_id in (voided, refused):
            await wait_until(partial(_closed, nats, table_id), what=f"the end of {table_id}")

        def refuse(message: Msg) -> bool:
            return message.subject == result_subject(refused)

        async with (
            _consuming(nats, MATCHMAKING, MATCHMAKING_RESULTS_CONSUMER),
            _consuming(nats, LEDGER, LEDGER_RESULTS_CONSUMER, refuse),
        ):
            for table_id in (voided, refused):
                await _acked(nats, LEDGER_RESULTS_CONSUMER, table_id)
                await _acked(nats, MATCHMAKING_RESULTS_CONSUMER, table_id)
        kept = await _held(nats, refused)
        gone = await _held(nats, voided)
        floors = [
            await _ack_floor(nats, durable)
            for durable in (LEDGER_RESULTS_CONSUMER, MATCHMAKING_RESULTS_CONSUMER)
        ]
        await asyncio.sleep(1.1)

        # A limit of one table: the voided one, the older, and no further.
        code, out, err = await _command(nats, retention_seconds=1.0, limit=1)
        assert code == 0, err
        assert json.loads(out) == {
            "swept": 1,
            "kept_unsettled": 0,
            "kept_set_aside": 0,
            "kept_young": 0,
            "purged_messages": gone.stream + 1 + gone.index,
            "more": True,
            "settled_through": min(floors),
        }
        assert await _held(nats, voided) == Held(0, False, 0)
        assert await _held(nats, refused) == kept

        code, out, err = await _command(nats, retention_seconds=1.0, limit=10)
        assert code == 0, err
        assert json.loads(out) == {
            "swept": 0,
            "kept_unsettled": 0,
            "kept_set_aside": 1,
            "kept_young": 0,
            "purged_messages": 0,
            "more": False,
            "settled_through": min(floors),
        }
        assert await _held(nats, refused) == kept


async def _command(
    nats: NatsServer, *, retention_seconds: float, limit: int
) -> tuple[int, str, str]:
    """``masa-bus sweep`` as an operator's job runs it (the retention user, the retention,
    the limit of tables a run): its exit code, stdout and stderr."""
    env = {
        **os.environ,
        "MASA_NATS_URL": nats.url,
        "MASA_NATS_USER": RETENTION,
        "MASA_NATS_PASSWORD": nats.password(RETENTION),
        "MASA_TABLE_RETENTION_SECONDS": str(retention_seconds),
        "MASA_SWEEP_TABLES_LIMIT": str(limit),
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "masa_platform.bus_cli",
        "sweep",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    return process.returncode or 0, out.decode(), err.decode()
