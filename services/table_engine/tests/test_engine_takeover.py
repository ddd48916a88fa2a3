"""Tables outlive their node (issue 12, architecture.md): live nodes take over the tables of a node
that died (its leases expired) or drained (it released them), rebuild them from snapshot and
log, keep their deadlines, and void a table whose log they cannot replay."""

from __future__ import annotations

import asyncio
import time

import grpc
import grpc.aio
import pytest
from engine_support import (
    create_table,
    elevator_config,
    get_view,
    log_entries,
    metadata,
    results,
    running_nodes,
    seat,
    table_stub,
    wait_until,
)
from grpc_status import rpc_status
from masa.events.v1 import engine_pb2, table_log_pb2
from masa.table.v1 import event_pb2, table_pb2
from masa_platform.bus import KvBucket, connect, publish
from masa_platform.bus_access import ADMIN
from masa_platform.errors import error_info
from masa_platform.keys import load_mac_keys
from masa_platform.signing import SEAL, Sealer
from masa_platform.testing import NatsServer, keyring
from masa_rules.elevator import legal_actions
from masa_table_engine.adapters.jetstream import SNAPSHOT_SCHEMA, log_subject
from masa_table_engine.adapters.registry import ENGINE_NODES_BUCKET
from masa_table_engine.bootstrap import Node
from masa_table_engine.domain.model import Entry
from masa_table_engine.domain.table import Table
from masa_wire.elevator import action_to_proto, state_from_seat_view

PLAYERS = ("ayse", "bora", "cem")


async def _tables(node: Node, count: int, turn_seconds: float = 600.0) -> list[str]:
    async with table_stub(node.address) as stub:
        return [
            await create_table(
                stub, elevator_config([seat(i, p) for i, p in enumerate(PLAYERS)], turn_seconds)
            )
            for _ in range(count)
        ]


def _served_by(node: Node, table_id: str) -> bool:
    try:
        runtime = node.tables.get(table_id)
    except Exception:
        return False
    return not runtime.frozen


async def _move(node: Node, table_id: str, request_id: str) -> table_pb2.SubmitActionResponse:
    async with table_stub(node.address) as stub:
        public = (await get_view(stub, table_id, PLAYERS[0])).seat_view
        player = PLAYERS[public.table.turn_seat]
        mine = (await get_view(stub, table_id, player)).seat_view
        action = legal_actions(state_from_seat_view(mine), public.table.turn_seat)[0]
        return await stub.SubmitAction(
            table_pb2.SubmitActionRequest(
                request_id=request_id,
                table_id=table_id,
                expected_sequence=mine.table.table.sequence,
                action=action_to_proto(action),
            ),
            metadata=metadata(player),
        )


def _gapless(entries: list[table_log_pb2.TableLogEntry]) -> None:
    assert [e.sequence for e in entries] == list(range(1, len(entries) + 1))


async def test_the_tables_of_a_node_that_died_are_taken_over_and_play_on(
    nats: NatsServer,
) -> None:
    async with running_nodes(nats, "doomed", "heir-b", "heir-c") as (nodes, registries):
        doomed = nodes.pop("doomed")
        tables = await _tables(doomed, 8)
        for number, table_id in enumerate(tables):
            await _move(doomed, table_id, f"before-{number}")
        # Stopping without a drain is a death to the leases: nobody releases them.
        died = time.monotonic()
        await doomed.stop(0.1)

        async def all_served() -> bool:
            return all(any(_served_by(n, t) for n in nodes.values()) for t in tables)

        await wait_until(all_served, timeout=15, what="the survivors to take every table")
        took = time.monotonic() - died
        # The lease (1.5 s) runs out, a scan (every 0.2 s) finds the table, and it is rebuilt.
        assert took < 5.0
        # Each table is served by one survivor (the one first in its claim order, unless that
        # one was slow for two scan periods: test_engine_fakes checks the order).
        counts = {name: len(node.tables.served) for name, node in nodes.items()}
        assert sum(counts.values()) == len(tables)
        taken = sum(
            registries[name].get_sample_value("masa_table_takeovers_total", {"reason": "expired"})
            or 0
            for name in nodes
        )
        assert taken == len(tables)
        for number, table_id in enumerate(tables):
            owner = next(n for n in nodes.values() if _served_by(n, table_id))
            answer = await _move(owner, table_id, f"after-{number}")
            assert answer.update.sequence >= 3
            # The other survivor sends the client to the owner (architecture.md).
            other = next(n for n in nodes.values() if n is not owner)
            async with table_stub(other.address) as stub:
                call = stub.GetTable(
                    table_pb2.GetTableRequest(table_id=table_id), metadata=metadata(PLAYERS[0])
                )
                with pytest.raises(grpc.aio.AioRpcError) as moved:
                    await call
                assert moved.value.code() is grpc.StatusCode.FAILED_PRECONDITION
                info = error_info(await rpc_status.aio.from_call(call))
                assert info is not None and info.reason == "TABLE_MOVED"
                assert info.metadata["owner_address"] == owner.address
            entries = await log_entries(nats, table_id)
            _gapless(entries)
            requests = [e.action_applied.request_id for e in entries if e.action_applied.request_id]
            assert requests == [f"before-{number}", f"after-{number}"]
            assert {e.rules_version for e in entries} != {""}
            assert all(e.schema_version == SNAPSHOT_SCHEMA for e in entries)
        # The registry lists each survivor's tables, for masa nodes.
        client = await connect(nats.url, name="test", user=ADMIN, password=nats.password(ADMIN))
        try:
            bucket = await KvBucket.open(client, ENGINE_NODES_BUCKET)

            async def listed() -> bool:
                found: list[str] = []
                for name in nodes:
                    entry = await bucket.get(name)
                    assert entry is not None
                    found.extend(engine_pb2.EngineNode.FromString(entry.value).table_ids)
                return sorted(found) == sorted(tables)

            await wait_until(listed, timeout=10, what="the registry to list the tables")
        finally:
            await client.close()


async def test_a_turn_that_ran_out_while_nobody_served_the_table_is_played_on_takeover(
    nats: NatsServer,
) -> None:
    """P-10 across a move: the turn keeps its deadline; once past, the heir plays it at once."""
    async with running_nodes(nats, "short-lived", "heir") as (nodes, _):
        (table_id,) = await _tables(nodes["short-lived"], 1, turn_seconds=1.0)
        await nodes["short-lived"].stop(0.1)
        await wait_until(
            lambda: _async(_served_by(nodes["heir"], table_id)), timeout=15, what="takeover"
        )

        async def timed_out() -> bool:
            return any(
                e.WhichOneof("input") == "timer_fired" for e in await log_entries(nats, table_id)
            )

        await wait_until(timed_out, timeout=10, what="the expired turn to be played")
        entries = await log_entries(nats, table_id)
        first_turn = next(
            event.turn_started
            for event in entries[0].events
            if event.WhichOneof("kind") == "turn_started"
        )
        fired = next(e for e in entries if e.WhichOneof("input") == "timer_fired")
        assert fired.timer_fired.kind == table_log_pb2.TIMER_KIND_TURN
        # The deadline set by the dead node held: the timer fired after it, not a whole new
        # turn time after the takeover.
        deadline = first_turn.deadline.ToNanoseconds() / 1e9
        fired_at = fired.occurred_at.ToNanoseconds() / 1e9
        assert deadline <= fired_at < deadline + 6.0
        _gapless(entries)


async def _async(value: bool) -> bool:
    return value


async def test_a_draining_node_hands_its_tables_over_at_once(nats: NatsServer) -> None:
    # Leases of a minute: only the drain's release can move the tables in time.
    async with running_nodes(nats, "leaving", "staying", lease_ttl_seconds=60.0) as (
        nodes,
        registries,
    ):
        leaving, staying = nodes["leaving"], nodes["staying"]
        tables = await _tables(leaving, 6)
        for number, table_id in enumerate(tables):
            await _move(leaving, table_id, f"before-{number}")
        started = time.monotonic()
        await leaving.drain()

        async def all_moved() -> bool:
            return all(_served_by(staying, t) for t in tables)

        await wait_until(all_moved, timeout=10, what="the tables to move")
        assert time.monotonic() - started < 2.0
        assert (
            registries["staying"].get_sample_value(
                "masa_table_takeovers_total", {"reason": "drained"}
            )
            == 6
        )
        # The drained node takes no new table, and sends clients of the old ones on.
        async with table_stub(leaving.address) as stub:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await create_table(stub, elevator_config([seat(0, "ayse"), seat(1), seat(2)]))
            assert refused.value.code() is grpc.StatusCode.UNAVAILABLE
            call = stub.GetTable(
                table_pb2.GetTableRequest(table_id=tables[0]), metadata=metadata(PLAYERS[0])
            )
            with pytest.raises(grpc.aio.AioRpcError):
                await call
            info = error_info(await rpc_status.aio.from_call(call))
            assert info is not None and info.reason == "TABLE_MOVED"
            assert info.metadata["owner_address"] == staying.address
        for number, table_id in enumerate(tables):
            # A retry of a move made before the drain is answered, not applied again.
            again = await _retry(nats, staying, table_id, f"before-{number}")
            assert again.update.sequence == 2
            await _move(staying, table_id, f"after-{number}")
            entries = await log_entries(nats, table_id)
            _gapless(entries)
            requests = [e.action_applied.request_id for e in entries if e.action_applied.request_id]
            assert requests == [f"before-{number}", f"after-{number}"]


async def _retry(
    server: NatsServer, node: Node, table_id: str, request_id: str
) -> table_pb2.SubmitActionResponse:
    """The move ``request_id`` made at sequence 1 again (the same action, from the log)."""
    entries = await log_entries(server, table_id)
    applied = next(e.action_applied for e in entries if e.action_applied.request_id == request_id)
    player = PLAYERS[applied.seat]
    async with table_stub(node.address) as stub:
        return await stub.SubmitAction(
            table_pb2.SubmitActionRequest(
                request_id=request_id, table_id=table_id, action=applied.action
            ),
            metadata=metadata(player),
        )


@pytest.mark.parametrize(
    ("sealed", "why"),
    [
        # An engine of another rules version, say: sealed, but its events are not what
        # replaying its input gives.
        (True, "other events"),
        # Not written by an engine at all (issue 19: a route into the log): no seal.
        (False, "seal"),
    ],
)
async def test_a_table_whose_log_cannot_be_trusted_is_voided_loudly(
    nats: NatsServer, caplog: pytest.LogCaptureFixture, sealed: bool, why: str
) -> None:
    async with running_nodes(nats, "writer", "reader") as (nodes, _):
        (table_id,) = await _tables(nodes["writer"], 1)
        await nodes["writer"].stop(0.1)
        # An entry whose logged events are not what replaying its input gives (another rules
        # version, say): seat 0 reconnects, but the log claims nothing happened.
        entries = await log_entries(nats, table_id)
        forged = table_log_pb2.TableLogEntry(
            event_id=f"{table_id}:{len(entries) + 1}",
            table_id=table_id,
            sequence=len(entries) + 1,
            occurred_at=entries[-1].occurred_at,
            seat_changed=table_log_pb2.SeatChanged(
                seat=0, change=table_log_pb2.SEAT_CHANGE_RECONNECTED
            ),
            rules_version="0.0.0-elsewhere",
            schema_version=1,
        )
        client = await connect(nats.url, name="forger", user=ADMIN, password=nats.password(ADMIN))
        payload = forged.SerializeToString()
        headers = {"Masa-Node": "writer"}
        if sealed:
            sealer = Sealer(load_mac_keys(keyring().log_mac))
            headers[SEAL] = sealer.seal(log_subject(table_id), payload)
        try:
            await publish(client.jetstream(), log_subject(table_id), payload, headers=headers)
        finally:
            await client.close()

        async def voided() -> bool:
            found = await results(nats, table_id)
            return any(r.WhichOneof("result") == "game_abandoned" for r in found)

        await wait_until(voided, timeout=15, what="the table to be voided")
        abandoned = [r.game_abandoned for r in await results(nats, table_id)]
        assert len(abandoned) == 1
        assert abandoned[0].event_id == f"{table_id}:1:abandoned"
        assert "rebuilt" in abandoned[0].reason
        entries = await log_entries(nats, table_id)
        _gapless(entries)
        last = entries[-1]
        assert last.WhichOneof("input") == "table_voided"
        assert last.table_voided.reason == event_pb2.ABANDON_REASON_UNRECOVERABLE
        assert why in last.table_voided.details
        assert not nodes["reader"].tables.served
    assert any("cannot be rebuilt" in r.getMessage() for r in caplog.records)


class _NoPublish:
    """Results that never reach the bus (the node dies before its relay publishes)."""

    async def publish(self, table: Table, entry: Entry, *, recheck: bool = False) -> list[str]:
        del table, entry, recheck
        await asyncio.Event().wait()
        return []


async def test_a_result_is_published_once_by_the_heir_when_its_node_died_before_publishing(
    nats: NatsServer,
) -> None:
    async with running_nodes(nats, "mute", "heir", bot_delay_seconds=0.0) as (nodes, registries):
        mute = nodes["mute"]
        mute.tables.outbox._results = _NoPublish()
        async with table_stub(mute.address) as stub:
            table_id = await create_table(stub, elevator_config([seat(0), seat(1), seat(2)]))

        async def finished() -> bool:
            return mute.tables.get(table_id).table.finished

        await wait_until(finished, timeout=30, what="the bot game to end")
        assert mute.tables.outbox.pending >= 1
        assert await results(nats, table_id) == []
        await mute.stop(0.1)

        async def published() -> bool:
            return any(
                r.WhichOneof("result") == "game_finished" for r in await results(nats, table_id)
            )

        await wait_until(published, timeout=15, what="the heir to publish the result")
        found = await results(nats, table_id)
        ids = [getattr(r, r.WhichOneof("result") or "").event_id for r in found]
        assert len(ids) == len(set(ids))
        assert f"{table_id}:1:game" in ids
        # The heir closed the books: the table is in no index and holds no lease.
        client = await connect(nats.url, name="check", user=ADMIN, password=nats.password(ADMIN))
        try:
            index = await KvBucket.open(client, "masa_table_index")

            async def closed() -> bool:
                return not [k for k in await index.keys() if k.endswith(table_id)]

            await wait_until(closed, timeout=10, what="the books to be closed")
        finally:
            await client.close()
        assert (
            registries["heir"].get_sample_value(
                "masa_outbox_publishes_total", {"outcome": "published"}
            )
            or 0
        ) >= 1
