"""The ledger's SQL, shared by the PostgreSQL and SQLite stores.

Both stores run the same statements (written with ``%s`` placeholders; SQLite's ``?`` is
substituted) through a small :class:`Executor`, so one implementation of every query and of
the invariant check serves both databases. What differs lives in the stores: connections,
transactions, row locks (``FOR UPDATE`` on PostgreSQL; SQLite has one writer at a time), and
which driver errors mean "run the transaction again".
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from importlib import resources
from typing import Any, Protocol, TypeVar

from masa_rules.table_config import PayoutRule

from masa_ledger.app.ports import (
    AccountChange,
    Change,
    CheckFacts,
    HoldFilter,
    InboxEntry,
    OutboxMessage,
    OutboxRow,
    TransferFilter,
    Tx,
)
from masa_ledger.domain.errors import Conflict, Unavailable
from masa_ledger.domain.model import (
    Account,
    AccountKind,
    GameKey,
    Hold,
    HoldState,
    SeatPayout,
    Settlement,
    SettlementState,
    Transfer,
    TransferKind,
    escrow_id,
)

__all__ = ["Executor", "SqlStore", "SqlTx", "migrations"]

T = TypeVar("T")
Row = tuple[Any, ...]

_log = logging.getLogger(__name__)

# Enough for a burst of transactions on the same accounts to get through one by one.
MAX_ATTEMPTS = 30

ACCOUNT_COLUMNS = (
    "account_id, kind, player_id, table_id, game_no, stake, balance, held, pending_stakes, "
    "closed, created_us, rule"
)
HOLD_COLUMNS = (
    "hold_id, player_id, amount, lobby_id, ticket_id, ttl_us, state, created_us, expire_us, "
    "table_id, game_no, closed_us, reason, rule"
)
TRANSFER_COLUMNS = (
    "transfer_id, kind, debit_account_id, credit_account_id, amount, created_us, table_id, "
    "game_no, hold_id, reason"
)
SETTLEMENT_COLUMNS = (
    "table_id, game_no, state, pot, rake, forfeited, payouts, hold_ids, rule, event_id, reason, "
    "closed_us"
)


class Executor(Protocol):
    """Runs statements inside the current transaction of one connection."""

    async def fetch(self, sql: str, params: Sequence[object] = ()) -> list[Row]: ...

    async def execute(self, sql: str, params: Sequence[object] = ()) -> None: ...

    async def execute_many(self, sql: str, rows: Sequence[Sequence[object]]) -> None: ...


def migrations(dialect: str) -> list[tuple[int, str, str]]:
    """The migrations of a dialect as (version, name, sql), in version order."""
    folder = resources.files("masa_ledger.adapters.migrations").joinpath(dialect)
    found: list[tuple[int, str, str]] = []
    for entry in folder.iterdir():
        if not entry.name.endswith(".sql"):
            continue
        version, _, name = entry.name.removesuffix(".sql").partition("_")
        found.append((int(version), name, entry.read_text(encoding="utf-8")))
    return sorted(found)


def _us(seconds: float) -> int:
    return round(seconds * 1_000_000)


def _seconds(us: int | None) -> float | None:
    return None if us is None else us / 1_000_000


def _marks(count: int) -> str:
    return ", ".join(["%s"] * count)


def account_from_row(row: Row) -> Account:
    return Account(
        account_id=row[0],
        kind=AccountKind(row[1]),
        player_id=row[2],
        table_id=row[3],
        game_no=int(row[4]),
        stake=int(row[5]),
        balance=int(row[6]),
        held=int(row[7]),
        pending_stakes=int(row[8]),
        closed=SettlementState(row[9]) if row[9] else None,
        created_at=_seconds(row[10]),
        rule=rule_from_json(row[11]) if row[11] else None,
    )


def rule_to_json(rule: PayoutRule) -> str:
    return json.dumps(
        {"rake_basis_points": rule.rake_basis_points, "place_shares": list(rule.place_shares)}
    )


def rule_from_json(text: str) -> PayoutRule:
    rule = json.loads(text)
    return PayoutRule(int(rule["rake_basis_points"]), tuple(int(s) for s in rule["place_shares"]))


def hold_from_row(row: Row) -> Hold:
    return Hold(
        hold_id=row[0],
        player_id=row[1],
        amount=int(row[2]),
        lobby_id=row[3],
        ticket_id=row[4],
        ttl_seconds=int(row[5]) / 1_000_000,
        state=HoldState(row[6]),
        created_at=int(row[7]) / 1_000_000,
        expire_at=int(row[8]) / 1_000_000,
        table_id=row[9],
        game_no=int(row[10]),
        closed_at=_seconds(row[11]),
        reason=row[12],
        rule=rule_from_json(row[13]) if row[13] else None,
    )


def transfer_from_row(row: Row) -> Transfer:
    return Transfer(
        transfer_id=row[0],
        kind=TransferKind(row[1]),
        debit_account_id=row[2],
        credit_account_id=row[3],
        amount=int(row[4]),
        created_at=int(row[5]) / 1_000_000,
        table_id=row[6],
        game_no=int(row[7]),
        hold_id=row[8] or "",
        reason=row[9],
    )


def settlement_from_row(row: Row, transfers: Sequence[Transfer] = ()) -> Settlement:
    return Settlement(
        key=GameKey(table_id=row[0], game_no=int(row[1])),
        state=SettlementState(row[2]),
        pot=int(row[3]),
        rake=int(row[4]),
        forfeited=int(row[5]),
        payouts=tuple(
            SeatPayout(seat=seat, player_id=player_id, place=place, amount=amount)
            for seat, player_id, place, amount in json.loads(row[6])
        ),
        hold_ids=tuple(json.loads(row[7])),
        event_id=row[9],
        reason=row[10],
        closed_at=int(row[11]) / 1_000_000,
        rule=rule_from_json(row[8]),
        transfers=tuple(transfers),
    )


async def read_settlement(ex: Executor, key: GameKey) -> Settlement | None:
    """A game's settlement with its transfers, in the order they were written."""
    rows = await ex.fetch(
        f"SELECT {SETTLEMENT_COLUMNS} FROM settlements WHERE table_id = %s AND game_no = %s",
        (key.table_id, key.game_no),
    )
    if not rows:
        return None
    transfers = await ex.fetch(
        f"SELECT {TRANSFER_COLUMNS} FROM transfers WHERE table_id = %s AND game_no = %s "
        "ORDER BY seq",
        (key.table_id, key.game_no),
    )
    return settlement_from_row(rows[0], [transfer_from_row(t) for t in transfers])


class SqlTx(Tx):
    """:class:`~masa_ledger.app.ports.Tx` over an executor; ``for_update`` is the row-lock
    clause of the dialect (empty where the whole database has one writer)."""

    def __init__(self, executor: Executor, *, for_update: str) -> None:
        self._ex = executor
        self._for_update = for_update

    async def lock_accounts(
        self, account_ids: Collection[str], *, create: Sequence[Account] = ()
    ) -> dict[str, Account]:
        if create:
            await self._ex.execute_many(
                f"INSERT INTO accounts ({ACCOUNT_COLUMNS}) VALUES ({_marks(12)}) "
                "ON CONFLICT (account_id) DO NOTHING",
                new_account_rows(create),
            )
        ids = sorted(set(account_ids))
        if not ids:
            return {}
        rows = await self._ex.fetch(
            f"SELECT {ACCOUNT_COLUMNS} FROM accounts WHERE account_id IN ({_marks(len(ids))}) "
            f"ORDER BY account_id{self._for_update}",
            ids,
        )
        return {row[0]: account_from_row(row) for row in rows}

    async def lock_games(
        self, keys: Collection[GameKey], *, also: Collection[str] = ()
    ) -> dict[str, Account]:
        # Two statements, not one lock over a join: at READ COMMITTED, PostgreSQL re-checks a
        # row another transaction changed while this one waited for it against that join's old
        # rows, and silently drops it (a repeat of a result, waiting behind its settlement,
        # would find no escrow and refuse a paid game). The escrows (and ``also``) are locked
        # by id first; while they are held no bound hold of these games can change, so their
        # wallets, read next, are the right ones. Escrows sort before the house and the
        # wallets, so the global account-id order still holds.
        games = sorted({(key.table_id, key.game_no) for key in keys})
        named = sorted({escrow_id(*game) for game in games} | set(also))
        locked = await self.lock_accounts(named)
        if not games:
            return locked
        pairs = ", ".join(["(%s, %s)"] * len(games))
        rows = await self._ex.fetch(
            "SELECT DISTINCT account_id FROM holds WHERE state = 'bound' "
            f"AND (table_id, game_no) IN ({pairs})",
            [value for game in games for value in game],
        )
        wallets = sorted({str(row[0]) for row in rows} - set(named))
        locked.update(await self.lock_accounts(wallets))
        return locked

    async def holds(self, hold_ids: Collection[str], *, lock: bool = False) -> dict[str, Hold]:
        ids = sorted(set(hold_ids))
        if not ids:
            return {}
        rows = await self._ex.fetch(
            f"SELECT {HOLD_COLUMNS} FROM holds WHERE hold_id IN ({_marks(len(ids))}) "
            f"ORDER BY hold_id{self._for_update if lock else ''}",
            ids,
        )
        return {row[0]: hold_from_row(row) for row in rows}

    async def holds_of_games(self, keys: Collection[GameKey]) -> dict[GameKey, list[Hold]]:
        found: dict[GameKey, list[Hold]] = {key: [] for key in keys}
        if not found:
            return found
        pairs = ", ".join(["(%s, %s)"] * len(found))
        rows = await self._ex.fetch(
            f"SELECT {HOLD_COLUMNS} FROM holds WHERE (table_id, game_no) IN ({pairs}) "
            "ORDER BY hold_id",
            [value for key in found for value in (key.table_id, key.game_no)],
        )
        for row in rows:
            hold = hold_from_row(row)
            found[GameKey(table_id=hold.table_id, game_no=hold.game_no)].append(hold)
        return found

    async def transfer(self, transfer_id: str) -> Transfer | None:
        rows = await self._ex.fetch(
            f"SELECT {TRANSFER_COLUMNS} FROM transfers WHERE transfer_id = %s", (transfer_id,)
        )
        return transfer_from_row(rows[0]) if rows else None

    async def settlement(self, key: GameKey) -> Settlement | None:
        return await read_settlement(self._ex, key)

    async def apply(self, change: Change) -> None:
        raise NotImplementedError


def new_account_rows(accounts: Sequence[Account]) -> list[tuple[object, ...]]:
    """Rows of ``INSERT INTO accounts ({ACCOUNT_COLUMNS})``, by account id."""
    return [
        (
            a.account_id,
            a.kind.value,
            a.player_id,
            a.table_id,
            a.game_no,
            a.stake,
            a.balance,
            a.held,
            a.pending_stakes,
            "" if a.closed is None else a.closed.value,
            _us(a.created_at or 0.0),
            "" if a.rule is None else rule_to_json(a.rule),
        )
        for a in sorted(accounts, key=lambda a: a.account_id)
    ]


def new_hold_rows(holds: Sequence[Hold]) -> list[tuple[object, ...]]:
    """Rows of ``INSERT INTO holds ({NEW_HOLD_COLUMNS})``."""
    return [
        (
            h.account_id,
            h.hold_id,
            h.player_id,
            h.amount,
            h.lobby_id,
            h.ticket_id,
            _us(h.ttl_seconds),
            h.state.value,
            _us(h.created_at),
            _us(h.expire_at),
            h.table_id,
            h.game_no,
            None if h.closed_at is None else _us(h.closed_at),
            h.reason,
            "" if h.rule is None else rule_to_json(h.rule),
        )
        for h in holds
    ]


NEW_HOLD_COLUMNS = f"account_id, {HOLD_COLUMNS}"


def hold_update_rows(holds: Sequence[Hold]) -> list[tuple[object, ...]]:
    """Rows of (hold_id, state, table_id, game_no, closed_us, reason)."""
    return [
        (
            h.hold_id,
            h.state.value,
            h.table_id,
            h.game_no,
            None if h.closed_at is None else _us(h.closed_at),
            h.reason,
        )
        for h in holds
    ]


def transfer_rows(transfers: Sequence[Transfer]) -> list[tuple[object, ...]]:
    """Rows of ``INSERT INTO transfers ({TRANSFER_COLUMNS})``."""
    return [
        (
            t.transfer_id,
            t.kind.value,
            t.debit_account_id,
            t.credit_account_id,
            t.amount,
            _us(t.created_at),
            t.table_id,
            t.game_no,
            t.hold_id or None,
            t.reason,
        )
        for t in transfers
    ]


def account_change_rows(changes: Mapping[str, AccountChange]) -> list[tuple[object, ...]]:
    """Rows of (account_id, balance, held, pending_stakes, stake or None, closed or None, rule
    or None), by account id."""
    return [
        (
            account_id,
            c.balance,
            c.held,
            c.pending_stakes,
            c.stake,
            None if c.close is None else c.close.value,
            None if c.rule is None else rule_to_json(c.rule),
        )
        for account_id, c in sorted(changes.items())
        if c != AccountChange()
    ]


def settlement_row(s: Settlement) -> tuple[object, ...]:
    """The row of ``INSERT INTO settlements ({SETTLEMENT_COLUMNS})``."""
    return (
        s.key.table_id,
        s.key.game_no,
        s.state.value,
        s.pot,
        s.rake,
        s.forfeited,
        json.dumps([[p.seat, p.player_id, p.place, p.amount] for p in s.payouts]),
        json.dumps(list(s.hold_ids)),
        rule_to_json(s.rule),
        s.event_id,
        s.reason,
        _us(s.closed_at),
    )


def inbox_row(entry: InboxEntry, at: float) -> tuple[object, ...]:
    """The row of (event_id, table_id, game_no, outcome, detail, received_us)."""
    return (
        entry.event_id,
        entry.key.table_id,
        entry.key.game_no,
        entry.outcome.value,
        entry.detail[:1000],
        _us(at),
    )


def outbox_rows(messages: Sequence[OutboxMessage], at: float) -> list[tuple[object, ...]]:
    """Rows of (event_id, subject, payload, created_us)."""
    return [(m.event_id, m.subject, m.payload, _us(at)) for m in messages]


class SqlStore:
    """The store's reads, the retry of conflicting transactions and the invariant check; the
    subclasses provide connections and transactions."""

    for_update = ""
    tx_class: type[SqlTx] = SqlTx

    async def _in_transaction(self, work: Callable[[Executor], Awaitable[T]], *, write: bool) -> T:
        """Run ``work`` in one transaction on one connection; map driver errors to
        :class:`Conflict` (run it again) and :class:`Unavailable`."""
        raise NotImplementedError

    async def ping(self) -> None:
        """Raise :class:`Unavailable` when the database cannot be reached."""
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    async def transact(self, work: Callable[[Tx], Awaitable[T]]) -> T:
        for attempt in range(MAX_ATTEMPTS):
            try:
                return await self._in_transaction(
                    lambda ex: work(self.tx_class(ex, for_update=self.for_update)), write=True
                )
            except Conflict as conflict:
                # Full jitter, so that the transactions that collided do not collide again.
                delay = random.uniform(0, min(0.05, 0.001 * 2**attempt))
                _log.debug("transaction conflict, again in %.3f s: %s", delay, conflict)
                await asyncio.sleep(delay)
        raise Unavailable(f"a transaction still conflicted after {MAX_ATTEMPTS} attempts")

    async def _fetch(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        async def run(ex: Executor) -> list[Row]:
            return await ex.fetch(sql, params)

        return await self._in_transaction(run, write=False)

    async def account(self, account_id: str) -> Account | None:
        rows = await self._fetch(
            f"SELECT {ACCOUNT_COLUMNS} FROM accounts WHERE account_id = %s", (account_id,)
        )
        return account_from_row(rows[0]) if rows else None

    async def hold(self, hold_id: str) -> Hold | None:
        rows = await self._fetch(f"SELECT {HOLD_COLUMNS} FROM holds WHERE hold_id = %s", (hold_id,))
        return hold_from_row(rows[0]) if rows else None

    async def settlement(self, key: GameKey) -> Settlement | None:
        return await self._in_transaction(lambda ex: read_settlement(ex, key), write=False)

    async def list_transfers(
        self, where: TransferFilter, *, before_seq: int | None, limit: int
    ) -> list[tuple[int, Transfer]]:
        conditions = ["(debit_account_id = %s OR credit_account_id = %s)"]
        params: list[object] = [where.account_id, where.account_id]
        if where.kind is not None:
            conditions.append("kind = %s")
            params.append(where.kind.value)
        if where.table_id:
            conditions.append("table_id = %s")
            params.append(where.table_id)
        if where.game_no:
            conditions.append("game_no = %s")
            params.append(where.game_no)
        if before_seq is not None:
            conditions.append("seq < %s")
            params.append(before_seq)
        rows = await self._fetch(
            f"SELECT seq, {TRANSFER_COLUMNS} FROM transfers WHERE {' AND '.join(conditions)} "
            "ORDER BY seq DESC LIMIT %s",
            [*params, limit],
        )
        return [(int(row[0]), transfer_from_row(row[1:])) for row in rows]

    async def list_holds(
        self, where: HoldFilter, *, before_seq: int | None, limit: int
    ) -> list[tuple[int, Hold]]:
        conditions = ["player_id = %s"]
        params: list[object] = [where.player_id]
        if where.state is not None:
            conditions.append("state = %s")
            params.append(where.state.value)
        if where.table_id:
            conditions.append("table_id = %s")
            params.append(where.table_id)
        if where.game_no:
            conditions.append("game_no = %s")
            params.append(where.game_no)
        if before_seq is not None:
            conditions.append("seq < %s")
            params.append(before_seq)
        rows = await self._fetch(
            f"SELECT seq, {HOLD_COLUMNS} FROM holds WHERE {' AND '.join(conditions)} "
            "ORDER BY seq DESC LIMIT %s",
            [*params, limit],
        )
        return [(int(row[0]), hold_from_row(row[1:])) for row in rows]

    async def due_holds(self, now: float, limit: int) -> list[Hold]:
        rows = await self._fetch(
            f"SELECT {HOLD_COLUMNS} FROM holds WHERE state = 'held' AND expire_us <= %s "
            "ORDER BY expire_us LIMIT %s",
            (_us(now), limit),
        )
        return [hold_from_row(row) for row in rows]

    async def outbox_batch(self, limit: int) -> list[OutboxRow]:
        rows = await self._fetch(
            "SELECT seq, event_id, subject, payload, created_us FROM outbox "
            "WHERE published_us IS NULL ORDER BY seq LIMIT %s",
            (limit,),
        )
        return [
            OutboxRow(
                seq=int(r[0]),
                event_id=r[1],
                subject=r[2],
                payload=bytes(r[3]),
                created_at=int(r[4]) / 1_000_000,
            )
            for r in rows
        ]

    async def mark_published(self, seqs: Sequence[int], at: float) -> None:
        if not seqs:
            return

        async def run(ex: Executor) -> None:
            await ex.execute(
                f"UPDATE outbox SET published_us = %s WHERE seq IN ({_marks(len(seqs))})",
                [_us(at), *seqs],
            )

        await self._in_transaction(run, write=True)

    async def prune(self, *, published_before: float, received_before: float) -> int:
        async def run(ex: Executor) -> int:
            outbox = await ex.fetch(
                "DELETE FROM outbox WHERE published_us IS NOT NULL AND published_us < %s "
                "RETURNING seq",
                (_us(published_before),),
            )
            inbox = await ex.fetch(
                "DELETE FROM inbox WHERE received_us < %s RETURNING event_id",
                (_us(received_before),),
            )
            return len(outbox) + len(inbox)

        return await self._in_transaction(run, write=True)

    async def check(self) -> CheckFacts:
        async def run(ex: Executor) -> CheckFacts:
            counts: dict[str, int] = {}
            examples: dict[str, list[str]] = {}
            for name, sql in CHECKS.items():
                rows = await ex.fetch(sql)
                counts[name] = len(rows)
                examples[name] = [" ".join(str(v) for v in row) for row in rows[:20]]
            totals: dict[str, int] = {}
            for name, sql in TOTALS.items():
                rows = await ex.fetch(sql)
                totals[name] = int(rows[0][0] or 0) if rows else 0
            return CheckFacts(counts=counts, examples=examples, totals=totals)

        return await self._in_transaction(run, write=False)


# Each query lists the rows that break one invariant; an empty answer means it holds.
CHECKS: dict[str, str] = {
    # P-31: chips are only moved, never made or lost; the issuer is negative by what it issued.
    "balances_sum_to_zero": (
        "SELECT 'sum of balances', SUM(balance) FROM accounts HAVING SUM(balance) <> 0"
    ),
    # Every balance is what its transfers say it is.
    "balances_match_transfers": (
        "SELECT a.account_id, a.balance, COALESCE(c.total, 0) - COALESCE(d.total, 0) "
        "FROM accounts a "
        "LEFT JOIN (SELECT credit_account_id AS id, SUM(amount) AS total FROM transfers "
        "GROUP BY credit_account_id) c ON c.id = a.account_id "
        "LEFT JOIN (SELECT debit_account_id AS id, SUM(amount) AS total FROM transfers "
        "GROUP BY debit_account_id) d ON d.id = a.account_id "
        "WHERE a.balance <> COALESCE(c.total, 0) - COALESCE(d.total, 0)"
    ),
    # Only the issuer may be negative, and no wallet reserves more than it has.
    "no_negative_balances": (
        "SELECT account_id, balance, held FROM accounts "
        "WHERE kind <> 'issuer' AND (balance < 0 OR held < 0 OR held > balance)"
    ),
    # A wallet's reserved chips are its pending holds.
    "held_matches_pending_holds": (
        "SELECT a.account_id, a.held, COALESCE(h.total, 0) FROM accounts a "
        "LEFT JOIN (SELECT account_id, SUM(amount) AS total FROM holds "
        "WHERE state IN ('held', 'bound') GROUP BY account_id) h ON h.account_id = a.account_id "
        "WHERE a.held <> COALESCE(h.total, 0)"
    ),
    # Every escrow equals the holds bound to it, and pays out all it receives.
    "escrow_matches_bound_holds": (
        "SELECT a.account_id, a.balance, a.pending_stakes, COALESCE(h.total, 0) FROM accounts a "
        "LEFT JOIN (SELECT table_id, game_no, SUM(amount) AS total FROM holds "
        "WHERE state = 'bound' GROUP BY table_id, game_no) h "
        "ON h.table_id = a.table_id AND h.game_no = a.game_no "
        "WHERE a.kind = 'escrow' AND (a.balance <> 0 OR a.pending_stakes <> COALESCE(h.total, 0))"
    ),
    # An escrow is closed exactly when its game has a settlement, in the same state.
    "escrows_closed_with_their_game": (
        "SELECT a.account_id, a.closed, s.state FROM accounts a "
        "LEFT JOIN settlements s ON s.table_id = a.table_id AND s.game_no = a.game_no "
        "WHERE a.kind = 'escrow' AND a.closed <> COALESCE(s.state, '')"
    ),
    # No hold is bound to, posted into or voided with a game it does not belong to.
    "holds_follow_their_game": (
        "SELECT h.hold_id, h.state, s.state FROM holds h "
        "LEFT JOIN settlements s ON s.table_id = h.table_id AND s.game_no = h.game_no "
        "WHERE (h.state = 'bound' AND s.state IS NOT NULL) "
        "OR (h.state = 'posted' AND (s.state IS NULL OR s.state <> 'settled')) "
        "OR (h.state = 'voided' AND (s.state IS NULL OR s.state <> 'voided'))"
    ),
    # No hold is both posted and voided: a posted hold has its one stake transfer, and no other
    # hold has any.
    "holds_posted_or_voided_once": (
        "SELECT h.hold_id, h.state FROM holds h LEFT JOIN transfers t ON t.hold_id = h.hold_id "
        "WHERE (h.state = 'posted') <> (t.transfer_id IS NOT NULL)"
    ),
    # No game is settled twice: a settled game's stakes and payouts each add up to its pot
    # once, and a voided or open game moved no chips.
    "games_settled_once": (
        "SELECT t.table_id, t.game_no, COALESCE(s.state, 'open'), COALESCE(s.pot, 0), "
        "t.staked, t.paid FROM (SELECT table_id, game_no, "
        "SUM(CASE WHEN kind = 'stake' THEN amount ELSE 0 END) AS staked, "
        "SUM(CASE WHEN kind <> 'stake' THEN amount ELSE 0 END) AS paid "
        "FROM transfers WHERE table_id <> '' GROUP BY table_id, game_no) t "
        "LEFT JOIN settlements s ON s.table_id = t.table_id AND s.game_no = t.game_no "
        "WHERE s.state IS NULL OR s.state <> 'settled' OR t.staked <> s.pot OR t.paid <> s.pot"
    ),
    # Issue 19: every game is bound under the terms its holds were placed for (a hold placed
    # before the ledger kept terms has none to compare).
    "holds_bound_under_their_terms": (
        "SELECT h.hold_id, h.rule, a.rule FROM holds h JOIN accounts a "
        "ON a.kind = 'escrow' AND a.table_id = h.table_id AND a.game_no = h.game_no "
        "WHERE h.rule <> '' AND h.state IN ('bound', 'posted', 'voided') AND a.rule <> h.rule"
    ),
    # A settled game's recorded pot is what was staked into it (also when nothing was).
    "settlements_match_stakes": (
        "SELECT s.table_id, s.game_no, s.state, s.pot, COALESCE(h.total, 0) FROM settlements s "
        "LEFT JOIN (SELECT table_id, game_no, SUM(amount) AS total FROM holds "
        "WHERE state IN ('posted', 'voided') GROUP BY table_id, game_no) h "
        "ON h.table_id = s.table_id AND h.game_no = s.game_no "
        "WHERE s.pot <> COALESCE(h.total, 0)"
    ),
}

TOTALS: dict[str, str] = {
    "accounts": "SELECT COUNT(*) FROM accounts",
    "transfers": "SELECT COUNT(*) FROM transfers",
    "holds": "SELECT COUNT(*) FROM holds",
    "settlements": "SELECT COUNT(*) FROM settlements",
    "chips_issued": "SELECT -balance FROM accounts WHERE account_id = 'issuer'",
    "chips_in_wallets": "SELECT SUM(balance) FROM accounts WHERE kind = 'player'",
    "chips_held": "SELECT SUM(held) FROM accounts WHERE kind = 'player'",
    "chips_in_escrow": "SELECT SUM(pending_stakes) FROM accounts WHERE kind = 'escrow'",
    "chips_of_the_house": "SELECT balance FROM accounts WHERE account_id = 'house'",
    "pending_holds": "SELECT COUNT(*) FROM holds WHERE state IN ('held', 'bound')",
    "unpublished_events": "SELECT COUNT(*) FROM outbox WHERE published_us IS NULL",
}
