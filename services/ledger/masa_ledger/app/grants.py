"""Granting chips (P-31): the issuer's chips into a player's wallet, once per request id.

The transfer id derives from the request id (``grant:<request_id>``), so the same grant again
moves nothing and answers with the first transfer; the same id with another player, amount or
reason is REQUEST_ID_REUSED. A grant opens the player's wallet if it has none.
"""

from __future__ import annotations

from masa_rules.refusals import Reason

from masa_ledger.app.unit_of_work import UnitOfWork
from masa_ledger.domain.errors import Refused, RequestIdReused
from masa_ledger.domain.events import ChipsGranted
from masa_ledger.domain.model import ISSUER, Account, AccountKind, Transfer, TransferKind, wallet_id
from masa_ledger.domain.validation import MAX_BALANCE

__all__ = ["grant_chips"]


async def grant_chips(
    unit: UnitOfWork, request_id: str, player_id: str, amount: int, reason: str
) -> tuple[Transfer, bool]:
    """The grant's transfer, and whether this request made it (False for a retry)."""
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
            reason=Reason.BALANCE_LIMIT,
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
