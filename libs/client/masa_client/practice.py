"""Practice players: ``masa practice`` fills a lobby with SDK players, so that a developer alone
can try a chip game (P-13).

Bots never sit at a chip table (P-13), so under ``make run`` a developer alone in a chip lobby
waits for players who never come. Practice players are those players: plain SDK clients
(:class:`~masa_client.matchmaking.MatchmakingClient` and :class:`~masa_client.client.TableClient`),
each a development player with a token of its own, and hence a wallet of its own: the ledger
welcomes a player it has no wallet of with development chips under ``make run``. Each one queues in
the lobby, plays its seat with the rules library's ``normal`` policy (the greedy policies,
which the bot service plays at that level), waits for the ledger to settle its stake, prints
one line with the chips it won or lost, and queues again: after ``games`` games, or until
stopped. Stopped (Ctrl-C, SIGTERM, a closed terminal), a searching player cancels its ticket
and a seated one leaves its table, whose seat then forfeits as any player's does (P-12); a
search a run killed outright left open is the same player's, and is cancelled at the next
start.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import IO, Final

import grpc
from masa.ledger.v1 import ledger_pb2
from masa.matchmaking.v1 import matchmaking_pb2 as mm
from masa.table.v1 import view_pb2

from masa_client.accounts import settled
from masa_client.client import TableClient
from masa_client.errors import MasaCallError
from masa_client.load.moves import move_from_view, salt
from masa_client.matchmaking import LedgerClient, MatchmakingClient
from masa_client.seating import NoSeat, cancel_search, open_tickets, unseated
from masa_client.tokens import TokenSource

__all__ = [
    "MAX_PLAYERS",
    "GamePlayed",
    "PracticeOptions",
    "PracticePlayer",
    "add_practice_parser",
    "play_seat",
    "practise",
    "run_practice",
]

# More than a few tables' worth of players is a load test, which masa-load is for.
MAX_PLAYERS: Final = 16
MAX_THINK_SECONDS: Final = 10.0
MAX_GAMES: Final = 1_000_000
# Matchmaking's lobby ids; a practice player's id is made of one.
_LOBBY_ID: Final = re.compile(r"[a-z0-9][a-z0-9-]{0,39}")
_ENDS: Final = frozenset({"game_finished", "game_abandoned"})
# A move refused because the table moved on meanwhile (another seat, a timer): the next
# update brings a fresh view to decide from.
_STALE: Final = frozenset({grpc.StatusCode.ABORTED, grpc.StatusCode.FAILED_PRECONDITION})
_LEAVE_SECONDS: Final = 5.0


@dataclass(frozen=True, slots=True)
class PracticePlayer:
    """A development player: its id, and the tokens whose subject it is."""

    player_id: str
    token: TokenSource


@dataclass(frozen=True, slots=True)
class PracticeOptions:
    lobby_id: str
    # Games each player plays; None plays until stopped.
    games: int | None
    # The pause before each move, so that a person at the table can follow the play.
    think_seconds: float
    matchmaking: str
    ledger: str
    # Every table-engine node, where a table is looked for when its node does not answer.
    nodes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class GamePlayed:
    """One finished game of a practice player."""

    player_id: str
    # The player's game number in this run, from 1.
    game: int
    table_id: str
    place: int
    seats: int
    forfeited: bool
    # The table's stake (0 without chips) and what the table paid for it (the stake itself
    # when the game was voided); None when the ledger has not settled the game in time.
    stake: int = 0
    paid: int | None = None

    @property
    def chips(self) -> int | None:
        """Chips won (positive) or lost (negative); None when unknown or nothing was staked."""
        return None if self.paid is None else self.paid - self.stake

    def line(self) -> str:
        forfeit = ", forfeited (P-12)" if self.forfeited else ""
        if not self.stake:
            money = "no chips at stake"
        elif self.chips is None:
            money = "not settled yet (see masa balance)"
        else:
            money = f"{self.chips:+,} chips"
        return (
            f"{self.player_id}: game {self.game} at table {self.table_id}: "
            f"place {self.place} of {self.seats}{forfeit}, {money}"
        )


async def run_practice(
    players: Sequence[PracticePlayer], options: PracticeOptions, out: IO[str]
) -> int:
    """Every player at once, a line per game on ``out``; 0 when each played its games, 1 when
    one of them had to stop (its reason printed)."""

    def say(line: str) -> None:
        print(line, file=out, flush=True)

    async def one(player: PracticePlayer) -> bool:
        try:
            await practise(player, options, say)
        except (NoSeat, MasaCallError) as error:
            print(f"{player.player_id}: stopped: {error}", file=out, flush=True)
            return False
        return True

    done = await asyncio.gather(*(one(player) for player in players))
    return 0 if all(done) else 1


async def practise(
    player: PracticePlayer, options: PracticeOptions, say: Callable[[str], None]
) -> None:
    """Queue, play, report (a line to ``say``), again: ``options.games`` times, or until
    cancelled.

    A search the same practice player left open (an earlier run killed without the chance to
    cancel it) is its own: it is cancelled first, or the new search would be refused."""
    async with (
        MatchmakingClient(options.matchmaking, player.token) as matchmaking,
        LedgerClient(options.ledger, player.token) as ledger,
    ):
        for left in await open_tickets(matchmaking):
            await cancel_search(matchmaking, left)
            say(
                f"{player.player_id}: cancelled its search in {left.lobby_id} left open by an "
                f"earlier run (ticket {left.ticket_id})"
            )
        game = 0
        while options.games is None or game < options.games:
            game += 1
            ticket = await _seated(matchmaking, options.lobby_id, player.player_id)
            async with TableClient(
                ticket.table_address, player.token, nodes=options.nodes
            ) as table:
                final = await play_seat(table, ticket.table_id, options.think_seconds)
            say((await _result(ledger, player.player_id, game, ticket, final)).line())


async def _seated(matchmaking: MatchmakingClient, lobby_id: str, player_id: str) -> mm.Ticket:
    """A ticket in the lobby, watched until seated; cancelled if the wait is."""
    ticket = await matchmaking.create_ticket(lobby_id, display_name=player_id)
    try:
        async for current in matchmaking.watch_ticket(ticket.ticket_id):
            ticket = current
    except asyncio.CancelledError:
        await cancel_search(matchmaking, ticket)
        raise
    if ticket.state != mm.Ticket.STATE_MATCHED:
        raise unseated(ticket)
    return ticket


async def play_seat(client: TableClient, table_id: str, think_seconds: float) -> view_pb2.SeatView:
    """Play the caller's seat with the ``normal`` policy until the game ends; its final view.

    A watch update (or the first view) may mean this seat has something to do: a turn, an
    Elevator gift, a 51 query. The seat reads its view and plays the policy's move, if any.
    Cancelled, it leaves the table first (P-12).
    """
    moves = 0
    try:
        async for message in client.watch(table_id):
            if message.WhichOneof("payload") == "update":
                if any(e.WhichOneof("kind") in _ENDS for e in message.update.events):
                    break
                view = (await client.get_table(table_id)).seat_view
            else:
                view = message.seat_view
            if view.table.table.state != view_pb2.Table.STATE_PLAYING:
                break
            sequence = view.table.table.sequence
            move = move_from_view(view, salt(table_id, sequence, moves))
            if move is None:
                continue
            await asyncio.sleep(think_seconds)
            try:
                await client.submit_action(table_id, move, sequence)
            except MasaCallError as error:
                if error.code not in _STALE:
                    raise
                continue
            moves += 1
    except asyncio.CancelledError:
        with contextlib.suppress(MasaCallError, TimeoutError):
            await asyncio.wait_for(asyncio.shield(client.leave_table(table_id)), _LEAVE_SECONDS)
        raise
    return (await client.get_table(table_id)).seat_view


async def _result(
    ledger: LedgerClient, player_id: str, game: int, ticket: mm.Ticket, final: view_pb2.SeatView
) -> GamePlayed:
    table = final.table
    mine = next((s for s in table.ranking if s.seat == final.seat), None)
    played = GamePlayed(
        player_id=player_id,
        game=game,
        table_id=ticket.table_id,
        place=mine.place if mine is not None else 0,
        seats=len(table.seats),
        forfeited=mine.forfeited if mine is not None else False,
        stake=table.table.config.stake,
    )
    if not ticket.hold_id:
        return played
    closed = await settled(ledger, ticket.hold_id)
    if closed is None:
        return played
    hold, paid = closed
    # A voided game gave the stake back: nothing won or lost.
    return replace(
        played, paid=paid if hold.state == ledger_pb2.StakeHold.STATE_POSTED else hold.amount
    )


def add_practice_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    *,
    matchmaking_where: str,
    ledger_where: str,
) -> None:
    practice = commands.add_parser(
        "practice",
        help="practice players for a lobby, to try a chip game alone (development)",
        description="Start practice players in a lobby: each a development player with its own "
        "token and wallet (the ledger's development welcome gives it chips), who queues, plays "
        "the normal policy, and queues again, printing a line per game with the chips won or "
        "lost. Bots never sit at a chip table (P-13): queue with `masa play --lobby LOBBY` "
        "beside them. Ctrl-C stops them (so do SIGTERM and a closed terminal): a search is "
        "cancelled, a seat is left (P-12); a search a killed run left open is cancelled at the "
        "next start.",
    )
    practice.add_argument("--lobby", required=True, type=_lobby_id, help="the lobby to queue for")
    practice.add_argument(
        "--players",
        type=_whole(1, MAX_PLAYERS),
        default=2,
        help=f"how many practice players (1-{MAX_PLAYERS}, default: 2)",
    )
    practice.add_argument(
        "--games",
        type=_whole(1, MAX_GAMES),
        help="games each player plays before it stops (default: until Ctrl-C)",
    )
    practice.add_argument(
        "--think",
        type=_seconds,
        default=0.5,
        help=f"seconds each player waits before a move, so that you can follow the play "
        f"(0-{MAX_THINK_SECONDS:g}, default: 0.5)",
    )
    practice.add_argument("--matchmaking", help=matchmaking_where)
    practice.add_argument("--ledger", help=ledger_where)


def _lobby_id(text: str) -> str:
    if not _LOBBY_ID.fullmatch(text):
        raise argparse.ArgumentTypeError(f"not a lobby id: {text[:40]!r}")
    return text


def _whole(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        if not text.isdigit() or not low <= int(text) <= high:
            raise argparse.ArgumentTypeError(f"not a number from {low} to {high}: {text[:20]!r}")
        return int(text)

    return parse


def _seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0.0 <= seconds <= MAX_THINK_SECONDS:
        raise argparse.ArgumentTypeError(
            f"not a number of seconds from 0 to {MAX_THINK_SECONDS:g}: {text[:20]!r}"
        )
    return seconds
