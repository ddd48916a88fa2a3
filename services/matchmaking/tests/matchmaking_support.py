"""Test doubles of matchmaking's outside world: a ledger, engine nodes, events and metrics.

They keep what a real one keeps (holds with their states, tables by id and request) and can
be told to fail, so the tests check what placement leaves behind: every hold placed is bound to
a live table or released, and no ticket sits at two tables.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from masa.common.v1 import error_pb2
from masa_matchmaking.app.ports import (
    EngineFull,
    EngineNode,
    EngineRefused,
    GameStarted,
    HoldBound,
    HoldRequest,
    InsufficientFunds,
    LeaseStore,
    LedgerRefused,
    Unreachable,
)
from masa_matchmaking.domain.lobby import Lobby
from masa_matchmaking.domain.rating import PlayerRating
from masa_matchmaking.domain.ticket import Ticket
from masa_platform.errors import MasaError, reason_name
from masa_rules.errors import RuleViolation
from masa_rules.table_config import GameKind, PayoutRule, TableConfig, check_table_config
from masa_table_engine.adapters.convert import config_from_proto
from masa_table_engine.adapters.limits import check_config, check_table_id
from masa_wire.table_config import config_to_proto

LOBBIES_TOML = """
[defaults]
matching = { base_spread = 5.0, spread_per_second = 0.5, open_after_seconds = 30 }

[[lobby]]
id = "salon"
name = "Salon 51"
game = "fiftyone"
preset = "salon"
seats = 4
stake = 100

[[lobby]]
id = "teams"
name = "Salon teams"
game = "fiftyone"
preset = "salon"
mode = "teams"
seats = 4
stake = 100

[[lobby]]
id = "elevator"
name = "Elevator"
game = "elevator"
min_seats = 3
max_seats = 6
stake = 20
short_table_after_seconds = 2

[[lobby]]
id = "training"
name = "Training Elevator"
game = "elevator"
mode = "training"
seats = 4
autopilot_level = "hard"

[[lobby]]
id = "training-51"
name = "Training 51"
game = "fiftyone"
mode = "training"
seats = 4
"""


HOLD_NOT_HELD: Final = reason_name(error_pb2.ERROR_REASON_HOLD_NOT_HELD)
HOLD_ALREADY_BOUND: Final = reason_name(error_pb2.ERROR_REASON_HOLD_ALREADY_BOUND)
HOLD_NOT_FOUND: Final = reason_name(error_pb2.ERROR_REASON_HOLD_NOT_FOUND)
STAKE_MISMATCH: Final = reason_name(error_pb2.ERROR_REASON_STAKE_MISMATCH)
TERMS_MISMATCH: Final = reason_name(error_pb2.ERROR_REASON_TERMS_MISMATCH)
REQUEST_ID_REUSED: Final = reason_name(error_pb2.ERROR_REASON_REQUEST_ID_REUSED)
TABLE_EXISTS: Final = reason_name(error_pb2.ERROR_REASON_TABLE_EXISTS)


def _asked(request: HoldRequest) -> tuple[object, ...]:
    """What a stake asks for, as the ledger tells a retry from another request (AIP-155)."""
    return (
        request.player_id,
        request.amount,
        request.lobby_id,
        request.ticket_id,
        request.payout.spelt_out(),
    )


@dataclass
class Hold:
    request: HoldRequest
    # The ledger's states (masa.ledger.v1 StakeHold.State) in lower case: held, then bound to
    # a table's game and posted once it is settled; or released, expired or voided.
    state: str = "held"
    table_id: str = ""


@dataclass
class FakeLedger:
    """The ledger port as :class:`~masa_matchmaking.adapters.ledger_client.GrpcLedger` answers
    it over the real ledger (``test_matchmaking_ledger_contract`` runs both): a hold a table's
    game took is :class:`HoldBound` on release, any other hold no longer held is refused
    HOLD_NOT_HELD, an unknown or released one is fine."""

    balances: dict[str, int] = field(default_factory=dict)
    holds: dict[str, Hold] = field(default_factory=dict)
    unreachable: bool = False
    calls: list[str] = field(default_factory=list)
    # The real ledger's development welcome: chips for a player it has no wallet of, at the
    # first stake.
    welcome: int = 0

    def available(self, player: str) -> int:
        held = sum(
            h.request.amount
            for h in self.holds.values()
            if h.request.player_id == player and h.state in ("held", "bound")
        )
        return self.balances.get(player, 0) - held

    async def hold_stakes(
        self, request_id: str, holds: Sequence[HoldRequest], ttl_seconds: float
    ) -> None:
        self.calls.append(f"hold:{request_id}")
        if self.unreachable:
            raise Unreachable("ledger down")
        for h in holds:
            placed = self.holds.get(h.hold_id)
            if placed is not None and _asked(placed.request) != _asked(h):
                raise LedgerRefused(REQUEST_ID_REUSED, f"{h.hold_id} was held for another stake")
        if all(h.hold_id in self.holds for h in holds):
            return
        for h in holds:
            if self.welcome and h.player_id not in self.balances:
                self.balances[h.player_id] = self.welcome
        short = [h.player_id for h in holds if self.available(h.player_id) < h.amount]
        if short:
            raise InsufficientFunds(short, f"short: {short}")
        for h in holds:
            self.holds[h.hold_id] = Hold(h)

    def bind(self, table_id: str, hold_ids: Sequence[str], stake: int, payout: PayoutRule) -> None:
        """The table-engine's BindHolds of a table's first game under the terms ``payout``,
        refused as the real ledger refuses it: all or nothing, an unknown hold first; the same
        holds to the same table again is fine."""
        for hold_id in hold_ids:
            if hold_id not in self.holds:
                raise LedgerRefused(HOLD_NOT_FOUND, f"no hold {hold_id}")
        for hold_id in hold_ids:
            hold = self.holds[hold_id]
            if hold.state == "bound" and hold.table_id == table_id:
                continue
            if hold.state in ("bound", "posted"):
                raise LedgerRefused(HOLD_ALREADY_BOUND, f"{hold_id} is bound elsewhere")
            if hold.state != "held":
                raise LedgerRefused(HOLD_NOT_HELD, f"{hold_id} is {hold.state}")
            if hold.request.amount != stake:
                raise LedgerRefused(STAKE_MISMATCH, f"{hold_id} does not hold {stake}")
            if hold.request.payout.spelt_out() != payout.spelt_out():
                raise LedgerRefused(TERMS_MISMATCH, f"{hold_id} was held for other terms")
        for hold_id in hold_ids:
            self.holds[hold_id].state = "bound"
            self.holds[hold_id].table_id = table_id

    def expire(self, hold_id: str) -> None:
        """The ledger's expiry of an unbound hold past its TTL."""
        hold = self.holds[hold_id]
        if hold.state == "held":
            hold.state = "expired"

    async def release_hold(self, hold_id: str, reason: str) -> None:
        self.calls.append(f"release:{hold_id}")
        if self.unreachable:
            raise Unreachable("ledger down")
        hold = self.holds.get(hold_id)
        if hold is None or hold.state == "released":
            return
        if hold.state in ("bound", "posted"):
            raise HoldBound(hold_id)
        if hold.state != "held":
            raise LedgerRefused(HOLD_NOT_HELD, f"hold {hold_id} is {hold.state}")
        hold.state = "released"

    def open_holds(self) -> list[Hold]:
        return [h for h in self.holds.values() if h.state == "held"]


@dataclass
class CreatedTable:
    table_id: str
    request_id: str
    address: str
    config: TableConfig


@dataclass
class FakeEngines:
    """Engine nodes sharing one table index, as the real ones share the snapshot bucket, each
    answering CreateTable as :class:`~masa_matchmaking.adapters.engines.GrpcEngines` does over
    a real node (``test_matchmaking_engines_contract`` runs both): a configuration the node's
    own checks refuse is :class:`EngineRefused` with their reason, a full node refuses a new
    table, a chip table binds its stakes in ``ledger`` (its refusal is the engine's, and
    without a ledger that answers the node is :class:`Unreachable`)."""

    ledger: FakeLedger | None = None
    tables: dict[str, CreatedTable] = field(default_factory=dict)
    refuse: str = ""
    unreachable: set[str] = field(default_factory=set)
    # Nodes that take the call and never answer (a node stuck, or its instance dying).
    hanging: set[str] = field(default_factory=set)
    # Nodes that run all the tables they may (MASA_MAX_TABLES): RESOURCE_EXHAUSTED.
    full: set[str] = field(default_factory=set)
    # Creates that make the table but whose answer is lost on the way back.
    lose_answers: int = 0
    creates: int = 0

    async def create_table(
        self, address: str, table_id: str, request_id: str, config: TableConfig
    ) -> str:
        self.creates += 1
        if address in self.unreachable:
            raise Unreachable(f"{address} does not answer")
        if address in self.hanging:
            await asyncio.Event().wait()
        if self.refuse:
            raise EngineRefused(self.refuse, "refused by the test")
        config = _engine_config(table_id, config)
        existing = self.tables.get(table_id)
        if existing is None and address in self.full:
            raise EngineFull(f"{address} is full")
        if existing is not None:
            if existing.request_id != request_id:
                raise EngineRefused(TABLE_EXISTS, f"table {table_id} exists")
            return self._answer(existing.address)
        _check_rules(config)
        if config.stake:
            self._bind(table_id, config)
        self.tables[table_id] = CreatedTable(table_id, request_id, address, config)
        return self._answer(address)

    def _bind(self, table_id: str, config: TableConfig) -> None:
        if self.ledger is None or self.ledger.unreachable:
            raise Unreachable(f"no ledger binds the stakes of {table_id}")
        holds = [seat.hold_id for seat in config.seats if seat.hold_id]
        try:
            self.ledger.bind(table_id, holds, config.stake, config.payout)
        except LedgerRefused as refused:
            raise EngineRefused(refused.reason, refused.message) from None

    def _answer(self, address: str) -> str:
        if self.lose_answers:
            self.lose_answers -= 1
            raise Unreachable(f"the answer of {address} was lost")
        return address

    def seated(self) -> dict[str, str]:
        """Player -> table, failing if a player sits at two tables."""
        found: dict[str, str] = {}
        for table in self.tables.values():
            for seat in table.config.seats:
                if seat.player_id:
                    assert seat.player_id not in found, f"{seat.player_id} seated twice"
                    found[seat.player_id] = table.table_id
        return found


def _engine_config(table_id: str, config: TableConfig) -> TableConfig:
    """The configuration as a node reads the CreateTable that GrpcEngines sends, by the node's
    own checks: :class:`EngineRefused` with their reason where they refuse it."""
    message = config_to_proto(config)
    try:
        check_table_id(table_id)
        check_config(message)
        return config_from_proto(message, config.turn_seconds)
    except MasaError as error:
        raise EngineRefused(error.reason, error.message) from None


def _check_rules(config: TableConfig) -> None:
    """What a node checks of a new table before it binds its stakes (the check lobbies load
    by too): :class:`EngineRefused` with the rule id where it refuses it."""
    try:
        check_table_config(config)
    except RuleViolation as error:
        raise EngineRefused(error.rule, error.message) from None


@dataclass
class FakeNodes:
    nodes: list[EngineNode] = field(
        default_factory=lambda: [
            EngineNode("node-a", "a:1", frozenset(GameKind), 3, 100, 0.03, False),
            EngineNode("node-b", "b:1", frozenset(GameKind), 1, 100, 0.01, False),
        ]
    )

    async def live(self) -> list[EngineNode]:
        return list(self.nodes)


@dataclass
class FlakyLeases:
    """A real lease store whose renewals can be made to time out, as a starved instance's
    did (its event loop too busy to read the answers in time)."""

    leases: LeaseStore
    failing: bool = False
    failed: int = 0

    async def acquire(self, key: str) -> int | None:
        if self.failing:
            self.failed += 1
            raise Unreachable("the lease store did not answer")
        return await self.leases.acquire(key)

    async def renew(self, key: str, revision: int) -> int | None:
        if self.failing:
            self.failed += 1
            raise Unreachable("the lease store did not answer")
        return await self.leases.renew(key, revision)

    async def release(self, key: str, revision: int) -> None:
        await self.leases.release(key, revision)


@dataclass
class FakeEvents:
    matched: list[Ticket] = field(default_factory=list)
    started: list[GameStarted] = field(default_factory=list)
    ratings: list[tuple[PlayerRating, PlayerRating]] = field(default_factory=list)

    async def ticket_matched(self, ticket: Ticket, now: float) -> None:
        self.matched.append(ticket)

    async def game_started(self, started: GameStarted, now: float) -> None:
        self.started.append(started)

    async def rating_changed(
        self,
        before: PlayerRating,
        after: PlayerRating,
        *,
        table_id: str,
        game_no: int,
        place: int,
        now: float,
    ) -> None:
        self.ratings.append((before, after))


@dataclass
class FakeMetrics:
    depths: dict[str, int] = field(default_factory=dict)
    rounds: int = 0
    matched_waits: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def queue_depth(self, lobby_id: str, depth: int) -> None:
        self.depths[lobby_id] = depth

    def round_run(self, lobby_id: str, seconds: float) -> None:
        self.rounds += 1

    def matched(self, lobby_id: str, waits: Sequence[float], spread: float) -> None:
        self.matched_waits.extend(waits)

    def placement_failed(self, reason: str) -> None:
        self.failures.append(reason)


class Clock:
    """A clock the test moves."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


_ids = itertools.count()


def table_ids() -> str:
    return f"t{next(_ids):06d}"


def lobby_named(lobbies: Sequence[Lobby], lobby_id: str) -> Lobby:
    return next(lobby for lobby in lobbies if lobby.lobby_id == lobby_id)
