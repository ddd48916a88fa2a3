"""Binding held stakes to one game's escrow, under the game's stake and terms (P-30).

The escrow of a game is opened by its first bind, with the stake per hold and the terms (rake
and payout table) its settlement will pay by, which must be the terms each hold was placed for
(TERMS_MISMATCH). Binding changes no balance: the holds become
*bound* and the escrow's pending stakes are their sum. Binding the same holds to the same game
under the same terms again answers as the first time; anything else for a game bound already is
ESCROW_MISMATCH, and a game closed already is GAME_CLOSED.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from masa_rules.refusals import Reason
from masa_rules.table_config import PayoutRule

from masa_ledger.app.holds import no_hold, not_held
from masa_ledger.app.ports import AccountChange
from masa_ledger.app.unit_of_work import Outcome, UnitOfWork
from masa_ledger.domain.errors import BadInput, Refused, game_metadata
from masa_ledger.domain.events import HoldsBound
from masa_ledger.domain.model import Account, GameKey, Hold, HoldState

__all__ = ["BindRequest", "bind_holds"]


@dataclass(frozen=True, slots=True, kw_only=True)
class BindRequest:
    """Holds to bind to one game, each holding ``stake``, under the game's terms ``rule``;
    ``at`` is when it was asked (a hold past its expiry then is not bound)."""

    key: GameKey
    stake: int
    hold_ids: tuple[str, ...]
    at: float
    rule: PayoutRule


async def bind_holds(
    unit: UnitOfWork, batch: Sequence[BindRequest]
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
    unit: UnitOfWork, bind: BindRequest, escrows: dict[str, Account], holds: dict[str, Hold]
) -> tuple[Account, list[Hold]]:
    """One bind of a batch; ``escrows`` and ``holds`` follow what earlier ones changed."""
    key, stake = bind.key, bind.stake
    # The terms as they compare and are kept: the winner's 10000 spelt out when none is set.
    rule = bind.rule.spelt_out()
    escrow = escrows[key.escrow_id]
    if escrow.closed is not None:
        raise Refused(
            f"game {key} was {escrow.closed.value} already",
            reason=Reason.GAME_CLOSED,
            metadata=game_metadata(key, state=escrow.closed.name),
        )
    for hold_id in bind.hold_ids:
        if hold_id not in holds:
            raise no_hold(hold_id)
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
        same_terms = escrow.stake == stake and (
            escrow.rule is not None and escrow.rule.spelt_out() == rule
        )
        if here and total == escrow.pending_stakes and same_terms:
            return escrow, chosen
        raise Refused(
            f"game {key} is bound to other holds or another stake",
            reason=Reason.ESCROW_MISMATCH,
            metadata=game_metadata(key, stake=str(escrow.stake)),
        )
    for hold in chosen:
        _check_bindable(hold, key, stake, rule, bind.at)
    bound = [
        replace(hold, state=HoldState.BOUND, table_id=key.table_id, game_no=key.game_no)
        for hold in chosen
    ]
    for hold in bound:
        holds[hold.hold_id] = hold
        unit.update(hold)
    escrows[key.escrow_id] = replace(escrow, pending_stakes=total, stake=stake, rule=rule)
    unit.adjust(key.escrow_id, AccountChange(pending_stakes=total, stake=stake, rule=rule))
    unit.report(HoldsBound(key=key, stake=stake, hold_ids=bind.hold_ids, at=bind.at, rule=rule))
    return escrows[key.escrow_id], bound


def _check_bindable(hold: Hold, key: GameKey, stake: int, rule: PayoutRule, now: float) -> None:
    if hold.state in (HoldState.BOUND, HoldState.POSTED):
        raise Refused(
            f"hold {hold.hold_id!r} is bound to game {hold.table_id}:{hold.game_no}",
            reason=Reason.HOLD_ALREADY_BOUND,
            metadata={
                "hold_id": hold.hold_id,
                "table_id": hold.table_id,
                "game_no": str(hold.game_no),
            },
        )
    if hold.state is not HoldState.HELD:
        raise not_held(hold)
    if hold.expire_at <= now:
        raise not_held(replace(hold, state=HoldState.EXPIRED))
    if hold.amount != stake:
        raise Refused(
            f"hold {hold.hold_id!r} holds {hold.amount}, the stake of game {key} is {stake}",
            reason=Reason.STAKE_MISMATCH,
            metadata={"hold_id": hold.hold_id, "amount": str(hold.amount), "stake": str(stake)},
        )
    if hold.rule is not None and hold.rule != rule:
        # The terms were fixed by whoever placed the stake (matchmaking, from the lobby): the
        # binder may not choose others, so a compromised engine cannot rake or re-split a pot.
        raise Refused(
            f"hold {hold.hold_id!r} was placed for other terms than game {key} is bound under",
            reason=Reason.TERMS_MISMATCH,
            metadata={"hold_id": hold.hold_id},
        )
