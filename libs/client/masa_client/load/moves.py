"""The moves ``masa-load`` plays: the engines' greedy policies, on the seat's own view.

Each move is seeded by the table, the sequence and the move's number, so runs repeat.
"""

from __future__ import annotations

from masa.table.v1 import action_pb2, view_pb2
from masa_rules import fiftyone
from masa_rules.elevator import Action, State, legal_actions
from masa_rules.elevator.policies import greedy_policy
from masa_rules.fiftyone.policies import greedy_policy as fiftyone_greedy
from masa_rules.shuffle import DrawStream
from masa_wire import elevator as elevator_wire
from masa_wire import fiftyone as fiftyone_wire
from masa_wire.errors import WireError

__all__ = ["elevator_action", "move_from_view", "salt"]


def salt(table_id: str, sequence: int, moves: int) -> bytes:
    return f"{table_id}/{sequence}/{moves}".encode()


def elevator_action(state: State, seat: int, seed: bytes) -> Action | None:
    """The greedy Elevator move of ``seat``; None when it has none now."""
    if not legal_actions(state, seat):
        return None
    return greedy_policy(state, seat, DrawStream(seed))


def move_from_view(view: view_pb2.SeatView, seed: bytes) -> action_pb2.Action | None:
    """The greedy move of the view's seat (a turn's move, a gift, a query's answer), or None
    when that seat has nothing to do now."""
    seat = view.seat
    try:
        if view.table.WhichOneof("game") == "fiftyone":
            state = fiftyone_wire.state_from_seat_view(view)
            if not fiftyone.legal_actions(state, seat):
                return None
            return fiftyone_wire.action_to_proto(fiftyone_greedy(state, seat, DrawStream(seed)))
        action = elevator_action(elevator_wire.state_from_seat_view(view), seat, seed)
        return None if action is None else elevator_wire.action_to_proto(action)
    except WireError:
        # A view between hands (or a game that has ended) has no move to make.
        return None
