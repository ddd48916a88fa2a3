"""The ledger port a node binds a chip table's stakes through (P-30, ``app/stakes.py``), the
same scenarios run against the test double (``engine_stakes.FakeStakes``) and against
``GrpcStakeBinder`` over the real ledger on SQLite, with the same outcome asserted of both:
what was refused, by which ErrorReason and with which metadata (CreateTable hands both to its
caller), and the state each hold is left in."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TypeAlias

import grpc.aio
import pytest
from engine_stakes import FakeStakes
from engine_support import SERVICE, metadata, running_ledger
from google.protobuf.duration_pb2 import Duration
from masa.common.v1 import error_pb2
from masa.ledger.v1 import ledger_pb2, ledger_pb2_grpc
from masa_platform.auth import ServiceTokens, TokenSigner
from masa_platform.settings import AuthSettings
from masa_platform.testing import NatsServer, free_port, keyring
from masa_platform.tls import open_channel
from masa_rules.table_config import PayoutRule
from masa_table_engine.adapters.ledger_client import GrpcStakeBinder
from masa_table_engine.app.stakes import StakeBinder, StakesRefused, StakesUnavailable
from masa_wire.table_config import payout_to_proto

STAKE: Final = 100
# The ledger's development welcome: chips for a player it has no wallet of, at the first stake.
WELCOME: Final = 1_000
TERMS: Final = PayoutRule(rake_basis_points=500)
# Long enough for the calls before a hold's expiry, short enough that a test waits it out.
SHORT_TTL: Final = 1.0

# What a bind did: nothing raised, or the exception, its ErrorReason and its metadata; and
# then the state of each hold (masa.ledger.v1 StakeHold.State).
Refusal: TypeAlias = tuple[
    type[Exception] | None, error_pb2.ErrorReason.ValueType, tuple[tuple[str, str], ...]
]
Outcome: TypeAlias = tuple[Refusal, tuple[ledger_pb2.StakeHold.State.ValueType, ...]]
BOUND: Final = ledger_pb2.StakeHold.STATE_BOUND
HELD: Final = ledger_pb2.StakeHold.STATE_HELD
NONE: Final = error_pb2.ERROR_REASON_UNSPECIFIED


@dataclass
class Side:
    """One ledger behind the port, and what matchmaking does to its holds."""

    name: str
    stakes: StakeBinder
    # HoldStakes of one stake: hold id, player, amount, how long it may stay unbound, and the
    # terms of the game it is for.
    hold: Callable[[str, str, int, float, PayoutRule], Awaitable[None]]
    release: Callable[[str], Awaitable[None]]
    # Until the ledger has expired this hold of this player (placed with SHORT_TTL).
    expired: Callable[[str, str], Awaitable[None]]
    # The hold's state, read as its player reads it.
    state: Callable[[str, str], Awaitable[ledger_pb2.StakeHold.State.ValueType]]


def _fake(unreachable: bool = False) -> Side:
    fake = FakeStakes(unreachable=unreachable)

    async def hold(hold_id: str, player: str, amount: int, ttl: float, terms: PayoutRule) -> None:
        fake.hold(hold_id, player, amount, terms)

    async def release(hold_id: str) -> None:
        fake.release(hold_id)

    async def expired(player: str, hold_id: str) -> None:
        fake.expire(hold_id)

    async def state(player: str, hold_id: str) -> ledger_pb2.StakeHold.State.ValueType:
        return fake.holds[hold_id].state

    return Side("fake", fake, hold, release, expired, state)


def _binder(address: str, timeout_seconds: float = 5.0) -> tuple[GrpcStakeBinder, grpc.aio.Channel]:
    """The port as a node makes it, under the table-engine's own service token."""
    channel = open_channel(address, None)
    tokens = ServiceTokens(TokenSigner(keyring().signer("table-engine"), AuthSettings()))
    return GrpcStakeBinder(channel, tokens, timeout_seconds=timeout_seconds), channel


async def _real(nats: NatsServer, directory: Path, running: AsyncExitStack) -> Side:
    service = await running.enter_async_context(
        running_ledger(nats, directory, dev_welcome_chips=WELCOME, expiry_interval_seconds=0.2)
    )
    address = service.server.address
    binder, channel = _binder(address)
    running.push_async_callback(channel.close)
    ledger = ledger_pb2_grpc.LedgerServiceStub(
        await running.enter_async_context(grpc.aio.insecure_channel(address))
    )

    async def hold(hold_id: str, player: str, amount: int, ttl: float, terms: PayoutRule) -> None:
        await ledger.HoldStakes(
            ledger_pb2.HoldStakesRequest(
                request_id=f"holds-{hold_id}",
                stakes=[
                    ledger_pb2.HoldStakeRequest(
                        request_id=hold_id,
                        player_id=player,
                        amount=amount,
                        ttl=Duration(seconds=int(ttl), nanos=int(ttl % 1 * 1e9)),
                        payout=payout_to_proto(terms),
                    )
                ],
            ),
            metadata=SERVICE,
        )

    async def release(hold_id: str) -> None:
        await ledger.ReleaseHold(
            ledger_pb2.ReleaseHoldRequest(
                request_id=f"release-{hold_id}", hold_id=hold_id, reason="ticket cancelled"
            ),
            metadata=SERVICE,
        )

    async def state(player: str, hold_id: str) -> ledger_pb2.StakeHold.State.ValueType:
        answer = await ledger.GetHold(
            ledger_pb2.GetHoldRequest(hold_id=hold_id), metadata=metadata(player)
        )
        return answer.hold.state

    async def expired(player: str, hold_id: str) -> None:
        deadline = asyncio.get_running_loop().time() + 30
        while asyncio.get_running_loop().time() < deadline:
            if await state(player, hold_id) == ledger_pb2.StakeHold.STATE_EXPIRED:
                return
            await asyncio.sleep(0.1)
        raise AssertionError(f"hold {hold_id} did not expire")

    return Side("real", binder, hold, release, expired, state)


@pytest.fixture
async def sides(nats_server: NatsServer, tmp_path: Path) -> AsyncIterator[list[Side]]:
    async with AsyncExitStack() as running:
        yield [_fake(), await _real(nats_server, tmp_path, running)]


async def _refusal(call: Awaitable[None]) -> Refusal:
    try:
        await call
    except StakesRefused as refused:
        reason = error_pb2.ErrorReason.Value(f"ERROR_REASON_{refused.reason}")
        return StakesRefused, reason, tuple(sorted(refused.metadata.items()))
    except StakesUnavailable:
        return StakesUnavailable, NONE, ()
    return None, NONE, ()


async def _each(sides: list[Side], scenario: Callable[[Side], Awaitable[Outcome]]) -> Outcome:
    """The scenario's outcome, asserted the same on every side."""
    outcomes = {side.name: await scenario(side) for side in sides}
    assert len(set(outcomes.values())) == 1, outcomes
    return outcomes[sides[0].name]


def _ids() -> tuple[str, list[str]]:
    """A new table id and the players of its three seats."""
    run = uuid.uuid4().hex[:8]
    return f"t{run}", [f"p{run}-{seat}" for seat in range(3)]


async def _held(side: Side, table_id: str, players: list[str]) -> list[str]:
    """A hold of the stake for each player; their ids."""
    holds = [f"{table_id}-s{seat}" for seat in range(len(players))]
    for hold_id, player in zip(holds, players, strict=True):
        await side.hold(hold_id, player, STAKE, 60, TERMS)
    return holds


async def _states(
    side: Side, players: list[str], holds: list[str]
) -> tuple[ledger_pb2.StakeHold.State.ValueType, ...]:
    return tuple([await side.state(p, h) for p, h in zip(players, holds, strict=True)])


async def test_p30_held_stakes_are_bound_to_the_game_and_binding_them_again_is_answered_alike(
    sides: list[Side],
) -> None:
    """A retried create binds again: the ledger answers as the first time."""
    table_id, players = _ids()

    async def scenario(side: Side) -> Outcome:
        holds = await _held(side, table_id, players)
        first = await _refusal(side.stakes.bind(table_id, 1, STAKE, holds, TERMS))
        again = await _refusal(side.stakes.bind(table_id, 1, STAKE, holds, TERMS))
        assert first == again, side.name
        return first, await _states(side, players, holds)

    assert await _each(sides, scenario) == ((None, NONE, ()), (BOUND,) * 3)


# How a scenario spoils the holds of a table before its bind: given the side, the table, its
# players and their holds, it returns the hold ids the bind names.
Spoil: TypeAlias = Callable[[Side, str, list[str], list[str]], Awaitable[list[str]]]


async def _released(side: Side, table_id: str, players: list[str], holds: list[str]) -> list[str]:
    await side.release(holds[-1])
    return holds


async def _expired(side: Side, table_id: str, players: list[str], holds: list[str]) -> list[str]:
    late = f"{table_id}-late"
    await side.hold(late, f"{players[-1]}-late", STAKE, SHORT_TTL, TERMS)
    await side.expired(f"{players[-1]}-late", late)
    return [*holds, late]


async def _never_held(side: Side, table_id: str, players: list[str], holds: list[str]) -> list[str]:
    return [*holds, f"{table_id}-unknown"]


async def _other_amount(
    side: Side, table_id: str, players: list[str], holds: list[str]
) -> list[str]:
    small = f"{table_id}-small"
    await side.hold(small, f"{players[-1]}-small", STAKE // 2, 60, TERMS)
    return [*holds, small]


async def _other_terms(
    side: Side, table_id: str, players: list[str], holds: list[str]
) -> list[str]:
    """A stake placed for a game of no rake: the table binds under its lobby's 5%."""
    raked_less = f"{table_id}-terms"
    await side.hold(raked_less, f"{players[-1]}-terms", STAKE, 60, PayoutRule())
    return [*holds, raked_less]


async def _bound_elsewhere(
    side: Side, table_id: str, players: list[str], holds: list[str]
) -> list[str]:
    assert await _refusal(side.stakes.bind(f"{table_id}-x", 1, STAKE, holds[-1:], TERMS)) == (
        None,
        NONE,
        (),
    )
    return holds


async def _one_player_twice(
    side: Side, table_id: str, players: list[str], holds: list[str]
) -> list[str]:
    second = f"{table_id}-again"
    await side.hold(second, players[0], STAKE, 60, TERMS)
    return [*holds, second]


def _state(state: ledger_pb2.StakeHold.State.ValueType) -> str:
    """A hold's state as the ledger's metadata names it (RELEASED)."""
    return ledger_pb2.StakeHold.State.Name(state).removeprefix("STATE_")


@pytest.mark.parametrize(
    ("spoil", "reason", "why"),
    [
        (
            _released,
            error_pb2.ERROR_REASON_HOLD_NOT_HELD,
            lambda t: {"hold_id": f"{t}-s2", "state": _state(ledger_pb2.StakeHold.STATE_RELEASED)},
        ),
        (
            _expired,
            error_pb2.ERROR_REASON_HOLD_NOT_HELD,
            lambda t: {"hold_id": f"{t}-late", "state": _state(ledger_pb2.StakeHold.STATE_EXPIRED)},
        ),
        (_never_held, error_pb2.ERROR_REASON_HOLD_NOT_FOUND, lambda t: {"hold_id": f"{t}-unknown"}),
        (
            _other_amount,
            error_pb2.ERROR_REASON_STAKE_MISMATCH,
            lambda t: {"hold_id": f"{t}-small", "amount": str(STAKE // 2), "stake": str(STAKE)},
        ),
        (_other_terms, error_pb2.ERROR_REASON_TERMS_MISMATCH, lambda t: {"hold_id": f"{t}-terms"}),
        (
            _bound_elsewhere,
            error_pb2.ERROR_REASON_HOLD_ALREADY_BOUND,
            lambda t: {"hold_id": f"{t}-s2", "table_id": f"{t}-x", "game_no": "1"},
        ),
        (_one_player_twice, error_pb2.ERROR_REASON_BAD_REQUEST, lambda t: {"field": "hold_ids"}),
    ],
    ids=[
        "released",
        "expired",
        "never-held",
        "other-amount",
        "other-terms",
        "bound-elsewhere",
        "one-player",
    ],
)
async def test_p30_a_bind_the_ledger_refuses_names_the_hold_and_binds_none(
    sides: list[Side],
    spoil: Spoil,
    reason: error_pb2.ErrorReason.ValueType,
    why: Callable[[str], dict[str, str]],
) -> None:
    """All or nothing: the table is not made, and its good holds stay held for the next one.
    ``why`` is the refusal's metadata, given the table id."""
    table_id, players = _ids()

    async def scenario(side: Side) -> Outcome:
        holds = await _held(side, table_id, players)
        named = await spoil(side, table_id, players, holds)
        refusal = await _refusal(side.stakes.bind(table_id, 1, STAKE, named, TERMS))
        return refusal, await _states(side, players[:2], holds[:2])

    assert await _each(sides, scenario) == (
        (StakesRefused, reason, tuple(sorted(why(table_id).items()))),
        (HELD, HELD),
    )


async def test_p30_a_refused_bind_asked_again_as_it_was_is_refused_alike(
    sides: list[Side],
) -> None:
    """The ledger keeps its first answer to the node's bind of a game (AIP-155), a refusal
    too: a hold placed after the refusal does not change it."""
    table_id, players = _ids()

    async def scenario(side: Side) -> Outcome:
        holds = [f"{table_id}-s{seat}" for seat in range(len(players))]
        first = await _refusal(side.stakes.bind(table_id, 1, STAKE, holds, TERMS))
        await _held(side, table_id, players)
        again = await _refusal(side.stakes.bind(table_id, 1, STAKE, holds, TERMS))
        assert first == again, side.name
        return again, await _states(side, players, holds)

    assert await _each(sides, scenario) == (
        (
            StakesRefused,
            error_pb2.ERROR_REASON_HOLD_NOT_FOUND,
            (("hold_id", f"{table_id}-s0"),),
        ),
        (HELD,) * 3,
    )


# Another bind of a bound game: given its holds, the stake, holds and terms it names.
Rebind: TypeAlias = Callable[[list[str]], tuple[int, list[str], PayoutRule]]


@pytest.mark.parametrize(
    "rebind",
    [
        lambda holds: (STAKE + 1, holds, TERMS),
        lambda holds: (STAKE, holds[:2], TERMS),
        lambda holds: (STAKE, holds, PayoutRule()),
    ],
    ids=["stake", "holds", "terms"],
)
async def test_p30_binding_a_bound_game_otherwise_is_refused_and_leaves_it_bound(
    sides: list[Side], rebind: Rebind
) -> None:
    """A game's stakes and terms are fixed by its first bind; the holds stay bound to it. The
    node names its bind by the game, so the ledger answers another bind of it as a request id
    reused (it would say ESCROW_MISMATCH once it has forgotten the first request)."""
    table_id, players = _ids()

    async def scenario(side: Side) -> Outcome:
        holds = await _held(side, table_id, players)
        await side.stakes.bind(table_id, 1, STAKE, holds, TERMS)
        stake, named, payout = rebind(holds)
        refusal = await _refusal(side.stakes.bind(table_id, 1, stake, named, payout))
        return refusal, await _states(side, players, holds)

    assert await _each(sides, scenario) == (
        (StakesRefused, error_pb2.ERROR_REASON_REQUEST_ID_REUSED, ()),
        (BOUND,) * 3,
    )


async def test_p30_a_ledger_that_does_not_answer_is_unavailable_not_a_refusal() -> None:
    """The create is retried (UNAVAILABLE), never refused for it."""
    binder, channel = _binder(f"127.0.0.1:{free_port()}", timeout_seconds=2.0)
    try:
        outcomes = {
            "fake": await _refusal(
                _fake(unreachable=True).stakes.bind("t", 1, STAKE, ["h"], TERMS)
            ),
            "real": await _refusal(binder.bind("t", 1, STAKE, ["h"], TERMS)),
        }
    finally:
        await channel.close()
    assert set(outcomes.values()) == {(StakesUnavailable, NONE, ())}, outcomes
