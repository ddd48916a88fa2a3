"""NATS outages and lost ownership (architecture.md): no table freezes, nothing is lost or doubled.

A stalled nats-server (SIGSTOP: connections stay open, nothing is answered) or a killed and
restarted one: a write that timed out may still land once NATS is back. The table learns from
the log whether it did, adopts it, and takes actions again within 2 s of NATS returning.
Health says NOT_SERVING meanwhile. Only an entry another node wrote takes a table away: it is
handed over to the lease holder, or recovered when the lease is free.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import grpc.aio
import pytest
from engine_support import (
    bus_client,
    create_table,
    elevator_config,
    fiftyone_config,
    game_finished,
    get_view,
    log_entries,
    metadata,
    running_node,
    seat,
    settings,
    table_stub,
    wait_until,
)
from grpc_health.v1 import health_pb2
from grpc_status import rpc_status
from masa.events.v1 import table_log_pb2
from masa.table.v1 import table_pb2, table_pb2_grpc
from masa_platform.acks import publish_headers
from masa_platform.bus import KvBucket
from masa_platform.errors import error_info
from masa_platform.keys import load_mac_keys
from masa_platform.signing import SEAL, Sealer
from masa_platform.testing import HealthStub, NatsServer, keyring
from masa_rules.elevator import legal_actions
from masa_table_engine.adapters.convert import entry_to_log, input_from_log
from masa_table_engine.adapters.jetstream import (
    LEASE_BUCKET,
    SNAPSHOT_BUCKET,
    STREAM,
    WRITER_HEADER,
    log_subject,
)
from masa_table_engine.bootstrap import Node
from masa_table_engine.domain.model import SeatChange, SeatChanged
from masa_table_engine.domain.table import TimerPolicy, accept
from masa_wire.elevator import action_to_proto, state_from_seat_view
from prometheus_client import CollectorRegistry

PLAYERS = ("ayse", "bora", "cem")
OUTAGE_SECONDS = 8.0
# The goal: tables take actions again within this long of NATS answering again.
BACK_WITHIN_SECONDS = 2.0


@pytest.fixture
def nats(tmp_path: Path) -> Iterator[NatsServer]:
    """A server of the test's own, since the test stalls or kills it."""
    with NatsServer(tmp_path / "nats", secure=True) as server:
        yield server


async def _next_move(
    stub: table_pb2_grpc.TableServiceAsyncStub, table_id: str, request_id: str
) -> tuple[int, table_pb2.SubmitActionRequest]:
    """The seat on turn and a legal move for it, from a fresh view.

    A move that timed out earlier may land between the two reads and pass the turn on, so
    the seat's own view must still show it on turn; otherwise read again.
    """
    while True:
        public = await get_view(stub, table_id, PLAYERS[0])
        turn = public.seat_view.table.turn_seat
        mine = (await get_view(stub, table_id, PLAYERS[turn])).seat_view
        if mine.table.turn_seat == turn:
            break
    return turn, table_pb2.SubmitActionRequest(
        request_id=request_id,
        table_id=table_id,
        expected_sequence=mine.table.table.sequence,
        action=action_to_proto(legal_actions(state_from_seat_view(mine), turn)[0]),
    )


async def _move(
    stub: table_pb2_grpc.TableServiceAsyncStub,
    table_id: str,
    request_id: str,
    timeout: float = 30.0,
) -> table_pb2.SubmitActionResponse:
    """One legal move of the human seat on turn."""
    turn, request = await _next_move(stub, table_id, request_id)
    return await stub.SubmitAction(request, metadata=metadata(PLAYERS[turn]), timeout=timeout)


async def _submit(
    stub: table_pb2_grpc.TableServiceAsyncStub, move: table_pb2.SubmitActionRequest, player: str
) -> table_pb2.SubmitActionResponse:
    return await stub.SubmitAction(move, metadata=metadata(player), timeout=30)


async def _seconds_until_a_move_is_taken(
    stub: table_pb2_grpc.TableServiceAsyncStub, table_id: str
) -> float:
    """Try a move every few milliseconds from now on; how long until one was accepted."""
    started = time.monotonic()
    attempt = 0
    while True:
        attempt += 1
        try:
            await _move(stub, table_id, f"after-{attempt}", timeout=1.0)
        except grpc.aio.AioRpcError as error:
            if error.code() not in (
                grpc.StatusCode.UNAVAILABLE,
                grpc.StatusCode.ABORTED,
                grpc.StatusCode.DEADLINE_EXCEEDED,
            ):
                raise
            assert time.monotonic() - started < 30, "the table never took a move again"
            await asyncio.sleep(0.02)
            continue
        return time.monotonic() - started


async def _health(address: str) -> int:
    async with grpc.aio.insecure_channel(address) as channel:
        try:
            reply = await HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=1.0)
        except grpc.aio.AioRpcError:
            return -1
        status: int = reply.status
        return status


async def _serving(address: str) -> bool:
    return await _health(address) == health_pb2.HealthCheckResponse.SERVING


def _frozen(registry: CollectorRegistry) -> float:
    return registry.get_sample_value("masa_tables_frozen") or 0.0


def _assert_log_is_whole(entries: list[table_log_pb2.TableLogEntry]) -> None:
    """One entry per sequence, in order, and no request applied twice."""
    assert [e.sequence for e in entries] == list(range(1, len(entries) + 1))
    requests = [
        (e.action_applied.seat, e.action_applied.request_id)
        for e in entries
        if e.WhichOneof("input") == "action_applied" and e.action_applied.request_id
    ]
    assert len(requests) == len(set(requests))


@pytest.mark.parametrize("outage", ["pause", "kill"])
async def test_after_an_outage_tables_take_moves_within_2_s_and_nothing_is_lost_or_doubled(
    nats: NatsServer, outage: str
) -> None:
    """The issue-9 reproduction: an 8 s outage froze every table for good (its own buffered
    write came back as 'wrong last sequence' and the engine fenced itself off)."""
    registry = CollectorRegistry()
    engine = settings(nats, "outage", bot_delay_seconds=0.05, health_check_seconds=0.2)
    async with running_node(engine, registry) as node, table_stub(node.address) as stub:
        humans = await create_table(
            stub, elevator_config([seat(i, p) for i, p in enumerate(PLAYERS)])
        )
        bots = await create_table(
            stub, fiftyone_config("salon", [seat(s) for s in range(4)], hands=3)
        )
        await _move(stub, humans, "before")
        turn, move = await _next_move(stub, humans, "during")
        if outage == "pause":
            nats.pause()
        else:
            nats.kill()
        # A move made while NATS is away: it times out, or lands once NATS is back.
        during = asyncio.create_task(_submit(stub, move, PLAYERS[turn]))
        await wait_until(lambda: _not_serving(node), what="health to say NOT_SERVING")
        await asyncio.sleep(OUTAGE_SECONDS)
        # The move's write timed out (after 5 s): its table is frozen until the log answers.
        assert _frozen(registry) >= 1
        if outage == "pause":
            nats.resume()
        else:
            nats.start()
        back = await _seconds_until_a_move_is_taken(stub, humans)
        assert back < BACK_WITHIN_SECONDS, f"tables took moves again after {back:.2f} s"

        heard = await asyncio.gather(during, return_exceptions=True)
        first: int | None = None
        if isinstance(heard[0], table_pb2.SubmitActionResponse):
            first = heard[0].update.sequence
        else:
            # It timed out, or the log had not taken it when the caller was answered.
            assert isinstance(heard[0], grpc.aio.AioRpcError)
            assert heard[0].code() == grpc.StatusCode.UNAVAILABLE
        await wait_until(lambda: _serving(node.address), what="health to say SERVING")
        assert _frozen(registry) == 0
        # The move made during the outage counts once, whatever its caller heard, and a retry
        # gets the entry it made.
        runtime = node.tables.get(humans)
        landed = runtime.history.accepted(turn, "during")
        if first is not None:
            assert landed is not None and landed.sequence == first
        if landed is not None:
            retried = await stub.SubmitAction(move, metadata=metadata(PLAYERS[turn]))
            assert retried.update.sequence == landed.sequence
        await wait_until(lambda: _finished(nats, bots), timeout=120, what="the bot game to end")

    for table_id in (humans, bots):
        _assert_log_is_whole(await log_entries(nats, table_id))
    entries = await log_entries(nats, humans)
    assert entries[-1].sequence == runtime.table.sequence


async def _not_serving(node: Node) -> bool:
    return await _health(node.address) == health_pb2.HealthCheckResponse.NOT_SERVING


async def _finished(server: NatsServer, table_id: str) -> bool:
    return await game_finished(server, table_id) is not None


async def test_a_lease_that_expired_during_the_outage_is_taken_back(nats: NatsServer) -> None:
    engine = settings(nats, "expiry", lease_ttl_seconds=1.5, health_check_seconds=0.2)
    async with running_node(engine) as node, table_stub(node.address) as stub:
        table_id = await create_table(
            stub, elevator_config([seat(i, p) for i, p in enumerate(PLAYERS)])
        )
        nats.pause()
        await asyncio.sleep(4.0)
        nats.resume()
        back = await _seconds_until_a_move_is_taken(stub, table_id)
        assert back < BACK_WITHIN_SECONDS
        client = await bus_client(nats)
        try:
            leases = await KvBucket.open(client, LEASE_BUCKET)

            async def held_again() -> bool:
                entry = await leases.get(table_id)
                return entry is not None and entry.value == b"expiry"

            # Renewed every half second (a third of the TTL): the lease is ours again.
            await wait_until(held_again, what="the lease to be taken back")
        finally:
            await client.close()
        assert await _move(stub, table_id, "later")


async def _write_as(server: NatsServer, table_id: str, writer: str, *, take_lease: bool) -> int:
    """Another node's entry at the end of the table's log (a reconnection of seat 0, which
    every new human seat can make), and optionally its lease and snapshot: what a node that
    took the table over would have written."""
    entries = await log_entries(server, table_id)
    client = await bus_client(server)
    try:
        js = client.jetstream()
        last = await js.get_last_msg(STREAM, log_subject(table_id))
        # The entry as that node's engine would have logged it, events and all, so that a
        # replay of the log matches it.
        table = None
        for logged in entries:
            at = logged.occurred_at.ToNanoseconds() / 1e9
            table, _ = accept(table, input_from_log(logged, 30.0), at, TimerPolicy())
        _, theirs = accept(
            table, SeatChanged(0, SeatChange.RECONNECTED), time.time(), TimerPolicy()
        )
        entry = entry_to_log(theirs, f"{writer}:7000")
        sequence = entry.sequence
        payload = entry.SerializeToString()
        # Sealed as an engine seals it (that node holds the engines' key), and fenced as its
        # append is: on the log's last entry as it found it.
        sealer = Sealer(load_mac_keys(keyring().log_mac))
        await js.publish(
            log_subject(table_id),
            payload,
            headers=publish_headers(
                msg_id=entry.event_id,
                expected_last_subject_sequence=last.seq,
                extra={
                    WRITER_HEADER: writer,
                    SEAL: sealer.seal(log_subject(table_id), payload),
                },
            ),
        )
        if take_lease:
            leases = await KvBucket.open(client, LEASE_BUCKET)
            await leases.put(table_id, writer.encode())
            snapshots = await KvBucket.open(client, SNAPSHOT_BUCKET)
            body = json.dumps({"owner": writer, "address": f"{writer}:7000", "table": {}})
            seal = sealer.seal(f"{SNAPSHOT_BUCKET}.{table_id}", body.encode())
            await snapshots.put(table_id, json.dumps({"seal": seal, "body": body}).encode())
    finally:
        await client.close()
    return sequence


async def test_a_table_another_node_took_over_is_handed_over_not_left_stopped(
    nats: NatsServer,
) -> None:
    engine = settings(nats, "zombie", health_check_seconds=0.2, lease_ttl_seconds=60)
    async with running_node(engine) as node, table_stub(node.address) as stub:
        table_id = await create_table(
            stub, elevator_config([seat(i, p) for i, p in enumerate(PLAYERS)])
        )
        await _write_as(nats, table_id, "usurper", take_lease=True)
        # The next move meets the usurper's entry: the table is fenced and handed over.
        with pytest.raises(grpc.aio.AioRpcError) as fenced:
            await _move(stub, table_id, "fenced")
        assert fenced.value.code() == grpc.StatusCode.UNAVAILABLE

        async def moved() -> bool:
            try:
                await get_view(stub, table_id, PLAYERS[0])
            except grpc.aio.AioRpcError as error:
                return error.code() == grpc.StatusCode.FAILED_PRECONDITION
            return False

        await wait_until(moved, what="the table to be handed over")
        rpc = stub.GetTable(
            table_pb2.GetTableRequest(table_id=table_id), metadata=metadata(PLAYERS[0])
        )
        with pytest.raises(grpc.aio.AioRpcError):
            await rpc
        info = error_info(await rpc_status.aio.from_call(rpc))
        assert info is not None and info.reason == "TABLE_MOVED"
        assert info.metadata["owner_address"] == "usurper:7000"
        # Nothing frozen is left behind: the node serves its other tables.
        await wait_until(lambda: _serving(node.address), what="health to say SERVING")
        entries = await log_entries(nats, table_id)
        assert [e.sequence for e in entries] == list(range(1, len(entries) + 1))


async def test_a_fenced_table_whose_lease_is_free_is_recovered_and_plays_on(
    nats: NatsServer,
) -> None:
    engine = settings(nats, "survivor", health_check_seconds=0.2)
    async with running_node(engine) as node, table_stub(node.address) as stub:
        table_id = await create_table(
            stub, elevator_config([seat(i, p) for i, p in enumerate(PLAYERS)])
        )
        foreign = await _write_as(nats, table_id, "stray-writer", take_lease=False)
        with pytest.raises(grpc.aio.AioRpcError):
            await _move(stub, table_id, "fenced")

        async def recovered() -> bool:
            try:
                runtime = node.tables.get(table_id)
            except Exception:
                return False
            return not runtime.frozen and runtime.table.sequence >= foreign

        await wait_until(recovered, what="the table to be recovered")
        await _move(stub, table_id, "after-recovery")
        await wait_until(lambda: _serving(node.address), what="health to say SERVING")
        entries = await log_entries(nats, table_id)
        _assert_log_is_whole(entries)
        # The recovered table replayed the other writer's entry (seat 0 reconnected); no stream
        # of that seat lives here, so recovery recorded it as disconnected again (P-12).
        changes = [
            (e.sequence, e.seat_changed.change)
            for e in entries
            if e.WhichOneof("input") == "seat_changed"
        ]
        assert changes == [
            (foreign, table_log_pb2.SEAT_CHANGE_RECONNECTED),
            (foreign + 1, table_log_pb2.SEAT_CHANGE_DISCONNECTED),
        ]
        assert entries[-1].action_applied.request_id == "after-recovery"
