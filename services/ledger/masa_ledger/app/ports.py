"""What the use cases need from the outside: a transactional store, the table results, metrics.

The store has two implementations (PostgreSQL and SQLite) behind these protocols, and one test
suite runs against both. A transaction's work is a coroutine function that receives a
:class:`Tx`; the store commits when it returns and rolls back when it raises, and runs it again
after a :class:`~masa_ledger.domain.errors.Conflict` (a deadlock, a serialization failure, a
concurrent insert of the same id). Work must therefore have no effect outside the transaction.
The use cases write only through :mod:`.unit_of_work`, which makes a fresh unit of work for
each run.

Locks are taken in one global order, so that two transactions never wait for each other in a
circle: accounts first, in account-id order, then holds, in hold-id order. Every transaction
that changes a game first locks that game's escrow account, which makes the escrow row the
game's mutex for binding, settling and voiding.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from masa_rules.table_config import PayoutRule

from masa_ledger.domain.events import LedgerEvent
from masa_ledger.domain.model import (
    Account,
    GameAbandonment,
    GameKey,
    GameResult,
    Hold,
    HoldState,
    Settlement,
    SettlementState,
    Transfer,
    TransferKind,
)

__all__ = [
    "AccountChange",
    "Change",
    "CheckFacts",
    "EncodeEvent",
    "HoldFilter",
    "InboxEntry",
    "InboxOutcome",
    "LedgerMetrics",
    "OutboxMessage",
    "OutboxRow",
    "ResultLog",
    "Store",
    "TransferFilter",
    "Tx",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class AccountChange:
    """Amounts added to an account's columns (negative to take away); for an escrow, also the
    stake and terms its holds were bound with and the state its game is closed in."""

    balance: int = 0
    held: int = 0
    pending_stakes: int = 0
    stake: int | None = None
    close: SettlementState | None = None
    rule: PayoutRule | None = None

    def plus(self, other: AccountChange) -> AccountChange:
        return AccountChange(
            balance=self.balance + other.balance,
            held=self.held + other.held,
            pending_stakes=self.pending_stakes + other.pending_stakes,
            stake=self.stake if other.stake is None else other.stake,
            close=other.close or self.close,
            rule=self.rule if other.rule is None else other.rule,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxMessage:
    event_id: str
    subject: str
    payload: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxRow:
    seq: int
    event_id: str
    subject: str
    payload: bytes
    created_at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class InboxEntry:
    """A consumed table result: recorded once per event id (a repeat changes nothing)."""

    event_id: str
    key: GameKey
    outcome: InboxOutcome
    detail: str = ""


class InboxOutcome(enum.Enum):
    """What became of a consumed table result."""

    SETTLED = "settled"
    VOIDED = "voided"
    # The game was settled or voided before (by an admin call, or by another event).
    ALREADY_CLOSED = "already_closed"
    # The result does not match what the ledger holds for the game; an operator must look.
    REJECTED = "rejected"


@dataclass(frozen=True, slots=True, kw_only=True)
class Change:
    """Everything one transaction writes, applied at once at its end (one statement where the
    database allows it)."""

    at: float
    # Accounts to open, with their first values (a new escrow's stake and state).
    new_accounts: Sequence[Account] = ()
    new_holds: Sequence[Hold] = ()
    # Existing holds with their new state, game, close time and reason.
    holds: Sequence[Hold] = ()
    transfers: Sequence[Transfer] = ()
    accounts: Mapping[str, AccountChange] = field(default_factory=dict)
    settlements: Sequence[Settlement] = ()
    inbox: Sequence[InboxEntry] = ()
    outbox: Sequence[OutboxMessage] = ()

    @property
    def empty(self) -> bool:
        return not (
            self.new_accounts
            or self.new_holds
            or self.holds
            or self.transfers
            or self.accounts
            or self.settlements
            or self.inbox
            or self.outbox
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class TransferFilter:
    account_id: str
    kind: TransferKind | None = None
    table_id: str = ""
    game_no: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class HoldFilter:
    player_id: str
    state: HoldState | None = None
    table_id: str = ""
    game_no: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckFacts:
    """What the invariant check found: by check name, how many rows break it and a few of
    them; and totals of the ledger."""

    counts: Mapping[str, int]
    examples: Mapping[str, Sequence[str]]
    totals: Mapping[str, int] = field(default_factory=dict)


class Tx(Protocol):
    """One transaction of the store: reads (some locking), then one :meth:`apply`."""

    async def lock_accounts(
        self, account_ids: Collection[str], *, create: Sequence[Account] = ()
    ) -> dict[str, Account]:
        """Create the accounts of ``create`` that do not exist, then lock every account of
        ``account_ids`` that exists, in account-id order; missing ones are left out."""
        ...

    async def lock_games(
        self, keys: Collection[GameKey], *, also: Collection[str] = ()
    ) -> dict[str, Account]:
        """Lock, in account-id order, the escrows of the games that exist and the accounts of
        ``also``, then the wallets of the holds bound to those games; returns them all."""
        ...

    async def holds(self, hold_ids: Collection[str], *, lock: bool = False) -> dict[str, Hold]:
        """The holds that exist among ``hold_ids``; with ``lock``, locked in hold-id order."""
        ...

    async def holds_of_games(self, keys: Collection[GameKey]) -> dict[GameKey, list[Hold]]:
        """Every hold ever bound to each game (bound, posted or voided), by hold id."""
        ...

    async def transfer(self, transfer_id: str) -> Transfer | None: ...

    async def settlement(self, key: GameKey) -> Settlement | None:
        """The game's settlement with its transfers."""
        ...

    async def apply(self, change: Change) -> None:
        """Write ``change``; outbox and inbox rows whose id exists already are skipped."""
        ...


class Store(Protocol):
    """The ledger's database."""

    async def transact(self, work: Callable[[Tx], Awaitable[T]]) -> T:
        """Run ``work`` in a transaction, again after a conflict; commit when it returns."""
        ...

    async def account(self, account_id: str) -> Account | None: ...

    async def hold(self, hold_id: str) -> Hold | None: ...

    async def settlement(self, key: GameKey) -> Settlement | None:
        """The game's settlement with its transfers."""
        ...

    async def list_transfers(
        self, where: TransferFilter, *, before_seq: int | None, limit: int
    ) -> list[tuple[int, Transfer]]:
        """Transfers newest first (by store sequence), below ``before_seq`` when it is set."""
        ...

    async def list_holds(
        self, where: HoldFilter, *, before_seq: int | None, limit: int
    ) -> list[tuple[int, Hold]]: ...

    async def due_holds(self, now: float, limit: int) -> list[Hold]:
        """Held (unbound) holds whose expiry has passed, oldest expiry first."""
        ...

    async def outbox_batch(self, limit: int) -> list[OutboxRow]:
        """Unpublished outbox rows, oldest first."""
        ...

    async def mark_published(self, seqs: Sequence[int], at: float) -> None: ...

    async def prune(self, *, published_before: float, received_before: float) -> int:
        """Forget outbox rows published and inbox rows received before the given times (the
        settlements stay the permanent idempotency record); returns the rows removed."""
        ...

    async def check(self) -> CheckFacts:
        """Evaluate every invariant over the whole database."""
        ...

    async def ping(self) -> None:
        """Raise :class:`~masa_ledger.domain.errors.Unavailable` if the database is down."""
        ...

    async def close(self) -> None: ...


EncodeEvent = Callable[[LedgerEvent], OutboxMessage]


class ResultLog(Protocol):
    """The table-engine's published results (the table log), read by admin calls."""

    async def game_result(self, key: GameKey) -> GameResult | GameAbandonment | None: ...


class LedgerMetrics(Protocol):
    """Where the use cases count what they do (Prometheus in the service)."""

    def operation(self, kind: str, result: str) -> None: ...

    def settlement_seconds(self, seconds: float) -> None: ...

    def holds_expired(self, count: int) -> None: ...
