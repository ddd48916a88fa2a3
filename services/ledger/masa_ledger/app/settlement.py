"""Closing a game, exactly once: settling it by its result, or voiding it (P-30, F-97).

Both lock the game's escrow (the game's mutex), answer a game closed before with how it was
closed, and close the escrow the same way (:func:`_close`): each bound hold leaves its wallet's
reserved chips, *posted* or *voided*; the escrow's pending stakes go; the settlement is written
with the inbox entry of the event that closed the game and the event that reports it. Settling
first posts the stakes into the escrow and pays the pot out by the ranking, under the terms the
stakes were bound under (:mod:`masa_rules.payout`); voiding moves no chips. A result
that does not match the game's bound holds is RESULT_MISMATCH, and the bus's result is then
recorded as rejected (:func:`reject_result`) for an operator.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from masa_rules.payout import PotSplit, split_pot
from masa_rules.refusals import Reason
from masa_rules.table_config import PayoutRule

from masa_ledger.app.ports import AccountChange, InboxEntry, InboxOutcome
from masa_ledger.app.unit_of_work import Outcome, UnitOfWork
from masa_ledger.domain.errors import BadInput, LedgerError, NotFound, Refused, game_metadata
from masa_ledger.domain.events import GameSettled, GameVoided
from masa_ledger.domain.model import (
    HOUSE,
    GameAbandonment,
    GameKey,
    GameResult,
    Hold,
    HoldState,
    Settlement,
    SettlementState,
    Transfer,
    TransferKind,
    wallet_id,
)
from masa_ledger.domain.validation import check_game, check_id

__all__ = [
    "WINNER_TAKES_ALL",
    "SettleRequest",
    "VoidRequest",
    "check_result",
    "reject_result",
    "settle_games",
    "void_game",
]

# P-30's default terms: no rake, the winner takes all.
WINNER_TAKES_ALL = PayoutRule()


@dataclass(frozen=True, slots=True, kw_only=True)
class SettleRequest:
    """A finished game to settle by its result."""

    result: GameResult
    # Whether the result came from the bus (its event is recorded in the inbox).
    from_event: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class VoidRequest:
    """A game to void, by an operator or by its table's GameAbandoned."""

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


async def settle_games(
    unit: UnitOfWork, batch: Sequence[SettleRequest]
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
    unit: UnitOfWork,
    request: SettleRequest,
    games: _Games,
    bound_by_game: dict[GameKey, list[Hold]],
) -> tuple[Settlement, bool]:
    """One settlement of a batch. The pot is paid by the terms its stakes were bound under,
    never by the result."""
    result = request.result
    key = result.key
    closed = games.closed[key]
    if closed is not None:
        return _closed_before(unit, closed, result.event_id, from_event=request.from_event)
    bound = _still_bound(bound_by_game[key])
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


async def void_game(unit: UnitOfWork, request: VoidRequest) -> tuple[Settlement, bool]:
    """Void a game: its bound holds are voided and no chips move. A void no table event
    orders, of a game the ledger never saw (no escrow), is NOT_FOUND."""
    key = request.key
    games = await _lock_games(unit, [key], house=False)
    closed = games.closed[key]
    if closed is not None:
        return _closed_before(unit, closed, request.event_id, from_event=request.from_event)
    if not request.event_id and unit.opens(key.escrow_id):
        raise NotFound(
            f"the ledger knows no game {key}: no stake was ever bound to it",
            reason=Reason.NOT_FOUND,
            metadata=game_metadata(key),
        )
    bound = _still_bound((await unit.tx.holds_of_games([key]))[key])
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


async def reject_result(
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


def _still_bound(holds: Sequence[Hold]) -> list[Hold]:
    """Of the holds ever bound to a game, those still bound: what closing it posts or voids."""
    return [hold for hold in holds if hold.state is HoldState.BOUND]


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


def check_result(result: GameResult) -> None:
    """Refuse a malformed result before anything is read (BAD_REQUEST)."""
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
            reason=Reason.RESULT_MISMATCH,
            metadata=game_metadata(result.key),
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
