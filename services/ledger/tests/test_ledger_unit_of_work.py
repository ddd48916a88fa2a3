"""The unit of work every ledger write runs as, on every store (P-30, P-31).

A unit gathers what its requests write and applies it, with the events that report it, in one
transaction; each request is answered and counted on its own; a unit whose every request was
refused rolls back; a conflict runs the work again from a fresh unit.
"""

from __future__ import annotations

import pytest
from ledger_support import Clock, RecordedMetrics, make_ledger
from masa_ledger.adapters.convert import encode_event
from masa_ledger.adapters.sql import SqlStore
from masa_ledger.app.ports import AccountChange
from masa_ledger.app.unit_of_work import Outcome, UnitOfWork, Writer
from masa_ledger.domain.errors import Conflict, Refused
from masa_ledger.domain.events import HoldPlaced
from masa_ledger.domain.model import Account, AccountKind, Hold, HoldState, wallet_id


def _writer(store: SqlStore, clock: Clock) -> tuple[Writer, RecordedMetrics, list[None]]:
    metrics = RecordedMetrics()
    commits: list[None] = []
    writer = Writer(
        store, encode_event, metrics, clock=clock, on_commit=lambda: commits.append(None)
    )
    return writer, metrics, commits


def _hold(hold_id: str, player_id: str, now: float) -> Hold:
    return Hold(
        hold_id=hold_id,
        player_id=player_id,
        amount=100,
        lobby_id="",
        ticket_id="",
        ttl_seconds=60.0,
        state=HoldState.HELD,
        created_at=now,
        expire_at=now + 60.0,
    )


async def _place(unit: UnitOfWork, hold: Hold) -> Hold:
    unit.place(hold)
    unit.adjust(hold.account_id, AccountChange(held=hold.amount))
    unit.report(HoldPlaced(hold=hold))
    return hold


async def _refuse(unit: UnitOfWork) -> Hold:
    raise Refused("no", reason="INSUFFICIENT_FUNDS")


async def _nothing(unit: UnitOfWork, hold: Hold) -> Hold:
    return hold


async def test_p30_a_batch_commits_what_its_requests_decided_and_counts_each(
    store: SqlStore,
) -> None:
    clock = Clock()
    ledger, _ = make_ledger(store, clock)
    await ledger.grant("g", "ayse", 1000, "")
    writer, metrics, commits = _writer(store, clock)
    placed = _hold("h1", "ayse", clock.now)

    async def work(unit: UnitOfWork) -> list[Outcome[Hold]]:
        return [
            await unit.decide(_place, unit, placed),
            await unit.decide(_refuse, unit),
            await unit.decide(_nothing, unit, placed),
        ]

    answers = await writer.run("hold", work)
    assert answers[0] == answers[2] == placed
    assert isinstance(answers[1], Refused)
    assert await store.hold("h1") == placed
    assert (await ledger.wallet("ayse")).held == 100
    assert [row.event_id for row in await store.outbox_batch(10)][-1] == "hold_placed:h1"
    # Changed the ledger (reported an event), refused, changed nothing.
    assert metrics.operations == [("hold", "ok"), ("hold", "refused"), ("hold", "replayed")]
    assert len(commits) == 1


async def test_p31_a_unit_whose_every_request_is_refused_rolls_back(store: SqlStore) -> None:
    clock = Clock()
    writer, metrics, commits = _writer(store, clock)
    wallet = wallet_id("ayse")

    async def step(unit: UnitOfWork) -> Hold:
        # Written to the database at once, not gathered in the unit: the rollback undoes it.
        opened = Account(account_id=wallet, kind=AccountKind.PLAYER, player_id="ayse")
        await unit.tx.lock_accounts([wallet], create=[opened])
        return await _refuse(unit)

    with pytest.raises(Refused):
        await writer.one("grant", step)
    assert await store.account(wallet) is None
    assert metrics.operations == [("grant", "refused")]
    assert commits == []


async def test_p30_a_conflict_runs_the_work_again_from_a_fresh_unit(store: SqlStore) -> None:
    clock = Clock()
    ledger, _ = make_ledger(store, clock)
    await ledger.grant("g", "ayse", 1000, "")
    writer, metrics, commits = _writer(store, clock)
    units: list[UnitOfWork] = []

    async def step(unit: UnitOfWork) -> Hold:
        units.append(unit)
        hold = await _place(unit, _hold("h1", "ayse", unit.at))
        if len(units) == 1:
            clock.now += 1
            raise Conflict("a deadlock")
        return hold

    hold = await writer.one("hold", step)
    assert units[0] is not units[1]
    assert hold.created_at == units[1].at == clock.now
    # The first unit's hold was never written: reserved once, reported once, counted once.
    assert (await ledger.wallet("ayse")).held == 100
    assert [row.event_id for row in await store.outbox_batch(10)].count("hold_placed:h1") == 1
    assert metrics.operations == [("hold", "ok")]
    assert len(commits) == 1
