"""Accounts, holds, transfers and settlements as frozen values (P-30, P-31).

Glossary:

- *wallet*: a player's account, ``player:<player_id>``. Its ``held`` chips are reserved by
  pending holds; ``available = balance - held`` is what the player can still stake.
- *hold*: a stake reserved for a game, the pending half of a two-phase transfer. It is *held*
  for a lobby, *bound* to one game's escrow when the table is created, then *posted* into the
  escrow when the game is settled, or *released*, *expired* or *voided* without moving chips.
- *escrow*: the pot of one game, ``escrow:<table_id>:<game_no>``. Its ``pending_stakes`` are
  the holds bound to it; a settlement posts them in and pays them out in one transaction, so
  its balance is zero whenever no transaction is running.
- *transfer*: one posted, immutable movement of chips from a debit to a credit account; its id
  is its idempotency key. All balances together always sum to zero: only the issuer, which
  grants chips, is negative.

A game's payout rule (P-30) is the table model's :class:`masa_rules.table_config.PayoutRule`,
the one the lobby fixed and the table engine binds the stakes under.

Times are seconds since the epoch (floats); the stores keep whole microseconds.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from masa_rules.payout import SeatPayout, Standing
from masa_rules.table_config import PayoutRule

__all__ = [
    "HOUSE",
    "ISSUER",
    "Account",
    "AccountKind",
    "GameAbandonment",
    "GameKey",
    "GameResult",
    "Hold",
    "HoldState",
    "SeatPayout",
    "Settlement",
    "SettlementState",
    "Standing",
    "Transfer",
    "TransferKind",
    "escrow_id",
    "wallet_id",
]

ISSUER = "issuer"
HOUSE = "house"


def wallet_id(player_id: str) -> str:
    return f"player:{player_id}"


def escrow_id(table_id: str, game_no: int) -> str:
    return f"escrow:{table_id}:{game_no}"


class AccountKind(enum.Enum):
    PLAYER = "player"
    ESCROW = "escrow"
    HOUSE = "house"
    ISSUER = "issuer"


@dataclass(frozen=True, slots=True, kw_only=True)
class GameKey:
    """What settlement is keyed by: one game at one table."""

    table_id: str
    game_no: int

    @property
    def escrow_id(self) -> str:
        return escrow_id(self.table_id, self.game_no)

    def __str__(self) -> str:
        return f"{self.table_id}:{self.game_no}"


class SettlementState(enum.Enum):
    SETTLED = "settled"
    VOIDED = "voided"


@dataclass(frozen=True, slots=True, kw_only=True)
class Account:
    account_id: str
    kind: AccountKind
    player_id: str = ""
    table_id: str = ""
    game_no: int = 0
    balance: int = 0
    # A wallet's chips reserved by its pending holds (held or bound).
    held: int = 0
    # An escrow's pending stakes: the amounts of the holds bound to it and not yet posted.
    pending_stakes: int = 0
    # An escrow's stake per hold, fixed when its holds are bound; 0 otherwise.
    stake: int = 0
    # An escrow's terms, fixed when its holds are bound (the lobby's rake and payout table, as
    # the table-engine bound them): what the game is paid by. None before, and for others.
    rule: PayoutRule | None = None
    # How an escrow's game was closed; None while it is open (and for other accounts).
    closed: SettlementState | None = None
    # None for a wallet that exists only implicitly (never granted any chips).
    created_at: float | None = None

    @property
    def available(self) -> int:
        return self.balance - self.held


class HoldState(enum.Enum):
    HELD = "held"
    BOUND = "bound"
    POSTED = "posted"
    RELEASED = "released"
    EXPIRED = "expired"
    VOIDED = "voided"

    @property
    def pending(self) -> bool:
        """Whether the hold still reserves its chips (held or bound)."""
        return self in (HoldState.HELD, HoldState.BOUND)


@dataclass(frozen=True, slots=True, kw_only=True)
class Hold:
    hold_id: str
    player_id: str
    amount: int
    lobby_id: str
    ticket_id: str
    # The requested time to live, kept so that a retry can be told from a different request.
    ttl_seconds: float
    state: HoldState
    created_at: float
    expire_at: float
    table_id: str = ""
    game_no: int = 0
    closed_at: float | None = None
    reason: str = ""
    # The terms of the game the stake was placed for, the only ones it binds under; None for a
    # hold placed before the ledger kept them.
    rule: PayoutRule | None = None

    @property
    def account_id(self) -> str:
        return wallet_id(self.player_id)

    def same_request(self, other: Hold) -> bool:
        """Whether ``other`` asks for what placed this hold (AIP-155 retry vs. reuse)."""
        return (
            self.player_id,
            self.amount,
            self.lobby_id,
            self.ticket_id,
            round(self.ttl_seconds, 6),
            self.rule,
        ) == (
            other.player_id,
            other.amount,
            other.lobby_id,
            other.ticket_id,
            round(other.ttl_seconds, 6),
            other.rule,
        )


class TransferKind(enum.Enum):
    GRANT = "grant"
    STAKE = "stake"
    PAYOUT = "payout"
    RAKE = "rake"
    FORFEIT = "forfeit"


@dataclass(frozen=True, slots=True, kw_only=True)
class Transfer:
    transfer_id: str
    kind: TransferKind
    debit_account_id: str
    credit_account_id: str
    amount: int
    created_at: float
    table_id: str = ""
    game_no: int = 0
    hold_id: str = ""
    reason: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class GameResult:
    """A GameFinished: the authoritative ranking the ledger pays on (F-97, P-30)."""

    event_id: str
    key: GameKey
    stake: int
    standings: tuple[Standing, ...]
    teams: bool = False
    # The payout table the result names. The ledger pays by the terms the holds were bound
    # under; this is read only for an escrow bound before terms were recorded (an upgrade).
    published_rule: PayoutRule | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class GameAbandonment:
    """A GameAbandoned: the game cannot be completed and is voided (P-30)."""

    event_id: str
    key: GameKey
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Settlement:
    """How a game was closed, exactly once per key: settled (paid) or voided."""

    key: GameKey
    state: SettlementState
    pot: int
    rake: int
    forfeited: int
    payouts: tuple[SeatPayout, ...]
    hold_ids: tuple[str, ...]
    event_id: str
    reason: str
    closed_at: float
    rule: PayoutRule
    transfers: tuple[Transfer, ...] = ()
