"""``masa practice`` against the real services (P-13, P-30): practice players fill a chip lobby
that bots never fill, play their seats to the end and print what each game won or lost, and a
player of ``masa play`` waiting alone is told how many more players the lobby needs until they
come.

The setup chosen: the real services started in this test's own event loop
(:mod:`client_stack`), not the shared ``make run`` stack of the end-to-end tests.
"""

from __future__ import annotations

import asyncio
import io
import os
import re
import signal
import sys
from pathlib import Path

import pytest
from client_stack import STAKE, WELCOME, Stack, started, until
from masa.common.v1 import game_pb2
from masa.matchmaking.v1 import matchmaking_pb2 as mm
from masa_client.client import TableClient
from masa_client.matchmaking import LedgerClient, MatchmakingClient
from masa_client.practice import PracticeOptions, PracticePlayer, play_seat, run_practice
from masa_client.seating import find_seat
from masa_client.session import Console
from masa_ledger.app.check import run_check
from masa_platform.keys import ISSUER
from masa_platform.testing import keyring, sigint_as_in_a_terminal, token

RAKE = 3 * STAKE * 500 // 10_000
LINE = re.compile(
    r"(practice-trio-\d): game (\d+) at table (\S+): place (\d) of 3"
    r"(?:, forfeited \(P-12\))?, ([+-]\d+) chips"
)


def _players(*numbers: int) -> list[PracticePlayer]:
    return [PracticePlayer(f"practice-trio-{n}", token(f"practice-trio-{n}")) for n in numbers]


def _options(stack: Stack, games: int) -> PracticeOptions:
    return PracticeOptions(
        lobby_id="trio",
        games=games,
        think_seconds=0.0,
        matchmaking=stack.matchmaking,
        ledger=stack.ledger,
    )


async def test_P13_practice_players_fill_a_chip_lobby_and_print_the_chips_of_each_game(
    tmp_path: Path,
) -> None:
    async with started(tmp_path) as stack:
        players = _players(1, 2, 3)
        out = io.StringIO()
        code = await asyncio.wait_for(run_practice(players, _options(stack, 2), out), 240)
        assert code == 0, out.getvalue()
        lines = out.getvalue().splitlines()
        games = [LINE.fullmatch(line) for line in lines]
        assert len(lines) == 6 and all(games), lines
        won: dict[str, int] = {}
        tables: dict[str, list[int]] = {}
        for game in games:
            assert game is not None
            player, _, table_id, _, chips = game.groups()
            won[player] = won.get(player, 0) + int(chips)
            tables.setdefault(table_id, []).append(int(chips))
        assert sorted(len(t) for t in tables.values()) == [3, 3]
        assert {
            p.player_id: sum(1 for g in games if g and g[1] == p.player_id) for p in players
        } == {p.player_id: 2 for p in players}
        # Each table moved only the players' stakes: what the winners took, the others lost,
        # less the rake.
        assert all(sum(chips) == -RAKE for chips in tables.values())
        for player in players:
            async with LedgerClient(stack.ledger, player.token) as ledger:
                account = await ledger.balance()
            # The welcome, then what the lines say the games did.
            assert (account.balance, account.held) == (WELCOME + won[player.player_id], 0)
        report = await run_check(stack.ledger_service.store)
        assert report.ok, report.to_json()


async def test_P13_a_player_waiting_alone_is_told_how_many_more_until_practice_players_come(
    tmp_path: Path,
) -> None:
    async with started(tmp_path) as stack:
        said = io.StringIO()
        console = Console(said)
        ayse = token("ayse")
        out = io.StringIO()
        async with MatchmakingClient(stack.matchmaking, ayse) as matchmaking:
            lobby = await matchmaking.get_lobby("trio")
            seating = asyncio.create_task(find_seat(matchmaking, lobby, console))
            await until(lambda: "waiting for 2 more players" in said.getvalue(), "2 more")
            first = asyncio.create_task(run_practice(_players(1), _options(stack, 1), out))
            await until(lambda: "waiting for 1 more player:" in said.getvalue(), "1 more")
            second = asyncio.create_task(run_practice(_players(2), _options(stack, 1), out))
            ticket = await asyncio.wait_for(seating, 30)
        assert ticket.state == mm.Ticket.STATE_MATCHED and ticket.hold_id
        async with TableClient(ticket.table_address, ayse) as client:
            final = await asyncio.wait_for(play_seat(client, ticket.table_id, 0.0), 120)
        assert list(await asyncio.wait_for(asyncio.gather(first, second), 60)) == [0, 0]
        # Three players, no bot: bots never sit at a chip table (P-13).
        assert [seat.kind for seat in final.table.seats] == [game_pb2.SEAT_KIND_HUMAN] * 3
        shown = said.getvalue().splitlines()
        waiting = [line.strip() for line in shown if "waiting for" in line]
        assert waiting == [
            "waiting for 2 more players: bots never sit at a chip table (P-13)",
            "waiting for 1 more player: bots never sit at a chip table (P-13)",
        ]
        assert shown[-1].startswith(f"seated at table {ticket.table_id}")
        assert len(out.getvalue().splitlines()) == 2, out.getvalue()


@pytest.mark.parametrize(
    ("stop", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 128 + signal.SIGTERM)]
)
async def test_masa_practice_runs_as_a_command_and_ctrl_c_cancels_its_search(
    tmp_path: Path, stop: signal.Signals, code: int
) -> None:
    """The command itself: it mints each player's development token, cancels the search an
    earlier run left open, queues, and on Ctrl-C (or SIGTERM, or a closed terminal's SIGHUP)
    cancels the search it was waiting in, so no ticket is left to seat an absent player."""
    async with started(tmp_path) as stack:
        command = [
            str(Path(sys.executable).parent / "masa"),
            "practice",
            "--lobby",
            "trio",
            "--players",
            "1",
            "--matchmaking",
            stack.matchmaking,
            "--ledger",
            stack.ledger,
        ]
        # A run folder without run.json: the addresses are the ones given, and the command
        # signs its players' tokens with the issuer key it is told of.
        env = {
            **os.environ,
            "MASA_RUN_DIR": str(tmp_path / "no-run"),
            "MASA_JWT_ISSUER_KEY_FILE": str(keyring().private(ISSUER)),
        }
        (player,) = _players(1)
        async with MatchmakingClient(stack.matchmaking, player.token) as matchmaking:
            left = await matchmaking.create_ticket("trio", display_name=player.player_id)
        with sigint_as_in_a_terminal():
            process = await asyncio.create_subprocess_exec(
                *command, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
            )
        try:
            assert process.stdout is not None
            first = await asyncio.wait_for(process.stdout.readline(), 30)
            assert first.decode() == ("1 practice player in trio, until Ctrl-C: practice-trio-1\n")
            second = await asyncio.wait_for(process.stdout.readline(), 30)
            assert second.decode() == (
                "practice-trio-1: cancelled its search in trio left open by an earlier run "
                f"(ticket {left.ticket_id})\n"
            )
            async with MatchmakingClient(stack.matchmaking, player.token) as matchmaking:

                async def searching() -> list[mm.Ticket]:
                    return [
                        t
                        for t in await matchmaking.list_tickets()
                        if t.state == mm.Ticket.STATE_SEARCHING
                    ]

                deadline = asyncio.get_running_loop().time() + 30
                while not await searching():
                    assert asyncio.get_running_loop().time() < deadline, "no ticket searched"
                    await asyncio.sleep(0.1)
                process.send_signal(stop)
                _, err = await asyncio.wait_for(process.communicate(), 30)
                assert process.returncode == code, err.decode()
                assert "practice players stopped" in err.decode()
                tickets = await matchmaking.list_tickets()
                assert len(tickets) == 2
                assert {t.state for t in tickets} == {mm.Ticket.STATE_CANCELLED}
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
