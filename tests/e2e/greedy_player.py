"""An SDK client that plays its seat by the engines' greedy policy until the game is over."""

from __future__ import annotations

from masa.table.v1 import action_pb2, event_pb2, view_pb2
from masa_client.client import TableClient
from masa_client.errors import MasaCallError
from masa_rules import elevator, fiftyone
from masa_rules.elevator.policies import greedy_policy as elevator_greedy
from masa_rules.fiftyone.policies import greedy_policy as fiftyone_greedy
from masa_rules.shuffle import DrawStream
from masa_wire import elevator as elevator_wire
from masa_wire import fiftyone as fiftyone_wire
from masa_wire.errors import WireError

# Refusals a seat may meet without anything being wrong: another seat, a timer or the
# autopilot moved first, so the view it decided from is stale.
_RACES = frozenset({"SEQUENCE_MISMATCH", "E-3", "F-21"})


def _greedy_move(view: view_pb2.SeatView, rng: DrawStream) -> action_pb2.Action | None:
    """The greedy policy's move for the seat of ``view``, None when it has none to make."""
    if view.table.WhichOneof("game") == "elevator":
        state = elevator_wire.state_from_seat_view(view)
        if not elevator.legal_actions(state, view.seat):
            return None
        return elevator_wire.action_to_proto(elevator_greedy(state, view.seat, rng))
    fifty = fiftyone_wire.state_from_seat_view(view)
    if fifty.phase is fiftyone.Phase.OVER or not fiftyone.legal_actions(fifty, view.seat):
        return None
    return fiftyone_wire.action_to_proto(fiftyone_greedy(fifty, view.seat, rng))


async def play_seat(client: TableClient, table_id: str, salt: str) -> event_pb2.GameFinished:
    """Watch the table and move whenever this seat may, until GameFinished."""
    rng = DrawStream(salt.encode())
    async for message in client.watch(table_id):
        if message.WhichOneof("payload") == "update":
            for event in message.update.events:
                if event.WhichOneof("kind") == "game_finished":
                    return event.game_finished
        view = (await client.get_table(table_id)).seat_view
        try:
            action = _greedy_move(view, rng)
        except WireError:
            # The game ended between the update and this read: its end is on the watch.
            continue
        if action is None:
            continue
        try:
            await client.submit_action(table_id, action, view.table.table.sequence)
        except MasaCallError as error:
            if error.reason not in _RACES:
                raise
    raise AssertionError(f"the watch of {table_id} ended without GameFinished")
