"""Two matchmaking instances over one NATS: each lobby is matched by one of them at a time, no
ticket is placed twice, and the survivor takes the lobbies over when the other dies (P-2)."""

from __future__ import annotations

import asyncio
import uuid

from instances import Instance, start_instance, until
from masa_matchmaking.app.ports import LeaseStore
from masa_matchmaking.app.tickets import NewTicket
from masa_matchmaking.domain.ticket import TicketState
from masa_platform.testing import NatsServer
from matchmaking_support import FakeEngines, FakeEvents, FakeLedger, FlakyLeases


async def _queue(instances: list[Instance], players: list[str], lobby: str) -> list[str]:
    """One ticket per player, created round-robin on the instances, as a load balancer would."""
    tickets = await asyncio.gather(
        *(
            instances[index % len(instances)].desk.create(player, NewTicket(f"req-{player}", lobby))
            for index, player in enumerate(players)
        )
    )
    return [ticket.ticket_id for ticket in tickets]


async def _matched_events(events: FakeEvents, players: list[str]) -> list[str]:
    """The ticket ids of the players' TicketMatched events, once each player has one: the events
    follow the ticket writes, which other instances' caches can show first."""
    wanted = set(players)

    def ours() -> list[str]:
        return [t.ticket_id for t in events.matched if t.player_id in wanted]

    await until(lambda: {t.player_id for t in events.matched} >= wanted)
    return ours()


def _states(instance: Instance, players: list[str]) -> dict[str, TicketState]:
    states: dict[str, TicketState] = {}
    for player in players:
        cached = instance.store.cached(player)
        if cached is not None and cached[0].tickets:
            states[player] = cached[0].tickets[0].state
    return states


async def test_p2_two_instances_never_place_a_ticket_twice_and_the_survivor_takes_over(
    nats_server: NatsServer,
) -> None:
    ledger = FakeLedger()
    engines = FakeEngines(ledger)
    events = FakeEvents()
    run = uuid.uuid4().hex[:6]
    first = await start_instance(
        nats_server, name="mm-1", ledger=ledger, engines=engines, events=events
    )
    second = await start_instance(
        nats_server, name="mm-2", ledger=ledger, engines=engines, events=events
    )
    try:
        await until(lambda: first.matchmaker.leading | second.matchmaker.leading >= {"salon"})
        # Each lobby has exactly one leader.
        assert not (first.matchmaker.leading & second.matchmaker.leading)

        players = [f"{run}-p{i:02d}" for i in range(48)]
        for player in players:
            ledger.balances[player] = 1_000
        await _queue([first, second], players, "salon")
        await until(
            lambda: (
                _states(first, players) == dict.fromkeys(players, TicketState.MATCHED)
                and _states(second, players) == dict.fromkeys(players, TicketState.MATCHED)
            )
        )
        seated = engines.seated()  # asserts that nobody sits at two tables
        assert set(players) <= set(seated)
        ours = {table for player, table in seated.items() if player in players}
        assert len(ours) == 12
        # Every matched ticket names the table its player sits at; one event per ticket.
        for player in players:
            cached = first.store.cached(player)
            assert cached is not None
            ticket = cached[0].tickets[0]
            assert ticket.placement is not None
            assert ticket.placement.table_id == seated[player]
        matched = await _matched_events(events, players)
        assert len(matched) == len(set(matched)) == 48
        assert not ledger.open_holds()

        # The leader of the salon lobby dies without a goodbye; the other takes over.
        leader, survivor = (
            (first, second) if "salon" in first.matchmaker.leading else (second, first)
        )
        await leader.close(crash=True)
        await until(lambda: "salon" in survivor.matchmaker.leading, timeout=30)
        late = [f"{run}-late{i}" for i in range(4)]
        for player in late:
            ledger.balances[player] = 1_000
        await _queue([survivor], late, "salon")
        await until(lambda: _states(survivor, late) == dict.fromkeys(late, TicketState.MATCHED))
        assert len({engines.seated()[player] for player in late}) == 1
    finally:
        for instance in (first, second):
            if not instance.nc.is_closed:
                await instance.close()


async def test_p30_a_placement_whose_instance_died_is_resumed_without_a_second_table(
    nats_server: NatsServer,
) -> None:
    from masa_matchmaking.app.ports import EngineNode
    from masa_rules.table_config import GameKind
    from matchmaking_support import FakeNodes

    ledger = FakeLedger()
    engines = FakeEngines(ledger, hanging={"stuck:1"})
    events = FakeEvents()
    stuck = FakeNodes([EngineNode("stuck", "stuck:1", frozenset(GameKind), 0, 100, 0.0, False)])
    first = await start_instance(
        nats_server, name="mm-dies", ledger=ledger, engines=engines, events=events, nodes=stuck
    )
    await until(lambda: "salon" in first.matchmaker.leading)
    second = await start_instance(
        nats_server, name="mm-lives", ledger=ledger, engines=engines, events=events
    )
    players = [f"{uuid.uuid4().hex[:6]}-{i}" for i in range(4)]
    for player in players:
        ledger.balances[player] = 1_000
    try:
        await _queue([first], players, "salon")
        await until(lambda: _states(second, players) == dict.fromkeys(players, TicketState.PLACING))
        held = [h for h in ledger.holds.values() if h.request.player_id in players]
        assert len(held) == 4 and {h.state for h in held} == {"held"}
        await first.close(crash=True)
        await until(
            lambda: _states(second, players) == dict.fromkeys(players, TicketState.MATCHED),
            timeout=40,
        )
        (table,) = {engines.seated()[p] for p in players}
        # The same table id and holds as the dead instance chose: nothing was made twice.
        assert {
            h.request.hold_id for h in ledger.holds.values() if h.request.player_id in players
        } == {s.hold_id for s in engines.tables[table].config.seats}
        assert {h.state for h in held} == {"bound"}
    finally:
        for instance in (first, second):
            if not instance.nc.is_closed:
                await instance.close()


async def test_p2_a_leader_whose_renewals_time_out_stops_before_another_takes_over(
    nats_server: NatsServer,
) -> None:
    """The two-instance collapse: a leader whose lease renewals timed out (its event loop
    starved) kept running rounds after its lease had expired and the other instance had taken
    the lobby, so both claimed the same tickets, lost compare-and-sets and gave tickets back,
    and the placements cancelled at the flip sat PLACING until their timeout.

    A lease now counts only until lease_ttl after the last renewal that succeeded: the flaky
    leader has stopped placing by the time the other leads. Then 48 tickets, created on both
    instances, are each matched once, with no claim lost and no ticket write conflict."""
    ledger = FakeLedger()
    engines = FakeEngines(ledger)
    events = FakeEvents()
    run = uuid.uuid4().hex[:6]
    flaky: list[FlakyLeases] = []

    def wrap(leases: LeaseStore) -> LeaseStore:
        flaky.append(FlakyLeases(leases))
        return flaky[-1]

    first = await start_instance(
        nats_server,
        name="mm-flaky",
        ledger=ledger,
        engines=engines,
        events=events,
        wrap_leases=wrap,
    )
    await until(lambda: "salon" in first.matchmaker.leading)
    second = await start_instance(
        nats_server, name="mm-steady", ledger=ledger, engines=engines, events=events
    )
    try:
        conflicts_before = first.store.conflicts + second.store.conflicts
        flaky[0].failing = True
        await until(lambda: "salon" in second.matchmaker.leading, timeout=30)
        assert flaky[0].failed > 0
        assert "salon" not in first.matchmaker.leading

        players = [f"{run}-p{i:02d}" for i in range(48)]
        for player in players:
            ledger.balances[player] = 1_000
        await _queue([first, second], players, "salon")
        everyone = dict.fromkeys(players, TicketState.MATCHED)
        await until(
            lambda: _states(first, players) == everyone and _states(second, players) == everyone
        )
        seated = engines.seated()  # asserts that nobody sits at two tables
        assert len({seated[player] for player in players}) == 12
        matched = await _matched_events(events, players)
        assert len(matched) == len(set(matched)) == 48
        assert "claim_lost" not in first.metrics.failures + second.metrics.failures
        assert first.store.conflicts + second.store.conflicts == conflicts_before
        assert not ledger.open_holds()
    finally:
        for instance in (first, second):
            if not instance.nc.is_closed:
                await instance.close()
