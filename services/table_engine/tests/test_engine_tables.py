"""The node's tables in memory: a finished table is forgotten once its retention time has passed
(it lives on in JetStream), so the process does not grow with every game played."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from masa_rules.table_config import GameKind, GameOptions, SeatConfig, SeatKind, TableConfig
from masa_table_engine.adapters.memory import MemoryBus, MemoryLog, MemoryOwnership, MemoryResults
from masa_table_engine.app.ports import NullMetrics
from masa_table_engine.app.runtime import (
    Deps,
    RuntimeSettings,
    TooManySpectators,
    WatcherBehind,
)
from masa_table_engine.app.tables import TableNotFound, Tables
from masa_table_engine.domain.model import Entry
from masa_table_engine.domain.table import Table, TimerPolicy


def _deps(bus: MemoryBus) -> Deps:
    return Deps(
        log=MemoryLog(bus, "memory"),
        results=MemoryResults(bus),
        decider=None,
        metrics=NullMetrics(),
        ownership=MemoryOwnership(bus, "memory"),
        clock=bus.clock,
    )


async def test_a_finished_table_is_kept_for_its_retention_time_then_forgotten() -> None:
    bus = MemoryBus()
    deps = _deps(bus)
    settings = RuntimeSettings(
        timers=TimerPolicy(),
        snapshot_every=20,
        bot_timeout_seconds=1.0,
        finished_retention_seconds=30.0,
    )
    tables = Tables(deps, settings)
    bots = TableConfig(
        GameKind.ELEVATOR, tuple(SeatConfig(s, SeatKind.BOT) for s in range(3)), 30.0
    )
    try:
        first = await tables.create(bots)
        # Bot seats only: the driver plays the whole game with the in-process policy.
        async with asyncio.timeout(10):
            while not tables.get(first.table_id).table.finished:
                await asyncio.sleep(0.01)
        bus.clock.advance(29.0)
        await tables.create(bots)
        assert tables.get(first.table_id).table.finished
        bus.clock.advance(2.0)
        await tables.create(bots)
        with pytest.raises(TableNotFound):
            tables.get(first.table_id)
    finally:
        await tables.close()


async def test_a_table_keeps_only_its_latest_entries_in_memory() -> None:
    """Each entry holds the game states it led to: a whole 51 history would hold megabytes
    per table. A watcher further behind than the kept entries gets a fresh snapshot."""
    deps = _deps(MemoryBus())
    settings = RuntimeSettings(
        timers=TimerPolicy(), snapshot_every=20, bot_timeout_seconds=1.0, history_kept=10
    )
    tables = Tables(deps, settings)
    bots = TableConfig(
        GameKind.FIFTYONE,
        tuple(SeatConfig(s, SeatKind.BOT) for s in range(4)),
        30.0,
        preset="classic",
        options=GameOptions(hands_per_game=3),
    )
    try:
        table = await tables.create(bots)
        runtime = tables.get(table.table_id)
        async with asyncio.timeout(30):
            while not runtime.table.finished:
                await asyncio.sleep(0.01)
        assert runtime.table.sequence > 30
        stream = runtime.watch(None, as_player=False, after_sequence=5)
        first = await anext(stream)
        # Too far behind: the current table, not entries the table no longer holds.
        assert isinstance(first, Table) and first.sequence == runtime.table.sequence
        await stream.aclose()
        recent = runtime.watch(None, as_player=False, after_sequence=runtime.table.sequence - 3)
        entries = [item async for item in recent]
        assert [e.sequence for e in entries if isinstance(e, Entry)] == [
            runtime.table.sequence - 2,
            runtime.table.sequence - 1,
            runtime.table.sequence,
        ]
    finally:
        await tables.close()


class _Behind(NullMetrics):
    def __init__(self) -> None:
        self.behind = 0

    def watcher_behind(self) -> None:
        self.behind += 1


async def test_a_watcher_that_is_not_read_keeps_its_backlog_at_most_then_is_let_go() -> None:
    """A stalled reader holds no more than ``watch_backlog`` entries: past it the queue is
    emptied and the stream ends with WatcherBehind, naming the last sequence it gave."""
    metrics = _Behind()
    deps = replace(_deps(MemoryBus()), metrics=metrics)
    settings = RuntimeSettings(
        timers=TimerPolicy(), snapshot_every=20, bot_timeout_seconds=1.0, watch_backlog=3
    )
    tables = Tables(deps, settings)
    bots = TableConfig(
        GameKind.ELEVATOR, tuple(SeatConfig(s, SeatKind.BOT) for s in range(3)), 30.0
    )
    try:
        table = await tables.create(bots)
        runtime = tables.get(table.table_id)
        stream = runtime.watch(None, as_player=False, after_sequence=None, spectator=True)
        first = await anext(stream)
        assert isinstance(first, Table)
        assert runtime.spectators == 1
        async with asyncio.timeout(30):
            while not runtime.table.finished:
                await asyncio.sleep(0.01)
        assert runtime.table.sequence > first.sequence + 3
        assert metrics.behind == 1
        with pytest.raises(WatcherBehind) as behind:
            await anext(stream)
        assert (behind.value.limit, behind.value.last_sequence) == (3, first.sequence)
        assert runtime.spectators == 0
    finally:
        await tables.close()


async def test_spectators_past_the_limit_are_refused_and_other_watchers_are_not_counted() -> None:
    deps = _deps(MemoryBus())
    settings = RuntimeSettings(
        timers=TimerPolicy(), snapshot_every=20, bot_timeout_seconds=1.0, max_spectators=1
    )
    tables = Tables(deps, settings)
    humans = TableConfig(
        GameKind.ELEVATOR,
        tuple(SeatConfig(s, SeatKind.HUMAN, f"p{s}", f"p{s}") for s in range(3)),
        30.0,
    )
    try:
        runtime = tables.get((await tables.create(humans)).table_id)
        spectator = runtime.watch(None, as_player=False, after_sequence=None, spectator=True)
        await anext(spectator)
        with pytest.raises(TooManySpectators):
            await anext(runtime.watch(None, as_player=False, after_sequence=None, spectator=True))
        seated = runtime.watch(0, as_player=True, after_sequence=None)
        assert isinstance(await anext(seated), Table)
        await spectator.aclose()
        again = runtime.watch(None, as_player=False, after_sequence=None, spectator=True)
        assert isinstance(await anext(again), Table)
        await again.aclose()
        await seated.aclose()
    finally:
        await tables.close()
