"""The wire layer's one registry of games: how each game's states, actions and events cross the
wire, looked up by the game's registered name (``masa_rules.table_config.register_game``).

The table engine, the bot service and the clients convert a game's objects only through its
:class:`GameWire`, so that adding a game (docs/architecture.md, "Adding a game") registers one
here and edits no converter. 51 and Elevator are registered by this module; a plugin's game
calls :func:`register_wire` with its own, whose messages travel in the ``other_game`` arms of
``Action``, ``TableView``, ``SeatView`` and ``TableEvent`` (``google.protobuf.Any`` of the
game's own proto package).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol

from google.protobuf import timestamp_pb2
from masa.bot.v1 import bot_pb2
from masa.common.v1 import game_pb2
from masa.table.v1 import action_pb2, event_pb2, view_pb2
from masa_rules import elevator as elevator_engine
from masa_rules import fiftyone as fiftyone_engine
from masa_rules.table_config import GameKind

from masa_wire import elevator as elevator_wire
from masa_wire import fiftyone as fiftyone_wire
from masa_wire.elevator import Viewer
from masa_wire.errors import WireError
from masa_wire.table_config import game_from_proto

__all__ = [
    "GameWire",
    "game_name",
    "register_wire",
    "view_game_name",
    "wire_for",
    "wire_of",
    "wire_of_action",
]


class GameWire(Protocol):
    """One game's conversions. ``state`` and ``action`` are the game's own engine objects,
    opaque to everything but the game's rules and this."""

    name: str

    def owns(self, item: object) -> bool:
        """Whether ``item`` is one of this game's engine states or actions."""
        ...

    def owns_action(self, message: action_pb2.Action) -> bool:
        """Whether ``message`` is one of this game's actions (a logged action names its game
        only so)."""
        ...

    def private_view(self, state: object, seat: int) -> object | None:
        """What ``seat`` may know, worked out once for its table and seat views (or None)."""
        ...

    def fill_table_view(self, view: view_pb2.TableView, state: object, seen: object | None) -> None:
        """Set the game's public fields of ``view`` (the table and seats stay the caller's)."""
        ...

    def seat_view(
        self, table_view: view_pb2.TableView, state: object, seat: int, seen: object | None
    ) -> view_pb2.SeatView:
        """``seat``'s view: the filled public view plus what only the seat sees (P-20)."""
        ...

    def action_from_proto(
        self, message: action_pb2.Action, seat: int, state: object | None
    ) -> object:
        """The action ``seat`` asks for, checked against ``state`` when given (a logged action
        is read without one); raises :class:`WireError` for a malformed message."""
        ...

    def action_to_proto(self, action: object) -> action_pb2.Action: ...

    def events_to_proto(
        self,
        events: Sequence[object],
        after: object,
        viewer: Viewer,
        *,
        query_deadline: timestamp_pb2.Timestamp | None,
        timed_out: bool,
    ) -> list[event_pb2.TableEvent]:
        """The game's events of one step, which led to ``after``, as ``viewer`` may see them."""
        ...

    def state_from_seat_view(self, view: view_pb2.SeatView) -> object:
        """A state equivalent to the real one for every decision of ``view.seat``: what a bot
        decides from, made of the seat's view only."""
        ...

    def observe(self, observation: bot_pb2.Observation, state: object) -> None:
        """Add to a bot's ``observation`` (its view already in) what the game keeps of the
        hand's public history beyond the view; most games keep nothing more."""
        ...

    def state_from_observation(self, observation: bot_pb2.Observation) -> object:
        """:meth:`state_from_seat_view` of the observation's view, with what :meth:`observe`
        added."""
        ...


class _ElevatorWire:
    name = GameKind.ELEVATOR.value
    _ACTIONS: Final = frozenset({"play", "pass_turn", "give_card"})
    _EVENTS: Final = (
        elevator_engine.Dealt,
        elevator_engine.Played,
        elevator_engine.Passed,
        elevator_engine.Kopile,
        elevator_engine.Gave,
        elevator_engine.HandEnded,
    )

    def owns(self, item: object) -> bool:
        return isinstance(
            item,
            elevator_engine.State
            | elevator_engine.Play
            | elevator_engine.Pass
            | elevator_engine.Give,
        )

    def owns_action(self, message: action_pb2.Action) -> bool:
        return message.WhichOneof("kind") in self._ACTIONS

    def private_view(self, state: object, seat: int) -> object | None:
        return None

    def fill_table_view(self, view: view_pb2.TableView, state: object, seen: object | None) -> None:
        elevator_wire.fill_table_view(view, _elevator(state))

    def seat_view(
        self, table_view: view_pb2.TableView, state: object, seat: int, seen: object | None
    ) -> view_pb2.SeatView:
        return elevator_wire.seat_view(table_view, _elevator(state), seat)

    def action_from_proto(
        self, message: action_pb2.Action, seat: int, state: object | None
    ) -> object:
        hand = None if state is None else _elevator(state).hands[seat]
        return elevator_wire.action_from_proto(message, seat, hand)

    def action_to_proto(self, action: object) -> action_pb2.Action:
        if not isinstance(
            action, elevator_engine.Play | elevator_engine.Pass | elevator_engine.Give
        ):
            raise TypeError(f"not an Elevator action: {action!r}")
        return elevator_wire.action_to_proto(action)

    def events_to_proto(
        self,
        events: Sequence[object],
        after: object,
        viewer: Viewer,
        *,
        query_deadline: timestamp_pb2.Timestamp | None,
        timed_out: bool,
    ) -> list[event_pb2.TableEvent]:
        ours = [event for event in events if isinstance(event, self._EVENTS)]
        return elevator_wire.events_to_proto(ours, _elevator(after), viewer)

    def state_from_seat_view(self, view: view_pb2.SeatView) -> object:
        return elevator_wire.state_from_seat_view(view)

    def observe(self, observation: bot_pb2.Observation, state: object) -> None:
        elevator_wire.observe(observation, _elevator(state))

    def state_from_observation(self, observation: bot_pb2.Observation) -> object:
        return elevator_wire.state_from_observation(observation)


class _FiftyOneWire:
    name = GameKind.FIFTYONE.value

    def owns(self, item: object) -> bool:
        return isinstance(item, fiftyone_engine.State | fiftyone_engine.Action)

    def owns_action(self, message: action_pb2.Action) -> bool:
        # Every case of Action but Elevator's and a plugin's belongs to 51.
        kind = message.WhichOneof("kind")
        return kind is not None and kind != "other_game" and not _ELEVATOR.owns_action(message)

    def private_view(self, state: object, seat: int) -> object | None:
        # The rules' view of a 51 game is the costly part of a view: made once, for both.
        return fiftyone_engine.view(_fiftyone(state), seat)

    def fill_table_view(self, view: view_pb2.TableView, state: object, seen: object | None) -> None:
        fiftyone_wire.fill_table_view(view, _fiftyone(state), _seen(seen))

    def seat_view(
        self, table_view: view_pb2.TableView, state: object, seat: int, seen: object | None
    ) -> view_pb2.SeatView:
        return fiftyone_wire.seat_view(table_view, _fiftyone(state), seat, _seen(seen))

    def action_from_proto(
        self, message: action_pb2.Action, seat: int, state: object | None
    ) -> object:
        return fiftyone_wire.action_from_proto(
            message, seat, None if state is None else _fiftyone(state)
        )

    def action_to_proto(self, action: object) -> action_pb2.Action:
        if not isinstance(action, fiftyone_engine.Action):
            raise TypeError(f"not a 51 action: {action!r}")
        return fiftyone_wire.action_to_proto(action)

    def events_to_proto(
        self,
        events: Sequence[object],
        after: object,
        viewer: Viewer,
        *,
        query_deadline: timestamp_pb2.Timestamp | None,
        timed_out: bool,
    ) -> list[event_pb2.TableEvent]:
        return fiftyone_wire.events_to_proto(
            [event for event in events if isinstance(event, fiftyone_engine.Event)],
            _fiftyone(after),
            viewer,
            query_deadline=query_deadline,
            timed_out=timed_out,
        )

    def state_from_seat_view(self, view: view_pb2.SeatView) -> object:
        return fiftyone_wire.state_from_seat_view(view)

    def observe(self, observation: bot_pb2.Observation, state: object) -> None:
        """51's view holds all the public history a bot reads."""

    def state_from_observation(self, observation: bot_pb2.Observation) -> object:
        return fiftyone_wire.state_from_seat_view(observation.view)


def _elevator(state: object) -> elevator_engine.State:
    if not isinstance(state, elevator_engine.State):
        raise TypeError(f"not an Elevator state: {type(state).__name__}")
    return state


def _fiftyone(state: object) -> fiftyone_engine.State:
    if not isinstance(state, fiftyone_engine.State):
        raise TypeError(f"not a 51 state: {type(state).__name__}")
    return state


def _seen(seen: object | None) -> fiftyone_engine.View | None:
    if seen is not None and not isinstance(seen, fiftyone_engine.View):
        raise TypeError(f"not a 51 seat's view: {type(seen).__name__}")
    return seen


_ELEVATOR: Final = _ElevatorWire()
_WIRES: dict[str, GameWire] = {_ELEVATOR.name: _ELEVATOR, GameKind.FIFTYONE: _FiftyOneWire()}


def register_wire(wire: GameWire) -> None:
    """Convert the game ``wire.name`` (registered with the rules) by ``wire``; once."""
    if wire.name in _WIRES:
        raise ValueError(f"the game {wire.name} has a wire conversion already")
    _WIRES[wire.name] = wire


def wire_for(name: str) -> GameWire:
    """The conversions of the game ``name``; a game nobody registered is refused (P-2)."""
    wire = _WIRES.get(name)
    if wire is None:
        raise WireError(f"{name or 'an unnamed game'} is not a game this node hosts", "P-2")
    return wire


def wire_of(item: object) -> GameWire:
    """The conversions of the game an engine state or action belongs to."""
    for wire in _WIRES.values():
        if wire.owns(item):
            return wire
    raise TypeError(f"no registered game has states or actions like {type(item).__name__}")


def wire_of_action(message: action_pb2.Action) -> GameWire:
    """The conversions of the game whose action ``message`` is; an empty or unknown one is
    malformed."""
    for wire in _WIRES.values():
        if wire.owns_action(message):
            return wire
    raise WireError("the action names no move of a game this node hosts")


def game_name(config: game_pb2.TableConfig) -> str:
    """The registered name of the game a configuration message names (maybe unregistered),
    or "" when it names none, or names one by kind and another by name (which
    ``masa_wire.table_config.named_game_from_proto`` refuses)."""
    if config.game_name:
        return config.game_name if config.game == game_pb2.GAME_KIND_UNSPECIFIED else ""
    try:
        return game_from_proto(config.game)
    except WireError:
        return ""


def view_game_name(view: view_pb2.TableView) -> str:
    """The registered name of the game a view shows: its configuration's, or, for a view that
    carries none (a caller that built it by hand), the shipped game whose arm it fills."""
    named = game_name(view.table.config)
    if named:
        return named
    arm = view.WhichOneof("game")
    return arm if arm in (GameKind.FIFTYONE, GameKind.ELEVATOR) else ""
