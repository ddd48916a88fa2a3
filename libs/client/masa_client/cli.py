"""The ``masa`` command: play through matchmaking, see your chips, and development tools.

- ``masa play`` shows the lobbies (``masa lobbies``) and queues you through matchmaking for the
  one you pick, or for ``--lobby``; once seated, the table is played here. A chip table is
  paid by the ledger when the game ends, and the result and your balance are shown.
  ``--table`` comes back to a seat you have (P-12), and a chip table's result is shown then
  too (read from the ledger). Its standard input must be one it can wait on (a terminal or a
  pipe): anything else is refused, with exit code 2, before a ticket or a table is made.
  ``quit`` and Ctrl-C say how long the seat is kept and the command that comes back to it.
  ``--game`` (with ``--preset``,
  ``--players``, ``--level``, ``--turn-seconds``) is a development shortcut: a custom training
  table created directly with a development admin token, for table sizes and turn times no
  lobby has;
- ``masa practice --lobby LOBBY --players N`` (development) starts N practice players, each a
  development player with its own token and wallet, who queue in the lobby and play the
  ``normal`` policy, printing a line per game with the chips won or lost, until Ctrl-C or
  ``--games`` games: bots never sit at a chip table (P-13), so they are how a developer alone
  tries a chip game (:mod:`masa_client.practice`);
- ``masa cancel`` cancels your open ticket (``--ticket`` names one), as ``cancel`` does in the
  lobby menu of ``masa play``;
- ``masa lobbies``, ``masa balance``, ``masa history`` (your transfers) and ``masa grant
  PLAYER AMOUNT`` (an admin grant, with a development admin token);
- ``masa token --player NAME [--role admin]`` prints a development token signed with the
  issuer key ``make run`` keeps in ``.masa/keys`` (or ``MASA_JWT_ISSUER_KEY_FILE``);
- ``masa endpoints`` prints where the stack of ``make run`` listens, and ``--get NAME`` one
  address for scripts (:mod:`masa_client.endpoints`);
- ``masa watch TABLE`` follows a table as a spectator, or shows the result of one that has
  just finished;
- ``masa nodes`` lists the live table-engine nodes from the engine-node registry in NATS (as
  the operators' user, :mod:`masa_client.operator_bus`);
- ``masa admin`` holds the operator's commands (:mod:`masa_client.admin`).

Addresses come from ``--matchmaking``, ``--ledger`` and ``--address`` (the table-engine); else
from the ``run.json`` that ``make run`` writes into its run folder (``MASA_RUN_DIR``, default
``.masa``), looked for in the current folder and in every folder above it, so the commands
work from any folder of the checkout; else the default ports on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

import grpc
from google.protobuf.duration_pb2 import Duration
from masa.common.v1 import game_pb2
from masa.matchmaking.v1 import matchmaking_pb2 as mm
from masa.table.v1 import view_pb2
from masa_platform.auth import Role
from masa_platform.settings import load_settings
from masa_rules.table_config import BotLevel, GameKind
from masa_wire.games import game_name
from masa_wire.table_config import bot_level_to_proto, game_to_proto, preset_to_proto

from masa_client.accounts import (
    grant,
    print_balance,
    print_history,
    print_lobbies,
    show_table_chips,
)
from masa_client.admin import add_admin_parser, chip_amount, run_admin
from masa_client.client import TableClient
from masa_client.endpoints import add_endpoints_parser, print_endpoints
from masa_client.errors import MasaCallError
from masa_client.issuer import IssuerMissing, development_issuer
from masa_client.launcher import RunSettings
from masa_client.matchmaking import LedgerClient, MatchmakingClient
from masa_client.nodes import print_nodes, read_nodes
from masa_client.operator_bus import BusUnreachable, bus_login, connect_operator
from masa_client.practice import (
    PracticeOptions,
    PracticePlayer,
    add_practice_parser,
    run_practice,
)
from masa_client.render import BOT_NAMES, count, style_for
from masa_client.seating import NoSeat, cancel_open, choose_lobby, find_seat
from masa_client.session import (
    SEAT_PROTECTION_SECONDS,
    Console,
    Keyboard,
    PlaySession,
    watch_table,
)
from masa_client.tokens import TokenSource

__all__ = [
    "DEFAULT_ADDRESS",
    "DEFAULT_LEDGER",
    "DEFAULT_MATCHMAKING",
    "engine_address",
    "engine_nodes",
    "main",
    "run_file",
    "service_address",
    "table_config",
]

DEFAULT_ADDRESS: Final = "127.0.0.1:50051"
DEFAULT_LEDGER: Final = "127.0.0.1:50053"
DEFAULT_MATCHMAKING: Final = "127.0.0.1:50054"
# What masa play and --game offer: the presets of 51 and the bot levels, by name.
_PRESETS: Final = ("classic", "salon", "remi")
_LEVELS: Final = tuple(level.value for level in BotLevel)
NATS_WHERE: Final = (
    "the NATS server, nats://host:port (default: the one `make run` started, else MASA_NATS_URL)"
)
# How long a quitting player waits for the engine to confirm the end of a training table.
_LEAVE_SECONDS: Final = 10.0
# How long the development tokens the command signs for itself last: the clients ask for the
# next one before that, so that a session of any length goes on (masa_client.tokens).
_TOKEN_SECONDS: Final = 900.0
# The subject of the operator tokens the development shortcuts sign (masa grant, --game).
_OPERATOR: Final = "masa-cli"


def table_config(
    game: str, preset: str, player: str, *, players: int, level: str, turn_seconds: int
) -> game_pb2.TableConfig:
    """A training table (P-1): the player on seat 0, named bots on the other seats."""
    seats = [
        game_pb2.SeatAssignment(
            seat=0, kind=game_pb2.SEAT_KIND_HUMAN, player_id=player, display_name=player
        )
    ]
    seats.extend(
        game_pb2.SeatAssignment(
            seat=seat,
            kind=game_pb2.SEAT_KIND_BOT,
            display_name=BOT_NAMES[seat % len(BOT_NAMES)],
            bot_level=bot_level_to_proto(BotLevel(level)),
        )
        for seat in range(1, players)
    )
    fiftyone = game == GameKind.FIFTYONE
    return game_pb2.TableConfig(
        game=game_to_proto(game),
        preset=preset_to_proto(preset if fiftyone else ""),
        mode=game_pb2.MODE_TRAINING,
        seats=seats,
        turn_time=Duration(seconds=turn_seconds),
    )


def run_file(start: Path | None = None) -> Path | None:
    """The ``run.json`` of a running ``make run``: in its run folder, here or in a folder above."""
    run_dir = load_settings(RunSettings).run_dir
    if run_dir.is_absolute():
        candidates = [run_dir / "run.json"]
    else:
        here = (start or Path.cwd()).resolve()
        candidates = [folder / run_dir / "run.json" for folder in (here, *here.parents)]
    return next((candidate for candidate in candidates if candidate.is_file()), None)


def service_address(key: str, given: str | None, default: str, start: Path | None = None) -> str:
    """``given``, else the address ``make run`` wrote under ``key`` in run.json, else
    ``default``."""
    if given:
        return given
    found = run_file(start)
    if found is not None:
        address = json.loads(found.read_text()).get(key)
        if isinstance(address, str) and address:
            return address
    return default


def engine_address(given: str | None, start: Path | None = None) -> str:
    """``--address``, else the table-engine ``make run`` started, else the default."""
    return service_address("table_engine", given, DEFAULT_ADDRESS, start)


def engine_nodes(start: Path | None = None) -> tuple[str, ...]:
    """Every table-engine node ``make run`` started: where a client asks for a table whose node
    does not answer (it died, or drains)."""
    found = run_file(start)
    if found is None:
        return ()
    nodes = json.loads(found.read_text()).get("table_engines")
    if not isinstance(nodes, list):
        return ()
    return tuple(node for node in nodes if isinstance(node, str) and node)


def _token(subject: str, roles: Sequence[Role]) -> Callable[[], str]:
    """Development tokens of ``make run``'s issuer (masa_client.issuer), a fresh one a call."""
    issuer = development_issuer()
    return lambda: issuer.mint(subject, roles, ttl_seconds=_TOKEN_SECONDS)


async def _play(args: argparse.Namespace) -> int:
    unusable = Keyboard.unusable(sys.stdin.fileno())
    if unusable:
        print(
            f"masa play: {unusable}: run it in a terminal, or pipe the moves into it "
            "(no ticket was made and no seat taken)",
            file=sys.stderr,
        )
        return 2
    console = Console(sys.stdout)
    style = style_for(sys.stdout)
    player_token = _token(args.player, [Role.PLAYER])
    if args.table:
        table_id, owner = args.table, engine_address(args.address)
    elif args.game:
        table_id, owner = await _custom_training_table(args, console)
    else:
        try:
            ticket = await _seat_through_matchmaking(args, player_token, console)
        except NoSeat as no_seat:
            console.say(str(no_seat))
            return 1
        if ticket is None:
            return 0
        table_id, owner = ticket.table_id, ticket.table_address
        # Named on an interrupt (main), so that the player knows how to come back.
        args.table = table_id
        console.say(f"watch it from another terminal: make watch TABLE={table_id}")
    async with TableClient(owner, player_token, nodes=engine_nodes()) as client:
        joined = await client.get_table(table_id)
        if joined.WhichOneof("view") != "seat_view":
            console.say(f"{args.player} has no seat at table {table_id}")
            return 1
        table = joined.seat_view.table.table
        game = game_name(table.config)
        if game not in (GameKind.FIFTYONE, GameKind.ELEVATOR):
            console.say(
                f"masa play plays 51 and Elevator; table {table_id} is of "
                f"{table.config.game_name or 'a game it does not know'}"
            )
            return 1
        if table.state not in (view_pb2.Table.STATE_FINISHED, view_pb2.Table.STATE_VOIDED):
            console.say("type 'help' for the rules and the commands")
        session = PlaySession(client, table_id, game, console, style)
        ended = await _drive(session, console, _come_back(args))
    if ended and table.config.stake:
        ledger = service_address("ledger", args.ledger, DEFAULT_LEDGER)
        async with LedgerClient(ledger, player_token) as chips:
            await show_table_chips(chips, table_id, table.game_no, console)
    console.say("bye")
    return 0


def _come_back(args: argparse.Namespace) -> str:
    """The command that comes back to the seat at ``args.table``: ``make play`` under make."""
    if os.environ.get("MAKELEVEL"):
        return f"make play TABLE={args.table}"
    where = f" --address {args.address}" if args.address else ""
    return f"masa play --player {args.player} --table {args.table}{where}"


async def _custom_training_table(args: argparse.Namespace, console: Console) -> tuple[str, str]:
    """A training table made directly (development shortcut, with an operator's token: tables
    are matchmaking's to make): the table id and its owner."""
    address = engine_address(args.address)
    config = table_config(
        args.game,
        args.preset,
        args.player,
        players=args.players,
        level=args.level,
        turn_seconds=args.turn_seconds,
    )
    async with TableClient(address, _token(_OPERATOR, [Role.ADMIN])) as service:
        table = await service.create_table(config)
    # Named on an interrupt (main), so that the player knows how to come back.
    args.table = table.table_id
    console.say(f"table {table.table_id} created at {table.owner_address or address}")
    console.say(f"watch it from another terminal: make watch TABLE={table.table_id}")
    return table.table_id, table.owner_address or address


async def _seat_through_matchmaking(
    args: argparse.Namespace, token: TokenSource, console: Console
) -> mm.Ticket | None:
    """The lobby of ``--lobby`` or of the menu, and a ticket there until seated; None when the
    player leaves the menu. Raises :class:`NoSeat` when no seat comes of the ticket."""
    address = service_address("matchmaking", args.matchmaking, DEFAULT_MATCHMAKING)
    async with MatchmakingClient(address, token) as matchmaking:
        if args.lobby:
            lobby = await matchmaking.get_lobby(args.lobby)
        else:
            lobbies = await matchmaking.list_lobbies()
            with Keyboard(sys.stdin.fileno()) as keyboard:
                chosen = await choose_lobby(
                    lobbies, keyboard, console, matchmaking, level=BotLevel(args.level)
                )
            if chosen is None:
                console.say("bye")
                return None
            lobby = chosen
        return await find_seat(
            matchmaking,
            lobby,
            console,
            bot_level=bot_level_to_proto(BotLevel(args.level)),
            party_size=args.party,
            party_code=args.code,
        )


async def _drive(session: PlaySession, console: Console, come_back: str) -> bool:
    """Typed lines and the table's stream at once: the game's end ends the session at once.

    True when the game ended, False when the player left the table (told how long the seat is
    kept and ``come_back``, the command that comes back to it)."""
    follower = asyncio.create_task(session.follow())
    with Keyboard(sys.stdin.fileno()) as keyboard:
        try:
            while True:
                typed = asyncio.create_task(keyboard.line())
                done, _ = await asyncio.wait({typed, follower}, return_when=asyncio.FIRST_COMPLETED)
                if follower in done:
                    typed.cancel()
                    follower.result()
                    return True
                line = typed.result()
                console.typed()
                if line is None or not await session.handle(line):
                    break
        finally:
            if not follower.done():
                follower.cancel()
                await asyncio.gather(follower, return_exceptions=True)
    left = await asyncio.wait_for(session.leave(), _LEAVE_SECONDS)
    if left.state == view_pb2.Table.STATE_PLAYING:
        kept = await session.seconds_kept()
        if kept is None:
            console.say("you left the table: a bot plays your seat to the end (P-12)")
        else:
            console.say(
                f"you left the table: your seat is kept for {kept} s, then it forfeits: you "
                "are ranked last and lose your stake (P-12)"
            )
            console.say(f"come back with: {come_back}")
    else:
        console.say("you left the table, and it ended: no other player is left (P-12)")
    return False


async def _practice(args: argparse.Namespace) -> int:
    players = [
        PracticePlayer(name, _token(name, [Role.PLAYER]))
        for name in (f"practice-{args.lobby}-{n}" for n in range(1, args.players + 1))
    ]
    options = PracticeOptions(
        lobby_id=args.lobby,
        games=args.games,
        think_seconds=args.think,
        matchmaking=service_address("matchmaking", args.matchmaking, DEFAULT_MATCHMAKING),
        ledger=service_address("ledger", args.ledger, DEFAULT_LEDGER),
        nodes=engine_nodes(),
    )
    games = f"{count(args.games, 'game')} each" if args.games else "until Ctrl-C"
    print(
        f"{count(args.players, 'practice player')} in {args.lobby}, {games}: "
        f"{', '.join(p.player_id for p in players)}",
        flush=True,
    )
    # Stopped by SIGTERM or a closed terminal (SIGHUP) as by Ctrl-C: searches are cancelled
    # and seats left, or matchmaking would seat absent players.
    task = asyncio.current_task()
    assert task is not None
    signalled: list[signal.Signals] = []

    def stop(received: signal.Signals) -> None:
        signalled.append(received)
        task.cancel()

    loop = asyncio.get_running_loop()
    for received in (signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(received, stop, received)
    try:
        return await run_practice(players, options, sys.stdout)
    except asyncio.CancelledError:
        if not signalled:
            raise
        task.uncancel()
        print(f"\npractice players stopped ({signalled[0].name})", file=sys.stderr)
        return 128 + signalled[0]


async def _watch(args: argparse.Namespace) -> int:
    address = engine_address(args.address)
    console = Console(sys.stdout)
    token = _token(args.player, [Role.PLAYER])
    async with TableClient(address, token, nodes=engine_nodes()) as client:
        try:
            return await watch_table(client, args.table, console, style_for(sys.stdout))
        except MasaCallError as error:
            if error.code is not grpc.StatusCode.NOT_FOUND:
                raise
    print(
        f"masa watch: no table {args.table} is kept at {address}. A table stays there for a "
        "while after its game ends (30 s by default), so this one ended earlier, or the id is "
        "wrong.",
        file=sys.stderr,
    )
    return 1


async def _cancel(args: argparse.Namespace) -> int:
    address = service_address("matchmaking", args.matchmaking, DEFAULT_MATCHMAKING)
    async with MatchmakingClient(address, _token(args.player, [Role.PLAYER])) as client:
        for line in await cancel_open(client, args.ticket or ""):
            print(line)
    return 0


async def _lobbies(args: argparse.Namespace) -> int:
    address = service_address("matchmaking", args.matchmaking, DEFAULT_MATCHMAKING)
    async with MatchmakingClient(address, _token(args.player, [Role.PLAYER])) as client:
        print_lobbies(await client.list_lobbies(args.filter), sys.stdout)
    return 0


async def _balance(args: argparse.Namespace) -> int:
    address = service_address("ledger", args.ledger, DEFAULT_LEDGER)
    async with LedgerClient(address, _token(args.player, [Role.PLAYER])) as client:
        print_balance(await client.balance(), sys.stdout)
    return 0


async def _history(args: argparse.Namespace) -> int:
    address = service_address("ledger", args.ledger, DEFAULT_LEDGER)
    async with LedgerClient(address, _token(args.player, [Role.PLAYER])) as client:
        print_history(args.player, await client.transfers(limit=args.limit), sys.stdout)
    return 0


async def _grant(args: argparse.Namespace) -> int:
    address = service_address("ledger", args.ledger, DEFAULT_LEDGER)
    async with LedgerClient(address, _token(_OPERATOR, [Role.ADMIN])) as client:
        await grant(client, args.player, args.amount, args.reason, sys.stdout)
    return 0


async def _nodes(args: argparse.Namespace) -> int:
    bus = await connect_operator(bus_login(args.nats, run_file()))
    try:
        nodes = await read_nodes(bus)
    finally:
        await bus.close()
    print_nodes(nodes, sys.stdout)
    return 0


async def _admin(args: argparse.Namespace) -> int:
    def ledger(given: str | None) -> str:
        return service_address("ledger", given, DEFAULT_LEDGER)

    return await run_admin(args, ledger=ledger, run_file=run_file())


def _add_cancel_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    *,
    me: str,
    matchmaking_where: str,
) -> None:
    cancel = commands.add_parser(
        "cancel",
        help="cancel your open ticket",
        description="Cancel your open matchmaking ticket (a search you left running, which "
        "keeps you from queueing again), or the ticket --ticket names.",
    )
    cancel.add_argument("--ticket", help="the ticket to cancel (default: your open one)")
    cancel.add_argument(
        "--player", type=_player_id, default=me, help=f"whose ticket (default: {me})"
    )
    cancel.add_argument("--matchmaking", help=matchmaking_where)


def _add_lobbies_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    *,
    me: str,
    matchmaking_where: str,
) -> None:
    lobbies = commands.add_parser(
        "lobbies",
        help="list the lobbies",
        description="List the lobbies: how busy they are, how long their last seated players "
        "waited, and which would seat you now.",
    )
    lobbies.add_argument(
        "--filter", default="", help="an AIP-160 filter, such as 'game = ELEVATOR AND stake < 50'"
    )
    lobbies.add_argument(
        "--player", type=_player_id, default=me, help=f"who asks, for the token (default: {me})"
    )
    lobbies.add_argument("--matchmaking", help=matchmaking_where)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="masa", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    where = (
        "the table-engine host:port (default: the one `make run` started, found through "
        f".masa/run.json from any folder of the checkout, else {DEFAULT_ADDRESS})"
    )
    matchmaking_where = (
        f"matchmaking's host:port (default: the one `make run` started, else {DEFAULT_MATCHMAKING})"
    )
    ledger_where = (
        f"the ledger's host:port (default: the one `make run` started, else {DEFAULT_LEDGER})"
    )
    me = getpass.getuser()

    token = commands.add_parser(
        "token", help="print a development token", description="Print a development JWT."
    )
    token.add_argument(
        "--player", type=_player_id, required=True, help="the player id (the token's subject)"
    )
    token.add_argument(
        "--role",
        choices=[Role.PLAYER.value, Role.ADMIN.value],
        default=Role.PLAYER.value,
        help="what the token may do: player (default), or admin for an operator's calls such "
        "as CreateTable, GrantChips or VoidTable (services sign their own tokens)",
    )
    token.add_argument(
        "--ttl", type=float, default=12 * 3600, help="lifetime in seconds (default: 12 hours)"
    )
    add_endpoints_parser(commands)

    play = commands.add_parser(
        "play",
        help="play a table: pick a lobby, get seated through matchmaking, play",
        description="Show the lobbies (or take --lobby), queue through matchmaking until "
        "seated, and play the table here; a chip table's result and your balance are shown "
        "at the end. Type 'help' at the table for the commands.",
    )
    play.add_argument("--lobby", help="the lobby to queue for (masa lobbies lists them)")
    play.add_argument(
        "--party",
        type=int,
        default=1,
        help="players in your party, you included (teams lobbies: 2, your partner); the "
        "first member gets a code the others join with",
    )
    play.add_argument("--code", default="", help="join the party of this code")
    play.add_argument(
        "--level",
        choices=sorted(_LEVELS),
        default="normal",
        help="how well the bots play at a training table: easy (random legal moves), "
        "normal (default, greedy) or hard (searches over the unseen cards; a lobby lists its levels)",
    )
    play.add_argument(
        "--player", type=_player_id, default=me, help=f"your player id (default: {me})"
    )
    play.add_argument(
        "--table",
        help="come back to a table you already have a seat at, for example after losing the "
        "connection (within the seat protection, P-12)",
    )
    play.add_argument("--matchmaking", help=matchmaking_where)
    play.add_argument("--ledger", help=ledger_where)
    play.add_argument("--address", help=where)
    custom = play.add_argument_group(
        "a custom training table (development shortcut: created directly, not through "
        "matchmaking, with a development admin token)"
    )
    custom.add_argument(
        "--game",
        choices=["fiftyone", "elevator"],
        help="the game: 51 or Elevator; makes a custom training table",
    )
    custom.add_argument(
        "--preset",
        choices=sorted(_PRESETS),
        default="salon",
        help="the 51 rule preset (default: salon); Elevator has none",
    )
    custom.add_argument(
        "--players",
        type=int,
        default=4,
        help="seats at the table, you included (default: 4; 51 salon: 4, classic and remi: "
        "2-4; Elevator: 3-6)",
    )
    custom.add_argument(
        "--turn-seconds",
        type=int,
        default=60,
        help="seconds you have per turn before the autopilot plays it (P-10; default: 60)",
    )

    add_practice_parser(commands, matchmaking_where=matchmaking_where, ledger_where=ledger_where)

    _add_cancel_parser(commands, me=me, matchmaking_where=matchmaking_where)

    _add_lobbies_parser(commands, me=me, matchmaking_where=matchmaking_where)

    balance = commands.add_parser(
        "balance", help="show your chips", description="Show a player's chips in the ledger."
    )
    balance.add_argument(
        "--player", type=_player_id, default=me, help=f"whose chips (default: {me})"
    )
    balance.add_argument("--ledger", help=ledger_where)

    history = commands.add_parser(
        "history",
        help="show your transfers",
        description="Show a player's transfers (grants, stakes, payouts), newest first.",
    )
    history.add_argument(
        "--player", type=_player_id, default=me, help=f"whose transfers (default: {me})"
    )
    history.add_argument("--limit", type=int, default=20, help="how many (default: 20)")
    history.add_argument("--ledger", help=ledger_where)

    grant_chips = commands.add_parser(
        "grant",
        help="grant chips to a player (admin)",
        description="Grant chips to a player from the issuing account, with a development "
        "admin token (make run's issuer key).",
    )
    grant_chips.add_argument("player", type=_player_id, help="who gets the chips")
    grant_chips.add_argument("amount", type=chip_amount, help="how many chips")
    grant_chips.add_argument("--reason", default="granted with masa grant", help="why")
    grant_chips.add_argument("--ledger", help=ledger_where)

    watch = commands.add_parser(
        "watch",
        help="follow a table as a spectator",
        description="Follow a table as a spectator until its game ends, or show the result of "
        "a table that has just finished.",
    )
    watch.add_argument("table", help="the table id (masa play prints it)")
    watch.add_argument(
        "--player",
        type=_player_id,
        default=me,
        help=f"who is watching, for the token (default: {me})",
    )
    watch.add_argument("--address", help=where)

    nodes = commands.add_parser(
        "nodes",
        help="list the live table-engine nodes",
        description="List the live table-engine nodes from the engine-node registry in NATS: "
        "node id, address, tables served, capacity, seconds since the node last renewed its "
        "record (HEARD; a node silent for the registry's TTL is gone), and whether it drains. "
        "Logs into NATS as the operators' user (the admin password `make run` keeps in "
        ".masa/nats/, or MASA_NATS_USER and MASA_NATS_PASSWORD).",
    )
    nodes.add_argument("--nats", help=NATS_WHERE)
    add_admin_parser(commands, ledger_where=ledger_where, nats_where=NATS_WHERE)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    if args.command == "token":
        try:
            print(development_issuer().mint(args.player, [Role(args.role)], ttl_seconds=args.ttl))
        except IssuerMissing as error:
            print(f"masa token: {error}", file=sys.stderr)
            sys.exit(2)
        return
    if args.command == "endpoints":
        sys.exit(print_endpoints(run_file(), args.get))
    runners = {
        "play": _play,
        "practice": _practice,
        "cancel": _cancel,
        "watch": _watch,
        "lobbies": _lobbies,
        "balance": _balance,
        "history": _history,
        "grant": _grant,
        "nodes": _nodes,
        "admin": _admin,
    }
    runner = runners[args.command]
    try:
        code = asyncio.run(runner(args))
    except MasaCallError as error:
        print(f"masa {args.command}: {_failure(error)}", file=sys.stderr)
        code = 1
    except (BusUnreachable, IssuerMissing) as error:
        print(f"masa {args.command}: {error}", file=sys.stderr)
        code = 1
    except KeyboardInterrupt:
        if args.command == "play" and args.table:
            print(
                "\ninterrupted: your seat is kept for the seat protection (P-12: "
                f"{SEAT_PROTECTION_SECONDS} s by default), then it forfeits; come back with: "
                f"{_come_back(args)}",
                file=sys.stderr,
            )
        elif args.command == "practice":
            print("\npractice players stopped", file=sys.stderr)
        code = 130
    sys.exit(code)


def _player_id(text: str) -> str:
    """An argparse type: a player id as tokens carry it (1 to 128 characters, no control
    characters), refused here rather than as an invalid token by the server."""
    if not 1 <= len(text) <= 128 or not text.isprintable():
        raise argparse.ArgumentTypeError(
            f"not a player id (1 to 128 characters, no control characters): {text[:40]!r}"
        )
    return text


def _failure(error: MasaCallError) -> str:
    if error.code is grpc.StatusCode.UNAVAILABLE:
        return f"{error}\n  is the stack running? Start it with `make run` (see the README)."
    return str(error)
