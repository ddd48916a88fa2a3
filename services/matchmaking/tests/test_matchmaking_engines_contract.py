"""The engine port as placement relies on it (P-30, P-1), the same scenarios run against the
test double (``matchmaking_support.FakeEngines`` over ``FakeLedger``) and against
``GrpcEngines`` over a real table-engine node binding stakes in the real ledger, with the same
outcome asserted of both.

The placement tests run on the double; a double that answers otherwise than a node lets them
pass where production fails. It did: a configuration the node refuses, the double made; a
stake the ledger would not bind came out of the double as the ledger's refusal, not the
engine's (the placement does not catch that one); an unknown hold was HOLD_NOT_HELD, not
HOLD_NOT_FOUND; a hold of another amount than the stake was bound; and a chip table on a node
that cannot reach its ledger was made. A hold placed for other terms than the table's
(TERMS_MISMATCH) is refused by both alike.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TypeAlias

import pytest
from masa.common.v1 import error_pb2
from masa.ledger.v1 import ledger_pb2
from masa_matchmaking.app.ports import (
    EngineFull,
    EngineRefused,
    Engines,
    HoldBound,
    HoldRequest,
    Ledger,
    LedgerRefused,
    Unreachable,
)
from masa_matchmaking.domain.catalog import parse_lobbies
from masa_platform.testing import NatsServer, free_port
from masa_rules.table_config import BotLevel, PayoutRule, SeatConfig, SeatKind, TableConfig
from masa_table_engine.adapters.limits import MAX_DISPLAY_NAME
from matchmaking_support import LOBBIES_TOML, FakeEngines, FakeLedger, lobby_named
from real_services import LOBBIES_TOML as CHIP_LOBBIES_TOML
from real_services import (
    LOBBY,
    STAKE,
    WELCOME,
    grpc_engines,
    grpc_ledger,
    holds_of,
    start_real_ledger,
    start_real_node,
)

# A chip lobby (three seats, STAKE each) and a training one (one player and three bots).
CHIPS: Final = lobby_named(parse_lobbies(CHIP_LOBBIES_TOML), LOBBY)
TRAINING: Final = lobby_named(parse_lobbies(LOBBIES_TOML), "training")
# The real node's MASA_MAX_TABLES: room for a few tables, so that a test can fill it.
MAX_TABLES = 3
# Long enough for every call of a scenario, short enough that a test waits it out.
SHORT_TTL = 1.0

# What a call of the port did: its answer ("node": the node asked runs the table) or the
# exception and its reason, an ErrorReason where the reason is a platform one, else the id of
# the rule that refused it.
Reason: TypeAlias = error_pb2.ErrorReason.ValueType | str
Outcome: TypeAlias = tuple[type[Exception] | None, Reason]
MADE: Final[Outcome] = (None, "node")


@dataclass
class Side:
    """One engine port and the node behind it, and the ledger matchmaking holds stakes in."""

    name: str
    engines: Engines
    # The node's address, and one where no node answers.
    address: str
    dead: str
    ledger: Ledger
    # Until the node runs all the tables it may.
    fill: Callable[[], Awaitable[None]]
    # Until the ledger has expired this hold (placed with SHORT_TTL) as its own job does.
    expired: Callable[[str, str], Awaitable[None]]
    # The ledger stops answering the node.
    ledger_down: Callable[[], Awaitable[None]]


def _reason(reason: str) -> Reason:
    """An ErrorInfo reason as its ErrorReason, or the rule id it is."""
    try:
        return error_pb2.ErrorReason.Value(f"ERROR_REASON_{reason}")
    except ValueError:
        return reason


async def _outcome(side: Side, call: Awaitable[object]) -> Outcome:
    try:
        answer = await call
    except EngineRefused as refused:
        return EngineRefused, _reason(refused.reason)
    except HoldBound as bound:
        return HoldBound, bound.hold_id
    except LedgerRefused as refused:
        return LedgerRefused, _reason(refused.reason)
    except (EngineFull, Unreachable) as error:
        return type(error), ""
    if answer is None:
        return None, ""
    return None, "node" if answer == side.address else str(answer)


def _fake() -> Side:
    ledger = FakeLedger(welcome=WELCOME)
    engines = FakeEngines(ledger, unreachable={"dead:1"})

    async def fill() -> None:
        engines.full.add("node:1")

    async def expired(player: str, hold_id: str) -> None:
        ledger.expire(hold_id)

    async def ledger_down() -> None:
        ledger.unreachable = True

    return Side("fake", engines, "node:1", "dead:1", ledger, fill, expired, ledger_down)


async def _real(
    nats: NatsServer, directory: Path, running: list[Callable[[], Awaitable[None]]]
) -> Side:
    ledger_service = await start_real_ledger(nats, directory)
    stopped = False

    async def stop_ledger() -> None:
        nonlocal stopped
        if not stopped:
            stopped = True
            await ledger_service.stop(0.2)

    running.append(stop_ledger)
    ledger_address = ledger_service.server.address
    node = await start_real_node(
        nats, f"contract-{uuid.uuid4().hex[:8]}", ledger_address, max_tables=MAX_TABLES
    )
    running.append(lambda: node.stop(0.2))
    engines = grpc_engines()
    running.append(engines.close)
    ledger = grpc_ledger(ledger_address)
    running.append(ledger.close)

    async def fill() -> None:
        for _ in range(MAX_TABLES + 1):
            filler = f"filler-{uuid.uuid4().hex[:8]}"
            try:
                await engines.create_table(node.address, filler, filler, _training(filler))
            except EngineFull:
                return
        raise AssertionError(f"the node took {MAX_TABLES + 1} tables")

    async def expired(player: str, hold_id: str) -> None:
        deadline = asyncio.get_running_loop().time() + 30
        while asyncio.get_running_loop().time() < deadline:
            states = {h.hold_id: h.state for h in await holds_of(ledger_address, player)}
            if states.get(hold_id) == ledger_pb2.StakeHold.STATE_EXPIRED:
                return
            await asyncio.sleep(0.1)
        raise AssertionError(f"hold {hold_id} did not expire")

    dead = f"127.0.0.1:{free_port()}"
    return Side("real", engines, node.address, dead, ledger, fill, expired, stop_ledger)


@pytest.fixture
async def sides(nats_server: NatsServer, tmp_path: Path) -> AsyncIterator[list[Side]]:
    running: list[Callable[[], Awaitable[None]]] = []
    try:
        yield [_fake(), await _real(nats_server, tmp_path, running)]
    finally:
        for stop in reversed(running):
            await stop()


async def _each(
    sides: list[Side], scenario: Callable[[Side], Awaitable[tuple[Outcome, ...]]]
) -> tuple[Outcome, ...]:
    """The scenario's outcomes, asserted the same on every side."""
    outcomes = {side.name: await scenario(side) for side in sides}
    assert len(set(outcomes.values())) == 1, outcomes
    return outcomes[sides[0].name]


def _ids() -> tuple[str, list[str]]:
    """A new table id and the players of its chip table."""
    run = uuid.uuid4().hex[:8]
    return f"t{run}", [f"p{run}-{seat}" for seat in range(CHIPS.max_seats)]


def _training(table_id: str, name: str = "") -> TableConfig:
    player = f"{table_id}-player"
    seats = [SeatConfig(0, SeatKind.HUMAN, player, name or player)]
    seats += [
        SeatConfig(n, SeatKind.BOT, bot_level=BotLevel.EASY) for n in range(1, TRAINING.max_seats)
    ]
    return TRAINING.table_config(seats)


def _stakes(
    table_id: str, players: list[str], amount: int = STAKE, payout: PayoutRule = CHIPS.payout
) -> list[HoldRequest]:
    return [
        HoldRequest(f"{table_id}-s{seat}", player, amount, LOBBY, f"ticket-{player}", payout)
        for seat, player in enumerate(players)
    ]


def _seated(stakes: list[HoldRequest]) -> list[SeatConfig]:
    return [
        SeatConfig(seat, SeatKind.HUMAN, hold.player_id, hold.player_id, hold_id=hold.hold_id)
        for seat, hold in enumerate(stakes)
    ]


def _chips(stakes: list[HoldRequest]) -> TableConfig:
    return CHIPS.table_config(_seated(stakes))


async def test_p1_a_table_is_made_once_and_a_retry_of_its_request_is_answered_with_it(
    sides: list[Side],
) -> None:
    """The resume of a placement whose answer was lost asks again under the same ids."""
    table_id, _ = _ids()

    async def scenario(side: Side) -> tuple[Outcome, ...]:
        config = _training(table_id)
        create = side.engines.create_table
        return (
            await _outcome(side, create(side.address, table_id, table_id, config)),
            await _outcome(side, create(side.address, table_id, table_id, config)),
        )

    assert await _each(sides, scenario) == (MADE, MADE)


async def test_p30_a_chip_table_binds_its_stakes_once_so_that_they_fence_the_placement(
    sides: list[Side],
) -> None:
    """The table made, its holds are its stakes: a release is HoldBound (the fence of a create
    whose answer was lost), and a retried create binds nothing more."""
    table_id, players = _ids()

    async def scenario(side: Side) -> tuple[Outcome, ...]:
        stakes = _stakes(table_id, players)
        await side.ledger.hold_stakes(f"{table_id}-holds", stakes, 60)
        create = side.engines.create_table
        return (
            await _outcome(side, create(side.address, table_id, table_id, _chips(stakes))),
            await _outcome(side, create(side.address, table_id, table_id, _chips(stakes))),
            await _outcome(side, side.ledger.release_hold(stakes[0].hold_id, "fence")),
        )

    assert await _each(sides, scenario) == (MADE, MADE, (HoldBound, f"{table_id}-s0"))


async def test_another_request_for_a_table_id_is_refused_table_exists(sides: list[Side]) -> None:
    table_id, _ = _ids()

    async def scenario(side: Side) -> tuple[Outcome, ...]:
        config = _training(table_id)
        create = side.engines.create_table
        return (
            await _outcome(side, create(side.address, table_id, "first", config)),
            await _outcome(side, create(side.address, table_id, "second", config)),
        )

    assert await _each(sides, scenario) == (
        MADE,
        (EngineRefused, error_pb2.ERROR_REASON_TABLE_EXISTS),
    )


async def test_a_full_node_refuses_a_new_table_as_full_but_answers_a_retry_of_its_own(
    sides: list[Side],
) -> None:
    """MASA_MAX_TABLES: nothing is made, so placement asks the next node at once."""
    table_id, _ = _ids()

    async def scenario(side: Side) -> tuple[Outcome, ...]:
        create = side.engines.create_table
        made = await _outcome(side, create(side.address, table_id, table_id, _training(table_id)))
        await side.fill()
        other = f"{table_id}-other"
        return (
            made,
            await _outcome(side, create(side.address, other, other, _training(other))),
            await _outcome(side, create(side.address, table_id, table_id, _training(table_id))),
        )

    assert await _each(sides, scenario) == (MADE, (EngineFull, ""), MADE)


def _long_name(table_id: str, players: list[str]) -> TableConfig:
    """A seat's name longer than a node takes: malformed, whatever the rules."""
    return _training(table_id, name="n" * (MAX_DISPLAY_NAME + 1))


def _bot_at_chips(table_id: str, players: list[str]) -> TableConfig:
    """P-13: bots never take a seat at a chip table."""
    humans = _seated(_stakes(table_id, players[:-1]))
    bot = SeatConfig(len(humans), SeatKind.BOT, bot_level=BotLevel.EASY)
    return CHIPS.table_config([*humans, bot])


@pytest.mark.parametrize(
    ("refused", "reason"),
    [(_long_name, error_pb2.ERROR_REASON_BAD_REQUEST), (_bot_at_chips, "P-13")],
    ids=["bad-request", "P-13"],
)
async def test_p13_a_configuration_the_node_refuses_is_refused_with_its_reason_and_not_made(
    sides: list[Side], refused: Callable[[str, list[str]], TableConfig], reason: Reason
) -> None:
    """Refused before anything is made: the id is free for another request afterwards."""
    table_id, players = _ids()

    async def scenario(side: Side) -> tuple[Outcome, ...]:
        create = side.engines.create_table
        config = refused(table_id, players)
        return (
            await _outcome(side, create(side.address, table_id, table_id, config)),
            await _outcome(side, create(side.address, table_id, "valid", _training(table_id))),
        )

    assert await _each(sides, scenario) == ((EngineRefused, reason), MADE)


Stakes: TypeAlias = Callable[[Side, str, list[str]], Awaitable[list[HoldRequest]]]


async def _released(side: Side, table_id: str, players: list[str]) -> list[HoldRequest]:
    stakes = _stakes(table_id, players)
    await side.ledger.hold_stakes(f"{table_id}-holds", stakes, 60)
    await side.ledger.release_hold(stakes[-1].hold_id, "ticket cancelled")
    return stakes


async def _expired(side: Side, table_id: str, players: list[str]) -> list[HoldRequest]:
    stakes = _stakes(table_id, players)
    await side.ledger.hold_stakes(f"{table_id}-holds", stakes[:-1], 60)
    await side.ledger.hold_stakes(f"{table_id}-late", stakes[-1:], SHORT_TTL)
    await side.expired(players[-1], stakes[-1].hold_id)
    return stakes


async def _never_held(side: Side, table_id: str, players: list[str]) -> list[HoldRequest]:
    stakes = _stakes(table_id, players)
    await side.ledger.hold_stakes(f"{table_id}-holds", stakes[:-1], 60)
    return stakes


async def _other_amount(side: Side, table_id: str, players: list[str]) -> list[HoldRequest]:
    stakes = _stakes(table_id, players, amount=STAKE // 2)
    await side.ledger.hold_stakes(f"{table_id}-holds", stakes, 60)
    return stakes


async def _other_terms(side: Side, table_id: str, players: list[str]) -> list[HoldRequest]:
    """Held for the lobby's stake but a rake of its own: the table's terms are not these."""
    terms = PayoutRule(CHIPS.payout.rake_basis_points + 100, CHIPS.payout.place_shares)
    stakes = _stakes(table_id, players, payout=terms)
    await side.ledger.hold_stakes(f"{table_id}-holds", stakes, 60)
    return stakes


async def _bound_elsewhere(side: Side, table_id: str, players: list[str]) -> list[HoldRequest]:
    stakes = _stakes(table_id, players)
    await side.ledger.hold_stakes(f"{table_id}-holds", stakes, 60)
    elsewhere = f"{table_id}-elsewhere"
    made = await _outcome(
        side, side.engines.create_table(side.address, elsewhere, elsewhere, _chips(stakes))
    )
    assert made == MADE, side.name
    return stakes


@pytest.mark.parametrize(
    ("stakes", "reason"),
    [
        (_released, error_pb2.ERROR_REASON_HOLD_NOT_HELD),
        (_expired, error_pb2.ERROR_REASON_HOLD_NOT_HELD),
        (_never_held, error_pb2.ERROR_REASON_HOLD_NOT_FOUND),
        (_other_amount, error_pb2.ERROR_REASON_STAKE_MISMATCH),
        (_other_terms, error_pb2.ERROR_REASON_TERMS_MISMATCH),
        (_bound_elsewhere, error_pb2.ERROR_REASON_HOLD_ALREADY_BOUND),
    ],
    ids=["released", "expired", "never-held", "other-amount", "other-terms", "bound-elsewhere"],
)
async def test_p30_stakes_the_ledger_will_not_bind_refuse_the_table_with_its_reason(
    sides: list[Side], stakes: Stakes, reason: error_pb2.ErrorReason.ValueType
) -> None:
    """The engine's refusal carries the ledger's reason, and nothing is made: placement fails
    the tickets and releases the holds, which are not a table's stakes."""
    table_id, players = _ids()

    async def scenario(side: Side) -> tuple[Outcome, ...]:
        held = await stakes(side, table_id, players)
        create = side.engines.create_table
        return (
            await _outcome(side, create(side.address, table_id, table_id, _chips(held))),
            await _outcome(side, side.ledger.release_hold(held[0].hold_id, "placement failed")),
        )

    first = (HoldBound, f"{table_id}-s0") if stakes is _bound_elsewhere else (None, "")
    assert await _each(sides, scenario) == ((EngineRefused, reason), first)


async def test_an_address_where_no_node_answers_is_unreachable(sides: list[Side]) -> None:
    table_id, _ = _ids()

    async def scenario(side: Side) -> tuple[Outcome, ...]:
        config = _training(table_id)
        return (
            await _outcome(side, side.engines.create_table(side.dead, table_id, table_id, config)),
        )

    assert await _each(sides, scenario) == ((Unreachable, ""),)


async def test_p30_a_chip_table_on_a_node_whose_ledger_does_not_answer_is_unreachable(
    sides: list[Side],
) -> None:
    """Not a refusal: placement fences the holds and tries again later, and nothing is made,
    so a table without stakes is made there all the same."""
    table_id, players = _ids()

    async def scenario(side: Side) -> tuple[Outcome, ...]:
        stakes = _stakes(table_id, players)
        await side.ledger.hold_stakes(f"{table_id}-holds", stakes, 60)
        await side.ledger_down()
        create = side.engines.create_table
        free = f"{table_id}-free"
        return (
            await _outcome(side, create(side.address, table_id, table_id, _chips(stakes))),
            await _outcome(side, create(side.address, free, free, _training(free))),
        )

    assert await _each(sides, scenario) == ((Unreachable, ""), MADE)
