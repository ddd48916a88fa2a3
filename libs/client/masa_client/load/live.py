"""Live tables: human seats that follow their table on a watch stream and think before each
move, bot seats the engine plays, turn timers running.

Each human seat keeps a ``WatchTable`` stream open, as a real client does (it also keeps the
seat connected, so seat protection never starts). When the stream says the seat has
something to do (its turn starts, a query asks it, a Kopile owes its card) the seat waits a
think time, reads its view (``GetTable``) and plays the greedy move; a 51 turn of several
moves (draw, lay down, discard) is played move by move, each after its own pause. A move the
engine refuses (a turn timer was quicker) is counted, and the seat waits for its next turn.
When the game ends the table is replaced by a new one.
"""

from __future__ import annotations

import asyncio
import contextlib
import random

import grpc
import grpc.aio
from masa.table.v1 import event_pb2, table_pb2, view_pb2

from masa_client.load.moves import move_from_view, salt
from masa_client.load.pacing import ThinkTime
from masa_client.load.session import Session, Table, finished, next_turn

__all__ = ["LiveDriver"]

_ENDS = frozenset({"game_finished", "game_abandoned"})


class LiveDriver:
    """Keeps one live table in its slot: a new one whenever the last has ended."""

    def __init__(self, session: Session, slot: int, think: ThinkTime, seed: int) -> None:
        self.session = session
        self.slot = slot
        self.think = think
        self.rng = random.Random(seed)

    async def run(self) -> None:
        game_no = 0
        while True:
            table = await self.session.create(self.slot, game_no)
            game_no += 1
            if table is None:
                await asyncio.sleep(1.0)
                continue
            humans = len(table.players)
            if self.session.plan.humans is not None:
                humans = min(humans, self.session.plan.humans)
            over = asyncio.Event()
            seats = [_HumanSeat(self.session, table, seat, over, self) for seat in range(humans)]
            tasks = [asyncio.create_task(seat.run()) for seat in seats]
            try:
                await over.wait()
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)


class _HumanSeat:
    def __init__(
        self, session: Session, table: Table, seat: int, over: asyncio.Event, driver: LiveDriver
    ) -> None:
        self.session = session
        self.table = table
        self.seat = seat
        self.over = over
        self.driver = driver
        self.poke = asyncio.Event()

    async def run(self) -> None:
        actor = asyncio.create_task(self.act())
        try:
            await self.watch()
        finally:
            actor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await actor
            # However the stream ended, the table's driver moves on to a new table.
            self.over.set()

    async def watch(self) -> None:
        call = self.session.stub.WatchTable(
            table_pb2.WatchTableRequest(table_id=self.table.table_id),
            metadata=self.table.players[self.seat].metadata,
        )
        try:
            async for response in call:
                if response.HasField("seat_view"):
                    if self._asked_by_view(response.seat_view):
                        self.poke.set()
                    continue
                update = response.update
                if any(event.WhichOneof("kind") in _ENDS for event in update.events):
                    return
                if self._asked_by_update(update):
                    self.poke.set()
        except grpc.aio.AioRpcError as error:
            self.session.refused(error)
        finally:
            call.cancel()

    def _asked_by_view(self, view: view_pb2.SeatView) -> bool:
        table = view.table
        return (
            (table.HasField("turn_seat") and table.turn_seat == self.seat)
            or table.turn_phase == view_pb2.TURN_PHASE_GIVE
            or (
                table.HasField("fiftyone")
                and table.fiftyone.HasField("query")
                and self.seat in table.fiftyone.query.asked_seats
            )
        )

    def _asked_by_update(self, update: event_pb2.TableUpdate) -> bool:
        for event in update.events:
            kind = event.WhichOneof("kind")
            if (
                (kind == "turn_started" and event.turn_started.seat == self.seat)
                or (kind == "query_started" and self.seat in event.query_started.asked_seats)
                or (kind == "kopile_started" and self.seat in event.kopile_started.givers)
            ):
                return True
        return False

    async def act(self) -> None:
        table = self.table
        while True:
            await self.poke.wait()
            self.poke.clear()
            await asyncio.sleep(self.driver.think.draw(self.driver.rng))
            view = await self.session.view(table, self.seat)
            if view is None:
                continue
            move = move_from_view(
                view, salt(table.table_id, view.table.table.sequence, table.moves)
            )
            if move is None:
                continue
            update = await self.session.submit(table, self.seat, move, view.table.table.sequence)
            if update is not None and not finished(update) and next_turn(update) is None:
                # The turn is still this seat's (a 51 draw before the discard): look again.
                self.poke.set()
