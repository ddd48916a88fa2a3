"""``masa watch`` on a real pseudo-terminal: it follows a bots-only table until the game is over
and shows the result; a table that has just finished shows its result at once; a table that is
not kept (any more) gets a clear message."""

from __future__ import annotations

import asyncio
import os

from e2e_stack import Stack
from e2e_terminal import Terminal, assert_reads_well, masa
from masa.common.v1 import game_pb2
from masa_client.client import TableClient
from masa_platform.testing import token

ENV = {**os.environ, "NO_COLOR": "1", "TERM": "dumb"}
RESULT = r"game over: (.+ went out: no cards left \(E-11\)|nobody could play on[^\n]+)\n"


def _beside(stack: dict[str, str]) -> dict[str, str]:
    """The environment of a spectator beside the stack: its run folder holds the issuer key
    the spectator's token is signed with."""
    return {**ENV, "MASA_RUN_DIR": stack["run_dir"]}


async def _bots_table(address: str) -> str:
    bots = [
        game_pb2.SeatAssignment(seat=seat, kind=game_pb2.SEAT_KIND_BOT, display_name=f"b{seat}")
        for seat in range(3)
    ]
    config = game_pb2.TableConfig(
        game=game_pb2.GAME_KIND_ELEVATOR, mode=game_pb2.MODE_TRAINING, seats=bots
    )
    async with TableClient(address, token("matchmaking", "matchmaking")) as client:
        return (await client.create_table(config)).table_id


def test_masa_watch_prints_the_table_until_the_game_is_over_then_its_result(
    stack: dict[str, str],
) -> None:
    table_id = asyncio.run(_bots_table(stack["table-engine"]))
    terminal = Terminal(
        [masa(), "watch", table_id, "--address", stack["table-engine"]], _beside(stack)
    )
    try:
        terminal.expect(rf"Elevator · table {table_id}")
        terminal.expect(RESULT)
        terminal.expect(r"  1\. b\d \[bot\]\s+\d+ cards? left\n")
        assert terminal.wait() == 0
    finally:
        terminal.close()
    assert_reads_well(terminal.transcript, [])


async def test_masa_watch_of_a_finished_table_shows_its_result(stack: dict[str, str]) -> None:
    address = stack["table-engine"]
    table_id = await _bots_table(address)
    async with TableClient(address, token("kibitzer")) as client:
        async for _ in client.watch(table_id, spectate=True):
            pass  # the stream ends with the game
    terminal = Terminal([masa(), "watch", table_id, "--address", address], _beside(stack))
    try:
        terminal.expect(rf"Elevator · table {table_id} · hand 1 · game over")
        terminal.expect(RESULT)
        terminal.expect(r"  1\. b\d \[bot\]\s+\d+ cards? left\n")
        assert await asyncio.to_thread(terminal.wait) == 0
    finally:
        terminal.close()


def test_masa_watch_of_a_table_not_kept_says_so_clearly(running_stack: Stack) -> None:
    """From a folder below the stack's, without --address: run.json tells where to ask."""
    below = running_stack.run_dir.parent / "deeper"
    below.mkdir(exist_ok=True)
    env = {key: value for key, value in ENV.items() if key != "MASA_RUN_DIR"}
    terminal = Terminal([masa(), "watch", "f00d"], env, cwd=below)
    try:
        address = running_stack.addresses["table-engine"]
        terminal.expect(
            rf"masa watch: no table f00d is kept at {address}\. A table stays there for a while "
            r"after its game ends \(30 s by default\), so this one ended earlier, or the id is "
            r"wrong\."
        )
        assert terminal.wait() == 1
    finally:
        terminal.close()
