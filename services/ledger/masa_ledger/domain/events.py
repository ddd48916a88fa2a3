"""What the ledger tells the bus, written to the outbox in the same transaction as the change.

Event ids derive from what they report, so the same change always yields the same id: the
outbox keeps one row per id, and JetStream drops a republished one (Nats-Msg-Id).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from masa_rules.table_config import PayoutRule

from masa_ledger.domain.model import GameKey, Hold, Settlement, Transfer

__all__ = [
    "ChipsGranted",
    "GameSettled",
    "GameVoided",
    "HoldPlaced",
    "HoldVoidCause",
    "HoldVoided",
    "HoldsBound",
    "LedgerEvent",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class HoldPlaced:
    hold: Hold

    @property
    def event_id(self) -> str:
        return f"hold_placed:{self.hold.hold_id}"


class HoldVoidCause(enum.Enum):
    RELEASED = "released"
    EXPIRED = "expired"


@dataclass(frozen=True, slots=True, kw_only=True)
class HoldVoided:
    hold: Hold
    cause: HoldVoidCause

    @property
    def event_id(self) -> str:
        return f"hold_voided:{self.hold.hold_id}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ChipsGranted:
    transfer: Transfer
    player_id: str

    @property
    def event_id(self) -> str:
        return f"chips_granted:{self.transfer.transfer_id}"


@dataclass(frozen=True, slots=True, kw_only=True)
class HoldsBound:
    key: GameKey
    stake: int
    hold_ids: tuple[str, ...]
    at: float
    rule: PayoutRule

    @property
    def event_id(self) -> str:
        return f"holds_bound:{self.key}"


@dataclass(frozen=True, slots=True, kw_only=True)
class GameSettled:
    settlement: Settlement

    @property
    def event_id(self) -> str:
        return f"game_settled:{self.settlement.key}"


@dataclass(frozen=True, slots=True, kw_only=True)
class GameVoided:
    settlement: Settlement

    @property
    def event_id(self) -> str:
        return f"game_voided:{self.settlement.key}"


LedgerEvent = HoldPlaced | HoldVoided | ChipsGranted | HoldsBound | GameSettled | GameVoided
