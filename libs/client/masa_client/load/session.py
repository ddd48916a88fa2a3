"""The calls a load run makes, each timed and counted: CreateTable, GetTable, SubmitAction.

Only the given address is called, on one channel; an answer that names another node
(TABLE_MOVED) is counted as a refusal, never followed. Every move waits for the run's rate
cap first. What completes inside the measured window is counted; the warm-up before it is
not. Moves go as SubmitAction calls, or (``--moves stream``) as messages of one
SubmitActions stream per player, opened at the player's first move and kept for the run.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Final

import grpc
import grpc.aio
from masa.table.v1 import action_pb2, event_pb2, table_pb2, table_pb2_grpc, view_pb2

from masa_client.load.credentials import Credentials, Player
from masa_client.load.pacing import RateCap
from masa_client.load.report import Counts
from masa_client.load.tables import GameMix, TablePlan, table_config

__all__ = ["Session", "Table", "Window"]


@dataclass(slots=True)
class Window:
    """The measured window, [start, end) on ``time.perf_counter``; unset until it opens."""

    start: float = float("inf")
    end: float = float("inf")

    def measuring(self, now: float) -> bool:
        return self.start <= now < self.end


@dataclass(slots=True)
class Table:
    """One table as its driver plays it."""

    table_id: str
    game: str
    players: list[Player]
    moves: int = 0


_CODE_NAMES: Final = {code.value[0]: code.name for code in grpc.StatusCode}


@dataclass(slots=True)
class _MoveStream:
    call: grpc.aio.StreamStreamCall[table_pb2.SubmitActionsRequest, table_pb2.SubmitActionsResponse]
    # One move at a time: the answers come back in the order the moves went.
    turn: asyncio.Lock = field(default_factory=asyncio.Lock)


@dataclass(slots=True)
class MoveStreams:
    """One SubmitActions stream per player, opened at its first move and kept for the run."""

    stub: table_pb2_grpc.TableServiceAsyncStub
    streams: dict[str, _MoveStream] = field(default_factory=dict)

    async def submit(
        self, player: Player, request: table_pb2.SubmitActionRequest, timeout: float
    ) -> table_pb2.SubmitActionsResponse:
        stream = self.streams.get(player.name)
        if stream is None:
            stream = _MoveStream(self.stub.SubmitActions(metadata=player.metadata))
            self.streams[player.name] = stream
        async with stream.turn:
            try:
                async with asyncio.timeout(timeout):
                    await stream.call.write(table_pb2.SubmitActionsRequest(action=request))
                    answer = await stream.call.read()
            except BaseException:
                # A stream that failed or timed out may owe an answer still: the player's
                # next move opens a new one.
                self._drop(player.name, stream)
                raise
            if not isinstance(answer, table_pb2.SubmitActionsResponse):
                self._drop(player.name, stream)
                raise ConnectionError("the server ended the stream of moves")
            return answer

    def _drop(self, name: str, stream: _MoveStream) -> None:
        stream.call.cancel()
        if self.streams.get(name) is stream:
            del self.streams[name]

    def close(self) -> None:
        for stream in self.streams.values():
            stream.call.cancel()
        self.streams.clear()


@dataclass(slots=True)
class Session:
    """What every driver of a run shares."""

    stub: table_pb2_grpc.TableServiceAsyncStub
    credentials: Credentials
    mix: GameMix
    plan: TablePlan
    cap: RateCap
    call_timeout: float
    window: Window = field(default_factory=Window)
    # Moves over streams (``--moves stream``); None: a SubmitAction call each.
    streams: MoveStreams | None = None
    counts: Counts = field(default_factory=Counts)
    # Everything accepted since the start, warm-up included: the progress line's count.
    accepted_total: int = 0
    errors_total: int = 0

    def refused(self, error: grpc.aio.AioRpcError | str) -> None:
        """Count a refused call, by its status code (an error, or a code's name)."""
        self.errors_total += 1
        if self.window.measuring(time.perf_counter()):
            name = error if isinstance(error, str) else error.code().name
            self.counts.errors[name] += 1

    async def create(self, slot: int, game_no: int) -> Table | None:
        game = self.mix.game_of(slot)
        seats = self.plan.seats_of(game, slot, game_no)
        players = self.credentials.seat_players(slot, seats)
        config = table_config(game, seats, players, self.plan, slot=slot, game_no=game_no)
        try:
            created = await self.stub.CreateTable(
                table_pb2.CreateTableRequest(config=config),
                metadata=self.credentials.service,
                timeout=self.call_timeout,
            )
        except grpc.aio.AioRpcError as error:
            self.refused(error)
            return None
        if self.window.measuring(time.perf_counter()):
            self.counts.tables_created += 1
        return Table(created.table.table_id, game, players)

    async def view(self, table: Table, seat: int) -> view_pb2.SeatView | None:
        sent = time.perf_counter()
        try:
            answer = await self.stub.GetTable(
                table_pb2.GetTableRequest(table_id=table.table_id),
                metadata=table.players[seat].metadata,
                timeout=self.call_timeout,
            )
        except grpc.aio.AioRpcError as error:
            self.refused(error)
            return None
        done = time.perf_counter()
        if self.window.measuring(done):
            self.counts.get_table.add(done - sent)
        return answer.seat_view

    async def submit(
        self, table: Table, seat: int, move: action_pb2.Action, expected_sequence: int
    ) -> event_pb2.TableUpdate | None:
        """``seat``'s move; the engine's update, or None when it refused the move."""
        table.moves += 1
        await self.cap.slot()
        request = table_pb2.SubmitActionRequest(
            request_id=f"{table.table_id}/{seat}/{table.moves}",
            table_id=table.table_id,
            expected_sequence=expected_sequence,
            action=move,
        )
        player = table.players[seat]
        sent = time.perf_counter()
        try:
            if self.streams is None:
                answer = await self.stub.SubmitAction(
                    request, metadata=player.metadata, timeout=self.call_timeout
                )
                update = answer.update
            else:
                streamed = await self.streams.submit(player, request, self.call_timeout)
                if streamed.WhichOneof("result") != "update":
                    self.refused(_CODE_NAMES.get(streamed.refused.code, "UNKNOWN"))
                    return None
                update = streamed.update
        except grpc.aio.AioRpcError as error:
            self.refused(error)
            return None
        except TimeoutError:
            self.refused("DEADLINE_EXCEEDED")
            return None
        except ConnectionError:
            self.refused("UNAVAILABLE")
            return None
        done = time.perf_counter()
        self.accepted_total += 1
        if self.window.measuring(done):
            self.counts.submitted(table.game, done - sent)
            self.counts.games_finished += finished(update)
        return update

    def resynced(self) -> None:
        if self.window.measuring(time.perf_counter()):
            self.counts.resyncs += 1


def finished(update: event_pb2.TableUpdate) -> int:
    return sum(1 for event in update.events if event.HasField("game_finished"))


def next_turn(update: event_pb2.TableUpdate) -> int | None:
    """The seat whose turn the update starts, if it starts one."""
    return next(
        (int(e.turn_started.seat) for e in update.events if e.HasField("turn_started")), None
    )
