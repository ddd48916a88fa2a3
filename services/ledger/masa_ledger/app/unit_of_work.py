"""The one way the ledger writes: a unit of work, run in one store transaction.

Every write — a grant, a group of stakes, a batch of binds or of settlements gathered by group
commit, a release, the expiry, a void, a rejected result — is one :class:`UnitOfWork`, run by
:class:`Writer`:

1. The store opens a transaction and the writer makes a fresh unit over it, at the time of the
   clock. A conflict (a deadlock, a serialization failure, two transactions creating the same
   row) rolls the transaction back and :meth:`~.ports.Store.transact` runs it again from here,
   with a fresh unit: that is the one place a write is retried.
2. The work reads and locks through ``unit.tx`` (in the global lock order of :mod:`.ports`), then
   decides each of its requests with :meth:`UnitOfWork.decide`: the request's answer, or its
   refusal (a :class:`~masa_ledger.domain.errors.LedgerError`), which it raises before it
   writes anything to the unit.
3. What the requests decided — new and changed holds, transfers, account changes, settlements,
   inbox entries, and the events that report them — gathers in the unit and is applied at the
   end as one :class:`~.ports.Change`: the outbox rows are written in the same transaction as
   the change they report.
4. The transaction commits; when every request was refused it rolls back instead, so a refused
   write leaves the ledger exactly as it was.

A request changed the ledger exactly when it reported an event (every change is published).
So it is counted: ``ok``, or ``replayed`` when it changed nothing (a retry), ``refused``, or
``error`` for each request of a transaction that failed; and a commit that wrote events wakes
the outbox relay (``on_commit``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import ParamSpec, TypeAlias, TypeVar

from masa_ledger.app.ports import (
    AccountChange,
    Change,
    EncodeEvent,
    InboxEntry,
    LedgerMetrics,
    OutboxMessage,
    Store,
    Tx,
)
from masa_ledger.domain.errors import LedgerError
from masa_ledger.domain.events import LedgerEvent
from masa_ledger.domain.model import Account, AccountKind, GameKey, Hold, Settlement, Transfer

__all__ = ["Outcome", "UnitOfWork", "Writer"]

AnswerT = TypeVar("AnswerT")
RequestT = TypeVar("RequestT")
ValueT = TypeVar("ValueT")
P = ParamSpec("P")
# What a request of a unit gets: its answer, or its refusal.
Outcome: TypeAlias = AnswerT | LedgerError


class UnitOfWork:
    """One transaction of the ledger: its reads and locks (``tx``), and everything it writes,
    gathered from its requests — each hold once, the changes of an account summed."""

    def __init__(self, tx: Tx, *, at: float, encode: EncodeEvent) -> None:
        self.tx = tx
        # The time of the transaction: what it writes is stamped with it.
        self.at = at
        self._encode = encode
        # Accounts this unit may open, as they are before any change.
        self._unopened: dict[str, Account] = {}
        self._placed: dict[str, Hold] = {}
        self._holds: dict[str, Hold] = {}
        self._transfers: list[Transfer] = []
        self._accounts: dict[str, AccountChange] = {}
        self._settlements: list[Settlement] = []
        self._inbox: list[InboxEntry] = []
        self._outbox: list[OutboxMessage] = []
        # How each request decided so far went: ok, replayed or refused.
        self.outcomes: list[str] = []

    # --- requests ----------------------------------------------------------------------------

    async def decide(
        self, step: Callable[P, Awaitable[AnswerT]], *args: P.args, **kwargs: P.kwargs
    ) -> Outcome[AnswerT]:
        """Run one request's ``step``: its answer, or the refusal it raised (before writing
        anything), which is the request's alone; the others of the unit go on."""
        reported = len(self._outbox)
        try:
            answer = await step(*args, **kwargs)
        except LedgerError as refusal:
            self.outcomes.append("refused")
            return refusal
        self.outcomes.append("ok" if len(self._outbox) > reported else "replayed")
        return answer

    # --- what the unit writes ----------------------------------------------------------------

    def unopened_escrow(self, key: GameKey) -> Account:
        """A game's escrow that is not in the database: opened with the change if a request
        changes it (two units opening the same one collide on its key, and the second runs
        again and finds it)."""
        account = Account(
            account_id=key.escrow_id,
            kind=AccountKind.ESCROW,
            table_id=key.table_id,
            game_no=key.game_no,
            created_at=self.at,
        )
        return self._unopened.setdefault(account.account_id, account)

    def opens(self, account_id: str) -> bool:
        """Whether the account is not in the database (this unit would open it)."""
        return account_id in self._unopened

    def placed(self, hold_id: str) -> Hold | None:
        """A hold an earlier request of this unit placed."""
        return self._placed.get(hold_id)

    def place(self, hold: Hold) -> None:
        """Write a new hold."""
        self._placed[hold.hold_id] = hold

    def update(self, hold: Hold) -> None:
        """Write an existing hold's new state, game, close time and reason."""
        self._holds[hold.hold_id] = hold

    def adjust(self, account_id: str, change: AccountChange) -> None:
        """Add ``change`` to what the unit changes of the account."""
        self._accounts[account_id] = self._accounts.get(account_id, AccountChange()).plus(change)

    def post(self, transfers: Sequence[Transfer]) -> None:
        """Write the transfers, and move their chips from each debit to each credit account."""
        self._transfers.extend(transfers)
        for transfer in transfers:
            self.adjust(transfer.debit_account_id, AccountChange(balance=-transfer.amount))
            self.adjust(transfer.credit_account_id, AccountChange(balance=transfer.amount))

    def record(self, settlement: Settlement) -> None:
        """Write how a game was closed."""
        self._settlements.append(settlement)

    def receive(self, entry: InboxEntry) -> None:
        """Write what became of a consumed table result."""
        self._inbox.append(entry)

    def report(self, event: LedgerEvent) -> None:
        """Write the event that reports a change to the outbox, with the change."""
        self._outbox.append(self._encode(event))

    def change(self) -> Change:
        """Everything the unit writes, as one change."""
        opened = [
            _opened(account, self._accounts[account_id])
            for account_id, account in self._unopened.items()
            if account_id in self._accounts
        ]
        return Change(
            at=self.at,
            new_accounts=opened,
            new_holds=list(self._placed.values()),
            holds=list(self._holds.values()),
            transfers=self._transfers,
            accounts={k: v for k, v in self._accounts.items() if k not in self._unopened},
            settlements=self._settlements,
            inbox=self._inbox,
            outbox=self._outbox,
        )

    @property
    def reported(self) -> bool:
        """Whether the unit wrote events to the outbox."""
        return bool(self._outbox)


class Writer:
    """Runs units of work over the store, counts their requests and wakes the outbox relay;
    the only caller of :meth:`~.ports.Store.transact`."""

    def __init__(
        self,
        store: Store,
        encode: EncodeEvent,
        metrics: LedgerMetrics,
        *,
        clock: Callable[[], float],
        on_commit: Callable[[], None],
    ) -> None:
        self._store = store
        self._encode = encode
        self._metrics = metrics
        self._clock = clock
        self._on_commit = on_commit

    async def run(
        self, kind: str, work: Callable[[UnitOfWork], Awaitable[Sequence[Outcome[AnswerT]]]]
    ) -> Sequence[Outcome[AnswerT]]:
        """Run ``work`` (which decides each of its requests with :meth:`UnitOfWork.decide`
        and returns their outcomes) as one unit of work, and count each request as ``kind``."""

        async def attempt(tx: Tx) -> tuple[Sequence[Outcome[AnswerT]], UnitOfWork]:
            unit = UnitOfWork(tx, at=self._clock(), encode=self._encode)
            answers = await work(unit)
            if all(isinstance(answer, LedgerError) for answer in answers):
                raise _Refused([answer for answer in answers if isinstance(answer, LedgerError)])
            change = unit.change()
            if not change.empty:
                await tx.apply(change)
            return answers, unit

        try:
            answers, unit = await self._store.transact(attempt)
        except _Refused as refused:
            for _ in refused.refusals:
                self._metrics.operation(kind, "refused")
            return refused.refusals
        except Exception:
            self._metrics.operation(kind, "error")
            raise
        for outcome in unit.outcomes:
            self._metrics.operation(kind, outcome)
        if unit.reported:
            self._on_commit()
        return answers

    def batches(
        self,
        kind: str,
        work: Callable[[UnitOfWork, Sequence[RequestT]], Awaitable[Sequence[Outcome[AnswerT]]]],
    ) -> Callable[[Sequence[RequestT]], Awaitable[Sequence[Outcome[AnswerT]]]]:
        """What a group commit runs: each batch of requests as one unit of ``work``."""

        async def run_batch(batch: Sequence[RequestT]) -> Sequence[Outcome[AnswerT]]:
            return await self.run(kind, lambda unit: work(unit, batch))

        return run_batch

    async def one(self, kind: str, step: Callable[[UnitOfWork], Awaitable[ValueT]]) -> ValueT:
        """Run one request's ``step`` as a unit of its own: its answer, or its refusal raised."""

        async def work(unit: UnitOfWork) -> list[Outcome[ValueT]]:
            return [await unit.decide(step, unit)]

        (answer,) = await self.run(kind, work)
        if isinstance(answer, LedgerError):
            raise answer
        return answer


class _Refused(Exception):
    """Rolls back a unit whose every request was refused, carrying the refusals out."""

    def __init__(self, refusals: list[LedgerError]) -> None:
        super().__init__("every request of the unit was refused")
        self.refusals = refusals


def _opened(account: Account, change: AccountChange) -> Account:
    """A new account as it is after ``change``."""
    return replace(
        account,
        balance=account.balance + change.balance,
        held=account.held + change.held,
        pending_stakes=account.pending_stakes + change.pending_stakes,
        stake=account.stake if change.stake is None else change.stake,
        closed=change.close or account.closed,
        rule=account.rule if change.rule is None else change.rule,
    )
