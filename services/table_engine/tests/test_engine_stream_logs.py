"""A cancelled WatchTable logs no error on the real engine (issue 19; every log line of a call
carries its identity, issue 13, and binding that identity must cost no traceback).

Issue 19's finding: "each cancelled WatchTable stream also logs an ERROR traceback ('Token
... was created in a different Context', request_logs.py)". The interceptor's own test
(libs/platform/tests/test_platform_logs.py) uses a stand-in handler; here the streams are the
engine's, on a node started in this process (so that its records reach caplog) against a real
nats-server, on the services' event loop (uvloop) and asyncio's.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time

import grpc
import pytest
from engine_support import (
    create_table,
    fiftyone_config,
    get_view,
    metadata,
    running_node,
    seat,
    settings,
    table_stub,
    wait_until,
)
from masa.table.v1 import table_pb2, table_pb2_grpc
from masa_platform.runner import run
from masa_platform.testing import NatsServer
from roaming_player import RoamingSeat

CYCLES = 50
# Entries a resumed watch is sent at once: fewer than the node keeps for resuming (128).
BACKLOG = 60


@pytest.mark.parametrize("event_loop", ["uvloop", "asyncio"])
def test_cancelled_watches_on_the_engine_log_no_error_and_no_context_traceback(
    nats: NatsServer, caplog: pytest.LogCaptureFixture, event_loop: str
) -> None:
    """Issue 19: 50 times, a seated player and a spectator each open a WatchTable stream
    afresh and one resuming 60 entries back, and cancel each after its first message. A
    resumed stream is cancelled while the rest of its backlog is being written, which leaves
    the handler's generator at a yield for the event loop to close later from a task of its
    own: a log context bound across that yield could not be reset there ("Token ... was
    created in a different Context", an ERROR with a ValueError traceback, for nearly every
    resumed stream without the fix). Not one record at ERROR or above, nor a traceback of
    that kind at any level."""
    caplog.set_level(logging.DEBUG)
    run(_watch_and_cancel(nats), event_loop=event_loop)
    # The node ran in this process: its own records are here, so an error would be too.
    assert any(r.name.startswith("masa_table_engine") for r in caplog.records)
    errors = [
        f"{r.levelname} {r.name}: {r.getMessage()}"
        for r in caplog.records
        if r.levelno >= logging.ERROR
    ]
    assert errors == []
    tracebacks = [
        f"{r.levelname} {r.name}: {r.getMessage()}"
        for r in caplog.records
        if any(word in _traceback(r) for word in ("Context", "ValueError"))
    ]
    assert tracebacks == []


def _traceback(record: logging.LogRecord) -> str:
    """The record's exception as a handler would print it; empty if it has none."""
    return logging.Formatter().formatException(record.exc_info) if record.exc_info else ""


async def _watch_and_cancel(nats: NatsServer) -> None:
    async with (
        running_node(settings(nats, "cancelled-watches")) as node,
        table_stub(node.address) as stub,
    ):
        table_id, sequence = await _table_with_a_history(stub, node.address)
        runtime = node.tables.get(table_id)
        for _ in range(CYCLES):
            for watcher in ("ayse", "kibitzer"):
                for after in (None, sequence - BACKLOG):
                    call = stub.WatchTable(
                        table_pb2.WatchTableRequest(table_id=table_id, after_sequence=after),
                        metadata=metadata(watcher),
                    )
                    await call.read()
                    assert call.cancel()
                    assert await call.code() is grpc.StatusCode.CANCELLED

        async def closed() -> bool:
            # Spectators' streams are counted: each cancelled one has been closed.
            return runtime.spectators == 0

        await wait_until(closed, timeout=10.0, what="the cancelled streams to close")
        # A generator the loop finalizes, and a task whose exception nobody retrieved, report
        # when they are collected.
        for _ in range(5):
            gc.collect()
            await asyncio.sleep(0.05)


async def _table_with_a_history(
    stub: table_pb2_grpc.TableServiceAsyncStub, address: str
) -> tuple[str, int]:
    """A 51 table of Ayse and three bots (three hands: some 300 moves) played until it has
    more than :data:`BACKLOG` entries, then left waiting for Ayse (a turn of ten minutes);
    its id and sequence."""
    config = fiftyone_config(
        "classic", [seat(0, "ayse"), seat(1), seat(2), seat(3)], hands=3, turn_seconds=600
    )
    table_id = await create_table(stub, config)
    ayse = RoamingSeat(table_id, "ayse", lambda: [address], poll_seconds=0.01)
    player = asyncio.create_task(ayse.play(time.monotonic() + 30.0))

    async def played() -> bool:
        view = (await get_view(stub, table_id, "ayse")).seat_view
        return view.table.table.sequence > BACKLOG + 10

    try:
        await wait_until(played, timeout=30.0, what=f"{BACKLOG} moves")
    finally:
        player.cancel()
        await asyncio.gather(player, return_exceptions=True)
    return table_id, (await get_view(stub, table_id, "ayse")).seat_view.table.table.sequence
