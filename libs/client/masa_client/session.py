"""The terminal sessions of the ``masa`` CLI: play at a table as a seat, or watch one.

A session follows the table's watch stream and prints one line per event; it keeps the
seat's current view (fetched again after every update, so it is always the server's own
picture) and shows the whole board whenever the player has something to do. Typed commands
become actions (:mod:`masa_client.commands`) submitted at the sequence the player last saw.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import IO

import grpc
from masa.table.v1 import action_pb2, table_pb2, view_pb2

from masa_client.client import TableClient, sequence_of
from masa_client.commands import HELP, CommandError, parse_command
from masa_client.errors import MasaCallError
from masa_client.render import Style, board, describe
from masa_client.rulebook import meaning

__all__ = ["PlaySession", "read_lines", "watch_table"]

PROMPT = "> "


async def read_lines(fd: int) -> AsyncIterator[str]:
    """Lines typed on ``fd`` (a terminal or pipe), without blocking the event loop."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes] = asyncio.Queue()

    def readable() -> None:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            chunk = b""
        queue.put_nowait(chunk)
        if not chunk:
            loop.remove_reader(fd)

    loop.add_reader(fd, readable)
    pending = b""
    try:
        while True:
            chunk = await queue.get()
            if not chunk:
                if pending.strip():
                    yield pending.decode(errors="replace")
                return
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                yield line.decode(errors="replace").rstrip("\r")
    finally:
        loop.remove_reader(fd)


@dataclass
class PlaySession:
    """One seat at one table, driven by typed commands."""

    client: TableClient
    table_id: str
    game: str
    out: IO[str]
    style: Style
    view: view_pb2.SeatView | None = None
    sequence: int = 0
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    _was_my_move: bool = False

    def say(self, text: str = "") -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def prompt(self) -> None:
        self.out.write(PROMPT)
        self.out.flush()

    def names(self) -> dict[int, str]:
        if self.view is None:
            return {}
        return {
            seat.seat: (seat.display_name or seat.player_id or f"seat {seat.seat}")
            + (" (you)" if seat.seat == self.view.seat else "")
            for seat in self.view.table.seats
        }

    def my_move(self) -> bool:
        """Whether this seat must act now: its turn, or a query that asks it (F-80)."""
        if self.view is None or self.finished.is_set():
            return False
        table = self.view.table
        if table.turn_phase == view_pb2.TURN_PHASE_QUERY:
            query = table.fiftyone.query
            answered = {*query.given_seats, *query.refused_seats}
            return self.view.seat in query.asked_seats and self.view.seat not in answered
        return table.HasField("turn_seat") and table.turn_seat == self.view.seat

    async def refresh(self) -> None:
        answer = await self.client.get_table(self.table_id)
        if answer.WhichOneof("view") == "seat_view":
            self.view = answer.seat_view
            self.sequence = max(self.sequence, self.view.table.table.sequence)

    def show_board(self) -> None:
        if self.view is not None:
            self.say(board(self.view, self.style))

    async def follow(self) -> None:
        """Print the table's events until the game ends; show the board when it is our move."""
        async for message in self.client.watch(self.table_id):
            self.sequence = max(self.sequence, sequence_of(message))
            snapshot = message.WhichOneof("payload") == "seat_view"
            if snapshot:
                self.view = message.seat_view
            else:
                self._print_update(message)
                if self.finished.is_set():
                    break
                await self.refresh()
            mine = self.my_move()
            became_mine = mine and not self._was_my_move
            if snapshot or became_mine:
                self.show_board()
            if became_mine:
                self.prompt()
            self._was_my_move = mine
        self.finished.set()

    def _print_update(self, message: table_pb2.WatchTableResponse) -> None:
        names = self.names()
        for event in message.update.events:
            line = describe(event, names, self.style)
            if line:
                self.say(line)
            if event.WhichOneof("kind") == "game_finished":
                self.finished.set()

    async def handle(self, line: str) -> bool:
        """Act on one typed line; False when the player quits."""
        try:
            parsed = parse_command(line, self.game, self.view)
        except CommandError as error:
            self.say(self.style.paint(f"? {error}", "yellow"))
            return True
        if parsed.local == "quit":
            return False
        if parsed.local == "help":
            self.say(HELP[self.game])
        elif parsed.local == "look":
            await self.refresh()
            self.show_board()
        elif parsed.action is not None:
            await self._submit(parsed.action)
        return True

    async def _submit(self, action: action_pb2.Action) -> None:
        try:
            await self.client.submit_action(self.table_id, action, self.sequence)
        except MasaCallError as error:
            self.say(self.style.paint(_explain(error), "red"))
            if error.code in (grpc.StatusCode.ABORTED, grpc.StatusCode.FAILED_PRECONDITION):
                await self.refresh()


def _explain(error: MasaCallError) -> str:
    """A rejected move in words: the rule id, what happened, and what the rule says."""
    if error.rule:
        what = "not allowed" if error.is_illegal_move else "not a valid move"
        about = meaning(error.rule)
        return f"✗ {what} ({error.rule}): {error.message}" + (
            f"\n  rule {error.rule}: {about}" if about else ""
        )
    if error.code is grpc.StatusCode.ABORTED:
        return "✗ the table moved on before your move arrived; look again and retry"
    if error.code is grpc.StatusCode.PERMISSION_DENIED:
        return f"✗ not your seat or not your move: {error.message}"
    return f"✗ {error}"


async def watch_table(client: TableClient, table_id: str, out: IO[str], style: Style) -> int:
    """Follow ``table_id`` as a spectator until the game ends (the server closes the stream)."""
    names: dict[int, str] = {}
    async for message in client.watch(table_id, spectate=True):
        kind = message.WhichOneof("payload")
        if kind in ("spectator_view", "seat_view"):
            view = message.spectator_view if kind == "spectator_view" else message.seat_view.table
            names = {s.seat: s.display_name or s.player_id or f"seat {s.seat}" for s in view.seats}
            out.write(board(view, style) + "\n")
        else:
            for event in message.update.events:
                line = describe(event, names, style)
                if line:
                    out.write(line + "\n")
        out.flush()
    return 0
