"""Closed-loop tables: every seat is human and played from here, move after move.

A table acts on a fixed schedule (the run's rate spread over its tables) or, saturated, as
soon as its last move was answered. A finished table is replaced by a new one, so table
creation is part of the load.

An Elevator table's client holds every seat, so it keeps the table's state itself: it reads
each seat's view once per game (hands included) and applies every accepted move with the
engine's own rules, taking the secret stock card from the answer (the drawer sees it) and a
Kopile's cards from that seat's view. So the engine serves one call per move, as it would for
clients that follow their tables on watch streams. Should the copy ever disagree with the
engine it is read again. A 51 move starts from the actor's view (GetTable); a query it opens
is answered by the asked seats at once.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from masa.table.v1 import action_pb2, event_pb2
from masa_rules.elevator import Action, Kopile, State, apply
from masa_wire.cards import card_from_proto, cards_from_proto
from masa_wire.elevator import action_to_proto, state_from_seat_view

from masa_client.load.moves import elevator_action, move_from_view, salt
from masa_client.load.session import Session, Table, finished, next_turn
from masa_client.load.tables import FIFTYONE

__all__ = ["ClosedDriver"]


class ClosedDriver:
    """Plays the tables of one slot, one after another, every seat as its human player."""

    def __init__(self, session: Session, slot: int, *, interval: float, offset: float) -> None:
        self.session = session
        self.slot = slot
        # Seconds between this table's moves (0: as fast as answered), and where in that
        # interval its schedule starts, so that the tables' moves spread evenly.
        self.interval = interval
        self.offset = offset
        self.table: Table | None = None
        self.state: State | None = None
        self.sequence = 0

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        next_at = loop.time() + self.offset
        game_no = 0
        while True:
            self.table = await self.session.create(self.slot, game_no)
            game_no += 1
            if self.table is None:
                # Refused (counted); a short pause keeps a failing deployment from a storm.
                await asyncio.sleep(max(self.interval, 0.5))
                continue
            actor = await self.sync()
            while actor is not None:
                if self.interval:
                    delay = next_at - loop.time()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    # A table that fell behind catches up by one interval at most.
                    next_at = max(next_at + self.interval, loop.time() - self.interval)
                actor = await self.act(actor)

    async def sync(self) -> int | None:
        """Read the table again; returns the seat on turn (None: over, or unreadable)."""
        table = self.table
        assert table is not None
        if table.game == FIFTYONE:
            view = await self.session.view(table, 0)
            if view is None:
                return None
            self.sequence = view.table.table.sequence
            return int(view.table.turn_seat) if view.table.HasField("turn_seat") else None
        views = []
        for seat in range(len(table.players)):
            view = await self.session.view(table, seat)
            if view is None:
                return None
            views.append(view)
        first = views[0].table
        self.sequence = first.table.sequence
        if not first.HasField("turn_seat"):
            return None
        public = state_from_seat_view(views[0])
        # Only the stock's size matters until a card is drawn, and a drawn card is replaced
        # by the real one before the draw is applied.
        stock = (public.pile[0],) * first.elevator.stock_count
        hands = tuple(cards_from_proto(view.hand) for view in views)
        self.state = replace(public, hands=hands, stock=stock)
        return int(first.turn_seat)

    async def act(self, seat: int) -> int | None:
        """One move of ``seat``, on turn now; returns the next seat on turn, None at the end."""
        table = self.table
        assert table is not None
        chosen = await self.choose(table, seat)
        update = None
        if chosen is not None:
            update = await self.session.submit(table, seat, chosen[0], self.sequence)
        if update is not None:
            self.sequence = update.sequence
            if table.game == FIFTYONE:
                update = await self.answer_queries(update)
        if update is None:
            # No move, or a refused one: the copy has drifted from the table; read it again.
            self.session.resynced()
            return await self.sync()
        if finished(update):
            return None
        following = next_turn(update)
        action = chosen[1] if chosen is not None else None
        if action is None or self.state is None:
            return following if following is not None else await self.sync()
        return await self.follow(self.state, action, update, following)

    async def choose(
        self, table: Table, seat: int
    ) -> tuple[action_pb2.Action, Action | None] | None:
        """``seat``'s move, and the Elevator action it is for the copy of the state; None
        when the seat has no move by what this client knows."""
        seed = salt(table.table_id, self.sequence, table.moves)
        if table.game == FIFTYONE:
            view = await self.session.view(table, seat)
            if view is None:
                return None
            self.sequence = view.table.table.sequence
            move = move_from_view(view, seed)
            return None if move is None else (move, None)
        action = elevator_action(self.state, seat, seed) if self.state is not None else None
        return None if action is None else (action_to_proto(action), action)

    async def answer_queries(self, update: event_pb2.TableUpdate) -> event_pb2.TableUpdate | None:
        """F-80: the seats a 51 move asks answer at once, by their views, until it ends."""
        table = self.table
        assert table is not None
        asked = [
            seat
            for event in update.events
            if event.HasField("query_started")
            for seat in event.query_started.asked_seats
        ]
        for seat in asked:
            view = await self.session.view(table, seat)
            if view is None:
                return None
            move = move_from_view(view, salt(table.table_id, self.sequence, table.moves))
            if move is None:
                continue
            answered = await self.session.submit(table, seat, move, view.table.table.sequence)
            if answered is None:
                return None
            update = answered
            self.sequence = update.sequence
            if any(event.HasField("query_ended") for event in update.events):
                break
        return update

    async def follow(
        self, state: State, action: Action, update: event_pb2.TableUpdate, following: int | None
    ) -> int | None:
        """Apply the accepted ``action`` to the copy of the state; returns the seat on turn."""
        table = self.table
        assert table is not None
        for event in update.events:
            if event.HasField("passed") and event.passed.HasField("drawn"):
                drawn = card_from_proto(event.passed.drawn)
                state = replace(state, stock=(drawn, *state.stock[1:]))
        state, happened = apply(state, action)
        for rule_event in happened:
            if isinstance(rule_event, Kopile) and rule_event.drew:
                view = await self.session.view(table, rule_event.seat)
                if view is None:
                    return None
                seat = rule_event.seat
                hands = (*state.hands[:seat], cards_from_proto(view.hand), *state.hands[seat + 1 :])
                state = replace(state, hands=hands)
        self.state = state
        if following is None or following != state.turn:
            self.session.resynced()
            return await self.sync()
        return following
