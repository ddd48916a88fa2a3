"""``masa watch`` follows a bots-only Elevator table as a spectator until the game is over,
then exits 0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from masa.common.v1 import game_pb2
from masa_client.client import TableClient
from masa_platform.auth import Role, mint_token
from masa_platform.settings import AuthSettings

WAIT_SECONDS = 60.0


async def test_masa_watch_prints_the_table_until_the_game_is_over(stack: dict[str, str]) -> None:
    address = stack["table-engine"]
    bots = [
        game_pb2.SeatAssignment(seat=seat, kind=game_pb2.SEAT_KIND_BOT, display_name=f"b{seat}")
        for seat in range(3)
    ]
    config = game_pb2.TableConfig(
        game=game_pb2.GAME_KIND_ELEVATOR, mode=game_pb2.MODE_TRAINING, seats=bots
    )
    async with TableClient(address, mint_token(AuthSettings(), "e2e", [Role.SERVICE])) as client:
        table = await client.create_table(config)
    watched = subprocess.run(
        [
            str(Path(sys.executable).parent / "masa"),
            "watch",
            table.table_id,
            "--address",
            address,
        ],
        env={**os.environ, "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=WAIT_SECONDS,
        check=False,
    )
    assert watched.returncode == 0, watched.stderr
    assert "Elevator · table" in watched.stdout
    # Bots without a delay may finish before the watch connects: then the snapshot is final.
    assert "game over: 1. b" in watched.stdout or "final ranking: 1. b" in watched.stdout
