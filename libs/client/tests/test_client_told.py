"""What ``masa`` tells a player, run as a player runs it against the real services
(:mod:`client_stack`): how long players waited in each lobby and which lobby would seat them
now, cancelling an open ticket (``masa cancel``, ``cancel`` in the menu), the valid lobbies
when one is unknown, a menu left with exit code 0, an input the client cannot read refused
before any ticket or seat, the welcome chips of a new player's balance, how long a seat is
kept after ``quit`` and the command that comes back to it, the chips shown at the end of a
game the player came back to, and a void that gives the stake back (P-12, P-13, P-30).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shlex
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from client_stack import STAKE, WELCOME, Stack, masa, started, until
from masa.matchmaking.v1 import matchmaking_pb2 as mm
from masa_client.client import TableClient
from masa_client.matchmaking import MatchmakingClient, TableAdminClient
from masa_client.practice import PracticeOptions, PracticePlayer, play_seat, run_practice
from masa_client.seating import find_seat
from masa_client.session import Console
from masa_platform.auth import Role
from masa_platform.testing import sigint_as_in_a_terminal, token

WAIT_SECONDS = 60.0
GAME_SECONDS = 120.0
# A seat protection the engine is given that is not the default: what `quit` says must be
# the engine's.
PROTECTION_SECONDS = 45.0


class Running:
    """A ``masa`` command whose output is read as it comes, and matched with deadlines."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.out = ""
        self.err = ""
        self._cursor = 0
        assert process.stdout is not None and process.stderr is not None
        self._readers = [
            asyncio.create_task(self._read(process.stdout, "out")),
            asyncio.create_task(self._read(process.stderr, "err")),
        ]

    async def _read(self, stream: asyncio.StreamReader, into: str) -> None:
        while chunk := await stream.read(4096):
            setattr(self, into, getattr(self, into) + chunk.decode(errors="replace"))

    async def expect(self, pattern: str, timeout: float = WAIT_SECONDS) -> re.Match[str]:
        """Wait until ``pattern`` appears on stdout after the last match."""
        found: re.Match[str] | None = None

        def seen() -> bool:
            nonlocal found
            found = re.compile(pattern).search(self.out, self._cursor)
            return found is not None or self.process.returncode is not None

        await until(seen, f"{pattern!r} in:\n{self.out}\n{self.err}", timeout)
        if found is None:
            # The output may have come with the exit.
            await asyncio.gather(*self._readers)
            found = re.compile(pattern).search(self.out, self._cursor)
        assert found is not None, f"exited before {pattern!r}:\n{self.out}\n{self.err}"
        self._cursor = found.end()
        return found

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write((line + "\n").encode())

    async def exit_code(self, timeout: float = WAIT_SECONDS) -> int:
        code = await asyncio.wait_for(self.process.wait(), timeout)
        await asyncio.gather(*self._readers)
        return code

    async def close(self) -> None:
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        await asyncio.gather(*self._readers, return_exceptions=True)


@contextlib.asynccontextmanager
async def running(stack: Stack, *argv: str) -> AsyncIterator[Running]:
    command = Running(await masa(stack, *argv))
    try:
        yield command
    finally:
        await command.close()


async def finished(stack: Stack, *argv: str, typed: str = "") -> tuple[int, str, str]:
    """Run a command to its end, with ``typed`` as its input: exit code, stdout, stderr."""
    process = await masa(stack, *argv)
    out, err = await asyncio.wait_for(process.communicate(typed.encode()), WAIT_SECONDS)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def lobby_line(listing: str, lobby_id: str) -> str:
    return next(line for line in listing.splitlines() if re.search(rf"\. {lobby_id} ", line))


async def searching(stack: Stack, player: str, lobby_id: str) -> mm.Ticket:
    async with MatchmakingClient(stack.matchmaking, token(player)) as matchmaking:
        return await matchmaking.create_ticket(lobby_id)


async def ticket_state(stack: Stack, player: str, ticket_id: str) -> int:
    async with MatchmakingClient(stack.matchmaking, token(player)) as matchmaking:
        return (await matchmaking.get_ticket(ticket_id)).state


def practice(stack: Stack, *names: str) -> asyncio.Task[int]:
    """Practice players who each play one game in ``trio`` and stop."""
    options = PracticeOptions(
        lobby_id="trio",
        games=1,
        think_seconds=0.0,
        matchmaking=stack.matchmaking,
        ledger=stack.ledger,
    )
    players = [PracticePlayer(name, token(name)) for name in names]
    return asyncio.create_task(run_practice(players, options, sys.stdout))


async def test_P13_lobbies_show_recent_waits_and_seats_now_and_masa_cancel_cancels(
    tmp_path: Path,
) -> None:
    async with started(tmp_path) as stack:
        code, before, _ = await finished(stack, "lobbies", "--player", "looker")
        assert code == 0
        # Nobody was seated yet: no waits to tell; only training seats a player at once.
        assert "waits" not in before
        assert "seats you now" in lobby_line(before, "training")
        assert "seats you now" not in lobby_line(before, "trio")
        # A training lobby says which levels its bots play at (--level asks for one).
        assert "no chips, bots easy/normal/hard" in lobby_line(before, "training")
        assert "bots" not in lobby_line(before, "trio")

        trained = await searching(stack, "tina", "training")
        async with MatchmakingClient(stack.matchmaking, token("tina")) as matchmaking:
            async for ticket in matchmaking.watch_ticket(trained.ticket_id):
                trained = ticket
        assert trained.state == mm.Ticket.STATE_MATCHED
        first = await searching(stack, "pia", "trio")
        second = await searching(stack, "pol", "trio")

        code, after, _ = await finished(stack, "lobbies", "--player", "looker")
        assert code == 0
        training = lobby_line(after, "training")
        assert re.search(r"waits \d+ s \(9 in 10 within \d+ s\)\]  seats you now", training)
        # Two search in a lobby of three: one more player fills the table at once.
        trio = lobby_line(after, "trio")
        assert "[2 waiting, 0 playing]  seats you now" in trio, trio

        # Queueing twice says how to cancel the ticket that is open.
        code, out, err = await finished(stack, "play", "--player", "pol", "--lobby", "trio")
        assert code == 1, out + err
        assert "you already have an open ticket in trio: cancel it with `masa cancel`" in out

        code, out, _ = await finished(stack, "cancel", "--player", "pia")
        assert (code, out) == (0, f"ticket {first.ticket_id} in trio: cancelled\n")
        assert await ticket_state(stack, "pia", first.ticket_id) == mm.Ticket.STATE_CANCELLED
        code, out, _ = await finished(stack, "cancel", "--player", "pia")
        assert (code, out) == (0, "you have no open ticket to cancel\n")
        code, out, _ = await finished(
            stack, "cancel", "--player", "pol", "--ticket", second.ticket_id
        )
        assert (code, out) == (0, f"ticket {second.ticket_id} in trio: cancelled\n")


async def test_the_menu_names_the_valid_lobbies_cancels_an_open_ticket_and_quits_with_0(
    tmp_path: Path,
) -> None:
    async with started(tmp_path) as stack:
        ticket = await searching(stack, "mona", "trio")
        typed = "nosuch\ntrio\ncancel\nquit\n"
        code, out, err = await finished(stack, "play", "--player", "mona", typed=typed)
        assert code == 0, out + err
        assert "you have an open ticket in trio (searching): type 'cancel' to cancel it" in out
        assert "no lobby 'nosuch': pick 1 to 2 or one of trio, training" in out
        assert "you already have an open ticket in trio: cancel it with `masa cancel`" in out
        assert f"ticket {ticket.ticket_id} in trio: cancelled" in out
        assert out.endswith("bye\n")
        assert await ticket_state(stack, "mona", ticket.ticket_id) == mm.Ticket.STATE_CANCELLED

        # --lobby with an unknown id: matchmaking's answer lists the lobbies there are.
        code, out, err = await finished(stack, "play", "--player", "mona", "--lobby", "nosuch")
        assert code == 1
        assert "no lobby 'nosuch'; the lobbies are: trio, training" in err


async def test_an_input_masa_play_cannot_read_is_refused_before_a_ticket_or_a_seat(
    tmp_path: Path,
) -> None:
    """``masa play < /dev/null`` (or a file): the event loop cannot wait on it, so it is
    refused with exit code 2 before a ticket is made, not after a seat was taken."""
    async with started(tmp_path) as stack:
        for stdin in ("/dev/null", str(tmp_path / "lobbies.toml")):
            with open(stdin, "rb") as given:
                process = await masa(
                    stack, "play", "--player", "nul", "--lobby", "training", stdin=given
                )
                out, err = await asyncio.wait_for(process.communicate(), WAIT_SECONDS)
            assert process.returncode == 2, out.decode() + err.decode()
            assert "standard input is not a terminal or a pipe" in err.decode()
            assert "Traceback" not in err.decode()
        async with MatchmakingClient(stack.matchmaking, token("nul")) as matchmaking:
            assert await matchmaking.list_tickets() == []


async def test_a_new_players_balance_shows_the_development_welcome_before_any_ticket(
    tmp_path: Path,
) -> None:
    async with started(tmp_path) as stack:
        code, out, _ = await finished(stack, "balance", "--player", "newbie")
        assert code == 0
        assert out == f"newbie: {WELCOME:,} chips (0 held, {WELCOME:,} available)\n"


async def seated(stack: Stack, player: str) -> mm.Ticket:
    """``player`` seated at a ``trio`` table through matchmaking (the others of the table must
    come)."""
    async with MatchmakingClient(stack.matchmaking, token(player)) as matchmaking:
        lobby = await matchmaking.get_lobby("trio")
        return await asyncio.wait_for(find_seat(matchmaking, lobby, Console(sys.stdout)), 30)


async def test_P12_quit_says_how_long_the_seat_is_kept_and_the_command_that_comes_back(
    tmp_path: Path,
) -> None:
    """``quit`` at a chip table names the engine's seat protection (not the default) and the
    exact command that comes back to the seat, and that command does; Ctrl-C names the
    command too."""
    async with started(tmp_path, seat_protection_seconds=PROTECTION_SECONDS) as stack:
        practising = practice(stack, "pia", "pol")
        seat = await seated(stack, "ayse")
        try:
            async with running(
                stack, "play", "--player", "ayse", "--table", seat.table_id
            ) as first:
                await first.expect(r"your hand: ")
                first.send("quit")
                kept = await first.expect(r"your seat is kept for (\d+) s, then it forfeits")
                assert PROTECTION_SECONDS - 5 <= int(kept.group(1)) <= PROTECTION_SECONDS
                back = await first.expect(r"come back with: ([^\n]+)\n")
                assert await first.exit_code() == 0
            command = shlex.split(back.group(1))
            assert command == [
                "masa",
                "play",
                "--player",
                "ayse",
                "--table",
                seat.table_id,
                "--address",
                stack.engine,
            ]
            # The command as printed (the helper adds the addresses it takes, the same again).
            with sigint_as_in_a_terminal():
                again = Running(await masa(stack, *command[1:]))
            try:
                await again.expect(rf"Elevator · table {seat.table_id}")
                await again.expect(r"ayse \(you\)")
                # Ctrl-C says the same, with the default protection time (the engine's is
                # not in the view of a seat still connected).
                again.process.send_signal(signal.SIGINT)
                assert await again.exit_code() == 130
                assert (
                    "interrupted: your seat is kept for the seat protection (P-12: 180 s by "
                    f"default), then it forfeits; come back with: {back.group(1)}\n"
                ) in again.err
            finally:
                await again.close()
        finally:
            practising.cancel()
            await asyncio.gather(practising, return_exceptions=True)


async def test_P30_a_player_back_at_a_chip_table_with_table_sees_the_chips_at_the_end(
    tmp_path: Path,
) -> None:
    """The chip summary is read from the ledger, so a seat come back to with ``--table``
    shows it as one taken in the same session does."""
    async with started(tmp_path) as stack:
        practising = practice(stack, "pia", "pol")
        seat = await seated(stack, "ayse")
        async with running(stack, "play", "--player", "ayse", "--table", seat.table_id) as back:
            await back.expect(r"your hand: ")
            async with TableClient(seat.table_address, token("ayse")) as client:
                await asyncio.wait_for(play_seat(client, seat.table_id, 0.0), GAME_SECONDS)
            paid = await back.expect(
                rf"the table paid you ([\d,]+) chips for your stake of {STAKE}\n"
            )
            balance = await back.expect(r"balance: ([\d,]+) chips")
            assert await back.exit_code() == 0
        won = int(paid.group(1).replace(",", ""))
        assert int(balance.group(1).replace(",", "")) == WELCOME - STAKE + won
        assert await asyncio.wait_for(practising, GAME_SECONDS) == 0


async def test_P13_P30_the_waiting_line_tells_recent_waits_and_a_void_says_the_stake_came_back(
    tmp_path: Path,
) -> None:
    """After a table of the lobby was seated, a player who waits there is told how long its
    players waited; seated, they read after an operator's void (VoidTable) that the game was
    voided and their stake came back."""
    async with started(tmp_path) as stack:
        assert await asyncio.wait_for(practice(stack, "pia", "pol", "pim"), GAME_SECONDS) == 0
        async with running(stack, "play", "--player", "bora", "--lobby", "trio") as waiting:
            await waiting.expect(
                r"waiting for 2 more players: bots never sit at a chip table \(P-13\); players "
                r"seated here lately waited \d+ s \(9 in 10 within \d+ s\)\n"
            )
            practising = practice(stack, "pia", "pol")
            voided = (await waiting.expect(r"seated at table (\w+)")).group(1)
            await waiting.expect(r"your hand: ")
            async with TableAdminClient(stack.engine, token("operator", Role.ADMIN)) as engine:
                answer = await engine.void_table(voided, "a test void", timeout=10)
            assert answer.applied
            await waiting.expect(r"game voided: [^\n]*every stake went back \(P-30\)")
            await waiting.expect(
                rf"the game was voided: your stake of {STAKE} chips came back to you \(P-30\)\n"
            )
            await waiting.expect(rf"balance: {WELCOME:,} chips \({WELCOME:,} available\)")
            assert await waiting.exit_code() == 0
        assert await asyncio.wait_for(practising, GAME_SECONDS) == 0


async def test_C4_E4_elevator_help_gives_the_core_rules_and_a_card_not_held_is_refused_as_C4(
    tmp_path: Path,
) -> None:
    """``help`` says what may be played (E-4 ...), not only the commands; a card the player
    does not hold is refused for that (C-4), not as a colour rule (E-4) it does not break."""
    async with (
        started(tmp_path) as stack,
        running(stack, "play", "--player", "lena", "--lobby", "training") as play,
    ):
        hand = (await play.expect(r"your hand: ([^\n]+)\n")).group(1).split()
        await play.expect(r"your turn: 'play CARDS' or 'pass'")
        play.send("help")
        await play.expect(
            r"what may be played \(docs/rules.md\):\n"
            r"  E-4   play the opposite colour, strictly higher going up or strictly lower "
            r"going down\n"
        )
        await play.expect(r"  play 8H 8S\s+play one card")
        missing = next(
            f"{rank}{suit}"
            for rank in ("A", "K", "Q", "J", "10", "9", "8", "7", "6", "5", "4", "3", "2")
            for suit in "SHDC"
            if f"{rank}{suit}" not in hand
        )
        play.send(f"play {missing}")
        await play.expect(
            rf"not allowed \(C-4\): not in your hand: {missing}\n"
            r"  rule C-4: each physical card is in exactly one place: you play and give "
            r"only cards in your own hand\n"
        )
        play.send("quit")
        assert await play.exit_code() == 0
