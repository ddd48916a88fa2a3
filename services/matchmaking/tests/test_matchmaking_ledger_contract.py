"""The ledger port as placement relies on it (P-30), the same scenarios run against the test
double (``matchmaking_support.FakeLedger``) and against ``GrpcLedger`` over the real ledger,
with the same outcome asserted of both.

The placement tests run on the double; a double that answers otherwise than the real ledger
lets them pass where production fails. It did (issue 20): releasing a hold bound to a table's
game, the double said HOLD_ALREADY_BOUND and the real ledger says HOLD_NOT_HELD with the
hold's state, so the fence that tells a made table from none worked only in the tests.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import grpc.aio
import pytest
from grpc_status import rpc_status
from masa.ledger.v1 import ledger_pb2, ledger_pb2_grpc
from masa_matchmaking.app.ports import (
    HoldBound,
    HoldRequest,
    InsufficientFunds,
    Ledger,
    LedgerRefused,
)
from masa_platform.auth import Role
from masa_platform.errors import error_info
from masa_platform.testing import NatsServer, token
from masa_rules.table_config import PayoutRule
from masa_wire.table_config import payout_to_proto
from matchmaking_support import HOLD_NOT_HELD, REQUEST_ID_REUSED, TERMS_MISMATCH, FakeLedger
from real_services import WELCOME, grpc_ledger, holds_of, start_real_ledger

STAKE = 100
# The lobby's terms the stakes are held for: a 5% rake, the winner takes the rest.
TERMS = PayoutRule(rake_basis_points=500)
# Long enough for every call of a scenario, short enough that a test waits it out.
SHORT_TTL = 1.0


@dataclass
class Side:
    """One ledger behind the port, and what the other services do to its holds."""

    name: str
    ledger: Ledger
    # The table-engine's BindHolds of these holds to a table's first game, under these terms;
    # the ledger's refusal as LedgerRefused.
    bind: Callable[[str, list[str], PayoutRule], Awaitable[None]]
    # Until the ledger has expired this hold (placed with SHORT_TTL) as its own job does.
    expired: Callable[[str, str], Awaitable[None]]


Outcome = tuple[type[Exception] | None, str]


async def _outcome(call: Awaitable[None]) -> Outcome:
    """What a call of the port did: nothing raised, or the exception and what it names."""
    try:
        await call
    except HoldBound as bound:
        return HoldBound, bound.hold_id
    except LedgerRefused as refused:
        return LedgerRefused, refused.reason
    except InsufficientFunds as short:
        return InsufficientFunds, ",".join(short.players)
    return None, ""


def _fake() -> Side:
    fake = FakeLedger(welcome=WELCOME)

    async def bind(table_id: str, hold_ids: list[str], payout: PayoutRule) -> None:
        fake.bind(table_id, hold_ids, STAKE, payout)

    async def expired(player: str, hold_id: str) -> None:
        fake.expire(hold_id)

    return Side("fake", fake, bind, expired)


async def _real(
    nats: NatsServer, directory: Path, running: list[Callable[[], Awaitable[None]]]
) -> Side:
    service = await start_real_ledger(nats, directory)
    running.append(lambda: service.stop(0.2))
    address = service.server.address
    port = grpc_ledger(address)
    running.append(port.close)
    engine = (("authorization", f"Bearer {token('table-engine', Role.TABLE_ENGINE)}"),)

    async def bind(table_id: str, hold_ids: list[str], payout: PayoutRule) -> None:
        async with grpc.aio.insecure_channel(address) as channel:
            call = ledger_pb2_grpc.LedgerServiceStub(channel).BindHolds(
                ledger_pb2.BindHoldsRequest(
                    # A bind of its own each time: one refused is no answer to the next.
                    request_id=f"bind-{table_id}-{uuid.uuid4().hex[:8]}",
                    table_id=table_id,
                    game_no=1,
                    stake=STAKE,
                    hold_ids=hold_ids,
                    payout=payout_to_proto(payout),
                ),
                metadata=engine,
            )
            try:
                await call
            except grpc.aio.AioRpcError as error:
                info = error_info(await rpc_status.aio.from_call(call))
                raise LedgerRefused(info.reason if info else "", error.details() or "") from None

    async def expired(player: str, hold_id: str) -> None:
        deadline = asyncio.get_running_loop().time() + 30
        while asyncio.get_running_loop().time() < deadline:
            states = {h.hold_id: h.state for h in await holds_of(address, player)}
            if states.get(hold_id) == ledger_pb2.StakeHold.STATE_EXPIRED:
                return
            await asyncio.sleep(0.1)
        raise AssertionError(f"hold {hold_id} did not expire")

    return Side("real", port, bind, expired)


@pytest.fixture
async def sides(nats_server: NatsServer, tmp_path: Path) -> AsyncIterator[list[Side]]:
    running: list[Callable[[], Awaitable[None]]] = []
    try:
        yield [_fake(), await _real(nats_server, tmp_path, running)]
    finally:
        for stop in reversed(running):
            await stop()


def _stakes(
    player: str, table_id: str, amount: int = STAKE, payout: PayoutRule = TERMS
) -> list[HoldRequest]:
    return [HoldRequest(f"{table_id}-s0", player, amount, "trio", f"ticket-{player}", payout)]


async def _each(sides: list[Side], scenario: Callable[[Side], Awaitable[Outcome]]) -> Outcome:
    """The scenario's outcome, asserted the same on every side."""
    outcomes = {side.name: await scenario(side) for side in sides}
    assert len(set(outcomes.values())) == 1, outcomes
    return outcomes[sides[0].name]


def _ids() -> tuple[str, str]:
    run = uuid.uuid4().hex[:8]
    return f"p{run}", f"t{run}"


async def test_p30_releasing_a_hold_bound_to_a_table_is_hold_bound_on_both(
    sides: list[Side],
) -> None:
    """The fence of a create whose answer was lost: the hold is bound, so the table exists."""
    player, table_id = _ids()

    async def scenario(side: Side) -> Outcome:
        stakes = _stakes(player, table_id)
        await side.ledger.hold_stakes(f"{table_id}-holds", stakes, 60)
        await side.bind(table_id, [stakes[0].hold_id], TERMS)
        return await _outcome(side.ledger.release_hold(stakes[0].hold_id, "fence"))

    assert await _each(sides, scenario) == (HoldBound, f"{table_id}-s0")


async def test_p30_holding_again_under_the_same_ids_after_the_bind_is_answered_on_both(
    sides: list[Side],
) -> None:
    """A resume holds the stakes again under the ids the placement chose: the ledger answers
    with the holds as they are, bound, and charges nothing more."""
    player, table_id = _ids()

    async def scenario(side: Side) -> Outcome:
        stakes = _stakes(player, table_id)
        await side.ledger.hold_stakes(f"{table_id}-holds", stakes, 60)
        await side.bind(table_id, [stakes[0].hold_id], TERMS)
        return await _outcome(side.ledger.hold_stakes(f"{table_id}-holds", stakes, 60))

    assert await _each(sides, scenario) == (None, "")


async def test_p30_releasing_a_held_released_or_unknown_hold_is_fine_on_both(
    sides: list[Side],
) -> None:
    player, table_id = _ids()

    async def scenario(side: Side) -> Outcome:
        stakes = _stakes(player, table_id)
        await side.ledger.hold_stakes(f"{table_id}-holds", stakes, 60)
        first = await _outcome(side.ledger.release_hold(stakes[0].hold_id, "placement failed"))
        again = await _outcome(side.ledger.release_hold(stakes[0].hold_id, "placement failed"))
        unknown = await _outcome(side.ledger.release_hold(f"{table_id}-s9", "never held"))
        assert first == again == unknown, side.name
        return first

    assert await _each(sides, scenario) == (None, "")


async def test_p30_releasing_an_expired_hold_is_refused_hold_not_held_on_both(
    sides: list[Side],
) -> None:
    """A hold no longer held that no table took is no table made: refused, not HoldBound."""
    player, table_id = _ids()

    async def scenario(side: Side) -> Outcome:
        stakes = _stakes(player, table_id)
        await side.ledger.hold_stakes(f"{table_id}-holds", stakes, SHORT_TTL)
        await side.expired(player, stakes[0].hold_id)
        return await _outcome(side.ledger.release_hold(stakes[0].hold_id, "fence"))

    assert await _each(sides, scenario) == (LedgerRefused, HOLD_NOT_HELD)


async def test_p30_a_player_short_of_the_stake_is_named_on_both(sides: list[Side]) -> None:
    player, table_id = _ids()

    async def scenario(side: Side) -> Outcome:
        stakes = _stakes(player, table_id, amount=WELCOME + 1)
        return await _outcome(side.ledger.hold_stakes(f"{table_id}-holds", stakes, 60))

    assert await _each(sides, scenario) == (InsufficientFunds, player)


async def test_p30_binding_a_hold_under_other_terms_than_it_was_held_for_is_refused_on_both(
    sides: list[Side],
) -> None:
    """Issue 19: the terms are fixed when matchmaking places the stake, from the lobby, so the
    engine that binds it cannot choose others (here no rake, and then all to place 2 as well):
    TERMS_MISMATCH, the hold still held, and the lobby's own terms then bind it."""
    player, table_id = _ids()

    async def scenario(side: Side) -> Outcome:
        stakes = _stakes(player, table_id)
        await side.ledger.hold_stakes(f"{table_id}-holds", stakes, 60)
        hold_ids = [stakes[0].hold_id]
        no_rake = await _outcome(side.bind(table_id, hold_ids, PayoutRule()))
        resplit = await _outcome(side.bind(table_id, hold_ids, PayoutRule(500, (5000, 5000))))
        assert no_rake == resplit, side.name
        await side.bind(table_id, hold_ids, TERMS)
        assert await _outcome(side.ledger.release_hold(hold_ids[0], "fence")) == (
            HoldBound,
            hold_ids[0],
        ), side.name
        return no_rake

    assert await _each(sides, scenario) == (LedgerRefused, TERMS_MISMATCH)


async def test_p30_holding_again_under_the_same_ids_for_other_terms_is_request_id_reused(
    sides: list[Side],
) -> None:
    """A placement that holds again under the ids it chose, after the lobby's terms changed,
    asks for another stake: REQUEST_ID_REUSED, on both (placement then releases the holds
    those ids still reserve rather than leave them to expire); the first hold stays as it was,
    and a release frees it."""
    player, table_id = _ids()

    async def scenario(side: Side) -> Outcome:
        await side.ledger.hold_stakes(f"{table_id}-holds", _stakes(player, table_id), 60)
        other = _stakes(player, table_id, payout=PayoutRule(rake_basis_points=1000))
        again = await _outcome(side.ledger.hold_stakes(f"{table_id}-again", other, 60))
        released = await _outcome(side.ledger.release_hold(other[0].hold_id, "placement failed"))
        assert released == (None, ""), side.name
        return again

    assert await _each(sides, scenario) == (LedgerRefused, REQUEST_ID_REUSED)
