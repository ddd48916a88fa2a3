"""The reads: a wallet, an account, a hold, a settlement, and pages of transfers and holds.

Each checks its input, then reads the store outside any write (the last committed state); none
takes a lock or writes. The gRPC adapter checks who may read what.
"""

from __future__ import annotations

from masa_rules.refusals import Reason

from masa_ledger.app.holds import no_hold
from masa_ledger.app.paging import Page, page_of, page_size
from masa_ledger.app.ports import HoldFilter, Store, TransferFilter
from masa_ledger.domain.errors import BadInput, NotFound, game_metadata
from masa_ledger.domain.model import (
    HOUSE,
    ISSUER,
    Account,
    AccountKind,
    GameKey,
    Hold,
    Settlement,
    Transfer,
    wallet_id,
)
from masa_ledger.domain.validation import check_game, check_id, check_player_id, check_table_id

__all__ = ["account", "hold", "holds", "settlement", "transfers", "wallet"]


async def wallet(store: Store, player_id: str) -> Account:
    """A player's wallet; a player never granted chips has an empty one."""
    check_player_id("player_id", player_id)
    account_id = wallet_id(player_id)
    found = await store.account(account_id)
    return found or Account(account_id=account_id, kind=AccountKind.PLAYER, player_id=player_id)


async def account(store: Store, account_id: str) -> Account:
    _check_account_id(account_id)
    found = await store.account(account_id)
    if found is None:
        raise NotFound(
            f"no account {account_id!r}",
            reason=Reason.ACCOUNT_NOT_FOUND,
            metadata={"account_id": account_id},
        )
    return found


async def hold(store: Store, hold_id: str) -> Hold:
    check_id("hold_id", hold_id)
    found = await store.hold(hold_id)
    if found is None:
        raise no_hold(hold_id)
    return found


async def settlement(store: Store, key: GameKey) -> Settlement:
    check_game(key.table_id, key.game_no)
    found = await store.settlement(key)
    if found is None:
        raise NotFound(
            f"game {key} was neither settled nor voided",
            reason=Reason.SETTLEMENT_NOT_FOUND,
            metadata=game_metadata(key),
        )
    return found


async def transfers(
    store: Store, where: TransferFilter, *, size: int, before_seq: int | None
) -> Page[Transfer]:
    """A page of ``where``'s transfers, below ``before_seq`` (the previous page's
    ``next_before_seq``) if given."""
    _check_game_filter(where.table_id, where.game_no)
    limit = page_size(size)
    return page_of(await store.list_transfers(where, before_seq=before_seq, limit=limit + 1), limit)


async def holds(
    store: Store, where: HoldFilter, *, size: int, before_seq: int | None
) -> Page[Hold]:
    """A page of ``where``'s holds, below ``before_seq`` if given."""
    _check_game_filter(where.table_id, where.game_no)
    limit = page_size(size)
    return page_of(await store.list_holds(where, before_seq=before_seq, limit=limit + 1), limit)


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
