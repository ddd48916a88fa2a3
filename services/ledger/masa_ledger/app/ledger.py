"""The ledger's use cases: grant, hold, bind, release, expire, settle, void, and the reads.

Each write validates its input first (nothing is read for a malformed request), then runs as
one unit of work (:mod:`.unit_of_work`): it locks what it changes in the global order (see
:mod:`.ports`), checks the rules against what it locked, and writes the change together with
the events the outbox will publish. A refusal comes before anything is written, and a write
refused whole rolls back, so the ledger stays as it was. Every write is idempotent on the ids
the caller chose: the same request again answers as the first time and moves nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Generic, TypeVar

from masa_ledger.app.group_commit import GroupCommit
from masa_ledger.app.paging import page_size
from masa_ledger.app.ports import (
    AccountChange,
    EncodeEvent,
    HoldFilter,
    InboxEntry,
    InboxOutcome,
    LedgerMetrics,
    ResultLog,
    Store,
    TransferFilter,
)
from masa_ledger.app.unit_of_work import Outcome, UnitOfWork, Writer
from masa_ledger.domain.errors import (
    BadInput,
    LedgerError,
    NotFound,
    Refused,
    RequestIdReused,
    Unavailable,
)
from masa_ledger.domain.events import (
    ChipsGranted,
    GameSettled,
    GameVoided,
    HoldPlaced,
    HoldsBound,
    HoldVoidCause,
    HoldVoided,
)
from masa_ledger.domain.model import (
    HOUSE,
    ISSUER,
    Account,
    AccountKind,
    GameAbandonment,
    GameKey,
    GameResult,
    Hold,
    HoldState,
    PayoutRule,
    Settlement,
    SettlementState,
    Transfer,
    TransferKind,
    wallet_id,
)
from masa_ledger.domain.payout import PotSplit, split_pot
from masa_ledger.domain.validation import (
    MAX_BALANCE,
    MAX_HOLDS_PER_GAME,
    check_amount,
    check_game,
    check_hold_ids,
    check_id,
    check_player_id,
    check_rule,
    check_table_id,
    check_text,
)

__all__ = ["HoldPolicy", "Ledger", "Page", "StakeRequest"]

ItemT = TypeVar("ItemT")

_log = logging.getLogger(__name__)
# P-30's default terms: no rake, the winner takes all.
WINNER_TAKES_ALL = PayoutRule()
# How many players the development welcome remembers having seen (it only saves a read).
_WELCOMED_KEPT = 100_000


@dataclass(frozen=True, slots=True, kw_only=True)
class HoldPolicy:
    """How long an unbound hold lives: the default, and the most a caller may ask for."""

    default_ttl_seconds: float = 600.0
    max_ttl_seconds: float = 86_400.0


@dataclass(frozen=True, slots=True, kw_only=True)
class StakeRequest:
    """One stake to hold; ``hold_id`` is the request_id that placed it."""

    hold_id: str
    player_id: str
    amount: int
    lobby_id: str = ""
    ticket_id: str = ""
    # None takes the policy's default.
    ttl_seconds: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Page(Generic[ItemT]):
    """A page, newest first, and the sequence number the next page lists below (None on the
    last page)."""

    items: tuple[ItemT, ...]
    next_before_seq: int | None


class Ledger:
    """The use cases over one store. ``on_commit`` is called after every transaction that wrote
    outbox rows (the relay uses it to publish at once)."""

    def __init__(  # noqa: PLR0913 - the store, its encoder and metrics, then options by keyword
        self,
        store: Store,
        encode: EncodeEvent,
        metrics: LedgerMetrics,
        *,
        results: ResultLog | None = None,
        policy: HoldPolicy = HoldPolicy(),
        clock: Callable[[], float] = time.time,
        on_commit: Callable[[], None] = lambda: None,
        welcome_chips: int = 0,
    ) -> None:
        self._store = store
        self._welcome_chips = welcome_chips
        # Players welcomed (or found with a wallet) by this process: only saves a read.
        self._welcomed: OrderedDict[str, None] = OrderedDict()
        self._metrics = metrics
        self._results = results
        self._policy = policy
        self._clock = clock
        self._writer = Writer(store, encode, metrics, clock=clock, on_commit=on_commit)
        self._holding = GroupCommit(self._writer.batches("hold", _place_holds))
        self._binding = GroupCommit(self._writer.batches("bind", _bind_holds))
        self._settling = GroupCommit(self._writer.batches("settle", _settle_games))

    # --- writes ----------------------------------------------------------------------------

    async def grant(
        self, request_id: str, player_id: str, amount: int, reason: str
    ) -> tuple[Transfer, bool]:
        """P-31: issue chips from the issuing account; the transfer id derives from the
        request id, so a retry moves nothing and returns the first transfer. The transfer, and
        whether this call granted it (False for a retry)."""
        check_id("request_id", request_id)
        check_player_id("player_id", player_id)
        check_amount("amount", amount)
        check_text("reason", reason)
        return await self._writer.one(
            "grant", lambda unit: _grant(unit, request_id, player_id, amount, reason)
        )

    async def hold_stakes(self, stakes: Sequence[StakeRequest]) -> list[Hold]:
        """P-30: reserve the stakes of a group of players, all or nothing.

        A player who cannot pay (or has no wallet) makes the whole call FAILED_PRECONDITION,
        reason INSUFFICIENT_FUNDS, naming every short player, and nothing is held for anyone.
        A hold placed before under the same id is returned as it is, if the request is the same.
        """
        wanted = _new_holds(stakes, self._policy, self._clock())
        for hold in wanted:
            await self.welcome(hold.player_id)
        return await self._holding.submit(wanted)

    async def bind_holds(
        self,
        table_id: str,
        game_no: int,
        stake: int,
        hold_ids: Sequence[str],
        rule: PayoutRule = WINNER_TAKES_ALL,
    ) -> tuple[Account, list[Hold]]:
        """Make held stakes the pending stakes of one game's escrow, all or nothing, under the
        game's terms ``rule`` (its rake and payout table), which its settlement pays by.

        Each hold must be held (not bound, posted, voided or past its expiry) and hold exactly
        ``stake``. Binding the same holds to the same game again answers as the first time; any
        other set of holds, another stake or other terms for a game bound already is
        ESCROW_MISMATCH. Binding changes no balance, so only the escrow and the holds are
        locked.
        """
        check_game(table_id, game_no)
        check_amount("stake", stake)
        check_rule(rule)
        ids = check_hold_ids(hold_ids)
        return await self._binding.submit(
            _Bind(
                key=GameKey(table_id=table_id, game_no=game_no),
                stake=stake,
                hold_ids=ids,
                at=self._clock(),
                rule=rule,
            )
        )

    async def release_hold(self, hold_id: str, reason: str) -> Hold:
        """Void a hold that is not bound (a cancelled ticket); a released hold is returned as
        it is."""
        check_id("hold_id", hold_id)
        check_text("reason", reason)
        return await self._writer.one("release", lambda unit: _release(unit, hold_id, reason))

    async def expire_due(self, limit: int = 500) -> int:
        """Void unbound holds past their expiry; returns how many. Run periodically."""
        due = await self._store.due_holds(self._clock(), limit)
        if not due:
            return 0
        count = await self._writer.one("expire", lambda unit: _expire(unit, due))
        if count:
            self._metrics.holds_expired(count)
        return count

    async def settle(self, result: GameResult, *, from_event: bool) -> tuple[Settlement, bool]:
        """Post a finished game's stakes into its escrow and pay the pot by the ranking, once.

        The result's holds must be exactly the holds bound to the game, each of its player and
        of the game's stake (RESULT_MISMATCH otherwise: the ledger pays nothing it cannot
        match). A game settled or voided already is answered with that settlement and
        ``False``. ``from_event`` records the event in the inbox in the same transaction.
        """
        _check_result(result)
        started = time.perf_counter()
        settled, applied = await self._settling.submit(
            _Settle(result=result, from_event=from_event)
        )
        if applied:
            self._metrics.settlement_seconds(time.perf_counter() - started)
        return settled, applied

    async def void(
        self, key: GameKey, reason: str, *, event_id: str = "", from_event: bool = False
    ) -> tuple[Settlement, bool]:
        """P-30: void a game that cannot be completed: every hold bound to it is voided and no
        chips move. A game settled or voided already is answered with that settlement.

        A void no table event orders (``event_id`` empty: an operator's VoidGame) of a game the
        ledger never saw, one with no escrow because no stake was ever bound to it, is refused
        (NotFound) and records nothing: there is nothing to give back, and the closed escrow it
        would leave would refuse that game's stakes for good. A table's GameAbandoned voids any
        game, its stakes bound or not (a training table's closes its key).
        """
        check_game(key.table_id, key.game_no)
        check_text("reason", reason)
        request = _Void(key=key, reason=reason, event_id=event_id, from_event=from_event)
        return await self._writer.one("void", lambda unit: _void_game(unit, request))

    async def settle_from_log(self, key: GameKey) -> tuple[Settlement, bool]:
        """An admin's SettleGame: settle (or void) the game from what the table-engine
        published for it, never from anything the caller says."""
        check_game(key.table_id, key.game_no)
        if self._results is None:
            raise Unavailable("this ledger reads no table log")
        result = await self._results.game_result(key)
        if result is None:
            raise Refused(
                f"the table log has no result for game {key}",
                reason="GAME_NOT_FINISHED",
                metadata=_game_metadata(key),
            )
        if isinstance(result, GameAbandonment):
            return await self.void(key, result.reason, event_id=result.event_id)
        return await self.settle(result, from_event=False)

    async def on_result(self, result: GameResult | GameAbandonment) -> InboxOutcome:
        """A GameFinished or GameAbandoned from the bus, exactly once per event and per game.

        A result the ledger cannot pay (it does not match the game's holds, or it is malformed)
        is recorded as rejected in the inbox and logged: redelivering it would change nothing,
        and an operator settles or voids the game by hand. Anything else that fails (the
        database is down) raises, and the event is delivered again.
        """
        try:
            if isinstance(result, GameAbandonment):
                settlement, applied = await self.void(
                    result.key, result.reason, event_id=result.event_id, from_event=True
                )
            else:
                settlement, applied = await self.settle(result, from_event=True)
        except (BadInput, Refused) as error:
            _log.error(
                "refused to settle a table result; settle or void the game by hand",
                extra={
                    "event_id": result.event_id,
                    "game": str(result.key),
                    "reason": error.reason,
                },
            )
            await self._reject(result, error)
            return InboxOutcome.REJECTED
        if not applied:
            return InboxOutcome.ALREADY_CLOSED
        if settlement.state is SettlementState.VOIDED:
            return InboxOutcome.VOIDED
        return InboxOutcome.SETTLED

    async def _reject(self, result: GameResult | GameAbandonment, error: LedgerError) -> None:
        await self._writer.one("settle_rejected", lambda unit: _reject(unit, result, error))

    async def drain(self) -> None:
        """Wait for the transactions under way, so that the store can close after them."""
        for group in (self._holding, self._binding, self._settling):
            await group.drain()

    # --- reads -----------------------------------------------------------------------------

    async def welcome(self, player_id: str) -> None:
        """Development only (MASA_DEV_WELCOME_CHIPS): a player the ledger has no wallet of gets
        the welcome chips, once. The grant's request id derives from the player id and the
        ledger keeps it for ever, so no restart or second instance grants it twice."""
        if self._welcome_chips <= 0 or player_id in self._welcomed:
            return
        check_player_id("player_id", player_id)
        if await self._store.account(wallet_id(player_id)) is None:
            digest = hashlib.sha256(player_id.encode()).hexdigest()[:32]
            await self.grant(
                f"welcome-{digest}", player_id, self._welcome_chips, "development welcome chips"
            )
        self._welcomed[player_id] = None
        if len(self._welcomed) > _WELCOMED_KEPT:
            self._welcomed.popitem(last=False)

    async def wallet(self, player_id: str) -> Account:
        """A player's wallet; a player never granted chips has an empty one (with the
        development welcome on, such a player is welcomed first)."""
        check_player_id("player_id", player_id)
        await self.welcome(player_id)
        account_id = wallet_id(player_id)
        found = await self._store.account(account_id)
        return found or Account(account_id=account_id, kind=AccountKind.PLAYER, player_id=player_id)

    async def account(self, account_id: str) -> Account:
        _check_account_id(account_id)
        found = await self._store.account(account_id)
        if found is None:
            raise NotFound(
                f"no account {account_id!r}",
                reason="ACCOUNT_NOT_FOUND",
                metadata={"account_id": account_id},
            )
        return found

    async def hold(self, hold_id: str) -> Hold:
        check_id("hold_id", hold_id)
        found = await self._store.hold(hold_id)
        if found is None:
            raise _no_hold(hold_id)
        return found

    async def settlement(self, key: GameKey) -> Settlement:
        check_game(key.table_id, key.game_no)
        found = await self._store.settlement(key)
        if found is None:
            raise NotFound(
                f"game {key} was neither settled nor voided",
                reason="SETTLEMENT_NOT_FOUND",
                metadata=_game_metadata(key),
            )
        return found

    async def transfers(
        self, where: TransferFilter, *, size: int, before_seq: int | None = None
    ) -> Page[Transfer]:
        """A page of ``where``'s transfers, below ``before_seq`` (the previous page's
        ``next_before_seq``) if given."""
        _check_game_filter(where.table_id, where.game_no)
        limit = page_size(size)
        rows = await self._store.list_transfers(where, before_seq=before_seq, limit=limit + 1)
        return _page(rows, limit)

    async def holds(
        self, where: HoldFilter, *, size: int, before_seq: int | None = None
    ) -> Page[Hold]:
        """A page of ``where``'s holds, below ``before_seq`` if given."""
        _check_game_filter(where.table_id, where.game_no)
        limit = page_size(size)
        rows = await self._store.list_holds(where, before_seq=before_seq, limit=limit + 1)
        return _page(rows, limit)


# --- grants ------------------------------------------------------------------------------------


async def _grant(
    unit: UnitOfWork, request_id: str, player_id: str, amount: int, reason: str
) -> tuple[Transfer, bool]:
    wallet = wallet_id(player_id)
    transfer_id = f"grant:{request_id}"
    existing = await unit.tx.transfer(transfer_id)
    if existing is not None:
        same = (existing.kind, existing.credit_account_id, existing.amount) == (
            TransferKind.GRANT,
            wallet,
            amount,
        ) and existing.reason == reason
        if not same:
            raise RequestIdReused(
                f"request_id {request_id!r} granted other chips before",
                metadata={"request_id": request_id},
            )
        return existing, False
    opened = Account(
        account_id=wallet, kind=AccountKind.PLAYER, player_id=player_id, created_at=unit.at
    )
    accounts = await unit.tx.lock_accounts([ISSUER, wallet], create=[opened])
    if accounts[wallet].balance + amount > MAX_BALANCE:
        raise Refused(
            f"the grant would take {player_id}'s balance past {MAX_BALANCE}",
            reason="BALANCE_LIMIT",
            metadata={"player_id": player_id},
        )
    transfer = Transfer(
        transfer_id=transfer_id,
        kind=TransferKind.GRANT,
        debit_account_id=ISSUER,
        credit_account_id=wallet,
        amount=amount,
        created_at=unit.at,
        reason=reason,
    )
    unit.post([transfer])
    unit.report(ChipsGranted(transfer=transfer, player_id=player_id))
    return transfer, True


# --- holds -------------------------------------------------------------------------------------


def _new_holds(stakes: Sequence[StakeRequest], policy: HoldPolicy, now: float) -> list[Hold]:
    """The holds a group of stakes asks for, each checked, as they would be placed ``now``."""
    if not 1 <= len(stakes) <= MAX_HOLDS_PER_GAME:
        raise BadInput(
            f"hold 1 to {MAX_HOLDS_PER_GAME} stakes at once", metadata={"field": "stakes"}
        )
    wanted = [_new_hold(stake, policy, now) for stake in stakes]
    if len({hold.hold_id for hold in wanted}) != len(wanted):
        raise BadInput("two stakes have the same request_id", metadata={"field": "stakes"})
    if len({hold.player_id for hold in wanted}) != len(wanted):
        raise BadInput("a player is staked twice", metadata={"field": "stakes"})
    return wanted


def _new_hold(stake: StakeRequest, policy: HoldPolicy, now: float) -> Hold:
    check_id("request_id", stake.hold_id)
    check_player_id("player_id", stake.player_id)
    check_amount("amount", stake.amount)
    check_id("lobby_id", stake.lobby_id, required=False)
    check_id("ticket_id", stake.ticket_id, required=False)
    ttl = policy.default_ttl_seconds if stake.ttl_seconds is None else stake.ttl_seconds
    if not 0 < ttl <= policy.max_ttl_seconds:
        raise BadInput(
            f"ttl must be more than 0 and at most {policy.max_ttl_seconds:g} s",
            metadata={"field": "ttl"},
        )
    return Hold(
        hold_id=stake.hold_id,
        player_id=stake.player_id,
        amount=stake.amount,
        lobby_id=stake.lobby_id,
        ticket_id=stake.ticket_id,
        ttl_seconds=ttl,
        state=HoldState.HELD,
        created_at=now,
        expire_at=now + ttl,
    )


async def _place_holds(unit: UnitOfWork, batch: Sequence[list[Hold]]) -> list[Outcome[list[Hold]]]:
    """A batch of group stakes: the wallets of the new holds locked at once, then each group."""
    existing = await unit.tx.holds({h.hold_id for request in batch for h in request})
    wallets = {h.account_id for request in batch for h in request if h.hold_id not in existing}
    accounts = await unit.tx.lock_accounts(wallets)
    available = {account_id: a.available for account_id, a in accounts.items()}
    return [await unit.decide(_place, unit, request, existing, available) for request in batch]


async def _place(
    unit: UnitOfWork, request: list[Hold], existing: dict[str, Hold], available: dict[str, int]
) -> list[Hold]:
    """One request of a batch of holds: all of its stakes, or none."""
    # Each hold as it was placed before, in the database or by an earlier request of the batch.
    earlier = {h.hold_id: existing.get(h.hold_id) or unit.placed(h.hold_id) for h in request}
    for hold in request:
        found = earlier[hold.hold_id]
        if found is not None and not found.same_request(hold):
            raise RequestIdReused(
                f"request_id {hold.hold_id!r} placed another hold before",
                metadata={"request_id": hold.hold_id},
            )
    new = [h for h in request if earlier[h.hold_id] is None]
    short = [h for h in new if available.get(h.account_id, 0) < h.amount]
    if short:
        raise _insufficient(short, available)
    for hold in new:
        available[hold.account_id] -= hold.amount
        unit.place(hold)
        unit.adjust(hold.account_id, AccountChange(held=hold.amount))
        unit.report(HoldPlaced(hold=hold))
    return [earlier[h.hold_id] or h for h in request]


async def _release(unit: UnitOfWork, hold_id: str, reason: str) -> Hold:
    found = (await unit.tx.holds([hold_id])).get(hold_id)
    if found is None:
        raise _no_hold(hold_id)
    await unit.tx.lock_accounts([found.account_id])
    hold = (await unit.tx.holds([hold_id], lock=True))[hold_id]
    if hold.state is HoldState.RELEASED:
        return hold
    if hold.state is not HoldState.HELD:
        raise _not_held(hold)
    released = replace(hold, state=HoldState.RELEASED, closed_at=unit.at, reason=reason)
    unit.update(released)
    unit.adjust(hold.account_id, AccountChange(held=-hold.amount))
    unit.report(HoldVoided(hold=released, cause=HoldVoidCause.RELEASED))
    return released


async def _expire(unit: UnitOfWork, due: Sequence[Hold]) -> int:
    await unit.tx.lock_accounts({hold.account_id for hold in due})
    locked = await unit.tx.holds([hold.hold_id for hold in due], lock=True)
    expired = [
        replace(hold, state=HoldState.EXPIRED, closed_at=unit.at, reason="expired")
        for hold in locked.values()
        if hold.state is HoldState.HELD and hold.expire_at <= unit.at
    ]
    for hold in expired:
        unit.update(hold)
        unit.adjust(hold.account_id, AccountChange(held=-hold.amount))
        unit.report(HoldVoided(hold=hold, cause=HoldVoidCause.EXPIRED))
    return len(expired)


def _no_hold(hold_id: str) -> NotFound:
    return NotFound(f"no hold {hold_id!r}", reason="HOLD_NOT_FOUND", metadata={"hold_id": hold_id})


def _insufficient(short: Sequence[Hold], available_chips: dict[str, int]) -> Refused:
    first = short[0]
    available = available_chips.get(first.account_id, 0)
    names = ", ".join(hold.player_id for hold in short)
    return Refused(
        f"not enough chips to stake: {names}",
        reason="INSUFFICIENT_FUNDS",
        metadata={
            "player_id": first.player_id,
            "available": str(available),
            "required": str(first.amount),
            "short_player_ids": json.dumps([hold.player_id for hold in short]),
        },
    )


def _not_held(hold: Hold) -> Refused:
    metadata = {"hold_id": hold.hold_id, "state": hold.state.name}
    if hold.table_id:
        metadata |= {"table_id": hold.table_id, "game_no": str(hold.game_no)}
    return Refused(
        f"hold {hold.hold_id!r} is {hold.state.value}", reason="HOLD_NOT_HELD", metadata=metadata
    )


# --- binding -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class _Bind:
    key: GameKey
    stake: int
    hold_ids: tuple[str, ...]
    at: float
    rule: PayoutRule


async def _bind_holds(
    unit: UnitOfWork, batch: Sequence[_Bind]
) -> list[Outcome[tuple[Account, list[Hold]]]]:
    """A batch of binds: the escrows locked at once, then their holds, then each bind."""
    # A game's escrow is opened by the first bind that succeeds (written with the change), so a
    # refused bind leaves nothing behind.
    escrows = await unit.tx.lock_accounts({bind.key.escrow_id for bind in batch})
    for bind in batch:
        if bind.key.escrow_id not in escrows:
            escrows[bind.key.escrow_id] = unit.unopened_escrow(bind.key)
    holds = await unit.tx.holds({hold_id for bind in batch for hold_id in bind.hold_ids}, lock=True)
    return [await unit.decide(_bind, unit, bind, escrows, holds) for bind in batch]


async def _bind(
    unit: UnitOfWork, bind: _Bind, escrows: dict[str, Account], holds: dict[str, Hold]
) -> tuple[Account, list[Hold]]:
    """One bind of a batch; ``escrows`` and ``holds`` follow what earlier ones changed."""
    key, stake = bind.key, bind.stake
    escrow = escrows[key.escrow_id]
    if escrow.closed is not None:
        raise Refused(
            f"game {key} was {escrow.closed.value} already",
            reason="GAME_CLOSED",
            metadata=_game_metadata(key, state=escrow.closed.name),
        )
    for hold_id in bind.hold_ids:
        if hold_id not in holds:
            raise _no_hold(hold_id)
    chosen = [holds[hold_id] for hold_id in bind.hold_ids]
    if len({hold.player_id for hold in chosen}) != len(chosen):
        raise BadInput(
            f"game {key} names two holds of one player, who takes one seat (P-2)",
            metadata={"field": "hold_ids"},
        )
    total = sum(hold.amount for hold in chosen)
    if escrow.pending_stakes:
        # An open escrow's pending stakes are exactly its bound holds, so these are the same
        # holds if they are all bound here and add up to them.
        here = all(
            hold.state is HoldState.BOUND
            and (hold.table_id, hold.game_no) == (key.table_id, key.game_no)
            for hold in chosen
        )
        same_terms = escrow.stake == stake and escrow.rule == bind.rule
        if here and total == escrow.pending_stakes and same_terms:
            return escrow, chosen
        raise Refused(
            f"game {key} is bound to other holds or another stake",
            reason="ESCROW_MISMATCH",
            metadata=_game_metadata(key, stake=str(escrow.stake)),
        )
    for hold in chosen:
        _check_bindable(hold, key, stake, bind.at)
    bound = [
        replace(hold, state=HoldState.BOUND, table_id=key.table_id, game_no=key.game_no)
        for hold in chosen
    ]
    for hold in bound:
        holds[hold.hold_id] = hold
        unit.update(hold)
    escrows[key.escrow_id] = replace(escrow, pending_stakes=total, stake=stake, rule=bind.rule)
    unit.adjust(key.escrow_id, AccountChange(pending_stakes=total, stake=stake, rule=bind.rule))
    unit.report(HoldsBound(key=key, stake=stake, hold_ids=bind.hold_ids, at=bind.at))
    return escrows[key.escrow_id], bound


def _check_bindable(hold: Hold, key: GameKey, stake: int, now: float) -> None:
    if hold.state in (HoldState.BOUND, HoldState.POSTED):
        raise Refused(
            f"hold {hold.hold_id!r} is bound to game {hold.table_id}:{hold.game_no}",
            reason="HOLD_ALREADY_BOUND",
            metadata={
                "hold_id": hold.hold_id,
                "table_id": hold.table_id,
                "game_no": str(hold.game_no),
            },
        )
    if hold.state is not HoldState.HELD:
        raise _not_held(hold)
    if hold.expire_at <= now:
        raise _not_held(replace(hold, state=HoldState.EXPIRED))
    if hold.amount != stake:
        raise Refused(
            f"hold {hold.hold_id!r} holds {hold.amount}, the stake of game {key} is {stake}",
            reason="STAKE_MISMATCH",
            metadata={"hold_id": hold.hold_id, "amount": str(hold.amount), "stake": str(stake)},
        )


# --- settlement --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class _Settle:
    result: GameResult
    # Whether the result came from the bus (its event is recorded in the inbox).
    from_event: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class _Void:
    key: GameKey
    reason: str
    # The GameAbandoned that orders the void; empty for an operator's.
    event_id: str
    from_event: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class _Games:
    """The games a unit closes, locked: how each was closed (None while it is open; a request
    of a batch that closes one sets it for the next) and the terms its stakes were bound
    under (None if they were bound before the ledger recorded terms, or never)."""

    closed: dict[GameKey, Settlement | None]
    terms: dict[GameKey, PayoutRule | None]


async def _settle_games(
    unit: UnitOfWork, batch: Sequence[_Settle]
) -> list[Outcome[tuple[Settlement, bool]]]:
    """A batch of settlements: the games locked at once, their bound holds read, then each."""
    # The house may take a rake, or the prize when every staking seat forfeited: the terms say
    # which, and they are read with the locks, so the house is locked too.
    games = await _lock_games(unit, [request.result.key for request in batch], house=True)
    bound = await unit.tx.holds_of_games(
        [key for key, closed in games.closed.items() if closed is None]
    )
    return [await unit.decide(_settle, unit, request, games, bound) for request in batch]


async def _settle(
    unit: UnitOfWork, request: _Settle, games: _Games, bound_by_game: dict[GameKey, list[Hold]]
) -> tuple[Settlement, bool]:
    """One settlement of a batch. The pot is paid by the terms its stakes were bound under,
    never by the result."""
    result = request.result
    key = result.key
    closed = games.closed[key]
    if closed is not None:
        return _closed_before(unit, closed, result.event_id, from_event=request.from_event)
    bound = [h for h in bound_by_game[key] if h.state is HoldState.BOUND]
    _match(result, bound)
    pot = sum(hold.amount for hold in bound)
    # An escrow bound before the ledger recorded terms (a game that spans the upgrade) is paid
    # as it was then, by the verified result's table; every other by its bound terms.
    rule = games.terms.get(key) or result.published_rule or WINNER_TAKES_ALL
    split = split_pot(pot, result.standings, rule, teams=result.teams)
    transfers = _settlement_transfers(key, bound, split, unit.at)
    settlement = Settlement(
        key=key,
        state=SettlementState.SETTLED,
        pot=pot,
        rake=split.rake,
        forfeited=split.forfeited,
        payouts=split.payouts,
        hold_ids=tuple(hold.hold_id for hold in bound),
        event_id=result.event_id,
        reason="",
        closed_at=unit.at,
        rule=rule,
        transfers=tuple(transfers),
    )
    unit.post(transfers)
    return _close(unit, games, settlement, bound, from_event=request.from_event)


async def _void_game(unit: UnitOfWork, request: _Void) -> tuple[Settlement, bool]:
    key = request.key
    games = await _lock_games(unit, [key], house=False)
    closed = games.closed[key]
    if closed is not None:
        return _closed_before(unit, closed, request.event_id, from_event=request.from_event)
    if not request.event_id and unit.opens(key.escrow_id):
        raise NotFound(
            f"the ledger knows no game {key}: no stake was ever bound to it",
            reason="NOT_FOUND",
            metadata=_game_metadata(key),
        )
    bound = [h for h in (await unit.tx.holds_of_games([key]))[key] if h.state is HoldState.BOUND]
    settlement = Settlement(
        key=key,
        state=SettlementState.VOIDED,
        pot=sum(hold.amount for hold in bound),
        rake=0,
        forfeited=0,
        payouts=(),
        hold_ids=tuple(hold.hold_id for hold in bound),
        event_id=request.event_id,
        reason=request.reason,
        closed_at=unit.at,
        rule=PayoutRule(),
    )
    return _close(unit, games, settlement, bound, from_event=request.from_event)


async def _lock_games(unit: UnitOfWork, keys: Sequence[GameKey], *, house: bool) -> _Games:
    """Lock the games (their escrows, and the wallets of their holds and the house that closing
    them changes, all at once in account-id order): how each was closed, and its terms. A game
    never bound has no escrow yet: closing it opens one, with the change."""
    locked = await unit.tx.lock_games(keys, also=[HOUSE] if house else [])
    games = _Games(closed={}, terms={})
    for key in dict.fromkeys(keys):
        escrow = locked.get(key.escrow_id)
        if escrow is None:
            unit.unopened_escrow(key)
            games.closed[key] = None
            continue
        games.terms[key] = escrow.rule
        if escrow.closed is None:
            games.closed[key] = None
            continue
        closed = await unit.tx.settlement(key)
        if closed is None:
            raise RuntimeError(f"escrow {key.escrow_id} is closed without a settlement")
        games.closed[key] = closed
    return games


def _closed_before(
    unit: UnitOfWork, closed: Settlement, event_id: str, *, from_event: bool
) -> tuple[Settlement, bool]:
    """A game settled or voided before is answered with how it was closed, and not applied;
    an event that asked to close it again is recorded as such."""
    if from_event:
        unit.receive(
            InboxEntry(event_id=event_id, key=closed.key, outcome=InboxOutcome.ALREADY_CLOSED)
        )
    return closed, False


def _close(
    unit: UnitOfWork,
    games: _Games,
    settlement: Settlement,
    bound: Sequence[Hold],
    *,
    from_event: bool,
) -> tuple[Settlement, bool]:
    """Close a game's escrow, once, as ``settlement`` says (its stakes posted and paid out
    already when it is settled): each bound hold leaves its wallet's reserved chips, posted or
    voided, the escrow's pending stakes go, and the settlement is written with the inbox entry
    of the event that closed the game and the event that reports it."""
    key = settlement.key
    settled = settlement.state is SettlementState.SETTLED
    for hold in bound:
        unit.adjust(hold.account_id, AccountChange(held=-hold.amount))
        if settled:
            unit.update(replace(hold, state=HoldState.POSTED, closed_at=unit.at))
        else:
            unit.update(
                replace(hold, state=HoldState.VOIDED, closed_at=unit.at, reason=settlement.reason)
            )
    unit.adjust(
        key.escrow_id, AccountChange(pending_stakes=-settlement.pot, close=settlement.state)
    )
    unit.record(settlement)
    games.closed[key] = settlement
    if from_event:
        outcome = InboxOutcome.SETTLED if settled else InboxOutcome.VOIDED
        unit.receive(InboxEntry(event_id=settlement.event_id, key=key, outcome=outcome))
    unit.report(
        GameSettled(settlement=settlement) if settled else GameVoided(settlement=settlement)
    )
    return settlement, True


async def _reject(
    unit: UnitOfWork, result: GameResult | GameAbandonment, error: LedgerError
) -> None:
    """Record a table result the ledger refused to pay as rejected, so a redelivery of it
    changes nothing; an operator settles or voids its game by hand."""
    unit.receive(
        InboxEntry(
            event_id=result.event_id,
            key=result.key,
            outcome=InboxOutcome.REJECTED,
            detail=f"{error.reason}: {error.message}",
        )
    )


def _check_result(result: GameResult) -> None:
    key = result.key
    check_game(key.table_id, key.game_no)
    check_id("event_id", result.event_id)
    if result.stake < 0:
        raise BadInput("the stake is negative", metadata={"field": "stake"})
    seats = [standing.seat for standing in result.standings]
    holds = [standing.hold_id for standing in result.standings if standing.hold_id]
    if len(set(seats)) != len(seats) or len(set(holds)) != len(holds):
        raise BadInput("the ranking names a seat or a hold twice", metadata={"field": "ranking"})
    for standing in result.standings:
        if standing.place < 1:
            raise BadInput("places start at 1", metadata={"field": "ranking"})
        if standing.hold_id and not standing.player_id:
            raise BadInput("a seat with a hold has no player", metadata={"field": "ranking"})


def _match(result: GameResult, bound: Sequence[Hold]) -> None:
    """The result pays the game's bound holds exactly: the same holds, players and stake."""
    by_id = {hold.hold_id: hold for hold in bound}
    staked = {s.hold_id: s for s in result.standings if s.hold_id}
    problems: list[str] = []
    if set(staked) != set(by_id):
        problems.append(
            f"{len(set(staked) - set(by_id))} result holds are not bound to the game and "
            f"{len(set(by_id) - set(staked))} bound holds are not in the result"
        )
    for hold_id, standing in staked.items():
        hold = by_id.get(hold_id)
        if hold is None:
            continue
        if hold.player_id != standing.player_id:
            problems.append(f"hold {hold_id} is not seat {standing.seat}'s player's")
        if hold.amount != result.stake:
            problems.append(f"hold {hold_id} holds {hold.amount}, the stake is {result.stake}")
    if problems:
        raise Refused(
            f"the result of game {result.key} does not match its holds: {'; '.join(problems)}",
            reason="RESULT_MISMATCH",
            metadata=_game_metadata(result.key),
        )


def _settlement_transfers(
    key: GameKey, bound: Sequence[Hold], split: PotSplit, now: float
) -> list[Transfer]:
    """The stakes posted into the escrow, then the payouts, the rake and the forfeited prize
    out of it."""
    stakes = [
        Transfer(
            transfer_id=f"stake:{hold.hold_id}",
            kind=TransferKind.STAKE,
            debit_account_id=hold.account_id,
            credit_account_id=key.escrow_id,
            amount=hold.amount,
            created_at=now,
            table_id=key.table_id,
            game_no=key.game_no,
            hold_id=hold.hold_id,
        )
        for hold in bound
    ]
    payouts = [
        Transfer(
            transfer_id=f"payout:{key}:{payout.seat}",
            kind=TransferKind.PAYOUT,
            debit_account_id=key.escrow_id,
            credit_account_id=wallet_id(payout.player_id),
            amount=payout.amount,
            created_at=now,
            table_id=key.table_id,
            game_no=key.game_no,
        )
        for payout in split.payouts
    ]
    house = [
        Transfer(
            transfer_id=f"{kind.value}:{key}",
            kind=kind,
            debit_account_id=key.escrow_id,
            credit_account_id=HOUSE,
            amount=amount,
            created_at=now,
            table_id=key.table_id,
            game_no=key.game_no,
        )
        for kind, amount in (
            (TransferKind.RAKE, split.rake),
            (TransferKind.FORFEIT, split.forfeited),
        )
        if amount
    ]
    return stakes + payouts + house


# --- queries -----------------------------------------------------------------------------------


def _page(rows: Sequence[tuple[int, ItemT]], limit: int) -> Page[ItemT]:
    items = tuple(item for _, item in rows[:limit])
    return Page(items=items, next_before_seq=rows[limit - 1][0] if len(rows) > limit else None)


def _game_metadata(key: GameKey, **more: str) -> dict[str, str]:
    return {"table_id": key.table_id, "game_no": str(key.game_no), **more}


def _check_game_filter(table_id: str, game_no: int) -> None:
    if table_id:
        check_table_id("table_id", table_id)
    if game_no and not table_id:
        raise BadInput("game_no filters only with table_id", metadata={"field": "game_no"})
    if game_no < 0:
        raise BadInput("game_no must not be negative", metadata={"field": "game_no"})


def _check_account_id(account_id: str) -> None:
    if account_id in (HOUSE, ISSUER):
        return
    kind, _, rest = account_id.partition(":")
    if kind == "player":
        check_player_id("account_id", rest)
        return
    if kind == "escrow":
        table_id, _, game = rest.rpartition(":")
        if game.isdigit():
            check_game(table_id, int(game))
            return
    raise BadInput(
        "account_id is 'player:<player_id>', 'escrow:<table_id>:<game_no>', 'house' or 'issuer'",
        metadata={"field": "account_id"},
    )
