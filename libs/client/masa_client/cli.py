"""The ``masa`` command: development tokens, a training table in the terminal, a spectator.

- ``masa token --player NAME`` prints a development token signed with the local secret
  (``MASA_JWT_SECRET``, the development default when unset);
- ``masa play --game fiftyone --preset salon`` creates a training table against bots and plays
  it in the terminal. Until matchmaking exists the table is created directly, with a
  development service token (P-1 training: no chips). ``quit`` leaves the table, which ends a
  training table; the session also ends by itself when the game is over;
- ``masa watch TABLE`` follows a table as a spectator, or shows the result of one that has
  just finished.

The table-engine address comes from ``--address``; else from the ``run.json`` that ``make run``
writes into its run folder (``MASA_RUN_DIR``, default ``.masa``), looked for in the current
folder and in every folder above it, so the commands work from any folder of the checkout;
else ``127.0.0.1:50051``.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import grpc
from google.protobuf.duration_pb2 import Duration
from masa.common.v1 import game_pb2
from masa.table.v1 import view_pb2
from masa_platform.auth import Role, mint_token
from masa_platform.settings import AuthSettings, load_settings

from masa_client.client import TableClient
from masa_client.errors import MasaCallError
from masa_client.launcher import RunSettings
from masa_client.render import BOT_NAMES, style_for
from masa_client.session import Console, Keyboard, PlaySession, watch_table

__all__ = ["DEFAULT_ADDRESS", "engine_address", "main", "run_file", "table_config"]

DEFAULT_ADDRESS: Final = "127.0.0.1:50051"
_PRESETS: Final = {
    "classic": game_pb2.PRESET_CLASSIC,
    "salon": game_pb2.PRESET_SALON,
    "remi": game_pb2.PRESET_REMI,
}
_LEVELS: Final = {"easy": game_pb2.BOT_LEVEL_EASY, "normal": game_pb2.BOT_LEVEL_NORMAL}
_GAMES: Final = {game_pb2.GAME_KIND_FIFTYONE: "fiftyone", game_pb2.GAME_KIND_ELEVATOR: "elevator"}
# How long a quitting player waits for the engine to confirm the end of a training table.
_LEAVE_SECONDS: Final = 10.0


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
            bot_level=_LEVELS[level],
        )
        for seat in range(1, players)
    )
    fiftyone = game == "fiftyone"
    return game_pb2.TableConfig(
        game=game_pb2.GAME_KIND_FIFTYONE if fiftyone else game_pb2.GAME_KIND_ELEVATOR,
        preset=_PRESETS[preset] if fiftyone else game_pb2.PRESET_UNSPECIFIED,
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


def engine_address(given: str | None, start: Path | None = None) -> str:
    """``--address``, else the table-engine ``make run`` started, else the default."""
    if given:
        return given
    found = run_file(start)
    if found is not None:
        address = json.loads(found.read_text()).get("table_engine")
        if isinstance(address, str) and address:
            return address
    return DEFAULT_ADDRESS


def _token(auth: AuthSettings, subject: str, roles: Sequence[Role]) -> str:
    return mint_token(auth, subject, roles, ttl_seconds=12 * 3600)


async def _play(args: argparse.Namespace) -> int:
    auth = load_settings(AuthSettings)
    address = engine_address(args.address)
    console = Console(sys.stdout)
    style = style_for(sys.stdout)
    created = not args.table
    if not created:
        table_id, owner = args.table, address
    else:
        config = table_config(
            args.game,
            args.preset,
            args.player,
            players=args.players,
            level=args.level,
            turn_seconds=args.turn_seconds,
        )
        async with TableClient(address, _token(auth, "masa-cli", [Role.SERVICE])) as service:
            table = await service.create_table(config)
        table_id, owner = table.table_id, table.owner_address or address
        # Named on an interrupt (main), so that the player knows how to come back.
        args.table = table_id
        console.say(f"table {table_id} created at {owner}")
        console.say(f"watch it from another terminal: make watch TABLE={table_id}")
    console.say("type 'help' for the commands")
    async with TableClient(owner, _token(auth, args.player, [Role.PLAYER])) as client:
        game = args.game
        if not created:
            joined = await client.get_table(table_id)
            if joined.WhichOneof("view") != "seat_view":
                console.say(f"{args.player} has no seat at table {table_id}")
                return 1
            game = _GAMES[joined.seat_view.table.table.config.game]
        session = PlaySession(client, table_id, game, console, style)
        return await _drive(session, console)


async def _drive(session: PlaySession, console: Console) -> int:
    """Typed lines and the table's stream at once: the game's end ends the session at once."""
    follower = asyncio.create_task(session.follow())
    with Keyboard(sys.stdin.fileno()) as keyboard:
        try:
            while True:
                typed = asyncio.create_task(keyboard.line())
                done, _ = await asyncio.wait({typed, follower}, return_when=asyncio.FIRST_COMPLETED)
                if follower in done:
                    typed.cancel()
                    follower.result()
                    console.say("bye")
                    return 0
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
        console.say(
            "you left the table: your seat is kept for the seat-protection time, then it "
            "forfeits (P-12)"
        )
    else:
        console.say("you left the table, and it ended: no other player is left (P-12)")
    console.say("bye")
    return 0


async def _watch(args: argparse.Namespace) -> int:
    auth = load_settings(AuthSettings)
    address = engine_address(args.address)
    console = Console(sys.stdout)
    async with TableClient(address, _token(auth, args.player, [Role.PLAYER])) as client:
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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="masa", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    where = (
        "the table-engine host:port (default: the one `make run` started, found through "
        f".masa/run.json from any folder of the checkout, else {DEFAULT_ADDRESS})"
    )
    me = getpass.getuser()

    token = commands.add_parser(
        "token", help="print a development token", description="Print a development JWT."
    )
    token.add_argument("--player", required=True, help="the player id (the token's subject)")
    token.add_argument(
        "--role",
        choices=[role.value for role in Role],
        default=Role.PLAYER.value,
        help="what the token may do: player (default), or service and admin for internal "
        "calls such as CreateTable",
    )
    token.add_argument(
        "--ttl", type=float, default=12 * 3600, help="lifetime in seconds (default: 12 hours)"
    )

    play = commands.add_parser(
        "play",
        help="play a training table against bots",
        description="Create a training table (no chips, P-1) with you on seat 0 and bots on "
        "the other seats, and play it here. Type 'help' at the table for the commands.",
    )
    play.add_argument(
        "--game",
        choices=["fiftyone", "elevator"],
        default="fiftyone",
        help="the game: 51 (default) or Elevator",
    )
    play.add_argument(
        "--preset",
        choices=sorted(_PRESETS),
        default="salon",
        help="the 51 rule preset (default: salon); Elevator has none",
    )
    play.add_argument(
        "--players",
        type=int,
        default=4,
        help="seats at the table, you included (default: 4; 51 salon: 4, classic and remi: "
        "2-4; Elevator: 3-6)",
    )
    play.add_argument(
        "--level",
        choices=sorted(_LEVELS),
        default="normal",
        help="how well the bots play: easy (random legal moves) or normal (default, greedy)",
    )
    play.add_argument(
        "--turn-seconds",
        type=int,
        default=60,
        help="seconds you have per turn before the autopilot plays it (P-10; default: 60)",
    )
    play.add_argument("--player", default=me, help=f"your player id (default: {me})")
    play.add_argument(
        "--table",
        help="join a table you already have a seat at, for example after losing the "
        "connection (within the seat protection, P-12), instead of creating one",
    )
    play.add_argument("--address", help=where)

    watch = commands.add_parser(
        "watch",
        help="follow a table as a spectator",
        description="Follow a table as a spectator until its game ends, or show the result of "
        "a table that has just finished.",
    )
    watch.add_argument("table", help="the table id (masa play prints it)")
    watch.add_argument(
        "--player", default=me, help=f"who is watching, for the token (default: {me})"
    )
    watch.add_argument("--address", help=where)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    if args.command == "token":
        auth = load_settings(AuthSettings)
        print(mint_token(auth, args.player, [Role(args.role)], ttl_seconds=args.ttl))
        return
    runner = _play if args.command == "play" else _watch
    try:
        code = asyncio.run(runner(args))
    except MasaCallError as error:
        print(f"masa {args.command}: {_failure(error)}", file=sys.stderr)
        code = 1
    except KeyboardInterrupt:
        if args.command == "play" and args.table:
            print(
                "\ninterrupted: your seat is kept for the seat-protection time (P-12); "
                f"come back with: masa play --player {args.player} --table {args.table}",
                file=sys.stderr,
            )
        code = 130
    sys.exit(code)


def _failure(error: MasaCallError) -> str:
    if error.code is grpc.StatusCode.UNAVAILABLE:
        return f"{error}\n  is the stack running? Start it with `make run` (see the README)."
    return str(error)
