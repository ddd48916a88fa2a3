"""``masa admin``: the operator's command line (issue 13).

- ``nodes``: the live table-engine nodes and the tables each one holds the lease of, and the
  tables whose node is gone (waiting for a live node to take them over);
- ``void TABLE``: voids a stuck table's game in the ledger, which releases every stake bound
  to it (P-30), and shows each stake given back;
- ``grant PLAYER AMOUNT``: chips from the issuing account (``GrantChips``), with a request id
  that makes a retry harmless;
- ``log TABLE``: the table's JetStream log as readable lines. It shows everything the log
  holds, every hand included: it is for operators only.

The gRPC calls carry a service-role token signed with the development secret
(``MASA_JWT_SECRET``, as the launcher's services use); NATS is reached as the operators' user
(:mod:`masa_client.operator_bus`). Every id and amount is checked before anything is sent.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Final

from masa.events.v1 import table_log_pb2
from masa.ledger.v1 import ledger_pb2
from masa_platform.auth import Role, mint_token
from masa_platform.settings import AuthSettings, load_settings

from masa_client.client import new_request_id
from masa_client.matchmaking import LedgerClient
from masa_client.nodes import print_nodes, read_nodes, table_owners
from masa_client.operator_bus import bus_login, connect_operator
from masa_client.table_log import describe_entry, read_table_log, seat_names

__all__ = ["add_admin_parser", "run_admin"]

# What the services accept (the table-engine's and the ledger's limits).
_TABLE_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
_PLAYER_ID: Final = re.compile(r"[A-Za-z0-9_.:@+-]{1,128}")
_REQUEST_ID: Final = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
_MAX_GRANT: Final = 10**12
_SUBJECT: Final = "masa-admin"
_HOLD_STATES: Final = {
    ledger_pb2.StakeHold.STATE_HELD: "held",
    ledger_pb2.StakeHold.STATE_BOUND: "bound",
    ledger_pb2.StakeHold.STATE_POSTED: "posted",
    ledger_pb2.StakeHold.STATE_RELEASED: "released",
    ledger_pb2.StakeHold.STATE_EXPIRED: "expired",
    ledger_pb2.StakeHold.STATE_VOIDED: "voided",
}


def _matching(pattern: re.Pattern[str], what: str) -> Callable[[str], str]:
    def check(text: str) -> str:
        if not pattern.fullmatch(text):
            raise argparse.ArgumentTypeError(f"not a valid {what}: {text[:40]!r}")
        return text

    return check


def _chips(text: str) -> int:
    try:
        amount = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of chips: {text[:40]!r}") from None
    if not 1 <= amount <= _MAX_GRANT:
        raise argparse.ArgumentTypeError(f"the amount must be 1 to {_MAX_GRANT:,} chips")
    return amount


def _game_no(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 2**32 - 1:
        raise argparse.ArgumentTypeError(f"not a game number (1 or more): {text[:40]!r}")
    return int(text)


def add_admin_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    *,
    ledger_where: str,
    nats_where: str,
) -> None:
    admin = commands.add_parser(
        "admin",
        help="operator commands: nodes, void, grant, log (service role)",
        description="The operator's commands. gRPC calls carry a service-role token signed "
        "with the development secret (MASA_JWT_SECRET); NATS is reached as the operators' "
        "user (the admin password `make run` keeps in .masa/nats/, or MASA_NATS_USER and "
        "MASA_NATS_PASSWORD).",
    )
    subcommands = admin.add_subparsers(dest="admin_command", required=True, metavar="SUBCOMMAND")

    nodes = subcommands.add_parser(
        "nodes",
        help="the live table-engine nodes and their tables",
        description="The live table-engine nodes (as masa nodes), each with the tables whose "
        "lease it holds, then the tables leased by a node no longer live (a live node takes "
        "each over when its lease expires).",
    )
    nodes.add_argument("--nats", help=nats_where)

    void = subcommands.add_parser(
        "void",
        help="void a stuck table's game: its stakes go back (P-30)",
        description="Void the game of a table that cannot finish: the ledger voids every "
        "stake hold bound to the game, no chips move, and each player's stake is free again "
        "(P-30). Voiding a game settled or voided already changes nothing and says so.",
    )
    void.add_argument("table", type=_matching(_TABLE_ID, "table id"), help="the table id")
    void.add_argument(
        "--game", type=_game_no, default=1, help="the game number at that table (default: 1)"
    )
    void.add_argument(
        "--reason",
        default="voided by an operator with masa admin void",
        help="why, for the audit trail",
    )
    void.add_argument(
        "--request-id",
        type=_matching(_REQUEST_ID, "request id"),
        help="the idempotency key (default: a fresh one); the same id again changes nothing",
    )
    void.add_argument("--ledger", help=ledger_where)

    grant = subcommands.add_parser(
        "grant",
        help="grant chips to a player",
        description="Grant chips to a player from the issuing account (GrantChips). The "
        "request id is printed: running the command again with --request-id and the same id "
        "grants nothing twice.",
    )
    grant.add_argument("player", type=_matching(_PLAYER_ID, "player id"), help="who gets them")
    grant.add_argument("amount", type=_chips, help=f"how many chips (1 to {_MAX_GRANT:,})")
    grant.add_argument(
        "--reason",
        default="granted by an operator with masa admin grant",
        help="why, for the audit trail",
    )
    grant.add_argument(
        "--request-id",
        type=_matching(_REQUEST_ID, "request id"),
        help="the idempotency key (default: a fresh one, printed)",
    )
    grant.add_argument("--ledger", help=ledger_where)

    log = subcommands.add_parser(
        "log",
        help="a table's log as readable lines (shows everything, hands included)",
        description="The table's JetStream log, one line per entry: sequence, time, input, "
        "seat by name, the move as logged, request id, the events it produced and the node "
        "that wrote it. It shows everything the log holds, every seat's cards included: it "
        "is an operator's tool, never to be shown to players.",
    )
    log.add_argument("table", type=_matching(_TABLE_ID, "table id"), help="the table id")
    log.add_argument("--nats", help=nats_where)


async def run_admin(
    args: argparse.Namespace, *, ledger: Callable[[str | None], str], run_file: Path | None
) -> int:
    """Run ``masa admin <subcommand>``; the exit code."""
    out = sys.stdout
    if args.admin_command in ("nodes", "log"):
        bus = await connect_operator(bus_login(args.nats, run_file))
        try:
            js = bus.jetstream()
            if args.admin_command == "nodes":
                nodes = await read_nodes(js, with_tables=True)
                live = {node.node_id for node in nodes}
                owners = await table_owners(js)
                orphans = sorted((t, n) for t, n in owners.items() if n not in live)
                print_nodes(nodes, out, orphans=orphans, with_tables=True)
                return 0
            return _print_log(await read_table_log(js, args.table), args.table, out)
        finally:
            await bus.close()
    token = mint_token(load_settings(AuthSettings), _SUBJECT, [Role.SERVICE], ttl_seconds=600)
    async with LedgerClient(ledger(args.ledger), token) as client:
        if args.admin_command == "grant":
            return await _grant(client, args, out)
        return await _void(client, args, out)


def _print_log(
    entries: list[tuple[str, table_log_pb2.TableLogEntry]], table_id: str, out: IO[str]
) -> int:
    if not entries:
        print(f"masa admin log: table {table_id} has no log (no such table)", file=sys.stderr)
        return 1
    names = seat_names(entry for _, entry in entries)
    for writer, entry in entries:
        print(describe_entry(entry, names, writer), file=out)
    return 0


async def _grant(client: LedgerClient, args: argparse.Namespace, out: IO[str]) -> int:
    request_id = args.request_id or new_request_id()
    transfer = await client.grant(args.player, args.amount, args.reason, request_id=request_id)
    print(
        f"granted {transfer.amount:,} chips to {args.player} ({transfer.transfer_id}); "
        f"request id {request_id}",
        file=out,
    )
    account = await client.balance(args.player)
    print(f"{args.player}: {account.balance:,} chips ({account.available:,} available)", file=out)
    return 0


async def _void(client: LedgerClient, args: argparse.Namespace, out: IO[str]) -> int:
    answer = await client.void_game(
        args.table, args.game, args.reason, request_id=args.request_id or new_request_id()
    )
    settlement = answer.settlement
    where = f"table {args.table} game {args.game}"
    if not answer.applied:
        state = "settled" if settlement.state == ledger_pb2.Settlement.STATE_SETTLED else "voided"
        print(f"{where} was {state} already; nothing changed", file=out)
        return 0
    print(f"voided {where}: {len(settlement.hold_ids)} stakes given back", file=out)
    for hold_id in settlement.hold_ids:
        hold = await client.hold(hold_id)
        state = _HOLD_STATES.get(hold.state, "?")
        print(f"  {hold.player_id}: {hold.amount:,} chips ({state}, hold {hold_id})", file=out)
    return 0
