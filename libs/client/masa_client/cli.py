"""The ``masa`` command: development tokens, a training table in the terminal, a spectator.

- ``masa token --player NAME`` prints a development token signed with the local secret
  (``MASA_JWT_SECRET``, the development default when unset);
- ``masa play --game fiftyone --preset salon`` creates a training table against bots and plays
  it in the terminal. Until matchmaking exists the table is created directly, with a
  development service token (P-1 training: no chips);
- ``masa watch TABLE`` follows a table as a spectator.

The table-engine address comes from ``--address``, else ``.masa/run.json`` written by
``make run``, else ``127.0.0.1:50051``.
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

from google.protobuf.duration_pb2 import Duration
from masa.common.v1 import game_pb2
from masa_platform.auth import Role, mint_token
from masa_platform.settings import AuthSettings, load_settings

from masa_client.client import TableClient
from masa_client.errors import MasaCallError
from masa_client.render import style_for
from masa_client.session import PlaySession, read_lines, watch_table

__all__ = ["main", "table_config"]

DEFAULT_ADDRESS: Final = "127.0.0.1:50051"
_PRESETS: Final = {
    "classic": game_pb2.PRESET_CLASSIC,
    "salon": game_pb2.PRESET_SALON,
    "remi": game_pb2.PRESET_REMI,
}
_LEVELS: Final = {"easy": game_pb2.BOT_LEVEL_EASY, "normal": game_pb2.BOT_LEVEL_NORMAL}


def table_config(
    game: str, preset: str, player: str, *, players: int, level: str, turn_seconds: int
) -> game_pb2.TableConfig:
    """A training table (P-1): the player on seat 0, bots on the other seats."""
    seats = [
        game_pb2.SeatAssignment(
            seat=0, kind=game_pb2.SEAT_KIND_HUMAN, player_id=player, display_name=player
        )
    ]
    seats.extend(
        game_pb2.SeatAssignment(
            seat=seat,
            kind=game_pb2.SEAT_KIND_BOT,
            display_name=f"bot {seat}",
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


def _address(given: str | None) -> str:
    if given:
        return given
    with_run = Path(".masa/run.json")
    if with_run.exists():
        address = json.loads(with_run.read_text()).get("table_engine")
        if isinstance(address, str) and address:
            return address
    return DEFAULT_ADDRESS


def _token(auth: AuthSettings, subject: str, roles: Sequence[Role]) -> str:
    return mint_token(auth, subject, roles, ttl_seconds=12 * 3600)


async def _play(args: argparse.Namespace) -> int:
    auth = load_settings(AuthSettings)
    address = _address(args.address)
    out = sys.stdout
    style = style_for(out)
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
    out.write(f"table {table.table_id} created at {table.owner_address or address}\n")
    out.write("type 'help' for the commands\n")
    owner = table.owner_address or address
    async with TableClient(owner, _token(auth, args.player, [Role.PLAYER])) as client:
        session = PlaySession(client, table.table_id, args.game, out, style)
        follower = asyncio.create_task(session.follow())
        try:
            async for line in read_lines(sys.stdin.fileno()):
                if session.finished.is_set():
                    break
                if not line.strip():
                    session.prompt()
                    continue
                if not await session.handle(line):
                    break
                session.prompt()
        finally:
            if session.finished.is_set():
                await follower
            else:
                follower.cancel()
                await asyncio.gather(follower, return_exceptions=True)
    out.write("\nbye\n")
    return 0


async def _watch(args: argparse.Namespace) -> int:
    auth = load_settings(AuthSettings)
    token = _token(auth, args.player, [Role.PLAYER])
    async with TableClient(_address(args.address), token) as client:
        return await watch_table(client, args.table, sys.stdout, style_for(sys.stdout))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="masa", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    token = commands.add_parser("token", help="print a development token")
    token.add_argument("--player", required=True, help="the player id (the token's subject)")
    token.add_argument("--role", choices=[role.value for role in Role], default=Role.PLAYER.value)
    token.add_argument("--ttl", type=float, default=12 * 3600, help="lifetime in seconds")

    play = commands.add_parser("play", help="play a training table against bots")
    play.add_argument("--game", choices=["fiftyone", "elevator"], default="fiftyone")
    play.add_argument("--preset", choices=sorted(_PRESETS), default="salon")
    play.add_argument("--players", type=int, default=4, help="seats, you included")
    play.add_argument("--level", choices=sorted(_LEVELS), default="normal")
    play.add_argument("--turn-seconds", type=int, default=60)
    play.add_argument("--player", default=getpass.getuser())
    play.add_argument("--address", help="the table-engine host:port")

    watch = commands.add_parser("watch", help="follow a table as a spectator")
    watch.add_argument("table", help="the table id")
    watch.add_argument("--player", default=getpass.getuser())
    watch.add_argument("--address", help="the table-engine host:port")
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
        print(f"masa {args.command}: {error}", file=sys.stderr)
        code = 1
    except KeyboardInterrupt:
        code = 130
    sys.exit(code)
