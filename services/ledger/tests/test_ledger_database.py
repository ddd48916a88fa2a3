"""What the database itself refuses, whatever the code does (P-30, P-31).

These statements bypass the ledger's code on purpose: the CHECK constraints, unique indexes
and triggers must stop them on SQLite and on PostgreSQL alike.
"""

from __future__ import annotations

import sqlite3

import psycopg
import pytest
from ledger_support import Clock, execute, hold_for, make_ledger, result
from masa_ledger.adapters.sql import SqlStore
from masa_ledger.app.holds import StakeRequest
from masa_ledger.domain.errors import Conflict
from masa_ledger.domain.model import GameKey
from masa_rules.table_config import PayoutRule

# What each driver raises for a refused statement (PostgreSQL's unique violations surface as
# Conflict, which the store retries: here there is nothing to retry).
REFUSED = (sqlite3.IntegrityError, psycopg.errors.IntegrityError, Conflict)


async def _settled(store: SqlStore) -> None:
    ledger, _ = make_ledger(store, Clock())
    for player in "ab":
        await ledger.grant(f"w-{player}", player, 1000, "")
    await hold_for(ledger, "ab", 100, "t1")
    await ledger.bind_holds("t1", 1, 100, ["t1-a", "t1-b"])
    # A hold still held, for a game with a 5% rake: its terms are as fixed as the rest.
    await ledger.hold_stakes(
        [StakeRequest(hold_id="held", player_id="a", amount=100, rule=PayoutRule(500))]
    )
    await ledger.settle(
        result(GameKey(table_id="t1", game_no=1), 100, [(0, "a", 1, "t1-a"), (1, "b", 2, "t1-b")]),
        from_event=False,
    )


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE accounts SET balance = -1 WHERE account_id = 'player:b'",
        "UPDATE accounts SET balance = -1 WHERE account_id = 'house'",
        "UPDATE accounts SET held = balance + 1 WHERE account_id = 'player:a'",
        "UPDATE accounts SET pending_stakes = -1 WHERE account_id = 'escrow:t1:1'",
        "UPDATE accounts SET held = 5 WHERE account_id = 'issuer'",
    ],
    ids=["wallet", "house", "held", "escrow", "issuer-held"],
)
async def test_p31_only_the_issuer_may_go_negative(store: SqlStore, sql: str) -> None:
    await _settled(store)
    with pytest.raises(REFUSED):
        await execute(store, sql)


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE transfers SET amount = amount + 1 WHERE transfer_id = 'payout:t1:1:0'",
        "DELETE FROM transfers WHERE transfer_id = 'payout:t1:1:0'",
        "UPDATE settlements SET state = 'voided' WHERE table_id = 't1'",
        "DELETE FROM settlements WHERE table_id = 't1'",
        "DELETE FROM holds WHERE hold_id = 't1-a'",
        "UPDATE holds SET state = 'voided' WHERE hold_id = 't1-a'",
        "UPDATE holds SET amount = 1 WHERE hold_id = 't1-a'",
        # Each a legal step of the hold's state, so that only the change of terms is refused.
        "UPDATE holds SET state = 'bound', table_id = 't9', game_no = 1, rule = '' "
        "WHERE hold_id = 'held'",
        "UPDATE holds SET state = 'released', closed_us = 1, "
        "rule = '{\"rake_basis_points\": 0, \"place_shares\": [10000]}' WHERE hold_id = 'held'",
    ],
    ids=[
        "edit-transfer",
        "delete-transfer",
        "resettle",
        "unsettle",
        "delete-hold",
        "posted-to-voided",
        "edit-hold",
        "other-terms",
        "new-terms",
    ],
)
async def test_p31_history_is_never_rewritten(store: SqlStore, sql: str) -> None:
    await _settled(store)
    with pytest.raises(REFUSED):
        await execute(store, sql)


async def test_p30_a_hold_is_posted_once_and_a_game_settled_once(store: SqlStore) -> None:
    await _settled(store)
    with pytest.raises(REFUSED):
        await execute(
            store,
            "INSERT INTO transfers (transfer_id, kind, debit_account_id, credit_account_id, "
            "amount, created_us, table_id, game_no, hold_id) VALUES "
            "('stake:again', 'stake', 'player:a', 'escrow:t1:1', 100, 0, 't1', 1, 't1-a')",
        )
    with pytest.raises(REFUSED):
        await execute(
            store,
            "INSERT INTO settlements (table_id, game_no, state, pot, rake, forfeited, payouts, "
            "hold_ids, rule, closed_us) VALUES ('t1', 1, 'voided', 0, 0, 0, '[]', '[]', '{}', 0)",
        )
    with pytest.raises(REFUSED):
        await execute(
            store,
            "INSERT INTO transfers (transfer_id, kind, debit_account_id, credit_account_id, "
            "amount, created_us) VALUES ('grant:zero', 'grant', 'issuer', 'player:a', 0, 0)",
        )
