"""Placing chip tables against the real ledger and a real table-engine node (P-30): a player is
seated once and charged once when CreateTable's answer is lost or matchmaking dies between
making a table and seating its players, and a ledger outage makes the players wait, not fail.

The services are the real ones (:mod:`real_services`): the ledger on SQLite, a table-engine
node binding the stakes in it, matchmaking through its own bootstrap, one nats-server. Only
the answers are lost, by an engine port that forwards each CreateTable to the node first.
The ledger answers ReleaseHold of a hold a table's game took with HOLD_NOT_HELD and the
hold's state; matchmaking once looked for another reason, decided the table had not been made,
and placed the players again at a second table with a second stake each (issue 20).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest
from masa.ledger.v1 import ledger_pb2
from masa.matchmaking.v1 import matchmaking_pb2 as mm
from masa_matchmaking.bootstrap import MatchmakingService
from masa_matchmaking.settings import MatchmakingSettings
from masa_platform.settings import SettingsError, load_settings
from prometheus_client import CollectorRegistry
from real_services import (
    PLACEMENT_TIMEOUT,
    STAKE,
    WELCOME,
    DyingAfterCreate,
    LosingAnswers,
    Stack,
    balance_of,
    grpc_engines,
    holds_of,
    kill,
    queue,
    real_stack,
    tickets_of,
    until,
)

BOUND = ledger_pb2.StakeHold.STATE_BOUND
MATCHED = mm.Ticket.STATE_MATCHED
# Placements were given up by a resume this long after they started (placement.py).
GIVEN_UP_AFTER = 4 * PLACEMENT_TIMEOUT


def _players(count: int) -> list[str]:
    run = uuid.uuid4().hex[:6]
    return [f"p{run}-{i}" for i in range(count)]


async def _all_matched(service: MatchmakingService, tickets: dict[str, str]) -> bool:
    found = await tickets_of(service.address, tickets)
    return all(ticket.state == MATCHED for ticket in found.values())


async def _seated_once(stack: Stack, service: MatchmakingService, tickets: dict[str, str]) -> str:
    """Every player MATCHED at one table, never requeued, with one stake held in the whole
    ledger: the hold their ticket names, bound to that table. Returns the table id."""
    found = await tickets_of(service.address, tickets)
    assert {ticket.state for ticket in found.values()} == {MATCHED}
    (table_id,) = {ticket.table_id for ticket in found.values()}
    assert {ticket.requeues for ticket in found.values()} == {0}
    for player, ticket in found.items():
        holds = await holds_of(stack.ledger_address, player)
        assert [(h.hold_id, h.state, h.table_id) for h in holds] == [
            (ticket.hold_id, BOUND, table_id)
        ], f"{player} staked more than once: {holds}"
        account = await balance_of(stack.ledger_address, player)
        assert (account.balance, account.held) == (WELCOME, STAKE)
    # And the node runs that one table: no second table was started for anyone.
    assert stack.node.tables.served == [table_id]
    return table_id


async def test_p30_a_lost_create_table_answer_seats_every_player_once_at_the_table_made(
    tmp_path: Path,
) -> None:
    """Every CreateTable of the placement makes (or finds) the table on the node, which binds
    the stakes, and no answer reaches matchmaking. The fence (ReleaseHold) hears that the holds
    are bound: the table exists, the tickets stay PLACING, and the resume seats the players
    there."""
    async with real_stack(tmp_path) as stack:
        engines = grpc_engines()
        stack.running.push_async_callback(engines.close)
        # Each attempt of the placement (three) is lost; the resume's is answered.
        losing = LosingAnswers(engines, lose=3)
        service = await stack.start_matchmaking("mm-lossy", engines=losing)
        players = _players(3)
        tickets = await queue(service.address, players)
        await until(lambda: losing.lose == 0, "three lost answers")
        await until(lambda: _all_matched(service, tickets), "every player seated")
        table_id = await _seated_once(stack, service, tickets)
        # Every CreateTable asked for that one table.
        assert set(losing.asked) == {table_id} and len(losing.asked) >= 4


@pytest.mark.parametrize(
    "restart_after",
    [0.0, GIVEN_UP_AFTER],
    ids=["restarted-at-once", "restarted-after-the-placement-was-given-up"],
)
async def test_p30_matchmaking_killed_between_create_and_seat_resumes_at_the_same_table(
    tmp_path: Path, restart_after: float
) -> None:
    """The first instance makes the table (the node binds the stakes) and is killed before it
    seats anyone: its tickets stay PLACING. Another instance takes the lobby over and resumes
    the placement. Soon after, it runs the placement again under the same ids, and the node
    answers with the table made. Once the placement is older than the resumes keep retrying
    (a restart that came late), the resume asks the ledger, whose answer (the holds are bound)
    says the table exists: the players are seated there, charged once, either way."""
    async with real_stack(tmp_path) as stack:
        engines = grpc_engines()
        stack.running.push_async_callback(engines.close)
        dying = DyingAfterCreate(engines)
        first = await stack.start_matchmaking("mm-dies", engines=dying)
        players = _players(3)
        tickets = await queue(first.address, players)
        await asyncio.wait_for(dying.created.wait(), 60)
        created_at = time.monotonic()
        (table_id,) = set(dying.asked)
        await kill(first)
        await asyncio.sleep(max(0.0, restart_after - (time.monotonic() - created_at)))
        second = await stack.start_matchmaking("mm-resumes")
        await until(lambda: _all_matched(second, tickets), "every player seated")
        assert await _seated_once(stack, second, tickets) == table_id


async def test_p30_a_ledger_outage_fails_no_ticket_and_the_lobby_backs_off(
    tmp_path: Path,
) -> None:
    """Issue 20: a 5 s ledger outage failed 250 waiting tickets, each requeue running a new
    round at once. Now the players of a placement the ledger could not hold go back to the
    front uncounted, and the lobby's rounds back off (0.5 s doubling); once the ledger is back
    every player is seated, charged once."""
    async with real_stack(tmp_path, ledger_up=False) as stack:
        registry = CollectorRegistry()
        service = await stack.start_matchmaking("mm-waits", registry=registry, max_requeues=1)
        players = _players(6)
        tickets = await queue(service.address, players)
        outage_ends = time.monotonic() + 5.0
        seen: set[int] = set()
        while time.monotonic() < outage_ends:
            found = await tickets_of(service.address, tickets)
            seen |= {ticket.state for ticket in found.values()}
            await asyncio.sleep(0.1)
        attempts = registry.get_sample_value(
            "masa_matchmaking_placement_failures_total", {"reason": "ledger_unavailable"}
        )
        # The players were placed and put back (max_requeues 1: one counted requeue would have
        # failed them), never failed.
        assert attempts is not None and attempts >= 2
        assert mm.Ticket.STATE_FAILED not in seen
        # Two tables at most each round, and a round at 0, 0.5, 1.5 and 3.5 s: without the
        # back-off a placement ran again every few milliseconds.
        assert attempts <= 16, f"{attempts} placements in 5 s: the rounds did not back off"
        await stack.start_ledger()
        await until(lambda: _all_matched(service, tickets), "every player seated")
        found = await tickets_of(service.address, tickets)
        assert {ticket.requeues for ticket in found.values()} == {0}
        by_table: dict[str, list[str]] = {}
        for player, ticket in found.items():
            by_table.setdefault(ticket.table_id, []).append(player)
            holds = await holds_of(stack.ledger_address, player)
            assert [(h.state, h.table_id) for h in holds] == [(BOUND, ticket.table_id)]
        assert sorted(len(seated) for seated in by_table.values()) == [3, 3]


def test_p30_the_back_off_is_read_from_masa_settings() -> None:
    environ = {
        "MASA_PLACEMENT_BACKOFF_SECONDS": "0.25",
        "MASA_PLACEMENT_BACKOFF_MAX_SECONDS": "4",
    }
    settings = load_settings(MatchmakingSettings, environ)
    assert (settings.placement_backoff_seconds, settings.placement_backoff_max_seconds) == (
        0.25,
        4.0,
    )
    defaults = load_settings(MatchmakingSettings, {})
    assert (defaults.placement_backoff_seconds, defaults.placement_backoff_max_seconds) == (
        0.5,
        8.0,
    )
    for wrong in (
        {"MASA_PLACEMENT_BACKOFF_SECONDS": "0"},
        {"MASA_PLACEMENT_BACKOFF_MAX_SECONDS": "0.1"},
    ):
        with pytest.raises(SettingsError, match="MASA_PLACEMENT_BACKOFF"):
            load_settings(MatchmakingSettings, wrong)
