"""A table runtime's life is one explicit phase (serving, unsynced, closing, closed, fenced),
moved only along the allowed steps: a fenced table never serves again, a closed one never
closes again."""

from __future__ import annotations

import asyncio

import pytest
from masa_rules.table_config import MAX_TURN_SECONDS, GameKind, SeatConfig, SeatKind, TableConfig
from masa_table_engine.adapters.memory import (
    MemoryBus,
    MemoryDirectory,
    MemoryLog,
    MemoryOwnership,
    MemoryResults,
)
from masa_table_engine.app.ports import LogUnavailable, NullMetrics
from masa_table_engine.app.runtime import _NEXT, Deps, Phase, RuntimeSettings
from masa_table_engine.app.tables import Tables
from masa_table_engine.domain.model import Entry
from masa_table_engine.domain.table import TimerPolicy


def test_every_phase_has_its_steps_and_fenced_is_the_end() -> None:
    assert set(_NEXT) == set(Phase)
    assert _NEXT[Phase.FENCED] == {Phase.FENCED}
    assert Phase.SERVING not in _NEXT[Phase.CLOSING] | _NEXT[Phase.CLOSED]
    # Every phase can be fenced off: another node may take any table.
    assert all(Phase.FENCED in steps for steps in _NEXT.values())


@pytest.mark.parametrize("phase", list(Phase))
def test_no_phase_goes_back_to_unsynced_once_the_game_is_over(phase: Phase) -> None:
    if phase in (Phase.CLOSING, Phase.CLOSED, Phase.FENCED):
        assert Phase.UNSYNCED not in _NEXT[phase]


# --- fencing while a write is out, and handing an unsynced table over ---------------------------


class _HeldLog(MemoryLog):
    """Appends wait for ``release`` and then fail as a silent log does."""

    def __init__(self, bus: MemoryBus, node_id: str) -> None:
        super().__init__(bus, node_id)
        self.waiting = asyncio.Event()
        self.release = asyncio.Event()
        self.hold = False

    async def append(self, entry: Entry) -> None:
        if self.hold:
            self.waiting.set()
            await self.release.wait()
            raise LogUnavailable("the log did not answer")
        await super().append(entry)


def _tables(bus: MemoryBus, log: MemoryLog) -> Tables:
    deps = Deps(
        log=log,
        results=MemoryResults(bus),
        decider=None,
        metrics=NullMetrics(),
        ownership=MemoryOwnership(bus, "a"),
        clock=bus.clock,
    )
    bus.nodes["a"] = ("a:7000", False)
    return Tables(
        deps,
        RuntimeSettings(timers=TimerPolicy(), snapshot_every=5, bot_timeout_seconds=0.1),
        directory=MemoryDirectory(bus),
    )


def _config() -> TableConfig:
    return TableConfig(
        game=GameKind.ELEVATOR,
        seats=(
            SeatConfig(0, SeatKind.HUMAN, "p0", "p0"),
            SeatConfig(1, SeatKind.HUMAN, "p1", "p1"),
            SeatConfig(2, SeatKind.BOT),
        ),
        turn_seconds=MAX_TURN_SECONDS,
    )


async def test_a_lease_lost_while_a_write_is_out_ends_that_write_as_unavailable_then_fences() -> (
    None
):
    """The write's failure is answered as the log's (UNAVAILABLE), never as a broken phase;
    the table is fenced once that write is over."""
    bus = MemoryBus()
    log = _HeldLog(bus, "a")
    tables = _tables(bus, log)
    table_id = (await tables.create(_config())).table_id
    runtime = tables.get(table_id)
    log.hold = True
    bus.down = True  # the write fails, and so does the read that would learn its fate
    leaving = asyncio.create_task(runtime.leave(0))
    await log.waiting.wait()
    bus.down = False
    bus.leases[table_id] = ("b", bus.clock() + 60)  # another node took the lease
    handing = asyncio.create_task(tables.lease_lost(table_id))
    await asyncio.sleep(0.05)
    bus.down = True
    log.release.set()
    with pytest.raises(LogUnavailable):
        await leaving
    await handing
    assert runtime.phase is Phase.FENCED
    await tables.close()


async def test_an_unsynced_table_handed_over_leaves_no_handed_over_snapshot() -> None:
    """Its log may hold an entry the runtime never adopted: a snapshot marked handed over
    would sit behind it, so the next owner replays the log instead."""
    bus = MemoryBus()
    tables = _tables(bus, MemoryLog(bus, "a"))
    table_id = (await tables.create(_config())).table_id
    runtime = tables.get(table_id)
    bus.down = True
    with pytest.raises(LogUnavailable):
        await runtime.leave(0)
    assert runtime.phase is Phase.UNSYNCED
    bus.down = False
    before = bus.snapshots.get(table_id)
    await runtime.hand_over(0.1)
    after = bus.snapshots.get(table_id)
    assert after is before or (after is not None and not after.snapshot.handed_over)
    # (Read again: mypy would keep the phase asserted above.)
    assert runtime.phase.value == Phase.FENCED.value
    await tables.close()
