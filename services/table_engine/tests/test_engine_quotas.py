"""Quotas on an engine node, on real NATS and real gRPC: one token cannot fill the node with
watch streams, spectators cannot fill a table so that its players cannot watch it, and a
watcher that does not read is let go with a bounded queue and resumes where it was.

The finding reproduced here: one player token opened 10,000 spectator WatchTable streams and
the node then refused everyone (health included) with RESOURCE_EXHAUSTED."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import grpc
import grpc.aio
from engine_support import (
    ADMIN_TOKEN,
    create_table,
    elevator_config,
    game_finished,
    get_view,
    metadata,
    running_node,
    seat,
    settings,
    table_stub,
    wait_until,
)
from grpc_health.v1 import health_pb2
from grpc_status import rpc_status
from masa.common.v1 import error_pb2
from masa.table.v1 import table_pb2, table_pb2_grpc
from masa_client.client import sequence_of
from masa_platform.errors import error_info
from masa_platform.quotas import CALLER_STREAMS
from masa_platform.settings import QuotaSettings
from masa_platform.testing import HealthStub, NatsServer, next_message
from masa_table_engine.adapters.grpc_api import TABLE_SPECTATORS, WATCH_BACKLOG
from masa_table_engine.settings import EngineSettings
from prometheus_client import CollectorRegistry

QUOTA_EXCEEDED = error_pb2.ErrorReason.Name(error_pb2.ERROR_REASON_QUOTA_EXCEEDED).removeprefix(
    "ERROR_REASON_"
)
OVERLOADED = error_pb2.ErrorReason.Name(error_pb2.ERROR_REASON_OVERLOADED).removeprefix(
    "ERROR_REASON_"
)
# Small limits, so that the attack is over in a moment: the server takes 40 callers' calls, a
# caller holds 4 streams.
QUOTAS = QuotaSettings(max_caller_rpcs=40, caller_streams=4, callers_tracked=100)


def node_settings(server: NatsServer, name: str, **overrides: Any) -> EngineSettings:
    base = settings(server, name, **overrides)
    platform = replace(base.platform, server=replace(base.platform.server, quotas=QUOTAS))
    return replace(base, platform=platform)


def watch(
    stub: table_pb2_grpc.TableServiceAsyncStub, table_id: str, who: str, **fields: Any
) -> grpc.aio.UnaryStreamCall[table_pb2.WatchTableRequest, table_pb2.WatchTableResponse]:
    request = table_pb2.WatchTableRequest(table_id=table_id, **fields)
    return stub.WatchTable(request, metadata=metadata(who))


async def opened(call: grpc.aio.UnaryStreamCall[Any, table_pb2.WatchTableResponse]) -> bool:
    """Whether the watch opened (its first view came), or was refused."""
    try:
        return (await next_message(call, table_pb2.WatchTableResponse)).WhichOneof(
            "payload"
        ) is not None
    except grpc.aio.AioRpcError:
        return False


async def refusal(call: grpc.aio.Call) -> tuple[grpc.StatusCode, str, dict[str, str]]:
    info = error_info(await rpc_status.aio.from_call(call))
    assert info is not None
    return await call.code(), info.reason, dict(info.metadata)


async def health(address: str) -> int:
    async with grpc.aio.insecure_channel(address) as channel:
        reply = await HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
    return int(reply.status)


async def test_one_spectator_token_cannot_fill_the_node_and_everyone_else_is_served(
    nats_server: NatsServer,
) -> None:
    """One token opens 60 spectator streams: 4 open, the rest are refused with
    QUOTA_EXCEEDED (caller_streams); the seated player watches and plays, another
    spectator watches, health says SERVING."""
    registry = CollectorRegistry()
    async with (
        running_node(node_settings(nats_server, "quota-streams"), registry) as node,
        table_stub(node.address) as stub,
    ):
        table_id = await create_table(stub, elevator_config([seat(0, "ayse"), seat(1), seat(2)]))
        flood = [watch(stub, table_id, "mallory") for _ in range(60)]
        results = await asyncio.gather(*(opened(call) for call in flood))
        assert sum(results) == QUOTAS.caller_streams
        code, reason, info = await refusal(flood[results.index(False)])
        assert (code, reason) == (grpc.StatusCode.RESOURCE_EXHAUSTED, QUOTA_EXCEEDED)
        assert info == {"quota": CALLER_STREAMS, "limit": str(QUOTAS.caller_streams)}
        refused = registry.get_sample_value("masa_quota_refusals_total", {"quota": CALLER_STREAMS})
        assert refused == 60 - QUOTAS.caller_streams

        assert await health(node.address) == health_pb2.HealthCheckResponse.SERVING
        assert await opened(watch(stub, table_id, "ayse"))
        assert await opened(watch(stub, table_id, "kibitzer"))
        view = await get_view(stub, table_id, "ayse")
        assert view.seat_view.seat == 0
        for call in flood:
            call.cancel()


async def test_spectators_fill_a_table_yet_its_seated_player_still_watches_it(
    nats_server: NatsServer,
) -> None:
    """MASA_MAX_SPECTATORS_PER_TABLE counts callers without a seat at the table only: past
    it a spectator is refused (QUOTA_EXCEEDED, table_spectators), while the seated player
    (as its seat or as a spectator) and a service still watch; a spectator leaving frees a
    place."""
    registry = CollectorRegistry()
    async with (
        running_node(
            node_settings(nats_server, "quota-table", max_spectators_per_table=3), registry
        ) as node,
        table_stub(node.address) as stub,
    ):
        table_id = await create_table(stub, elevator_config([seat(0, "ayse"), seat(1), seat(2)]))
        watchers = [watch(stub, table_id, f"fan-{n}") for n in range(3)]
        assert all(await asyncio.gather(*(opened(call) for call in watchers)))
        late = watch(stub, table_id, "fan-late")
        assert not await opened(late)
        code, reason, info = await refusal(late)
        assert (code, reason) == (grpc.StatusCode.RESOURCE_EXHAUSTED, QUOTA_EXCEEDED)
        assert info["quota"] == TABLE_SPECTATORS and info["limit"] == "3"
        refused = registry.get_sample_value(
            "masa_quota_refusals_total", {"quota": TABLE_SPECTATORS}
        )
        assert refused == 1

        own = watch(stub, table_id, "ayse")
        assert await opened(own)
        assert await opened(watch(stub, table_id, "ayse", spectate=True))
        # An operator looking on is not held to the spectators' cap.
        operator = stub.WatchTable(
            table_pb2.WatchTableRequest(table_id=table_id), metadata=ADMIN_TOKEN
        )
        assert await opened(operator)

        watchers[0].cancel()

        async def let_in() -> bool:
            return await opened(watch(stub, table_id, "fan-late"))

        await wait_until(let_in, timeout=10, what="a spectator's place freed")


async def test_a_watcher_that_does_not_read_is_let_go_and_resumes_after_its_last_sequence(
    nats_server: NatsServer,
) -> None:
    """A slow reader cannot grow the node's memory: its stream keeps MASA_WATCH_BACKLOG
    updates at most, then ends RESOURCE_EXHAUSTED, OVERLOADED, naming the last sequence it
    sent; a new stream after it goes on from there without a gap."""
    backlog = 4
    async with (
        running_node(
            # The whole game stays in the history, so that the stream resumes with updates.
            node_settings(nats_server, "quota-behind", watch_backlog=backlog, history_kept=10_000)
        ) as node,
        table_stub(node.address) as stub,
    ):
        table_id = await create_table(stub, elevator_config([seat(s) for s in range(4)]))
        # A reader that takes a kilobyte at a time: the node's writes wait on it at once.
        tight = [("grpc.http2.lookahead_bytes", 1024), ("grpc.http2.bdp_probe", 0)]
        async with grpc.aio.insecure_channel(node.address, options=tight) as channel:
            slow = watch(table_pb2_grpc.TableServiceStub(channel), table_id, "kibitzer")
            received = [await next_message(slow, table_pb2.WatchTableResponse)]

            async def finished() -> bool:
                return await game_finished(nats_server, table_id) is not None

            await wait_until(finished, timeout=60, what="the bots' game to finish")
            while (message := await _read(slow)) is not None:
                received.append(message)
            code, reason, info = await refusal(slow)
        assert (code, reason) == (grpc.StatusCode.RESOURCE_EXHAUSTED, OVERLOADED)
        assert info["quota"] == WATCH_BACKLOG and info["limit"] == str(backlog)
        last = sequence_of(received[-1])
        assert info["after_sequence"] == str(last)
        sequences = [sequence_of(message) for message in received]
        assert sequences == list(range(sequences[0], last + 1))

        resumed = [
            message async for message in watch(stub, table_id, "kibitzer", after_sequence=last)
        ]
        assert [sequence_of(message) for message in resumed] == list(
            range(last + 1, last + 1 + len(resumed))
        )
        assert any(
            event.WhichOneof("kind") == "game_finished" for event in resumed[-1].update.events
        )


async def _read(
    call: grpc.aio.UnaryStreamCall[Any, table_pb2.WatchTableResponse],
) -> table_pb2.WatchTableResponse | None:
    try:
        message = await call.read()
    except grpc.aio.AioRpcError:
        return None
    return message if isinstance(message, table_pb2.WatchTableResponse) else None
