"""Seat presence (P-12): the log holds connections that lasted, not reconnection churn.

A seat is logged as disconnected only once it has had no stream of its player for the grace
window (MASA_PRESENCE_GRACE_SECONDS); a stream back within it writes nothing; seat protection
counts from the logged disconnection. Against a real engine over gRPC on a real nats-server,
and on the memory bus's fake clock for the edges of the window.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable

import pytest
from engine_support import (
    create_table,
    elevator_config,
    log_entries,
    metadata,
    running_node,
    seat,
    settings,
    table_stub,
    wait_until,
)
from masa.events.v1 import table_log_pb2
from masa.table.v1 import table_pb2
from masa_platform.settings import SettingsError, load_settings
from masa_platform.testing import NatsServer, next_message
from masa_rules.table_config import MAX_TURN_SECONDS, GameKind, SeatConfig, SeatKind, TableConfig
from masa_table_engine.adapters.memory import (
    MemoryBus,
    MemoryDirectory,
    MemoryLog,
    MemoryOwnership,
    MemoryResults,
)
from masa_table_engine.app.ports import NullMetrics
from masa_table_engine.app.runtime import Deps, RuntimeSettings, WatchItem
from masa_table_engine.app.tables import Tables
from masa_table_engine.domain.model import (
    Entry,
    SeatChange,
    SeatChanged,
    SeatForfeited,
    TimerFired,
    TimerKind,
)
from masa_table_engine.domain.table import TimerPolicy
from masa_table_engine.settings import EngineSettings

CONNECTED = table_log_pb2.SEAT_CHANGE_RECONNECTED
DISCONNECTED = table_log_pb2.SEAT_CHANGE_DISCONNECTED


def _seat_changes(entries: list[table_log_pb2.TableLogEntry]) -> list[tuple[int, int]]:
    return [
        (e.seat_changed.seat, e.seat_changed.change)
        for e in entries
        if e.WhichOneof("input") == "seat_changed"
    ]


async def test_P12_200_reconnects_of_a_seated_player_write_at_most_two_seat_changes(
    nats_server: NatsServer,
) -> None:
    """The attack: a seated player opens and drops WatchTable 200 times in a row. Each cycle
    wrote a reconnection and a disconnection (394 entries in 2.3 s, kept for ever); now the
    seat is logged connected once and, after the grace window, disconnected once."""
    engine = settings(nats_server, "churn")
    assert engine.presence_grace_seconds == 2.0
    async with running_node(engine) as node, table_stub(node.address) as stub:
        table_id = await create_table(stub, elevator_config([seat(0, "ayse"), seat(1), seat(2)]))
        request = table_pb2.WatchTableRequest(table_id=table_id)
        for _ in range(200):
            call = stub.WatchTable(request, metadata=metadata("ayse"))
            view = (await next_message(call, table_pb2.WatchTableResponse)).seat_view
            assert view.table.seats[0].connected
            call.cancel()

        async def logged_gone() -> bool:
            return (0, DISCONNECTED) in _seat_changes(await log_entries(nats_server, table_id))

        await wait_until(logged_gone, timeout=10, what="the disconnection after the window")
        assert _seat_changes(await log_entries(nats_server, table_id)) == [
            (0, CONNECTED),
            (0, DISCONNECTED),
        ]


async def test_P12_a_real_drop_is_logged_after_the_window_and_the_seat_forfeits_after_protection(
    nats_server: NatsServer,
) -> None:
    """A player gone for longer than the window is logged as disconnected once it has passed,
    and forfeits the seat MASA_SEAT_PROTECTION_SECONDS after that entry (P-12)."""
    grace, protection = 0.3, 1.0
    engine = settings(
        nats_server, "drop", presence_grace_seconds=grace, seat_protection_seconds=protection
    )
    async with running_node(engine) as node, table_stub(node.address) as stub:
        table_id = await create_table(
            stub, elevator_config([seat(0, "ayse"), seat(1, "bora"), seat(2)])
        )
        request = table_pb2.WatchTableRequest(table_id=table_id)
        # ayse stays, so the table plays on (with a bot for bora) once bora forfeits.
        stays = stub.WatchTable(request, metadata=metadata("ayse"))
        await stays.read()
        drops = stub.WatchTable(request, metadata=metadata("bora"))
        await drops.read()
        dropped_at = time.time()
        drops.cancel()

        def forfeit_of_bora(entry: table_log_pb2.TableLogEntry) -> bool:
            return any(
                e.WhichOneof("kind") == "seat_forfeited" and e.seat_forfeited.seat == 1
                for e in entry.events
            )

        async def forfeited() -> bool:
            return any(forfeit_of_bora(e) for e in await log_entries(nats_server, table_id))

        await wait_until(forfeited, timeout=10, what="bora's forfeit")
        stays.cancel()
        entries = await log_entries(nats_server, table_id)
        assert _seat_changes(entries) == [(0, CONNECTED), (1, CONNECTED), (1, DISCONNECTED)]
        (gone,) = [e for e in entries if e.seat_changed.change == DISCONNECTED]
        (forfeit,) = [e for e in entries if forfeit_of_bora(e)]
        assert forfeit.timer_fired.kind == table_log_pb2.TIMER_KIND_SEAT_PROTECTION
        gone_at = gone.occurred_at.ToNanoseconds() / 1e9
        assert gone_at >= dropped_at + grace
        # The node's window, not the default one (2 s), with room for a slow machine.
        assert gone_at < dropped_at + grace + 1.5
        assert forfeit.occurred_at.ToNanoseconds() / 1e9 >= gone_at + protection


def test_the_grace_window_setting_is_range_checked_by_name() -> None:
    assert load_settings(EngineSettings, {}).presence_grace_seconds == 2.0
    read = load_settings(EngineSettings, {"MASA_PRESENCE_GRACE_SECONDS": "0.5"})
    assert read.presence_grace_seconds == 0.5
    for bad in ("0", "0.05", "61", "-1"):
        with pytest.raises(SettingsError, match="MASA_PRESENCE_GRACE_SECONDS"):
            load_settings(EngineSettings, {"MASA_PRESENCE_GRACE_SECONDS": bad})


# --- the window's edges on the fake clock ----------------------------------------------------

GRACE = 2.0
PROTECTION = 600.0


def _tables(bus: MemoryBus, node: str = "a") -> Tables:
    deps = Deps(
        log=MemoryLog(bus, node),
        results=MemoryResults(bus),
        decider=None,
        metrics=NullMetrics(),
        ownership=MemoryOwnership(bus, node),
        clock=bus.clock,
    )
    runtime_settings = RuntimeSettings(
        timers=TimerPolicy(seat_protection_seconds=PROTECTION),
        snapshot_every=5,
        bot_timeout_seconds=0.1,
        presence_grace_seconds=GRACE,
    )
    bus.nodes[node] = (f"{node}:7000", False)
    return Tables(deps, runtime_settings, directory=MemoryDirectory(bus))


def _config() -> TableConfig:
    # Turns (an hour, the longest) far longer than any test here moves the clock: only presence
    # writes entries.
    return TableConfig(
        game=GameKind.ELEVATOR,
        seats=(
            SeatConfig(0, SeatKind.HUMAN, "p0", "p0"),
            SeatConfig(1, SeatKind.HUMAN, "p1", "p1"),
            SeatConfig(2, SeatKind.BOT),
        ),
        turn_seconds=MAX_TURN_SECONDS,
    )


@pytest.fixture
def bus() -> MemoryBus:
    return MemoryBus()


def _entries(bus: MemoryBus, table_id: str) -> list[Entry]:
    return [stored.entry for stored in bus.logs[table_id]]


def _changes(bus: MemoryBus, table_id: str) -> list[tuple[float, SeatChanged]]:
    return [(e.at, e.input) for e in _entries(bus, table_id) if isinstance(e.input, SeatChanged)]


async def _opened(tables: Tables, table_id: str, seat: int) -> AsyncGenerator[WatchItem, None]:
    """A player's stream of ``seat``, open once its first item (the view) is read."""
    stream = tables.get(table_id).watch(seat, as_player=True, after_sequence=None)
    await anext(stream)
    return stream


async def _settle() -> None:
    """Let the table's driver run until it waits for its clock again."""
    for _ in range(5):
        await asyncio.sleep(0.01)


async def _until(check: Callable[[], bool], what: str) -> None:
    for _ in range(200):
        if check():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"timed out waiting for {what}")


async def test_P12_a_reconnection_within_the_window_writes_nothing_and_its_end_is_exact(
    bus: MemoryBus,
) -> None:
    tables = _tables(bus)
    table = await tables.create(_config())
    table_id = table.table_id
    start = bus.clock()
    stream = await _opened(tables, table_id, 0)
    await stream.aclose()
    await _settle()
    bus.clock.advance(GRACE - 0.01)
    await _settle()
    # Back just before the window ends: nothing is written, then or later.
    stream = await _opened(tables, table_id, 0)
    bus.clock.advance(GRACE * 3)
    await _settle()
    assert _changes(bus, table_id) == [(start, SeatChanged(0, SeatChange.RECONNECTED))]
    await stream.aclose()
    closed = bus.clock()
    await _settle()
    bus.clock.advance(GRACE - 0.01)
    await _settle()
    assert len(_changes(bus, table_id)) == 1
    # The window ends exactly GRACE after the last stream closed.
    bus.clock.advance(0.01)
    await _until(lambda: len(_changes(bus, table_id)) == 2, "the disconnection")
    at, change = _changes(bus, table_id)[-1]
    assert change == SeatChanged(0, SeatChange.DISCONNECTED)
    assert at == pytest.approx(closed + GRACE)
    # Logged disconnected: the next stream is logged as a reconnection at once.
    stream = await _opened(tables, table_id, 0)
    assert _changes(bus, table_id)[-1] == (bus.clock(), SeatChanged(0, SeatChange.RECONNECTED))
    await stream.aclose()
    await tables.close()


async def test_P12_a_reconnection_the_log_missed_is_recorded_while_the_stream_is_open(
    bus: MemoryBus,
) -> None:
    """The log did not answer as the player's stream opened: the stream goes on, and the
    reconnection is written once the log is back, so the seat's protection never runs out
    while its player watches."""
    tables = _tables(bus)
    table_id = (await tables.create(_config())).table_id
    bus.down = True
    stream = await _opened(tables, table_id, 0)
    assert not tables.get(table_id).table.seats[0].connected
    bus.down = False
    await _until(lambda: tables.get(table_id).table.seats[0].connected, "the reconnection")
    assert [c for _, c in _changes(bus, table_id)] == [SeatChanged(0, SeatChange.RECONNECTED)]
    bus.clock.advance(PROTECTION * 2)
    await _settle()
    assert not tables.get(table_id).table.seats[0].forfeited
    assert len(_changes(bus, table_id)) == 1
    await stream.aclose()
    await tables.close()


async def test_P12_the_seat_stays_connected_while_any_of_its_streams_is_open(
    bus: MemoryBus,
) -> None:
    tables = _tables(bus)
    table_id = (await tables.create(_config())).table_id
    first = await _opened(tables, table_id, 0)
    second = await _opened(tables, table_id, 0)
    await first.aclose()
    bus.clock.advance(GRACE * 2)
    await _settle()
    assert [c for _, c in _changes(bus, table_id)] == [SeatChanged(0, SeatChange.RECONNECTED)]
    assert tables.get(table_id).table.seats[0].connected
    await second.aclose()
    await _settle()
    bus.clock.advance(GRACE)
    await _until(lambda: len(_changes(bus, table_id)) == 2, "the disconnection")
    await tables.close()


async def test_P12_seat_protection_counts_from_the_logged_disconnection(bus: MemoryBus) -> None:
    """The 180 s of P-12 (PROTECTION here) start when the disconnection is logged, at the end
    of the window: the seat forfeits at that entry's time plus the protection, not before."""
    tables = _tables(bus)
    table_id = (await tables.create(_config())).table_id
    # Seat 1 stays, so the table plays on after seat 0 forfeits.
    stays = await _opened(tables, table_id, 1)
    stream = await _opened(tables, table_id, 0)
    await stream.aclose()
    await _settle()
    bus.clock.advance(GRACE)
    await _until(lambda: len(_changes(bus, table_id)) == 3, "the disconnection")
    gone_at, _ = _changes(bus, table_id)[-1]
    assert tables.get(table_id).table.seats[0].protection_deadline == gone_at + PROTECTION
    bus.clock.advance(PROTECTION - 0.01)
    await _settle()
    assert not tables.get(table_id).table.seats[0].forfeited
    bus.clock.advance(0.01)
    await _until(lambda: tables.get(table_id).table.seats[0].forfeited, "the forfeit")
    forfeit = next(
        e
        for e in _entries(bus, table_id)
        if any(isinstance(event, SeatForfeited) for event in e.events)
    )
    assert forfeit.input == TimerFired(TimerKind.SEAT_PROTECTION, 0)
    assert forfeit.at == pytest.approx(gone_at + PROTECTION)
    await stays.aclose()
    await tables.close()


async def test_P12_a_player_who_leaves_within_the_window_is_logged_as_leaving_only(
    bus: MemoryBus,
) -> None:
    tables = _tables(bus)
    table_id = (await tables.create(_config())).table_id
    stream = await _opened(tables, table_id, 0)
    await stream.aclose()
    await tables.get(table_id).leave(0)
    bus.clock.advance(GRACE * 2)
    await _settle()
    assert [c.change for _, c in _changes(bus, table_id)] == [
        SeatChange.RECONNECTED,
        SeatChange.LEFT,
    ]
    await tables.close()


async def test_P12_a_window_open_when_the_node_dies_ends_in_a_disconnection_by_the_heir(
    bus: MemoryBus,
) -> None:
    """The window lives in the node's memory: the node that takes the table over records the
    seat as disconnected at once, as every seat whose streams died with the old node."""
    dead = _tables(bus, "dead")
    table_id = (await dead.create(_config())).table_id
    stream = await _opened(dead, table_id, 0)
    await stream.aclose()
    await dead.close()
    del bus.nodes["dead"]
    heir = _tables(bus, "heir")
    bus.clock.advance(bus.lease_seconds + 1)
    assert await heir.take_over_unserved() == 1
    assert [
        (s.writer, s.entry.input)
        for s in bus.logs[table_id]
        if isinstance(s.entry.input, SeatChanged)
    ] == [
        ("dead", SeatChanged(0, SeatChange.RECONNECTED)),
        ("heir", SeatChanged(0, SeatChange.DISCONNECTED)),
    ]
    # A stream back on the heir is logged as a reconnection.
    stream = await _opened(heir, table_id, 0)
    assert _changes(bus, table_id)[-1][1] == SeatChanged(0, SeatChange.RECONNECTED)
    await stream.aclose()
    await heir.close()
