"""The ledger's API: grant, hold, bind, release, expire, settle, void, and the reads.

Each write validates its input first (nothing is read for a malformed request), then runs as
one unit of work (:mod:`.unit_of_work`): it locks what it changes in the global order (see
:mod:`.ports`), checks the rules against what it locked, and writes the change together with
the events the outbox will publish. A refusal comes before anything is written, and a write
refused whole rolls back, so the ledger stays as it was. Every write is idempotent on the ids
the caller chose: the same request again answers as the first time and moves nothing.

What each unit does lives with its job: :mod:`.grants`, :mod:`.holds` (place, release,
expire), :mod:`.binding`, :mod:`.settlement` (settle, void, and the escrow closing they share)
and :mod:`.queries`; holds, binds and settlements are group-committed (:mod:`.group_commit`).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence

from masa_rules.refusals import Reason
from masa_rules.table_config import PayoutRule

from masa_ledger.app import queries
from masa_ledger.app.binding import BindRequest, bind_holds
from masa_ledger.app.grants import grant_chips
from masa_ledger.app.group_commit import GroupCommit
from masa_ledger.app.holds import (
    HoldPolicy,
    StakeRequest,
    expire_holds,
    new_holds,
    place_holds,
    release_hold,
)
from masa_ledger.app.paging import Page
from masa_ledger.app.ports import (
    EncodeEvent,
    HoldFilter,
    InboxOutcome,
    LedgerMetrics,
    ResultLog,
    Store,
    TransferFilter,
)
from masa_ledger.app.settlement import (
    WINNER_TAKES_ALL,
    SettleRequest,
    VoidRequest,
    check_result,
    reject_result,
    settle_games,
    void_game,
)
from masa_ledger.app.unit_of_work import Writer
from masa_ledger.domain.errors import BadInput, LedgerError, Refused, Unavailable, game_metadata
from masa_ledger.domain.model import (
    Account,
    GameAbandonment,
    GameKey,
    GameResult,
    Hold,
    Settlement,
    SettlementState,
    Transfer,
    wallet_id,
)
from masa_ledger.domain.validation import (
    check_amount,
    check_game,
    check_hold_ids,
    check_id,
    check_player_id,
    check_rule,
    check_text,
)

__all__ = ["Ledger"]

_log = logging.getLogger(__name__)
# How many players the development welcome remembers having seen (it only saves a read).
_WELCOMED_KEPT = 100_000
# Unbound holds live 10 minutes by default, a day at most.
_DEFAULT_POLICY = HoldPolicy()


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
        policy: HoldPolicy = _DEFAULT_POLICY,
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
        self._holding = GroupCommit(self._writer.batches("hold", place_holds))
        self._binding = GroupCommit(self._writer.batches("bind", bind_holds))
        self._settling = GroupCommit(self._writer.batches("settle", settle_games))

    # --- writes ----------------------------------------------------------------------------

    async def grant(
        self, request_id: str, player_id: str, amount: int, reason: str, *, welcome: bool = False
    ) -> tuple[Transfer, bool]:
        """P-31: issue chips from the issuing account; the transfer id derives from the
        request id, so a retry moves nothing and returns the first transfer. The transfer, and
        whether this call granted it (False for a retry).

        ``welcome``: an operator's grant (``GrantChips``) is a way of being seen too, so a
        player the ledger has no wallet of gets the development welcome first (:meth:`welcome`),
        once the grant's input is known good."""
        check_id("request_id", request_id)
        check_player_id("player_id", player_id)
        check_amount("amount", amount)
        check_text("reason", reason)
        if welcome:
            await self.welcome(player_id)
        return await self._writer.one(
            "grant", lambda unit: grant_chips(unit, request_id, player_id, amount, reason)
        )

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

    async def hold_stakes(self, stakes: Sequence[StakeRequest]) -> list[Hold]:
        """P-30: reserve the stakes of a group of players, all or nothing.

        A player who cannot pay (or has no wallet) makes the whole call FAILED_PRECONDITION,
        reason INSUFFICIENT_FUNDS, naming every short player, and nothing is held for anyone.
        A hold placed before under the same id is returned as it is, if the request is the same.
        """
        wanted = new_holds(stakes, self._policy, self._clock())
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

        Each hold must be held (not bound, posted, voided or past its expiry), hold exactly
        ``stake`` (STAKE_MISMATCH), and have been placed for these terms, if it was placed for
        any (TERMS_MISMATCH). Binding the same holds to the same game again answers as the first time; any
        other set of holds, another stake or other terms for a game bound already is
        ESCROW_MISMATCH. Binding changes no balance, so only the escrow and the holds are
        locked.
        """
        check_game(table_id, game_no)
        check_amount("stake", stake)
        check_rule(rule)
        ids = check_hold_ids(hold_ids)
        return await self._binding.submit(
            BindRequest(
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
        return await self._writer.one("release", lambda unit: release_hold(unit, hold_id, reason))

    async def expire_due(self, limit: int = 500) -> int:
        """Void unbound holds past their expiry; returns how many. Run periodically."""
        due = await self._store.due_holds(self._clock(), limit)
        if not due:
            return 0
        count = await self._writer.one("expire", lambda unit: expire_holds(unit, due))
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
        check_result(result)
        started = time.perf_counter()
        settled, applied = await self._settling.submit(
            SettleRequest(result=result, from_event=from_event)
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
        request = VoidRequest(key=key, reason=reason, event_id=event_id, from_event=from_event)
        return await self._writer.one("void", lambda unit: void_game(unit, request))

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
                reason=Reason.GAME_NOT_FINISHED,
                metadata=game_metadata(key),
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
        await self._writer.one("settle_rejected", lambda unit: reject_result(unit, result, error))

    async def drain(self) -> None:
        """Wait for the transactions under way, so that the store can close after them."""
        for group in (self._holding, self._binding, self._settling):
            await group.drain()

    # --- reads -----------------------------------------------------------------------------

    async def wallet(self, player_id: str) -> Account:
        """A player's wallet; a player never granted chips has an empty one (with the
        development welcome on, such a player is welcomed first)."""
        await self.welcome(player_id)
        return await queries.wallet(self._store, player_id)

    async def account(self, account_id: str) -> Account:
        return await queries.account(self._store, account_id)

    async def hold(self, hold_id: str) -> Hold:
        return await queries.hold(self._store, hold_id)

    async def settlement(self, key: GameKey) -> Settlement:
        return await queries.settlement(self._store, key)

    async def transfers(
        self, where: TransferFilter, *, size: int, before_seq: int | None = None
    ) -> Page[Transfer]:
        """A page of ``where``'s transfers, below ``before_seq`` (the previous page's
        ``next_before_seq``) if given."""
        return await queries.transfers(self._store, where, size=size, before_seq=before_seq)

    async def holds(
        self, where: HoldFilter, *, size: int, before_seq: int | None = None
    ) -> Page[Hold]:
        """A page of ``where``'s holds, below ``before_seq`` if given."""
        return await queries.holds(self._store, where, size=size, before_seq=before_seq)
