"""One contract for the table stores, run against JetStream (a real nats-server) and against the
in-memory stores the fast tests use (``adapters/memory.py``): what the use cases rely on,
down to the ids a result is published under, by which the ledger and matchmaking know a
result they have seen."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import pytest
from engine_support import bus_client, provision_ttls, results
from masa_platform.acks import AckedPublisher
from masa_platform.bus import KvBucket, Leases
from masa_platform.bus_access import TABLE_ENGINE
from masa_platform.keys import RESULTS, load_mac_keys
from masa_platform.metrics import LoopMetrics
from masa_platform.signing import ResultSigner, Sealer
from masa_platform.testing import NatsServer, keyring
from masa_rules.table_config import (
    BotLevel,
    GameKind,
    GameOptions,
    SeatConfig,
    SeatKind,
    TableConfig,
)
from masa_table_engine.adapters.jetstream import (
    INDEX_BUCKET,
    LEASE_BUCKET,
    SNAPSHOT_BUCKET,
    JetStreamDirectory,
    JetStreamLog,
    JetStreamResults,
    KvOwnership,
)
from masa_table_engine.adapters.memory import (
    MemoryBus,
    MemoryDirectory,
    MemoryLog,
    MemoryOwnership,
    MemoryResults,
)
from masa_table_engine.adapters.registry import ENGINE_NODES_BUCKET
from masa_table_engine.adapters.results import result_event_id
from masa_table_engine.app.ports import (
    Directory,
    LogConflict,
    LogStore,
    LogUnavailable,
    Ownership,
    ResultPublisher,
)
from masa_table_engine.app.runtime import has_results
from masa_table_engine.domain.model import (
    AbandonReason,
    Created,
    Entry,
    PlayerAction,
    SeatChange,
    SeatChanged,
    Source,
    TableVoided,
)
from masa_table_engine.domain.table import Table, TimerPolicy, accept, table_to_json
from prometheus_client import CollectorRegistry

LEASE_SECONDS = 1.0


@dataclass
class Stores:
    """Two nodes' views of one bus, and a way to let leases run out."""

    logs: tuple[LogStore, LogStore]
    ownership: tuple[Ownership, Ownership]
    directory: Directory
    results: ResultPublisher
    expire: Callable[[], object]
    # The event ids of a table's results on the bus, in the order published.
    published: Callable[[str], Awaitable[list[str]]]


@pytest.fixture(params=["memory", "jetstream"])
async def stores(request: pytest.FixtureRequest, nats_server: NatsServer) -> AsyncIterator[Stores]:
    a, b = f"a-{uuid.uuid4().hex[:8]}", f"b-{uuid.uuid4().hex[:8]}"
    if request.param == "memory":
        bus = MemoryBus(lease_seconds=LEASE_SECONDS)

        async def in_memory(table_id: str) -> list[str]:
            return list(bus.results.get(table_id, []))

        yield Stores(
            (MemoryLog(bus, a), MemoryLog(bus, b)),
            (MemoryOwnership(bus, a), MemoryOwnership(bus, b)),
            MemoryDirectory(bus),
            MemoryResults(bus),
            lambda: bus.clock.advance(LEASE_SECONDS + 0.5),
            in_memory,
        )
        return
    provision_ttls(nats_server, lease_seconds=LEASE_SECONDS, node_seconds=10)
    client = await bus_client(nats_server, TABLE_ENGINE)
    snapshots = await KvBucket.open(client, SNAPSHOT_BUCKET)
    index = await KvBucket.open(client, INDEX_BUCKET)
    leases = await KvBucket.open(client, LEASE_BUCKET)
    nodes = await KvBucket.open(client, ENGINE_NODES_BUCKET)
    owners = (
        KvOwnership(Leases(leases, a), renew_every=60, loops=LoopMetrics(CollectorRegistry())),
        KvOwnership(Leases(leases, b), renew_every=60, loops=LoopMetrics(CollectorRegistry())),
    )
    publisher = await AckedPublisher.started(client, unavailable=LogUnavailable)

    async def on_the_bus(table_id: str) -> list[str]:
        return [result_event_id(result) for result in await results(nats_server, table_id)]

    def log(node: str) -> JetStreamLog:
        return JetStreamLog(
            client,
            publisher,
            snapshots,
            index,
            node_id=node,
            owner_address=f"{node}:1",
            default_turn_seconds=30,
            sealer=Sealer(load_mac_keys(keyring().log_mac)),
        )

    try:
        yield Stores(
            (log(a), log(b)),
            owners,
            JetStreamDirectory(index, leases, nodes, node=a, node_ttl_seconds=10),
            JetStreamResults(client, ResultSigner(keyring().signer(RESULTS))),
            lambda: asyncio.sleep(LEASE_SECONDS + 1.5),
            on_the_bus,
        )
    finally:
        for owner in owners:
            await owner.close()
        await publisher.close()
        await client.close()


TIMERS = TimerPolicy()


def _table(table_id: str) -> tuple[Table, list[Entry]]:
    """A table and its first three entries: created, seat 0 connects, seat 0 drops."""
    config = TableConfig(
        game=GameKind.ELEVATOR,
        seats=(
            SeatConfig(0, SeatKind.HUMAN, "ayse", "ayse"),
            SeatConfig(1, SeatKind.BOT),
            SeatConfig(2, SeatKind.BOT),
        ),
        turn_seconds=30.0,
        options=GameOptions(),
    )
    table, first = accept(None, Created(table_id, config, b"s" * 32), 1_800_000_000.25, TIMERS)
    table, second = accept(table, SeatChanged(0, SeatChange.RECONNECTED), 1_800_000_001.5, TIMERS)
    table, third = accept(table, SeatChanged(0, SeatChange.DISCONNECTED), 1_800_000_002.75, TIMERS)
    return table, [first, second, third]


async def _expire(stores: Stores) -> None:
    waited = stores.expire()
    if asyncio.iscoroutine(waited):
        await waited


async def test_the_log_takes_entries_in_order_and_fences_a_second_writer(stores: Stores) -> None:
    table_id = f"t{uuid.uuid4().hex}"
    _, entries = _table(table_id)
    mine, theirs = stores.logs
    for entry in entries[:2]:
        await mine.append(entry)
    found = await theirs.read(table_id, 0)
    assert [(f.sequence, f.input, f.writer) for f in found] == [
        (1, entries[0].input, mine.writer),
        (2, entries[1].input, mine.writer),
    ]
    await mine.append(entries[2])
    # The other writer read up to 2: its entry 3 meets ours.
    with pytest.raises(LogConflict):
        await theirs.append(entries[2])
    # A late retry of the writer's own entry 3 is no second entry (JetStream: a duplicate
    # Nats-Msg-Id, stored once).
    with pytest.raises(LogConflict):
        await mine.append(entries[2])
    found += await theirs.read(table_id, 2)
    assert [f.sequence for f in found] == [1, 2, 3]
    # Times come back to the microsecond (JetStream keeps nanoseconds of a float).
    assert [f.at for f in found] == pytest.approx([e.at for e in entries], abs=1e-6)
    # A replay gives the logged events back; other events are no match.
    assert all(mine.matches(e, f) for e, f in zip(entries, found, strict=True))
    assert not mine.matches(entries[1], found[2])


async def test_a_snapshot_keeps_the_table_its_hand_over_and_its_latest_requests(
    stores: Stores,
) -> None:
    table_id = f"t{uuid.uuid4().hex}"
    table, entries = _table(table_id)
    mine, theirs = stores.logs
    for entry in entries:
        await mine.append(entry)
    assert await theirs.load_snapshot(table_id) is None
    assert await theirs.placement(table_id) is None
    await mine.save_snapshot(table, handed_over=True, requests=((0, "r-1", 2),))
    snapshot = await theirs.load_snapshot(table_id)
    assert snapshot is not None
    assert table_to_json(snapshot.table) == table_to_json(table)
    assert snapshot.handed_over
    assert snapshot.requests == ((0, "r-1", 2),)
    placed = await theirs.placement(table_id)
    assert placed is not None and placed.node == mine.writer and not placed.finished
    # After a snapshot, the log is read from the snapshot's entry on.
    assert await theirs.read(table_id, table.sequence) == []
    voided, last = accept(table, TableVoided(AbandonReason.VOIDED), 1_800_000_003.0, TIMERS)
    await theirs.append(last)
    await theirs.save_snapshot(voided)
    placed = await mine.placement(table_id)
    assert placed is not None and placed.node == theirs.writer and placed.finished


async def test_the_index_lists_each_nodes_tables_and_a_takeover_moves_them(
    stores: Stores,
) -> None:
    table_id = f"t{uuid.uuid4().hex}"
    mine, theirs = stores.logs
    await mine.track(table_id)
    assert table_id in await mine.table_ids()
    assert table_id not in await theirs.table_ids()
    assert [u for u in await stores.directory.unserved() if u.table_id == table_id] == [
        _unserved(table_id, mine.writer)
    ]
    # A scan of one node's index finds its tables only.
    assert [
        u
        for u in await stores.directory.unserved(frozenset({mine.writer}))
        if u.table_id == table_id
    ] == [_unserved(table_id, mine.writer)]
    assert not [
        u
        for u in await stores.directory.unserved(frozenset({theirs.writer, "nobody"}))
        if u.table_id == table_id
    ]
    await theirs.adopt(table_id, mine.writer)
    assert table_id not in await mine.table_ids()
    assert table_id in await theirs.table_ids()
    await theirs.untrack(table_id)
    assert table_id not in await theirs.table_ids()


def _unserved(table_id: str, node: str) -> object:
    from masa_table_engine.app.ports import Unserved

    return Unserved(table_id, node)


async def test_one_node_holds_a_lease_until_it_releases_it_or_it_runs_out(
    stores: Stores,
) -> None:
    table_id = f"t{uuid.uuid4().hex}"
    mine, theirs = stores.ownership
    node = stores.logs[0].writer
    await stores.logs[0].track(table_id)
    assert await mine.claim(table_id)
    assert await theirs.holder(table_id) == node
    assert not await theirs.claim(table_id)
    assert table_id in mine.held()
    assert not [u for u in await stores.directory.unserved() if u.table_id == table_id]
    assert not await stores.directory.unserved(frozenset({node}))
    await mine.release(table_id)
    assert await theirs.holder(table_id) is None
    assert await theirs.claim(table_id)
    await _expire(stores)
    # Nobody renewed it: it ran out, and the table is unserved again.
    assert await mine.holder(table_id) is None
    assert [u.table_id for u in await stores.directory.unserved()].count(table_id) == 1
    assert [u.table_id for u in await stores.directory.unserved(frozenset({node}))] == [table_id]
    assert await mine.claim(table_id)


async def test_a_result_published_again_is_a_duplicate(stores: Stores) -> None:
    table_id = f"t{uuid.uuid4().hex}"
    table, _ = _table(table_id)
    voided, entry = accept(table, TableVoided(AbandonReason.VOIDED), 1_800_000_003.0, TIMERS)
    assert await stores.results.publish(voided, entry) == ["published"]
    assert await stores.results.publish(voided, entry, recheck=True) == ["duplicate"]
    assert await stores.results.publish(voided, entry) == ["duplicate"]


def _played(table_id: str) -> list[tuple[Table, Entry]]:
    """A 51 game of three hands played out by bots, in the pure model: each entry the outbox
    hands to the results store, which ends a hand (the last one the game too), with the table
    it left."""
    config = TableConfig(
        game=GameKind.FIFTYONE,
        preset="classic",
        seats=tuple(SeatConfig(n, SeatKind.BOT) for n in range(4)),
        turn_seconds=30.0,
        options=GameOptions(hands_per_game=3),
    )
    at = 1_800_000_000.0
    table, _ = accept(None, Created(table_id, config, b"s" * 32), at, TIMERS)
    ended: list[tuple[Table, Entry]] = []
    while not table.finished:
        seat = table.actor
        assert seat is not None
        action = table.engine.choose(table.game, seat, BotLevel.EASY, bytes([table.sequence % 256]))
        at += 0.5
        table, entry = accept(table, PlayerAction(seat, action, Source.BOT), at, TIMERS)
        if has_results(table, entry):
            ended.append((table, entry))
    return ended


async def test_each_hand_and_the_game_are_published_once_under_their_ids(
    stores: Stores,
) -> None:
    """A hand's result is ``{table}:1:hand:{hand_no}`` and the game's ``{table}:{game_no}:game``,
    in the order of the game, however often an entry is published again, with a recheck (a
    retry, a table rebuilt elsewhere) or without."""
    table_id = f"t{uuid.uuid4().hex}"
    ended = _played(table_id)
    ids = [f"{table_id}:1:hand:{n}" for n in (1, 2, 3)] + [f"{table_id}:1:game"]
    published = [["published"], ["published"], ["published", "published"]]
    duplicates = [["duplicate"], ["duplicate"], ["duplicate", "duplicate"]]
    assert [await stores.results.publish(t, e) for t, e in ended] == published
    assert await stores.published(table_id) == ids
    assert [await stores.results.publish(t, e, recheck=True) for t, e in ended] == duplicates
    assert [await stores.results.publish(t, e) for t, e in ended] == duplicates
    assert await stores.published(table_id) == ids


async def test_a_recheck_publishes_what_is_not_on_the_bus_and_only_that(stores: Stores) -> None:
    """A table rebuilt on another node hands every entry since its snapshot over again, with a
    recheck: what went out before its owner died is not published twice."""
    table_id = f"t{uuid.uuid4().hex}"
    ended = _played(table_id)
    assert len(ended) == 3
    assert await stores.results.publish(*ended[0]) == ["published"]
    assert [await stores.results.publish(t, e, recheck=True) for t, e in ended] == [
        ["duplicate"],
        ["published"],
        ["published", "published"],
    ]
    assert await stores.published(table_id) == [
        f"{table_id}:1:hand:1",
        f"{table_id}:1:hand:2",
        f"{table_id}:1:hand:3",
        f"{table_id}:1:game",
    ]


async def test_an_entry_without_results_publishes_nothing(stores: Stores) -> None:
    table_id = f"t{uuid.uuid4().hex}"
    table, entries = _table(table_id)
    assert await stores.results.publish(table, entries[-1]) == []
    assert await stores.published(table_id) == []
