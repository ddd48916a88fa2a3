"""``masa admin``: the operator's command line (issue 13).

- ``nodes``: the live table-engine nodes and the tables each one holds the lease of, and the
  tables whose node is gone (waiting for a live node to take them over);
- ``drain NODE``: drains a table-engine node (its ``DrainNode``, found through the registry):
  it takes no new table and hands each table over to the other nodes, and stays up answering
  health NOT_SERVING until it is stopped or resumed;
- ``resume NODE``: returns a drained node to service (its ``ResumeNode``): it makes new tables
  and takes tables over again, and answers health SERVING;
- ``void TABLE``: voids a stuck table at the engine first (``VoidTable`` at the node holding
  its lease): the table stops, logs ``TableVoided`` and publishes ``GameAbandoned``, from
  which the ledger voids the game's stakes (P-30), once; the command waits for that and shows
  each stake given back. Only when no engine can void it (no node holds the table, the node
  does not answer or does not know it) does it void the game in the ledger directly
  (``VoidGame``), the backstop: should that table ever play on, its result is refused by the
  ledger (the game is closed), so no chips move twice. A game the ledger never saw (no stake
  was bound to it: a mistyped table id, say) is voided nowhere: the command says so and fails.
  A table whose game is over already is left alone, in the engine and in the ledger (a
  finished game is settled from its result);
- ``grant PLAYER AMOUNT``: chips from the issuing account (``GrantChips``), with a request id
  that makes a retry harmless: a request id that granted before moves nothing, and the command
  says so;
- ``log TABLE``: the table's JetStream log as readable lines. It shows everything the log
  holds, every hand included: it is for operators only.

The gRPC calls carry an admin token: ``MASA_ADMIN_TOKEN`` (an operator's, from the deployment's
identity provider), else one signed with ``make run``'s issuer key
(:func:`masa_client.issuer.admin_token`); NATS is reached as the operators' user
(:mod:`masa_client.operator_bus`). Every id and amount is checked before anything is sent.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Final

import grpc
from masa.common.v1 import error_pb2
from masa.events.v1 import table_log_pb2
from masa.ledger.v1 import ledger_pb2
from masa.table.v1 import admin_pb2
from masa_platform.errors import reason_name

from masa_client.accounts import grant
from masa_client.client import RetryPolicy, new_request_id
from masa_client.errors import TABLE_MOVED, MasaCallError
from masa_client.issuer import admin_token
from masa_client.matchmaking import LedgerClient, TableAdminClient
from masa_client.nodes import EngineNodeInfo, print_nodes, read_nodes, table_owners
from masa_client.operator_bus import BusUnreachable, bus_login, connect_operator
from masa_client.table_log import describe_entry, read_table_log, seat_names

__all__ = ["add_admin_parser", "chip_amount", "run_admin"]

# What the services accept (the table-engine's and the ledger's limits).
_TABLE_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
_PLAYER_ID: Final = re.compile(r"[A-Za-z0-9_.:@+-]{1,128}")
_REQUEST_ID: Final = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
_NODE_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
_MAX_GRANT: Final = 10**12
_SUBJECT: Final = "masa-admin"
# A drain answers once every table is handed over: a few seconds, within the 120 s a node
# gets to stop (terminationGracePeriodSeconds).
_DRAIN_SECONDS: Final = 120.0
_RESUME_SECONDS: Final = 30.0
_VOID_SECONDS: Final = 30.0
# How long a void at the engine waits for the ledger to void the stakes from GameAbandoned
# before it voids them in the ledger itself.
_LEDGER_WAIT_SECONDS: Final = 15.0
# The engine's calls in a void are tried a few times only: the ledger is the backstop.
_ENGINE_RETRY: Final = RetryPolicy(attempts=3)
# What the ledger answers a void of a game it never saw with.
_UNKNOWN_GAME: Final = reason_name(error_pb2.ERROR_REASON_NOT_FOUND)
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


def chip_amount(text: str) -> int:
    """An argparse type: a whole number of chips an operator may grant at once."""
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
        help="operator commands: nodes, drain, resume, void, grant, log (admin)",
        description="The operator's commands. gRPC calls carry an admin token: "
        "MASA_ADMIN_TOKEN, else one signed with make run's issuer key (.masa/keys, or "
        "MASA_JWT_ISSUER_KEY_FILE); NATS is reached as the operators' "
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

    drain = subcommands.add_parser(
        "drain",
        help="drain a table-engine node: its tables move to the other nodes",
        description="Drain a live table-engine node (found in the engine-node registry, as "
        "masa nodes lists them), as SIGTERM does, without stopping it: it makes no new table, "
        "hands each of its tables over to the other nodes after a final snapshot, and answers "
        "health NOT_SERVING until it is stopped. The command returns once every table is "
        "handed over. Draining a drained node hands nothing over. masa admin resume returns "
        "it to service.",
    )
    drain.add_argument("node", type=_matching(_NODE_ID, "node id"), help="the node id")
    drain.add_argument("--nats", help=nats_where)

    resume = subcommands.add_parser(
        "resume",
        help="return a drained table-engine node to service",
        description="Return a drained table-engine node (found in the engine-node registry, "
        "where a drained node stays listed as draining) to service: it makes new tables and "
        "takes unserved tables over again, the registry lists it as live, and it answers "
        "health SERVING. The tables it handed over stay where they went. Resuming a node "
        "that is not drained changes nothing; a node stopping after SIGTERM cannot be "
        "resumed (start it again).",
    )
    resume.add_argument("node", type=_matching(_NODE_ID, "node id"), help="the node id")
    resume.add_argument("--nats", help=nats_where)

    void = subcommands.add_parser(
        "void",
        help="void a stuck table's game: it stops and its stakes go back (P-30)",
        description="Void the game of a table that cannot finish. The node serving it stops "
        "the table and ends its game as abandoned; the ledger then voids every stake hold "
        "bound to the game, no chips move, and each player's stake is free again (P-30). When "
        "no node can void it (none serves it, or it does not answer), the game is voided in "
        "the ledger only. A game over already is left as it is, and the command says so. A "
        "game neither a node nor the ledger knows (no stake was ever bound to it) is voided "
        "nowhere: the command says so and exits 1.",
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
    void.add_argument("--nats", help=nats_where)

    grant = subcommands.add_parser(
        "grant",
        help="grant chips to a player",
        description="Grant chips to a player from the issuing account (GrantChips). The "
        "request id is printed: running the command again with --request-id and the same id "
        "grants nothing twice, and says that nothing moved.",
    )
    grant.add_argument("player", type=_matching(_PLAYER_ID, "player id"), help="who gets them")
    grant.add_argument("amount", type=chip_amount, help=f"how many chips (1 to {_MAX_GRANT:,})")
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
            if args.admin_command == "nodes":
                nodes = await read_nodes(bus, with_tables=True)
                live = {node.node_id for node in nodes}
                owners = await table_owners(bus)
                orphans = sorted((t, n) for t, n in owners.items() if n not in live)
                print_nodes(nodes, out, orphans=orphans, with_tables=True)
                return 0
            return _print_log(await read_table_log(bus, args.table), args.table, out)
        finally:
            await bus.close()
    token = admin_token(_SUBJECT, ttl_seconds=600)
    if args.admin_command == "drain":
        return await _drain(args, token, run_file, out)
    if args.admin_command == "resume":
        return await _resume(args, token, run_file, out)
    async with LedgerClient(ledger(args.ledger), token) as client:
        if args.admin_command == "grant":
            await grant(
                client, args.player, args.amount, args.reason, out, request_id=args.request_id
            )
            return 0
        return await _void(client, args, token, run_file, out)


async def _registered(args: argparse.Namespace, run_file: Path | None) -> EngineNodeInfo | None:
    """The node ``args.node`` as the engine-node registry lists it (a drained node too); None,
    said on stderr with the nodes listed, when it is not there."""
    bus = await connect_operator(bus_login(args.nats, run_file))
    try:
        nodes = {node.node_id: node for node in await read_nodes(bus)}
    finally:
        await bus.close()
    node = nodes.get(args.node)
    if node is None:
        live = ", ".join(sorted(nodes)) or "none"
        print(
            f"masa admin {args.admin_command}: no live table-engine node {args.node} "
            f"(live: {live})",
            file=sys.stderr,
        )
    return node


async def _drain(args: argparse.Namespace, token: str, run_file: Path | None, out: IO[str]) -> int:
    node = await _registered(args, run_file)
    if node is None:
        return 1
    print(f"draining {node.node_id} at {node.address} ({node.tables} tables) ...", file=out)
    engine = TableAdminClient(node.address, token)
    async with engine:
        drained = await engine.drain_node(node.node_id, timeout=_DRAIN_SECONDS)
    print(
        f"drained {drained.node_id}: handed {drained.tables_handed_over} tables over to the "
        "other nodes; it makes no new table and answers health NOT_SERVING until it is stopped "
        f"or resumed (masa admin resume {drained.node_id})",
        file=out,
    )
    return 0


async def _resume(args: argparse.Namespace, token: str, run_file: Path | None, out: IO[str]) -> int:
    node = await _registered(args, run_file)
    if node is None:
        return 1
    engine = TableAdminClient(node.address, token)
    async with engine:
        try:
            answer = await engine.resume_node(node.node_id, timeout=_RESUME_SECONDS)
        except MasaCallError as error:
            if error.code is not grpc.StatusCode.FAILED_PRECONDITION:
                raise
            print(
                f"masa admin resume: {node.node_id} was not resumed: {error.message}",
                file=sys.stderr,
            )
            return 1
    if not answer.resumed:
        print(f"{answer.node_id} at {node.address} is not drained; nothing changed", file=out)
        return 0
    print(
        f"resumed {answer.node_id} at {node.address}: it makes new tables and takes tables "
        "over again, and answers health SERVING",
        file=out,
    )
    return 0


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


async def _void(
    client: LedgerClient,
    args: argparse.Namespace,
    token: str,
    run_file: Path | None,
    out: IO[str],
) -> int:
    """At the engine first, the ledger as the backstop (module doc)."""
    request_id = args.request_id or new_request_id()
    found = await _void_at_engine(args, token, run_file, request_id)
    if isinstance(found, admin_pb2.VoidTableResponse):
        # The engine knows the game's number at the table; --game is for the ledger only.
        args.game = found.table.game_no or args.game
        if not found.applied:
            return await _game_over(client, args, out)
        print(f"voided table {args.table} at {found.table.owner_address}", file=out)
        if not found.table.config.stake:
            print("no stakes to give back: the table plays without chips", file=out)
            return 0
        return await _stakes_voided_by_engine(client, args, request_id, out)
    print(
        f"the engine did not void table {args.table} ({found}); voiding it in the ledger",
        file=out,
    )
    return await _void_in_ledger(client, args, request_id, out)


async def _void_in_ledger(
    client: LedgerClient, args: argparse.Namespace, request_id: str, out: IO[str]
) -> int:
    """The ledger's VoidGame; a game it never saw (no stake bound to it) is voided nowhere."""
    try:
        answer = await client.void_game(args.table, args.game, args.reason, request_id=request_id)
    except MasaCallError as error:
        if error.reason != _UNKNOWN_GAME:
            raise
        print(
            f"masa admin void: the ledger knows no game {args.game} of table {args.table} "
            "(no stake was ever bound to it), so nothing was voided; check the table id "
            "(masa admin nodes lists the tables the nodes serve)",
            file=sys.stderr,
        )
        return 1
    return await _print_voided(client, answer, args, out)


async def _void_at_engine(
    args: argparse.Namespace,
    token: str,
    run_file: Path | None,
    request_id: str,
) -> admin_pb2.VoidTableResponse | str:
    """The answer of the node serving the table (``applied`` false: the game was over), or
    why no node could void it."""
    try:
        bus = await connect_operator(bus_login(args.nats, run_file))
    except BusUnreachable as error:
        return f"NATS, where the nodes are listed, cannot be reached: {error}"
    try:
        holder = (await table_owners(bus)).get(args.table)
        addresses = {node.node_id: node.address for node in await read_nodes(bus)}
    finally:
        await bus.close()
    address = addresses.get(holder or "")
    if address is None:
        return "no live node serves it" if holder is None else f"its node {holder} is not live"
    for _ in range(2):
        engine = TableAdminClient(address, token, retry=_ENGINE_RETRY)
        async with engine:
            try:
                answer = await engine.void_table(
                    args.table, args.reason, request_id=request_id, timeout=_VOID_SECONDS
                )
            except MasaCallError as error:
                if error.reason == TABLE_MOVED and error.metadata.get("owner_address"):
                    # Taken over since the lease was read: ask the new owner, once.
                    address = error.metadata["owner_address"]
                    continue
                if error.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.NOT_FOUND):
                    return str(error)
                raise
        return answer
    return "it moved from node to node while the command looked for it"


async def _stakes_voided_by_engine(
    client: LedgerClient, args: argparse.Namespace, request_id: str, out: IO[str]
) -> int:
    """The ledger voids the stakes from the table's GameAbandoned: wait for it, or void them
    here once the wait is over (the same game is voided once either way)."""
    deadline = time.monotonic() + _LEDGER_WAIT_SECONDS
    while time.monotonic() < deadline:
        settlement = await client.settlement(args.table, args.game)
        if settlement is not None:
            return await _print_settlement(client, settlement, args, out)
        await asyncio.sleep(0.2)
    print("the ledger has not voided the stakes yet; voiding them there now", file=out)
    return await _void_in_ledger(client, args, request_id, out)


async def _game_over(client: LedgerClient, args: argparse.Namespace, out: IO[str]) -> int:
    """The engine says the game is over: the ledger settles it from its result, so nothing is
    voided there either."""
    settlement = await client.settlement(args.table, args.game)
    where = f"table {args.table} game {args.game}"
    if settlement is None:
        print(f"{where} is over already; nothing changed (its result settles the stakes)", file=out)
        return 0
    print(f"{where} was {_closed(settlement)} already; nothing changed", file=out)
    return 0


async def _print_voided(
    client: LedgerClient,
    answer: ledger_pb2.VoidGameResponse,
    args: argparse.Namespace,
    out: IO[str],
) -> int:
    if not answer.applied:
        where = f"table {args.table} game {args.game}"
        print(f"{where} was {_closed(answer.settlement)} already; nothing changed", file=out)
        return 0
    return await _print_settlement(client, answer.settlement, args, out)


async def _print_settlement(
    client: LedgerClient, settlement: ledger_pb2.Settlement, args: argparse.Namespace, out: IO[str]
) -> int:
    where = f"table {args.table} game {args.game}"
    if settlement.state != ledger_pb2.Settlement.STATE_VOIDED:
        print(f"{where} was {_closed(settlement)} already; nothing changed", file=out)
        return 0
    print(f"voided {where}: {len(settlement.hold_ids)} stakes given back", file=out)
    for hold_id in settlement.hold_ids:
        hold = await client.hold(hold_id)
        state = _HOLD_STATES.get(hold.state, "?")
        print(f"  {hold.player_id}: {hold.amount:,} chips ({state}, hold {hold_id})", file=out)
    return 0


def _closed(settlement: ledger_pb2.Settlement) -> str:
    return "settled" if settlement.state == ledger_pb2.Settlement.STATE_SETTLED else "voided"
