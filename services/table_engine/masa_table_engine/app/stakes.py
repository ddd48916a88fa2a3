"""The stakes of a chip table (P-30): bound in the ledger before the table starts.

A table with a stake carries the ledger hold of each human seat's stake. Creating it binds
those holds to the table's game in the ledger (``LedgerService.BindHolds``), which checks each
amount against the stake and each hold's terms (the rake and payout table matchmaking held it
for) against the table's, before anything is written to the table log: a table whose stakes the
ledger refuses never starts, and one that starts has its pot in escrow. Binding is idempotent,
so a retried create binds again harmlessly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from masa_rules.table_config import PayoutRule

__all__ = ["StakeBinder", "StakesRefused", "StakesUnavailable", "TableExists"]


class StakesRefused(Exception):
    """The ledger refused the holds; ``reason`` is its ErrorInfo reason (STAKE_MISMATCH...)."""

    def __init__(self, message: str, reason: str, metadata: Mapping[str, str]) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason
        self.metadata = dict(metadata)


class StakesUnavailable(Exception):
    """The ledger could not be asked now (or this node has none); retry the create."""


class TableExists(Exception):
    """A table of that id exists, made by another CreateTable request."""

    def __init__(self, table_id: str) -> None:
        super().__init__(f"table {table_id} exists, made by another request")
        self.table_id = table_id


class StakeBinder(Protocol):
    async def bind(
        self,
        table_id: str,
        game_no: int,
        stake: int,
        hold_ids: Sequence[str],
        payout: PayoutRule,
    ) -> None:
        """Bind the holds to the game's escrow under the table's terms (its rake and payout
        table, which the game is paid by); raise :class:`StakesRefused` or
        :class:`StakesUnavailable`."""
        ...
