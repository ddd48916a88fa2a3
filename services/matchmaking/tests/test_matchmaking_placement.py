"""Placing tables (P-30): holds all or nothing, the least-loaded node, a table id chosen once,
and nothing left behind when a step fails: no hold, no second table, no ticket stuck."""

from __future__ import annotations

import functools
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace

import pytest
from instances import Instance, start_instance, until
from masa_matchmaking.app.placement import PlacementSettings
from masa_matchmaking.app.ports import EngineNode, HoldRequest
from masa_matchmaking.app.tickets import NewTicket
from masa_matchmaking.domain.catalog import parse_lobbies
from masa_matchmaking.domain.ticket import Placement, Ticket, TicketState
from masa_platform.testing import NatsServer
from masa_rules.table_config import BotLevel, GameKind, PayoutRule
from matchmaking_support import (
    LOBBIES_TOML,
    REQUEST_ID_REUSED,
    FakeEngines,
    FakeEvents,
    FakeLedger,
    FakeNodes,
    lobby_named,
)


def _players(count: int, chips: int, ledger: FakeLedger) -> list[str]:
    run = uuid.uuid4().hex[:6]
    players = [f"{run}-{i}" for i in range(count)]
    for player in players:
        ledger.balances[player] = chips
    return players


async def _queue(instance: Instance, players: list[str], lobby: str) -> None:
    for player in players:
        await instance.desk.create(player, NewTicket(f"r-{player}", lobby))


def _ticket(instance: Instance, player: str) -> Ticket:
    cached = instance.store.cached(player)
    assert cached is not None
    return cached[0].tickets[0]


def _placement(instance: Instance, player: str) -> Placement:
    placement = _ticket(instance, player).placement
    assert placement is not None, f"{player}'s ticket has no table"
    return placement


def _all(instance: Instance, players: list[str], state: TicketState) -> bool:
    return all(
        instance.store.cached(p) is not None and _ticket(instance, p).state is state
        for p in players
    )


# An instance with the fakes it places through, as the tests find them.
World = tuple[Instance, FakeLedger, FakeEngines, FakeEvents, FakeNodes]


@pytest.fixture
async def world(nats_server: NatsServer, request: pytest.FixtureRequest) -> AsyncIterator[World]:
    max_requeues = getattr(request, "param", 2)
    ledger = FakeLedger()
    engines = FakeEngines(ledger)
    events = FakeEvents()
    nodes = FakeNodes()
    instance = await start_instance(
        nats_server,
        name=f"mm-{uuid.uuid4().hex[:4]}",
        ledger=ledger,
        engines=engines,
        events=events,
        nodes=nodes,
        placement=PlacementSettings(max_requeues=max_requeues, placement_timeout_seconds=2.0),
    )
    await until(lambda: {"salon", "teams"} <= instance.matchmaker.leading)
    yield instance, ledger, engines, events, nodes
    await instance.close()


async def test_p30_a_full_table_is_held_created_on_the_least_loaded_node_and_bound(
    world: World,
) -> None:
    instance, ledger, engines, events, _ = world
    players = _players(4, 500, ledger)
    await _queue(instance, players, "salon")
    await until(lambda: _all(instance, players, TicketState.MATCHED))
    tables = {engines.seated()[p] for p in players}
    assert len(tables) == 1
    table = engines.tables[tables.pop()]
    assert table.address == "b:1"  # node-b has the lower load
    assert table.request_id == table.table_id
    assert all(ledger.holds[s.hold_id].state == "bound" for s in table.config.seats)
    assert sorted(ledger.available(p) for p in players) == [400] * 4
    placement = _placement(instance, players[0])
    assert placement.address == "b:1" and placement.hold_id
    started = [s for s in events.started if s.table_id == table.table_id]
    assert len(started) == 1 and started[0].node_id == "node-b"


async def test_p30_a_player_without_chips_fails_and_the_others_go_back_first_uncounted(
    world: World,
) -> None:
    instance, ledger, engines, _, _ = world
    players = _players(4, 500, ledger)
    ledger.balances[players[2]] = 10
    await _queue(instance, players, "salon")
    await until(lambda: _ticket(instance, players[2]).state is TicketState.FAILED)
    failed = _ticket(instance, players[2])
    assert failed.failure is not None and failed.failure.reason == "INSUFFICIENT_FUNDS"
    others = [p for p in players if p != players[2]]
    await until(lambda: _all(instance, others, TicketState.SEARCHING))
    # Their table failed because of another player: put back first, and not counted against
    # them (max_requeues is 2 here, so a counted requeue would bring each close to failing).
    assert all(_ticket(instance, p).requeues == 0 for p in others)
    assert all(_ticket(instance, p).front for p in others)
    assert not ledger.open_holds()
    assert not any(p in engines.seated() for p in players)
    # A fourth player with chips completes the table: the three go first.
    late = _players(1, 500, ledger)
    await _queue(instance, late, "salon")
    await until(lambda: _all(instance, [*others, *late], TicketState.MATCHED))
    assert len({engines.seated()[p] for p in [*others, *late]}) == 1


async def test_p30_an_engine_that_refuses_leaves_no_hold_and_fails_the_tickets_in_the_end(
    world: World,
) -> None:
    instance, ledger, engines, _, _ = world
    engines.refuse = "INVALID_ARGUMENT"
    players = _players(4, 500, ledger)
    await _queue(instance, players, "salon")
    await until(lambda: _all(instance, players, TicketState.FAILED))
    failures = [_ticket(instance, p).failure for p in players]
    assert {f.reason if f else None for f in failures} == {"INVALID_ARGUMENT"}
    ours = [h for h in ledger.holds.values() if h.request.player_id in players]
    assert ours and all(h.state == "released" for h in ours)
    assert all(ledger.available(p) == 500 for p in players)
    assert not any(p in engines.seated() for p in players)
    assert "invalid_argument" in instance.metrics.failures
    engines.refuse = ""


async def test_p30_a_stake_the_ledger_refuses_releases_what_its_ids_still_hold(
    world: World,
) -> None:
    """An earlier try of this placement held the stakes under the same ids for the lobby's
    terms of then (the lobby file changed and matchmaking restarted): holding them again is
    another request, REQUEST_ID_REUSED. The placement fails (a counted requeue), and the holds
    those ids still reserve are released, not left holding the players' chips until they
    expire; the next placement seats the players with one stake held each."""
    instance, ledger, engines, _, _ = world
    players = _players(4, 500, ledger)
    hold_stakes = ledger.hold_stakes
    earlier: list[str] = []

    async def held_before(
        request_id: str, holds: Sequence[HoldRequest], ttl_seconds: float
    ) -> None:
        if not earlier:
            then = [replace(h, payout=PayoutRule(h.payout.rake_basis_points + 100)) for h in holds]
            await hold_stakes(f"{request_id}-earlier", then, ttl_seconds)
            earlier.extend(h.hold_id for h in then)
        await hold_stakes(request_id, holds, ttl_seconds)

    ledger.hold_stakes = held_before  # type: ignore[method-assign]
    await _queue(instance, players, "salon")
    await until(lambda: _all(instance, players, TicketState.MATCHED))
    assert REQUEST_ID_REUSED.lower() in instance.metrics.failures
    assert all(_ticket(instance, p).requeues == 1 for p in players)
    assert len(earlier) == 4
    assert all(ledger.holds[h].state == "released" for h in earlier)
    assert sorted(ledger.available(p) for p in players) == [400] * 4
    assert len({engines.seated()[p] for p in players}) == 1


async def test_p30_nodes_that_do_not_answer_are_fenced_by_releasing_the_holds(world: World) -> None:
    """No node answers: the holds are released (so no create still under way can bind them)
    and the players go back to the front, uncounted (max_requeues is 2 here), again and again
    with the lobby backing off, until a node answers."""
    instance, ledger, engines, _, nodes = world
    engines.unreachable = {"a:1", "b:1"}
    players = _players(4, 500, ledger)
    await _queue(instance, players, "salon")
    await until(lambda: instance.metrics.failures.count("engine_unavailable") >= 3)
    assert all(_ticket(instance, p).state is not TicketState.FAILED for p in players)
    assert {_ticket(instance, p).requeues for p in players} == {0}
    engines.unreachable = set()
    await until(lambda: _all(instance, players, TicketState.MATCHED))
    assert len({engines.seated()[p] for p in players}) == 1
    assert not ledger.open_holds()
    assert all(ledger.available(p) == 400 for p in players)
    assert nodes.nodes


async def test_p30_no_live_node_for_the_game_releases_the_holds_and_the_players_wait(
    world: World,
) -> None:
    """No node hosting the game is the system's failure, not the players': their holds are
    released and their tickets wait uncounted until a node comes."""
    instance, ledger, engines, _, nodes = world
    saved = nodes.nodes
    nodes.nodes = [EngineNode("full", "f:1", frozenset({GameKind.ELEVATOR}), 10, 10, 1.0, False)]
    players = _players(4, 500, ledger)
    await _queue(instance, players, "salon")
    await until(lambda: instance.metrics.failures.count("no_engine") >= 2)
    assert all(_ticket(instance, p).state is not TicketState.FAILED for p in players)
    assert {_ticket(instance, p).requeues for p in players} == {0}
    ours = [h for h in ledger.holds.values() if h.request.player_id in players]
    assert ours and {h.state for h in ours} == {"released"}
    assert not any(p in engines.seated() for p in players)
    nodes.nodes = saved
    await until(lambda: _all(instance, players, TicketState.MATCHED))


async def test_p30_a_full_node_is_passed_over_and_with_every_node_full_the_tickets_wait(
    world: World,
) -> None:
    """MASA_MAX_TABLES: a node that answers NODE_AT_CAPACITY made nothing, so the next node is
    asked at once; when every node is full the holds are released and the players keep their
    place in the queue, uncounted (max_requeues is 2 here), until a node has room."""
    instance, ledger, engines, events, _ = world
    engines.full = {"b:1"}
    players = _players(4, 500, ledger)
    await _queue(instance, players, "salon")
    await until(lambda: _all(instance, players, TicketState.MATCHED))
    (started,) = [s for s in events.started if players[0] in {x.player_id for x in s.config.seats}]
    assert started.node_id == "node-a"
    engines.full = {"a:1", "b:1"}
    waiting = _players(4, 500, ledger)
    await _queue(instance, waiting, "salon")
    await until(lambda: instance.metrics.failures.count("node_at_capacity") >= 3)
    assert all(_ticket(instance, p).state is not TicketState.FAILED for p in waiting)
    assert {_ticket(instance, p).requeues for p in waiting} == {0}
    assert not any(p in engines.seated() for p in waiting)
    engines.full = set()
    await until(lambda: _all(instance, waiting, TicketState.MATCHED))
    assert not ledger.open_holds()
    assert all(ledger.available(p) == 400 for p in waiting)


async def test_p30_while_the_registry_shows_no_room_nothing_is_claimed_or_held(
    world: World,
) -> None:
    instance, ledger, _engines, _, nodes = world
    saved = nodes.nodes
    nodes.nodes = [
        EngineNode("node-a", "a:1", frozenset(GameKind), 100, 100, 1.0, False),
        EngineNode("node-b", "b:1", frozenset(GameKind), 5, 100, 0.05, True),
    ]
    players = _players(4, 500, ledger)
    await _queue(instance, players, "salon")
    await until(lambda: instance.metrics.failures.count("node_at_capacity") >= 3)
    assert _all(instance, players, TicketState.SEARCHING)
    assert {_ticket(instance, p).requeues for p in players} == {0}
    assert not [call for call in ledger.calls if call.startswith("hold:")]
    nodes.nodes = saved
    await until(lambda: _all(instance, players, TicketState.MATCHED))


async def test_p1_a_training_table_is_created_once_when_the_engines_answer_is_lost(
    world: World,
) -> None:
    """A table without stakes has no hold to fence a create whose answer was lost: its ticket
    stays PLACING and the resume asks again under the same table id, which finds the table the
    first create made. A new id would have started a second table for the same player."""
    instance, ledger, engines, _, _ = world
    (player,) = _players(1, 0, ledger)
    engines.lose_answers = 3
    await instance.desk.create(player, NewTicket(f"r-{player}", "training"))
    await until(lambda: engines.lose_answers == 0)
    assert _ticket(instance, player).state is TicketState.PLACING
    await until(lambda: _all(instance, [player], TicketState.MATCHED))
    mine = [t for t in engines.tables.values() if player in {s.player_id for s in t.config.seats}]
    assert len(mine) == 1
    assert _placement(instance, player).table_id == mine[0].table_id
    assert _ticket(instance, player).requeues == 0
    assert engines.creates == 4


async def test_p1_partners_queue_as_a_party_and_sit_opposite(world: World) -> None:
    instance, ledger, _engines, _, _ = world
    a, b, c, d = _players(4, 500, ledger)
    first = await instance.desk.create(a, NewTicket(f"r-{a}", "teams", party_size=2))
    assert len(first.party_code) == 8
    await until(lambda: instance.store.ticket(first.ticket_id) is not None)
    await instance.desk.create(
        b, NewTicket(f"r-{b}", "teams", party_size=2, party_code=first.party_code)
    )
    await _queue(instance, [c, d], "teams")
    await until(lambda: _all(instance, [a, b, c, d], TicketState.MATCHED))
    seats = {p: _placement(instance, p).seat for p in (a, b, c, d)}
    assert {seats[a] % 2, seats[b] % 2} == {seats[a] % 2}  # partners opposite: 0+2 or 1+3
    assert seats[a] != seats[b]
    assert {seats[c] % 2} == {seats[d] % 2} != {seats[a] % 2}


async def test_p11_training_seats_hard_bots_and_the_lobbys_autopilot_level(world: World) -> None:
    """Issue 23: an Elevator or a 51 training ticket may ask for hard bots, and the player's
    own seat carries the lobby's autopilot level."""
    instance, ledger, engines, _, _ = world
    players = _players(2, 0, ledger)
    for player, lobby in zip(players, ("training", "training-51"), strict=True):
        await instance.desk.create(player, NewTicket(f"r-{player}", lobby, bot_level=BotLevel.HARD))
        await until(functools.partial(_all, instance, [player], TicketState.MATCHED))
        table = engines.tables[engines.seated()[player]]
        autopilot = lobby_named(parse_lobbies(LOBBIES_TOML), lobby).autopilot_level
        assert [seat.bot_level for seat in table.config.seats] == [autopilot] + [BotLevel.HARD] * 3
        assert table.config.seats[0].player_id == player


async def test_p1_training_seats_at_once_with_bots_of_the_asked_level(world: World) -> None:

    instance, ledger, engines, _, _ = world
    (player,) = _players(1, 0, ledger)
    await instance.desk.create(
        player, NewTicket(f"r-{player}", "training", bot_level=BotLevel.EASY)
    )
    await until(lambda: _all(instance, [player], TicketState.MATCHED))
    table = engines.tables[engines.seated()[player]]
    bots = [seat for seat in table.config.seats if not seat.player_id]
    assert len(bots) == 3 and {seat.bot_level for seat in bots} == {BotLevel.EASY}
    assert not any(seat.hold_id for seat in table.config.seats)
