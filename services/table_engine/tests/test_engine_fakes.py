"""The use cases on the in-memory stores and a fake clock (issue 12, seams): timers, failed and
fenced writes, failed publishes and takeover, each in milliseconds. The same behaviour on real
NATS is in test_engine_outage.py and test_engine_takeover.py; the stores' shared contract is in
test_engine_store_contract.py."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace

import grpc
import grpc.aio
import pytest
from engine_stakes import BOUND, HELD, FakeStakes
from engine_support import (
    create_table,
    elevator_config,
    get_view,
    seat,
    table_stub,
)
from masa.common.v1 import error_pb2
from masa_platform.errors import reason_name
from masa_platform.metrics import LoopMetrics
from masa_platform.settings import PlatformSettings
from masa_platform.testing import auth_settings
from masa_rules.table_config import (
    GameKind,
    GameOptions,
    Mode,
    PayoutRule,
    SeatConfig,
    SeatKind,
    TableConfig,
)
from masa_table_engine.adapters.memory import (
    MemoryBus,
    MemoryDirectory,
    MemoryLog,
    MemoryOwnership,
    MemoryRegistry,
    MemoryResults,
)
from masa_table_engine.app.ports import (
    LogConflict,
    LoggedInput,
    LogUnavailable,
    NullMetrics,
    Scan,
    Snapshot,
)
from masa_table_engine.app.rendezvous import claim_order
from masa_table_engine.app.runtime import Deps, RuntimeSettings, WatchItem
from masa_table_engine.app.stakes import StakeBinder, StakesRefused
from masa_table_engine.app.tables import Tables
from masa_table_engine.bootstrap import Stores, StoresFactory, start_node
from masa_table_engine.domain.model import SeatChange, SeatChanged, TimerFired, TimerKind
from masa_table_engine.domain.table import TimerPolicy, accept
from masa_table_engine.settings import EngineSettings
from prometheus_client import CollectorRegistry

TURN_SECONDS = 30.0
LEASE_SECONDS = 15.0


class Recorded(NullMetrics):
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def result_published(self, outcome: str) -> None:
        self.counts[f"publish:{outcome}"] += 1

    def takeover(self, reason: str) -> None:
        self.counts[f"takeover:{reason}"] += 1


def _node(
    bus: MemoryBus,
    name: str,
    stakes: StakeBinder | None = None,
    directory: MemoryDirectory | None = None,
) -> tuple[Tables, Recorded, MemoryOwnership]:
    metrics = Recorded()
    ownership = MemoryOwnership(bus, name)
    deps = Deps(
        log=MemoryLog(bus, name),
        results=MemoryResults(bus),
        decider=None,
        metrics=metrics,
        ownership=ownership,
        clock=bus.clock,
    )
    settings = RuntimeSettings(
        timers=TimerPolicy(seat_protection_seconds=600.0), snapshot_every=5, bot_timeout_seconds=0.1
    )
    bus.nodes[name] = (f"{name}:7000", False)
    tables = Tables(deps, settings, stakes=stakes, directory=directory or MemoryDirectory(bus))
    return tables, metrics, ownership


def _config(humans: int = 3) -> TableConfig:
    return TableConfig(
        game=GameKind.ELEVATOR,
        seats=tuple(
            SeatConfig(n, SeatKind.HUMAN, f"p{n}", f"p{n}")
            if n < humans
            else SeatConfig(n, SeatKind.BOT)
            for n in range(3)
        ),
        turn_seconds=TURN_SECONDS,
        options=GameOptions(),
    )


async def _until(check: Callable[[], bool | Awaitable[bool]], what: str) -> None:
    for _ in range(400):
        result = check()
        if result if isinstance(result, bool) else await result:
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def bus() -> MemoryBus:
    return MemoryBus(lease_seconds=LEASE_SECONDS)


async def test_a_turn_times_out_by_the_clock_and_not_before(bus: MemoryBus) -> None:
    """P-10 on the fake clock: the driver fires the turn timer once its deadline has passed."""
    tables, _, _ = _node(bus, "a")
    table = await tables.create(_config())
    deadline = table.turn_deadline
    assert deadline is not None and deadline == pytest.approx(bus.clock() + TURN_SECONDS)
    await asyncio.sleep(0.05)
    bus.clock.advance(TURN_SECONDS - 1)
    await asyncio.sleep(0.05)
    assert len(bus.logs[table.table_id]) == 1
    bus.clock.advance(1.5)
    await _until(lambda: len(bus.logs[table.table_id]) >= 2, "the timer")
    fired = bus.logs[table.table_id][1].entry
    assert fired.input == TimerFired(TimerKind.TURN, table.actor or 0)
    assert fired.at >= deadline
    await tables.close()


async def test_a_write_the_log_refused_changes_nothing_and_one_that_landed_is_kept(
    bus: MemoryBus,
) -> None:
    tables, _, _ = _node(bus, "a")
    table = await tables.create(_config())
    runtime = tables.get(table.table_id)
    bus.down = True
    with pytest.raises(LogUnavailable):
        await runtime.commit(SeatChanged(0, SeatChange.RECONNECTED))
    assert runtime.table.sequence == 1
    assert runtime.frozen
    bus.down = False
    # The append lands but its answer is lost: the table reads the log and keeps it, once.
    bus.lost_acks = 1
    entry = await runtime.commit(SeatChanged(0, SeatChange.RECONNECTED))
    assert entry.sequence == 2
    assert [s.entry.sequence for s in bus.logs[table.table_id]] == [1, 2]
    assert not tables.get(table.table_id).frozen
    await tables.close()


async def test_a_table_another_node_wrote_to_is_fenced_off(bus: MemoryBus) -> None:
    tables, _, _ = _node(bus, "a")
    table = await tables.create(_config())
    runtime = tables.get(table.table_id)
    _, theirs = accept(table, SeatChanged(1, SeatChange.RECONNECTED), bus.clock(), TimerPolicy())
    await MemoryLog(bus, "usurper").append(theirs)
    with pytest.raises(LogConflict):
        await runtime.commit(SeatChanged(0, SeatChange.RECONNECTED))
    assert runtime.fenced
    assert [s.writer for s in bus.logs[table.table_id]] == ["a", "usurper"]
    await tables.close()


async def test_a_publish_that_fails_fails_no_caller_and_the_result_goes_out_once(
    bus: MemoryBus,
) -> None:
    tables, metrics, _ = _node(bus, "a")
    bus.failing_publishes = 2
    table = await tables.create(_config(humans=0))
    # Bots only: the game plays to its end at once; the end's result waits for the bus.
    await _until(lambda: tables.get(table.table_id).table.finished, "the game to end")
    await _until(lambda: tables.get(table.table_id).done, "the books to close")
    published = bus.results[table.table_id]
    assert len(published) == len(set(published))
    assert f"{table.table_id}:1:game" in published
    assert metrics.counts["publish:failed"] == 2
    assert tables.outbox.pending == 0
    assert not [key for key in bus.index if key.endswith(table.table_id)]
    assert bus.holder(table.table_id) is None
    await tables.close()


async def test_the_tables_of_a_dead_node_are_shared_out_and_keep_their_deadlines(
    bus: MemoryBus,
) -> None:
    dead, _, _ = _node(bus, "dead")
    made = [await dead.create(_config()) for _ in range(8)]
    await dead.close()
    del bus.nodes["dead"]
    heir_b, metrics_b, renew_b = _node(bus, "b")
    heir_c, metrics_c, renew_c = _node(bus, "c")
    # Nobody renews the dead node's leases: they run out; the turns too, meanwhile.
    bus.clock.advance(max(LEASE_SECONDS, TURN_SECONDS) + 1)
    # One scan each: every table to the heir that ranks it first, whichever looked first.
    assert await heir_c.take_over_unserved() + await heir_b.take_over_unserved() == 8
    renew_b.renew()
    renew_c.renew()
    for table in made:
        first = claim_order(table.table_id, ["b", "c"])[0]
        assert table.table_id in (heir_b if first == "b" else heir_c).served
    assert metrics_b.counts["takeover:expired"] + metrics_c.counts["takeover:expired"] == 8
    assert not [key for key in bus.index if key.startswith("dead.")]
    for table in made:
        owner = heir_b if table.table_id in heir_b.served else heir_c
        runtime = owner.get(table.table_id)

        # The turn ran out while nobody served the table: the heir plays it at once.
        def turn_played(table_id: str = table.table_id) -> bool:
            return any(isinstance(s.entry.input, TimerFired) for s in bus.logs[table_id])

        await _until(turn_played, "the expired turn")
        fired = next(
            s.entry for s in bus.logs[table.table_id] if isinstance(s.entry.input, TimerFired)
        )
        assert table.turn_deadline is not None and fired.at >= table.turn_deadline
        assert runtime.table.sequence >= 3
    await heir_b.close()
    await heir_c.close()


async def test_a_table_its_first_node_leaves_unserved_goes_to_the_next_after_a_while(
    bus: MemoryBus,
) -> None:
    """A table whose first node in the claim order does not take it (the node is slow, or
    looks live to the others but is not) is taken by the next node, two scan periods later."""
    dead, _, _ = _node(bus, "dead")
    made = [await dead.create(_config()) for _ in range(20)]
    await dead.close()
    del bus.nodes["dead"]
    heir, _, _ = _node(bus, "b")
    # "ghost" is listed live, but nothing runs there.
    bus.nodes["ghost"] = ("ghost:7000", False)
    bus.clock.advance(LEASE_SECONDS + 1)
    ghosts = {t.table_id for t in made if claim_order(t.table_id, ["b", "ghost"])[0] == "ghost"}
    assert ghosts and len(ghosts) < len(made)
    assert await heir.take_over_unserved() == len(made) - len(ghosts)
    # One of them is claimed meanwhile and given up again (a rebuild that failed): its wait
    # still counts from when it was first found unserved.
    held = min(ghosts)
    ghost = MemoryOwnership(bus, "ghost")
    assert await ghost.claim(held)
    bus.clock.advance(1.9)
    assert await heir.take_over_unserved() == 0
    await ghost.release(held)
    bus.clock.advance(0.2)
    assert await heir.take_over_unserved() == len(ghosts)
    assert sorted(heir.served) == sorted(t.table_id for t in made)
    await heir.close()


async def test_the_clusters_listing_takes_what_it_finds_whatever_its_rank(bus: MemoryBus) -> None:
    """One node lists every table for the cluster each period (JetStreamDirectory), so it may
    be the only one to see a table left unserved with no node in trouble (``Scan.claim_all``):
    it takes each once it has waited as long as the node ranked second would, not as long as
    its own rank says."""
    gone, _, _ = _node(bus, "gone")
    made = [await gone.create(_config()) for _ in range(40)]
    await gone.close()
    del bus.nodes["gone"]
    directory = MemoryDirectory(bus)
    finder, _, _ = _node(bus, "finder", directory=directory)
    ghosts = ["ghost-1", "ghost-2", "ghost-3"]
    for ghost in ghosts:
        # Listed live, but nothing runs there.
        bus.nodes[ghost] = (f"{ghost}:7000", False)
    bus.clock.advance(LEASE_SECONDS + 1)
    rank = {t.table_id: claim_order(t.table_id, ["finder", *ghosts]).index("finder") for t in made}
    assert {0, 2} <= set(rank.values())
    directory.scan = Scan(claim_all=True)
    assert await finder.scan_for_unserved() is False
    assert sorted(finder.served) == sorted(t for t, place in rank.items() if place == 0)
    # Two scan periods: by rank only its seconds would be due; it takes them all.
    bus.clock.advance(2.0)
    await finder.scan_for_unserved()
    assert sorted(finder.served) == sorted(rank)
    await finder.close()


async def test_a_drain_hands_every_table_over_for_the_next_scan(bus: MemoryBus) -> None:
    leaving, _, _ = _node(bus, "leaving")
    staying, metrics, _ = _node(bus, "staying")
    made = [await leaving.create(_config()) for _ in range(3)]
    await leaving.drain()
    bus.nodes["leaving"] = ("leaving:7000", True)
    assert not leaving.served
    assert all(bus.holder(t.table_id) is None for t in made)
    # No lease has to run out: the next scan takes them all.
    assert await staying.take_over_unserved() == 3
    assert metrics.counts["takeover:drained"] == 3
    assert sorted(staying.served) == sorted(t.table_id for t in made)
    await staying.close()
    await leaving.close()


async def test_a_stream_that_reaches_a_table_being_handed_over_ends_without_a_traceback(
    bus: MemoryBus, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 20: a player's stream that found the table just before a drain handed it over
    gets to it after the hand-over. Its seat's reconnection (P-12: the seat starts
    disconnected) cannot be logged here any more, which is expected while a table moves: an
    INFO line without a traceback, and the stream ends at once so that its reader finds the
    table's new node, instead of waiting on a table this node no longer serves."""
    leaving, _, _ = _node(bus, "leaving")
    table = await leaving.create(_config())
    runtime = leaving.get(table.table_id)
    opened_before = runtime.watch(1, as_player=True, after_sequence=None)
    assert await anext(opened_before) == runtime.table
    await runtime.hand_over(0.1)
    caplog.set_level(logging.INFO)
    late = runtime.watch(0, as_player=True, after_sequence=None)
    assert await asyncio.wait_for(_rest(late), 5) == []
    # The stream open before the hand-over ends too.
    assert await asyncio.wait_for(_rest(opened_before), 5) == []
    assert [s.entry.sequence for s in bus.logs[table.table_id]] == [1, 2]
    moving = [r for r in caplog.records if "the table is moving" in r.getMessage()]
    assert [(r.levelno, r.exc_info) for r in moving] == [(logging.INFO, None)]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    await leaving.close()


async def _rest(stream: AsyncIterator[WatchItem]) -> list[WatchItem]:
    return [item async for item in stream]


def _memory_stores(bus: MemoryBus) -> StoresFactory:
    """What bootstrap wires a node to instead of JetStream: the bus in memory."""

    async def stores(settings: EngineSettings, address: str, loops: LoopMetrics) -> Stores:
        # The memory stores renew nothing in the background: no loop to count.
        del loops
        node = settings.node_id

        async def probe() -> None:
            bus.check()

        async def close() -> None:
            return None

        return Stores(
            log=MemoryLog(bus, node, address),
            results=MemoryResults(bus),
            ownership=MemoryOwnership(bus, node),
            directory=MemoryDirectory(bus),
            registry=lambda tables: MemoryRegistry(bus, node, address),
            probe=probe,
            close=close,
            clock=bus.clock,
        )

    return stores


async def test_nodes_wired_to_the_memory_bus_serve_tables_and_hand_them_over(
    bus: MemoryBus,
) -> None:
    """bootstrap.start_node takes other stores than JetStream: two real gRPC nodes on the
    memory bus, a table played on one, drained to the other, and followed there."""
    base = EngineSettings(
        platform=PlatformSettings(service_name="table-engine", auth=auth_settings("table-engine")),
        turn_seconds=TURN_SECONDS,
        takeover_scan_seconds=0.05,
    )
    leaving = await start_node(
        replace(base, node_id="mem-a"), CollectorRegistry(), stores=_memory_stores(bus)
    )
    staying = await start_node(
        replace(base, node_id="mem-b"), CollectorRegistry(), stores=_memory_stores(bus)
    )
    try:
        async with table_stub(leaving.address) as stub:
            table_id = await create_table(
                stub, elevator_config([seat(0, "ann"), seat(1), seat(2)], TURN_SECONDS)
            )
            view = await get_view(stub, table_id, "ann")
            assert view.seat_view.table.table.owner_address == leaving.address
        await leaving.drain()
        await _until(lambda: table_id in staying.tables.served, "the takeover")
        async with table_stub(leaving.address) as stub:
            with pytest.raises(grpc.aio.AioRpcError) as moved:
                await get_view(stub, table_id, "ann")
            assert moved.value.code() is grpc.StatusCode.FAILED_PRECONDITION
        async with table_stub(staying.address) as stub:
            view = await get_view(stub, table_id, "ann")
            assert view.seat_view.table.table.table_id == table_id
    finally:
        await leaving.stop(0.1)
        await staying.stop(0.1)


class _ReadRecording(MemoryLog):
    """The memory log, noting what a node reads back (a takeover's cost)."""

    def __init__(self, bus: MemoryBus, node_id: str) -> None:
        super().__init__(bus, node_id)
        self.reads: list[tuple[str, int, int]] = []
        self.snapshots_loaded: list[str] = []

    async def read(self, table_id: str, after_sequence: int) -> list[LoggedInput]:
        found = await super().read(table_id, after_sequence)
        self.reads.append((table_id, after_sequence, len(found)))
        return found

    async def load_snapshot(self, table_id: str) -> Snapshot | None:
        self.snapshots_loaded.append(table_id)
        return await super().load_snapshot(table_id)


async def test_a_takeover_reads_only_the_log_after_the_snapshot(bus: MemoryBus) -> None:
    """Issue 12: recovering a table costs what follows its snapshot, whatever its history
    before; and the heir loads the snapshot of the tables it takes, not of every table."""
    dead, _, _ = _node(bus, "dead")
    finished = await dead.create(_config(humans=0))
    await _until(lambda: dead.get(finished.table_id).done, "the bots' game to end")
    table = await dead.create(_config())
    runtime = dead.get(table.table_id)
    for number in range(200):
        change = SeatChange.DISCONNECTED if number % 2 == 0 else SeatChange.RECONNECTED
        await runtime.commit(SeatChanged(0, change))
    await _until(
        lambda: bus.snapshots[table.table_id].snapshot.table.sequence > 190, "a late snapshot"
    )
    snapshot_sequence = bus.snapshots[table.table_id].snapshot.table.sequence
    await dead.close()
    del bus.nodes["dead"]
    log = _ReadRecording(bus, "heir")
    ownership = MemoryOwnership(bus, "heir")
    bus.nodes["heir"] = ("heir:7000", False)
    heir = Tables(
        Deps(log, MemoryResults(bus), None, NullMetrics(), ownership, bus.clock),
        RuntimeSettings(
            timers=TimerPolicy(seat_protection_seconds=600.0),
            snapshot_every=5,
            bot_timeout_seconds=0.1,
        ),
        directory=MemoryDirectory(bus),
    )
    bus.clock.advance(LEASE_SECONDS + 1)
    assert await heir.take_over_unserved() == 1
    # The heir rebuilt all 201 entries, then noted the player's stream as gone (P-12).
    assert [s.writer for s in bus.logs[table.table_id]][200:] == ["dead", "heir"]
    assert bus.logs[table.table_id][201].entry.input == SeatChanged(0, SeatChange.DISCONNECTED)
    assert heir.get(table.table_id).table.sequence == 202
    assert log.snapshots_loaded == [table.table_id]
    assert [(t, after) for t, after, _ in log.reads] == [(table.table_id, snapshot_sequence)]
    assert log.reads[0][2] == 201 - snapshot_sequence < 5
    await heir.close()


def _chip_config(holds: list[str]) -> TableConfig:
    return replace(
        _config(),
        seats=tuple(
            SeatConfig(n, SeatKind.HUMAN, f"p{n}", f"p{n}", hold_id=hold)
            for n, hold in enumerate(holds)
        ),
        mode=Mode.SINGLES,
        stake=100,
        payout=PayoutRule(rake_basis_points=500),
    )


async def test_p30_a_chip_table_is_made_only_once_the_ledger_bound_its_stakes(
    bus: MemoryBus,
) -> None:
    """P-30 on the memory stores and the ledger's double (its contract with the real ledger is
    test_engine_ledger_contract.py): stakes the ledger refuses leave nothing behind, neither
    log, index nor lease, and the table made binds its stakes once, retries and all."""
    stakes = FakeStakes()
    stakes.hold("h0", "p0", 100)
    stakes.hold("h1", "p1", 100)
    stakes.hold("h2", "p2", 50)
    stakes.hold("h3", "p2", 100)
    tables, _, _ = _node(bus, "a", stakes)
    with pytest.raises(StakesRefused) as refused:
        await tables.create(_chip_config(["h0", "h1", "h2"]), table_id="short", request_id="r1")
    assert refused.value.reason == reason_name(error_pb2.ERROR_REASON_STAKE_MISMATCH)
    assert refused.value.metadata["hold_id"] == "h2"
    assert "short" not in bus.logs and not bus.index and bus.holder("short") is None
    assert [stakes.holds[h].state for h in ("h0", "h1")] == [HELD, HELD]
    config = _chip_config(["h0", "h1", "h3"])
    table = await tables.create(config, table_id="staked", request_id="r2")
    again = await tables.create(config, table_id="staked", request_id="r2")
    assert again.table_id == table.table_id == "staked"
    assert len(bus.logs["staked"]) == 1
    assert [(stakes.holds[h].state, stakes.holds[h].table_id) for h in ("h0", "h1", "h3")] == [
        (BOUND, "staked")
    ] * 3
    await tables.close()
