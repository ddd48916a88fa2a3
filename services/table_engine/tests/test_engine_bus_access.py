"""The bus is not open to everyone (issue 9): the log and the snapshots hold every game's seed
and every hand, so only the table-engine (and operators) may read them. A client with another
service's credentials (matchmaking's) is refused every way in: a stored message, a direct get,
a consumer on the log, a live subscription, the snapshot bucket, the engine's reply inbox. It
can consume what it is meant to: the game results, through the consumer provisioned for it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

import nats
import nats.errors
import pytest
from engine_support import (
    bus_client,
    create_table,
    elevator_config,
    game_finished,
    running_node,
    seat,
    settings,
    table_stub,
    wait_until,
)
from masa.events.v1 import result_pb2
from masa_platform.bus_access import MATCHMAKING, MATCHMAKING_RESULTS_CONSUMER, inbox_prefix
from masa_platform.testing import NatsServer
from masa_table_engine.adapters.jetstream import SNAPSHOT_BUCKET, STREAM, log_subject
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import api

# Refused requests are never answered: the client gives up after this long.
REFUSED_WITHIN = 1.0


async def _as_matchmaking(server: NatsServer, errors: list[str]) -> Client:
    async def noted(error: Exception) -> None:
        errors.append(str(error))

    return await nats.connect(
        server.url,
        user=MATCHMAKING,
        password=server.password(MATCHMAKING),
        inbox_prefix=inbox_prefix(MATCHMAKING),
        error_cb=noted,
        allow_reconnect=False,
    )


async def _refused(request: Awaitable[object]) -> bool:
    try:
        await asyncio.wait_for(request, REFUSED_WITHIN * 2)
    except (nats.errors.Error, TimeoutError):
        return True
    return False


async def test_matchmakings_credentials_cannot_read_the_log_or_the_snapshots(
    nats_server: NatsServer,
) -> None:
    async with (
        running_node(settings(nats_server, "guarded")) as node,
        table_stub(node.address) as stub,
    ):
        table_id = await create_table(stub, elevator_config([seat(s) for s in range(3)]))

        async def over() -> bool:
            return await game_finished(nats_server, table_id) is not None

        await wait_until(over, what="the game to finish")
        errors: list[str] = []
        intruder = await _as_matchmaking(nats_server, errors)
        try:
            js = intruder.jetstream(timeout=REFUSED_WITHIN)
            log = log_subject(table_id)
            # A stored log entry, by the API and directly.
            assert await _refused(js.get_last_msg(STREAM, log))
            assert await _refused(js.get_msg(STREAM, seq=1, subject=log, next=True))
            assert await _refused(
                intruder.request(f"$JS.API.DIRECT.GET.{STREAM}.{log}", b"", timeout=REFUSED_WITHIN)
            )
            # A consumer of its own on the log.
            assert await _refused(
                js.add_consumer(STREAM, api.ConsumerConfig(name="peek", filter_subject=log))
            )
            # The snapshots, holding the seed and every hand.
            assert await _refused(js.key_value(SNAPSHOT_BUCKET))
            snapshot = f"$JS.API.DIRECT.GET.KV_{SNAPSHOT_BUCKET}.$KV.{SNAPSHOT_BUCKET}.{table_id}"
            assert await _refused(intruder.request(snapshot, b"", timeout=REFUSED_WITHIN))
            # Live: the log as it is written, the snapshot bucket, the engine's replies.
            heard: list[Msg] = []

            async def overheard(message: Msg) -> None:
                heard.append(message)

            for subject in (
                "masa.table.v1.*.log",
                f"$KV.{SNAPSHOT_BUCKET}.>",
                f"{inbox_prefix('table-engine')}.>",
                ">",
            ):
                await intruder.subscribe(subject, cb=overheard)
            await intruder.flush()
            await create_table(stub, elevator_config([seat(s) for s in range(3)]))
            await asyncio.sleep(REFUSED_WITHIN)
            assert heard == []
            # The server said no to each, and said why.
            violations = "\n".join(errors).lower()
            for refused in (
                f'publish to "$js.api.stream.msg.get.{STREAM}"',
                f'publish to "$js.api.direct.get.{STREAM}.{log}"',
                f'publish to "$js.api.consumer.create.{STREAM}.peek.{log}"',
                f'publish to "$js.api.stream.info.kv_{SNAPSHOT_BUCKET}"',
                'subscription to "masa.table.v1.*.log"',
                f'subscription to "$kv.{SNAPSHOT_BUCKET}.>"',
                'subscription to "_inbox.table-engine.>"',
            ):
                assert f"permissions violation for {refused.lower()}" in violations, refused

            # What matchmaking is meant to read: the results, through its own consumer.
            subscription = await intruder.jetstream().pull_subscribe_bind(
                MATCHMAKING_RESULTS_CONSUMER, stream=STREAM
            )
            results: list[result_pb2.TableResult] = []
            async with asyncio.timeout(20):
                while not any(r.game_finished.table_id == table_id for r in results):
                    for message in await subscription.fetch(16, timeout=5):
                        results.append(result_pb2.TableResult.FromString(message.data))
                        await message.ack()
        finally:
            await intruder.close()
    # Operators may read everything.
    admin = await bus_client(nats_server)
    try:
        assert (await admin.jetstream().get_last_msg(STREAM, log_subject(table_id))).data
    finally:
        await admin.close()


async def test_no_anonymous_client_gets_on_the_bus(nats_server: NatsServer) -> None:
    with pytest.raises(nats.errors.Error):
        await nats.connect(nats_server.url, allow_reconnect=False, max_reconnect_attempts=0)
