"""The issue-11 promise, kept under P-13, on a real pseudo-terminal: with ``make run`` going, a
newcomer runs ``masa play`` and picks the Elevator chip lobby from the menu; no bot sits at a
chip table, so they are told how many more players it needs until the practice players the
README offers a developer alone (``masa practice --lobby elevator --players 2``) come. They are
seated within a minute (the development welcome gave everyone chips), play the game to its end,
see what the table paid and their balance, and ``masa balance`` shows the same; each practice
player prints the game it played at that table."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import time
import uuid

from e2e_stack import Stack
from e2e_terminal import ROOT, Terminal, masa, without_uv
from greedy_player import play_seat
from masa.matchmaking.v1 import matchmaking_pb2 as mm
from masa_client.client import TableClient
from masa_client.matchmaking import MatchmakingClient
from masa_platform.testing import token

WELCOME = 10_000
STAKE = 20
SEATED_SECONDS = 60.0
GAME_SECONDS = 120.0


def test_a_newcomer_is_seated_at_a_chip_table_within_a_minute_and_sees_the_result(
    running_stack: Stack,
) -> None:
    player = f"newcomer-{uuid.uuid4().hex[:6]}"
    env = {**without_uv(), "MASA_RUN_DIR": str(running_stack.run_dir)}
    started = time.monotonic()
    terminal = Terminal([masa(), "play", "--player", player], env, cwd=ROOT)
    practice: Terminal | None = None
    try:
        terminal.expect(r"pick a lobby by number or id")
        assert re.search(r"elevator +Elevator, singles, 3-6 seats, 20 chips", terminal.transcript)
        terminal.send("elevator")
        terminal.expect(r"waiting for \d more players?: bots never sit at a chip table \(P-13\)")
        practice = Terminal(
            [masa(), "practice", "--lobby", "elevator", "--players", "2", "--games", "1"],
            env,
            cwd=ROOT,
        )
        seated = terminal.expect(r"seated at table (\w+), seat (\d+), on (\S+)\n")
        assert time.monotonic() - started < SEATED_SECONDS
        table_id, address = seated.group(1), seated.group(3)
        terminal.expect(r"your hand: ")

        # The player's moves come from the SDK, with the player's own token: the terminal
        # shows the table as the player's client would, to the end of the game.
        async def play() -> None:
            async with TableClient(address, token(player)) as client:
                await asyncio.wait_for(play_seat(client, table_id, salt=player), GAME_SECONDS)

        asyncio.run(play())
        paid = terminal.expect(rf"the table paid you ([\d,]+) chips for your stake of {STAKE}")
        shown = terminal.expect(r"balance: ([\d,]+) chips")
        terminal.expect(r"bye")
        assert terminal.wait() == 0
        for _ in range(2):
            practice.expect(rf"practice-elevator-\d: game 1 at table {table_id}: place \d of 3")
        assert practice.wait(GAME_SECONDS) == 0
    finally:
        terminal.close()
        if practice is not None:
            practice.close()
    payout = int(paid.group(1).replace(",", ""))
    balance = int(shown.group(1).replace(",", ""))
    assert balance == WELCOME - STAKE + payout
    ran = subprocess.run(
        [masa(), "balance", "--player", player],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert f"{player}: {balance:,} chips (0 held, {balance:,} available)" in ran.stdout
    history = subprocess.run(
        [masa(), "history", "--player", player],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert history.returncode == 0, history.stderr
    kinds = re.findall(r"\d\d:\d\d  (\w+)", history.stdout)
    assert kinds[-1] == "grant" and "stake" in kinds


def test_ctrl_c_while_searching_cancels_the_ticket(running_stack: Stack) -> None:
    """A search interrupted in the terminal leaves no ticket behind to seat an absent player."""
    player = f"impatient-{uuid.uuid4().hex[:6]}"
    env = {**without_uv(), "MASA_RUN_DIR": str(running_stack.run_dir)}
    terminal = Terminal([masa(), "play", "--player", player, "--lobby", "salon-51"], env, cwd=ROOT)
    try:
        terminal.expect(r"looking for a table in salon-51")
        # What a Ctrl-C in the player's terminal sends to the foreground process group.
        os.killpg(terminal.process.pid, signal.SIGINT)
        assert terminal.wait() == 130
    finally:
        terminal.close()

    async def tickets() -> list[mm.Ticket]:
        address = running_stack.addresses["matchmaking"]
        async with MatchmakingClient(address, token(player)) as matchmaking:
            return await matchmaking.list_tickets()

    (ticket,) = asyncio.run(tickets())
    assert ticket.state == mm.Ticket.STATE_CANCELLED


def test_P2_the_menu_lists_each_lobbys_levels_and_seats_a_hard_ticket_at_51(
    running_stack: Stack,
) -> None:
    """Issue 23: asked for hard bots, the menu lists each training lobby's levels (both games
    have a hard bot) and seats the player at a 51 training table."""
    player = f"hardy-{uuid.uuid4().hex[:6]}"
    env = {**without_uv(), "MASA_RUN_DIR": str(running_stack.run_dir)}
    terminal = Terminal([masa(), "play", "--player", player, "--level", "hard"], env, cwd=ROOT)
    try:
        terminal.expect(r"pick a lobby by number or id")
        for lobby, game in (("training-elevator", "Elevator"), ("training-51", "51")):
            assert re.search(
                rf"{lobby} +{game}[^\n]*, training, 4 seats, no chips, bots easy/normal/hard",
                terminal.transcript,
            ), terminal.transcript
        terminal.send("training-51")
        terminal.expect(r"seated at table (\w+), seat (\d+)")
        terminal.expect(r"your hand: ")
        terminal.send("quit")
        assert terminal.wait() == 0
    finally:
        terminal.close()
