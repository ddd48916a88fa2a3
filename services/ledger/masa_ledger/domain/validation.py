"""Every input is bounded and checked at the edge, before anything is read or written.

A refused input raises :class:`~masa_ledger.domain.errors.BadInput` naming the field, and the
ledger stays as it was.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from masa_rules.errors import RuleViolation
from masa_rules.table_config import PayoutRule, check_payout

from masa_ledger.domain.errors import BadInput

__all__ = [
    "MAX_AMOUNT",
    "MAX_BALANCE",
    "MAX_GAME_NO",
    "MAX_HOLDS_PER_GAME",
    "check_amount",
    "check_game",
    "check_hold_ids",
    "check_id",
    "check_player_id",
    "check_rule",
    "check_table_id",
    "check_text",
]

# One grant or stake. Far below int64, so that no sum the ledger forms can overflow.
MAX_AMOUNT: Final = 10**12
# No account's balance may pass this in either direction (BALANCE_LIMIT); the database's CHECK
# allows 10**18, so the code refuses long before the database would.
MAX_BALANCE: Final = 10**15
MAX_GAME_NO: Final = 2**31 - 1
# A table has at most 6 seats today; 16 leaves room without letting one call lock thousands.
MAX_HOLDS_PER_GAME: Final = 16

# Table ids become NATS subject tokens and parts of account and transfer ids.
_TABLE_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
# Request, hold, lobby and ticket ids: visible ASCII, no spaces.
_ID = re.compile(r"[\x21-\x7e]{1,128}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_amount(field: str, amount: int) -> int:
    if amount <= 0:
        raise BadInput(f"{field} must be positive, not {amount}", metadata={"field": field})
    if amount > MAX_AMOUNT:
        raise BadInput(f"{field} must be at most {MAX_AMOUNT}", metadata={"field": field})
    return amount


def check_id(field: str, value: str, *, required: bool = True) -> str:
    if not value:
        if required:
            raise BadInput(f"{field} is required", metadata={"field": field})
        return value
    if _ID.fullmatch(value) is None:
        raise BadInput(
            f"{field} must be 1 to 128 visible ASCII characters", metadata={"field": field}
        )
    return value


def check_player_id(field: str, value: str) -> str:
    """A JWT subject: 1 to 128 characters, no control characters."""
    if not value:
        raise BadInput(f"{field} is required", metadata={"field": field})
    if len(value) > 128 or _CONTROL.search(value) is not None:
        raise BadInput(
            f"{field} must be 1 to 128 characters without control characters",
            metadata={"field": field},
        )
    return value


def check_table_id(field: str, value: str) -> str:
    if _TABLE_ID.fullmatch(value) is None:
        raise BadInput(
            f"{field} must be 1 to 64 letters, digits, '-' or '_'", metadata={"field": field}
        )
    return value


def check_game(table_id: str, game_no: int) -> None:
    check_table_id("table_id", table_id)
    if not 1 <= game_no <= MAX_GAME_NO:
        raise BadInput("game_no must be 1 or more", metadata={"field": "game_no"})


def check_text(field: str, value: str, *, limit: int = 256) -> str:
    if len(value) > limit or _CONTROL.search(value) is not None:
        raise BadInput(
            f"{field} must be at most {limit} characters without control characters",
            metadata={"field": field},
        )
    return value


def check_hold_ids(hold_ids: Sequence[str]) -> tuple[str, ...]:
    if not hold_ids:
        raise BadInput("hold_ids must name at least one hold", metadata={"field": "hold_ids"})
    if len(hold_ids) > MAX_HOLDS_PER_GAME:
        raise BadInput(
            f"a game has at most {MAX_HOLDS_PER_GAME} holds", metadata={"field": "hold_ids"}
        )
    for hold_id in hold_ids:
        check_id("hold_ids", hold_id)
    if len(set(hold_ids)) != len(hold_ids):
        raise BadInput("hold_ids names a hold twice", metadata={"field": "hold_ids"})
    return tuple(hold_ids)


def check_rule(rule: PayoutRule) -> PayoutRule:
    """P-30: the table model's payout rule check (``masa_rules.table_config.check_payout``: a
    rake of 0..100%, place shares that pay the whole prize, the winner first and never growing;
    none pays the winner all), with at most a game's holds as places."""
    try:
        check_payout(rule, places=MAX_HOLDS_PER_GAME)
    except RuleViolation as violation:
        raise BadInput(violation.message, metadata={"field": "payout"}) from None
    return rule
