"""Holds (P-30): placing a group's stakes, releasing a hold, and expiring unbound ones.

A hold reserves a player's chips for a lobby: *held*. A group of stakes is held all or nothing
(INSUFFICIENT_FUNDS names every short player); a hold placed before under the same id is
answered as it is if the request is the same, REQUEST_ID_REUSED if not. An unbound hold is
released by its caller or expired by the ledger at its time; neither moves chips. Binding and
closing holds are :mod:`.binding` and :mod:`.settlement`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace

from masa_rules.refusals import Reason
from masa_rules.table_config import PayoutRule

from masa_ledger.app.ports import AccountChange
from masa_ledger.app.unit_of_work import Outcome, UnitOfWork
from masa_ledger.domain.errors import BadInput, NotFound, Refused, RequestIdReused
from masa_ledger.domain.events import HoldPlaced, HoldVoidCause, HoldVoided
from masa_ledger.domain.model import Hold, HoldState
from masa_ledger.domain.validation import (
    MAX_HOLDS_PER_GAME,
    check_amount,
    check_id,
    check_player_id,
    check_rule,
)

__all__ = [
    "HoldPolicy",
    "StakeRequest",
    "expire_holds",
    "new_holds",
    "no_hold",
    "not_held",
    "place_holds",
    "release_hold",
]


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
    # The terms of the game the stake is for, the only ones the hold will bind under (the
    # gRPC API requires them); None binds under any.
    rule: PayoutRule | None = None


def new_holds(stakes: Sequence[StakeRequest], policy: HoldPolicy, now: float) -> list[Hold]:
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
    rule = None if stake.rule is None else check_rule(stake.rule).spelt_out()
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
        rule=rule,
    )


async def place_holds(unit: UnitOfWork, batch: Sequence[list[Hold]]) -> list[Outcome[list[Hold]]]:
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


async def release_hold(unit: UnitOfWork, hold_id: str, reason: str) -> Hold:
    """Void a held (unbound) hold; one released already is answered as it is."""
    found = (await unit.tx.holds([hold_id])).get(hold_id)
    if found is None:
        raise no_hold(hold_id)
    await unit.tx.lock_accounts([found.account_id])
    hold = (await unit.tx.holds([hold_id], lock=True))[hold_id]
    if hold.state is HoldState.RELEASED:
        return hold
    if hold.state is not HoldState.HELD:
        raise not_held(hold)
    released = replace(hold, state=HoldState.RELEASED, closed_at=unit.at, reason=reason)
    unit.update(released)
    unit.adjust(hold.account_id, AccountChange(held=-hold.amount))
    unit.report(HoldVoided(hold=released, cause=HoldVoidCause.RELEASED))
    return released


async def expire_holds(unit: UnitOfWork, due: Sequence[Hold]) -> int:
    """Void the holds of ``due`` still held and past their expiry; returns how many."""
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


def no_hold(hold_id: str) -> NotFound:
    """The refusal of a hold id the ledger does not know."""
    return NotFound(
        f"no hold {hold_id!r}", reason=Reason.HOLD_NOT_FOUND, metadata={"hold_id": hold_id}
    )


def _insufficient(short: Sequence[Hold], available_chips: dict[str, int]) -> Refused:
    first = short[0]
    available = available_chips.get(first.account_id, 0)
    names = ", ".join(hold.player_id for hold in short)
    return Refused(
        f"not enough chips to stake: {names}",
        reason=Reason.INSUFFICIENT_FUNDS,
        metadata={
            "player_id": first.player_id,
            "available": str(available),
            "required": str(first.amount),
            "short_player_ids": json.dumps([hold.player_id for hold in short]),
        },
    )


def not_held(hold: Hold) -> Refused:
    """The refusal of a hold that is no longer held (HOLD_NOT_HELD, naming its state)."""
    metadata = {"hold_id": hold.hold_id, "state": hold.state.name}
    if hold.table_id:
        metadata |= {"table_id": hold.table_id, "game_no": str(hold.game_no)}
    return Refused(
        f"hold {hold.hold_id!r} is {hold.state.value}",
        reason=Reason.HOLD_NOT_HELD,
        metadata=metadata,
    )
