"""What ``masa lobbies``, ``balance``, ``history`` and ``grant`` print, and the payout a player
sees after a chip table (P-30)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import IO, Final

from masa.common.v1 import chips_pb2
from masa.ledger.v1 import ledger_pb2
from masa.matchmaking.v1 import matchmaking_pb2 as mm

from masa_client.client import new_request_id
from masa_client.matchmaking import LedgerClient
from masa_client.seating import lobby_table
from masa_client.session import Console

__all__ = [
    "grant",
    "print_balance",
    "print_history",
    "print_lobbies",
    "settled",
    "show_table_chips",
]

_KINDS: Final = {
    chips_pb2.TRANSFER_KIND_GRANT: "grant",
    chips_pb2.TRANSFER_KIND_STAKE: "stake",
    chips_pb2.TRANSFER_KIND_PAYOUT: "payout",
    chips_pb2.TRANSFER_KIND_RAKE: "rake",
    chips_pb2.TRANSFER_KIND_FORFEIT: "forfeit",
}
# How long the end of a chip table waits for the ledger to settle it.
_SETTLE_SECONDS: Final = 30.0
_CLOSED: Final = frozenset(
    {
        ledger_pb2.StakeHold.STATE_POSTED,
        ledger_pb2.StakeHold.STATE_VOIDED,
        ledger_pb2.StakeHold.STATE_RELEASED,
        ledger_pb2.StakeHold.STATE_EXPIRED,
    }
)


def print_lobbies(lobbies: Sequence[mm.Lobby], out: IO[str]) -> None:
    if not lobbies:
        print("no lobby matches", file=out)
    for line in lobby_table(lobbies):
        print(line, file=out)


def print_balance(account: ledger_pb2.Account, out: IO[str]) -> None:
    print(
        f"{account.player_id}: {account.balance:,} chips "
        f"({account.held:,} held, {account.available:,} available)",
        file=out,
    )


def print_history(player: str, transfers: Sequence[ledger_pb2.Transfer], out: IO[str]) -> None:
    if not transfers:
        print(f"{player} has no transfers yet", file=out)
    wallet = f"player:{player}"
    for transfer in transfers:
        when = datetime.fromtimestamp(transfer.create_time.seconds, UTC).strftime("%Y-%m-%d %H:%M")
        sign = "-" if transfer.debit_account_id == wallet else "+"
        where = f"  table {transfer.table_id} game {transfer.game_no}" if transfer.table_id else ""
        reason = f"  {transfer.reason}" if transfer.reason and not transfer.table_id else ""
        kind = _KINDS.get(transfer.kind, "?")
        print(f"{when}  {kind:<7} {sign}{transfer.amount:>9,}{where}{reason}", file=out)


async def grant(
    client: LedgerClient,
    player: str,
    amount: int,
    reason: str,
    out: IO[str],
    *,
    request_id: str | None = None,
) -> None:
    """Grant chips and say what moved, then the balance. A request id that granted before
    moves nothing (the ledger answers with the first grant), and that is what it says."""
    request_id = request_id or new_request_id()
    answer = await client.grant(player, amount, reason, request_id=request_id)
    transfer = answer.transfer
    if answer.replayed:
        print(
            f"already granted by request {request_id}: {transfer.amount:,} chips to {player} "
            f"({transfer.transfer_id}); nothing moved",
            file=out,
        )
    else:
        print(
            f"granted {transfer.amount:,} chips to {player} ({transfer.transfer_id}); "
            f"request id {request_id}",
            file=out,
        )
    print_balance(await client.balance(player), out)


async def settled(client: LedgerClient, hold_id: str) -> tuple[ledger_pb2.StakeHold, int] | None:
    """The stake's hold once the ledger closed its game, with what the table paid the caller
    for it (0 for a stake that was never taken); None when not settled within a while."""
    deadline = time.monotonic() + _SETTLE_SECONDS
    hold = await client.hold(hold_id)
    while hold.state not in _CLOSED and time.monotonic() < deadline:
        await asyncio.sleep(0.25)
        hold = await client.hold(hold_id)
    if hold.state not in _CLOSED:
        return None
    if hold.state != ledger_pb2.StakeHold.STATE_POSTED:
        return hold, 0
    transfers = await client.transfers(limit=50, table_id=hold.table_id)
    return hold, sum(t.amount for t in transfers if t.kind == chips_pb2.TRANSFER_KIND_PAYOUT)


async def _show_payout(client: LedgerClient, hold_id: str, console: Console) -> None:
    """Wait for the ledger to settle the stake's game, then say what became of the stake and
    the balance."""
    closed = await settled(client, hold_id)
    if closed is None:
        console.say("the ledger has not settled the table yet: see masa balance later")
        return
    hold, paid = closed
    if hold.state == ledger_pb2.StakeHold.STATE_POSTED:
        console.say(f"the table paid you {paid:,} chips for your stake of {hold.amount:,}")
    elif hold.state == ledger_pb2.StakeHold.STATE_VOIDED:
        console.say(
            f"the game was voided: your stake of {hold.amount:,} chips came back to you (P-30)"
        )
    else:
        console.say(f"your stake of {hold.amount:,} chips was never taken: it is yours (P-30)")
    account = await client.balance()
    console.say(f"balance: {account.balance:,} chips ({account.available:,} available)")


async def show_table_chips(
    client: LedgerClient, table_id: str, game_no: int, console: Console
) -> None:
    """What became of the caller's stake at a chip table's game, read from the ledger: the
    same whether the player was seated in this session or came back to the seat."""
    holds = await client.table_holds(table_id, game_no)
    if not holds:
        console.say(f"the ledger holds no stake of yours at table {table_id}: see masa history")
        return
    await _show_payout(client, holds[0].hold_id, console)
