"""The terminal sessions of the ``masa`` CLI: play at a table as a seat, or watch one.

A session follows the table's watch stream and prints lines for the events; it keeps the
seat's current view (fetched again after every update, so it is always the server's own
picture). Typed commands become actions (:mod:`masa_client.commands`) submitted at the
sequence the player last saw.

What the player sees, and when:

- the whole board whenever a move of theirs starts: their turn, a query that asks them, a new
  hand they start (even right after their own finishing discard), and again after each of
  their own moves within a turn (a draw, a lay-off), so the hand shown is never stale;
- the prompt only while the move is theirs. Lines that arrive while the prompt shows first
  erase it and then put it back, so the prompt never sits in the middle of other lines;
- while the autopilot plays the seat (P-11), the board says so and how to stop it (``resume``);
- at the end, the result and why the game ended; the session then ends by itself;
- when the table moves to another node (its node died or drained), one line says so
  (:data:`MOVED_NOTICE`) and play goes on: the stream resumes from the last sequence seen, and
  a move sent meanwhile is re-sent with its request id, so nothing is shown twice or lost.
"""

from __future__ import annotations

import asyncio
import os
import selectors
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import IO, Final

import grpc
from masa.table.v1 import action_pb2, event_pb2, table_pb2, view_pb2

from masa_client.client import TableClient, sequence_of
from masa_client.commands import HELP, CommandError, parse_command
from masa_client.errors import MasaCallError
from masa_client.render import Style, board, describe, game_over, with_names
from masa_client.rulebook import meaning

__all__ = [
    "MOVED_NOTICE",
    "PROMPT",
    "SEAT_PROTECTION_SECONDS",
    "Console",
    "Keyboard",
    "PlaySession",
    "public_view",
    "watch_table",
]

PROMPT: Final = "> "
MOVED_NOTICE: Final = "(table moved to another server; play goes on)"
# Events that end the game; the stream closes after them.
_GAME_ENDS: Final = frozenset({"game_finished", "game_abandoned"})
# Events about a seat that neither start its move nor change its cards.
_NOT_A_MOVE: Final = frozenset({"seat_connection_changed", "turn_timed_out"})
# How long a seat is kept for a player who left or dropped, unless the engine's view says
# otherwise: P-12's seat protection as docs/rules.md §4.1 sets it by default.
SEAT_PROTECTION_SECONDS: Final = 180


class Console:
    """Every line a session prints; a shown prompt is erased before another line goes out."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self._prompt_shown = False
        # After a typed line the cursor may sit after a prompt printed behind the echo of
        # type-ahead; the next output clears the line first, which is harmless when it is empty.
        self._erase_first = False
        fancy = out.isatty() and os.environ.get("TERM", "") not in ("", "dumb")
        # Back to the line's start and clear it; a dumb terminal gets the prompt overwritten.
        self._erase = "\r\033[K" if fancy else "\r" + " " * len(PROMPT) + "\r"

    def say(self, text: str = "") -> None:
        self._clear()
        self.out.write(text + "\n")
        self.out.flush()

    def prompt(self) -> None:
        if not self._prompt_shown:
            self._clear()
            self.out.write(PROMPT)
            self.out.flush()
            self._prompt_shown = True

    def typed(self) -> None:
        """The player pressed Enter: whatever the prompt showed is answered."""
        self._prompt_shown = False
        self._erase_first = True

    def _clear(self) -> None:
        if self._prompt_shown or self._erase_first:
            self.out.write(self._erase)
        self._prompt_shown = self._erase_first = False


class Keyboard:
    """Lines typed on ``fd`` (a terminal or a pipe), read without blocking the event loop."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()
        self._pending = b""
        self._loop: asyncio.AbstractEventLoop | None = None

    @staticmethod
    def unusable(fd: int) -> str:
        """Why lines cannot be read from ``fd`` as they are typed ("" when they can): it is
        closed, or it is /dev/null or a file, which the event loop cannot wait on."""
        with selectors.DefaultSelector() as probe:
            try:
                probe.register(fd, selectors.EVENT_READ)
            except (OSError, ValueError):
                return (
                    "standard input is not a terminal or a pipe (it is closed, /dev/null or a "
                    "file), so no move could be typed"
                )
        return ""

    def __enter__(self) -> Keyboard:
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self._fd, self._readable)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._loop is not None:
            self._loop.remove_reader(self._fd)

    async def line(self) -> str | None:
        """The next line typed, or None once input has ended (Ctrl-D)."""
        return await self._lines.get()

    def _readable(self) -> None:
        try:
            chunk = os.read(self._fd, 4096)
        except OSError:
            chunk = b""
        if not chunk:
            if self._pending.strip():
                self._lines.put_nowait(self._pending.decode(errors="replace"))
            self._lines.put_nowait(None)
            if self._loop is not None:
                self._loop.remove_reader(self._fd)
            return
        self._pending += chunk
        while b"\n" in self._pending:
            line, self._pending = self._pending.split(b"\n", 1)
            self._lines.put_nowait(line.decode(errors="replace").rstrip("\r"))


@dataclass
class PlaySession:
    """One seat at one table, driven by typed commands."""

    client: TableClient
    table_id: str
    game: str
    console: Console
    style: Style
    view: view_pb2.SeatView | None = None
    sequence: int = 0
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    # Whether the move was the player's after the last update, to notice a move beginning.
    _was_mine: bool = False

    def __post_init__(self) -> None:
        self.client.on_moved = self._moved

    def _moved(self, table_id: str, address: str) -> None:
        self.console.say(self.style.paint(MOVED_NOTICE, "dim"))
        if self.my_move():
            self.console.prompt()

    def my_move(self) -> bool:
        """Whether this seat must act now: its turn, or a query that asks it (F-80)."""
        if self.view is None or self.finished.is_set() or self.on_autopilot():
            return False
        table = self.view.table
        if table.turn_phase == view_pb2.TURN_PHASE_QUERY:
            query = table.fiftyone.query
            answered = {*query.given_seats, *query.refused_seats}
            return self.view.seat in query.asked_seats and self.view.seat not in answered
        # A turn without a deadline timed out, and the autopilot is playing it (P-10).
        return (
            table.HasField("turn_seat")
            and table.turn_seat == self.view.seat
            and table.HasField("turn_deadline")
        )

    def on_autopilot(self) -> bool:
        """Whether the autopilot plays this seat (P-11) or a bot does after a forfeit (P-12)."""
        if self.view is None:
            return False
        mine = next((s for s in self.view.table.seats if s.seat == self.view.seat), None)
        return mine is not None and (mine.autopilot or mine.forfeited)

    async def refresh(self) -> None:
        answer = await self.client.get_table(self.table_id)
        if answer.WhichOneof("view") == "seat_view":
            self.view = answer.seat_view
            self.sequence = max(self.sequence, self.view.table.table.sequence)

    def show_board(self) -> None:
        if self.view is not None:
            self.console.say(board(self.view, self.style))

    def prompt_if_mine(self) -> None:
        if self.my_move():
            self.console.prompt()

    async def follow(self) -> None:
        """Print the table's events until the game ends; show the board when a move starts."""
        async for message in self.client.watch(self.table_id):
            seen = self.sequence
            self.sequence = max(self.sequence, sequence_of(message))
            if message.WhichOneof("payload") == "seat_view":
                self.view = message.seat_view
                # A stream resumed on another node may start again with the table as the
                # player saw it last: nothing new to show.
                if not seen or self.sequence > seen:
                    self.show_board()
                if _finished(self.view.table):
                    break
            else:
                await self.refresh()
                if self._print_update(message.update):
                    break
                if self.my_move() and (not self._was_mine or self._concerns_me(message.update)):
                    self.show_board()
            self.prompt_if_mine()
            self._was_mine = self.my_move()
        self.finished.set()

    def _print_update(self, update: event_pb2.TableUpdate) -> bool:
        """Print the update's lines; True (after printing the result) when the game ended."""
        if self.view is None:
            return False
        me = self.view.seat
        for event in update.events:
            line = describe(event, self.view.table, self.style, me)
            if line:
                self.console.say(line)
        if not any(event.WhichOneof("kind") in _GAME_ENDS for event in update.events):
            return False
        self.finished.set()
        for line in game_over(self.view.table, self.style, me):
            self.console.say(line)
        return True

    def _concerns_me(self, update: event_pb2.TableUpdate) -> bool:
        """Whether the update starts a move of this seat or changed its cards or control."""
        me = self.view.seat if self.view is not None else -1
        for event in update.events:
            kind = event.WhichOneof("kind")
            if kind == "hand_dealt":
                return True
            if kind is None or kind in _NOT_A_MOVE:
                continue
            body = getattr(event, kind)
            if kind == "query_started" and me in body.asked_seats:
                return True
            if getattr(body, "seat", None) == me:
                return True
        return False

    async def handle(self, line: str) -> bool:
        """Act on one typed line; False when the player quits."""
        try:
            parsed = parse_command(line, self.game, self.view)
        except CommandError as error:
            self.console.say(self.style.paint(f"? {error}", "yellow"))
            self.prompt_if_mine()
            return True
        if parsed.local == "quit":
            return False
        if parsed.local == "help":
            self.console.say(HELP[self.game])
        elif parsed.local == "look":
            await self.refresh()
            self.show_board()
        elif parsed.local == "resume":
            await self._resume()
        elif parsed.action is not None:
            await self._submit(parsed.action)
            return True
        self.prompt_if_mine()
        return True

    async def leave(self) -> view_pb2.Table:
        """Give up the seat (LeaveTable); the answer says whether the table ended with it."""
        return await self.client.leave_table(self.table_id)

    async def seconds_kept(self) -> int | None:
        """How long the seat is kept now that its player left (P-12): to its protection
        deadline in the engine's view, else the default protection time; None when it is not
        kept (it forfeited, and a bot plays it)."""
        await self.refresh()
        if self.view is not None:
            mine = next((s for s in self.view.table.seats if s.seat == self.view.seat), None)
            if mine is not None and mine.forfeited:
                return None
            if mine is not None and mine.HasField("protection_deadline"):
                deadline = mine.protection_deadline.ToNanoseconds() / 1e9
                return max(0, round(deadline - time.time()))
        return SEAT_PROTECTION_SECONDS

    async def _resume(self) -> None:
        was = self.on_autopilot()
        try:
            view = await self.client.resume_control(self.table_id)
        except MasaCallError as error:
            self.console.say(self.style.paint(_explain(error, self._named), "red"))
            return
        self.view = view
        self.sequence = max(self.sequence, view.table.table.sequence)
        if was:
            self.console.say(self.style.paint("you have your seat back", "green"))
            self.show_board()
        else:
            self.console.say("the autopilot was not playing for you")

    def _named(self, text: str) -> str:
        return with_names(text, self.view.table) if self.view is not None else text

    async def _submit(self, action: action_pb2.Action) -> None:
        """Submit; the watch stream prints what happened and shows the board if still ours."""
        try:
            await self.client.submit_action(self.table_id, action, self.sequence)
        except MasaCallError as error:
            self.console.say(self.style.paint(_explain(error, self._named), "red"))
            if error.code in (grpc.StatusCode.ABORTED, grpc.StatusCode.FAILED_PRECONDITION):
                await self.refresh()
            self.prompt_if_mine()


def _finished(table: view_pb2.TableView) -> bool:
    return table.table.state in (view_pb2.Table.STATE_FINISHED, view_pb2.Table.STATE_VOIDED)


def _explain(error: MasaCallError, named: Callable[[str], str]) -> str:
    """A rejected move in words: the rule id, what happened, and what the rule says."""
    if error.rule:
        what = "not allowed" if error.is_illegal_move else "not a valid move"
        about = meaning(error.rule)
        return f"✗ {what} ({error.rule}): {named(error.message)}" + (
            f"\n  rule {error.rule}: {about}" if about else ""
        )
    if error.code is grpc.StatusCode.ABORTED:
        return "✗ the table moved on before your move arrived; look again and retry"
    if error.code is grpc.StatusCode.PERMISSION_DENIED:
        return f"✗ not your seat or not your move: {named(error.message)}"
    return f"✗ {error}"


def public_view(answer: table_pb2.GetTableResponse) -> view_pb2.TableView:
    """The public table of a ``GetTable`` answer: a caller with a seat there gets its seat's
    view, which holds it, and anyone else the spectators' view."""
    if answer.WhichOneof("view") == "seat_view":
        return answer.seat_view.table
    return answer.spectator_view


async def watch_table(client: TableClient, table_id: str, console: Console, style: Style) -> int:
    """Follow ``table_id`` as a spectator until the game ends, then show its result.

    A table that has already finished (the engine keeps it for a while) shows its final
    board and result at once.
    """
    view: view_pb2.TableView | None = None
    seen = 0
    client.on_moved = lambda _table, _address: console.say(style.paint(MOVED_NOTICE, "dim"))
    async for message in client.watch(table_id, spectate=True):
        sequence = sequence_of(message)
        if message.WhichOneof("payload") == "spectator_view":
            # A stream resumed on another node starts again with the table: shown only when
            # it holds something not seen yet.
            if view is None or sequence > seen:
                console.say(board(message.spectator_view, style))
            view = message.spectator_view
            seen = max(seen, sequence)
            continue
        seen = max(seen, sequence)
        if view is None:
            continue
        for event in message.update.events:
            line = describe(event, view, style)
            if line:
                console.say(line)
        if any(event.WhichOneof("kind") in _GAME_ENDS for event in message.update.events):
            final = await client.get_table(table_id)
            for line in game_over(public_view(final), style):
                console.say(line)
    return 0
