"""Nim, a toy game defined only here, registered as a plugin (docs/architecture.md, "Adding a
game"): seats take 1 to 3 stones in turn from one pile, and whoever takes the last wins.

It is the whole of what a game brings, one part per layer, each registered in that layer's
one registry and nowhere else: its rules (:class:`NimRules` and the table check), its wire
conversion (:class:`NimWire`, messages of its own proto package ``masa_test.nim.v1`` built
here at import, travelling in the ``other_game`` arms), the engine's game adapter
(:class:`NimGame`), the bot's decider (:func:`decide`) and the client's board
(:func:`board_lines`). :func:`register` registers them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from importlib.util import find_spec
from typing import TYPE_CHECKING, Any, Final

from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2
from google.protobuf.message import Message
from masa.bot.v1 import bot_pb2
from masa.table.v1 import action_pb2, event_pb2, view_pb2
from masa_rules.errors import RuleViolation
from masa_rules.table_config import BotLevel, Mode, TableConfig, register_game
from masa_wire import WireError
from masa_wire.elevator import Viewer
from masa_wire.games import register_wire

if TYPE_CHECKING:
    # The layers a process may lack: each is imported where it is used, and registered with
    # only when it is installed (register).
    from masa_bot.domain.choice import Decision
    from masa_client.render import Style
    from masa_table_engine.domain.games import HandOutcome

NAME: Final = "nim"
MAX_TAKE: Final = 3


# --- the game's own proto package, built at import as protoc would ----------------------------


def _messages() -> dict[str, type[Message]]:
    file = descriptor_pb2.FileDescriptorProto(
        name="masa_test/nim/v1/nim.proto", package="masa_test.nim.v1", syntax="proto3"
    )
    uint32 = descriptor_pb2.FieldDescriptorProto.TYPE_UINT32
    optional = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
    for name, fields in {
        "Take": ("count",),
        "NimTable": ("pile",),
        "Took": ("seat", "count", "left"),
    }.items():
        message = file.message_type.add(name=name)
        for number, field in enumerate(fields, start=1):
            message.field.add(name=field, number=number, type=uint32, label=optional)
    pool = descriptor_pool.Default()
    pool.Add(file)
    return {
        name: message_factory.GetMessageClass(
            pool.FindMessageTypeByName(f"masa_test.nim.v1.{name}")
        )
        for name in ("Take", "NimTable", "Took")
    }


_PROTO: Final = _messages()


def proto(name: str, **fields: int) -> Any:
    """A message of the game's package (``Take``, ``NimTable`` or ``Took``)."""
    return _PROTO[name](**fields)


def packed(name: str, **fields: int) -> any_pb2.Any:
    holder = any_pb2.Any()
    holder.Pack(proto(name, **fields))
    return holder


def unpacked(holder: any_pb2.Any, name: str) -> Any:
    message = proto(name)
    if not holder.Unpack(message):
        raise WireError(f"not a masa_test.nim.v1.{name}: {holder.type_url[:80]}")
    return message


# --- rules ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class State:
    players: int
    pile: int
    turn: int
    winner: int | None = None


@dataclass(frozen=True, slots=True)
class Take:
    seat: int
    count: int


@dataclass(frozen=True, slots=True)
class Took:
    seat: int
    count: int
    left: int


def start(players: int) -> State:
    return State(players=players, pile=5 * players + 2, turn=0)


def apply(state: State, action: Take) -> tuple[State, list[Took]]:
    if state.winner is not None:
        raise RuleViolation("NIM-3", "the game is over")
    if action.seat != state.turn:
        raise RuleViolation("NIM-1", f"it is seat {state.turn}'s turn")
    if not 1 <= action.count <= min(MAX_TAKE, state.pile):
        raise RuleViolation("NIM-2", f"take 1 to {min(MAX_TAKE, state.pile)} stones")
    pile = state.pile - action.count
    after = replace(
        state,
        pile=pile,
        turn=(state.turn + 1) % state.players,
        winner=action.seat if pile == 0 else None,
    )
    return after, [Took(action.seat, action.count, pile)]


def check_table(config: TableConfig) -> None:
    if not 2 <= len(config.seats) <= 4:
        raise RuleViolation("NIM-0", "nim is played by 2 to 4 seats")
    if config.mode is Mode.TEAMS or config.preset:
        raise RuleViolation("NIM-0", "nim has no teams and no presets")


# --- the engine's adapter -------------------------------------------------------------------


def _state(state: object) -> State:
    if not isinstance(state, State):
        raise TypeError(f"not a nim state: {type(state).__name__}")
    return state


class NimGame:
    kind: str = NAME

    def start(self, config: TableConfig, seed: bytes) -> tuple[object, list[object]]:
        return start(len(config.seats)), []

    def actor(self, state: object) -> int | None:
        game = _state(state)
        return None if game.winner is not None else game.turn

    def waiting(self, state: object) -> tuple[int, ...]:
        actor = self.actor(state)
        return () if actor is None else (actor,)

    def phase(self, state: object) -> str:
        return "play"

    def same_turn(self, before: object, after: object) -> bool:
        return False

    def query_seconds(self, state: object) -> float:
        return 0.0

    def timeout_action(self, state: object, seat: int) -> object | None:
        return None

    def apply(self, state: object, action: object) -> tuple[object, list[object]]:
        if not isinstance(action, Take):
            raise RuleViolation("NIM-1", "not a nim action")
        after, events = apply(_state(state), action)
        return after, list(events)

    def hand_size(self, state: object, seat: int) -> int:
        return _state(state).pile

    def seat_of(self, action: object) -> int:
        if not isinstance(action, Take):
            raise TypeError(f"not a nim action: {action!r}")
        return action.seat

    def name_of(self, action: object) -> str:
        return "take"

    def is_over(self, state: object) -> bool:
        return _state(state).winner is not None

    def ends_hand(self, events: Sequence[object]) -> bool:
        return any(isinstance(event, Took) and event.left == 0 for event in events)

    def choose(self, state: object, seat: int, level: BotLevel, salt: bytes) -> object:
        return best_take(_state(state), seat)

    def outcome(self, state: object) -> HandOutcome:
        from masa_table_engine.domain.games import HandOutcome

        game = _state(state)
        seats = tuple(range(game.players))
        if game.winner is None:
            return HandOutcome(places=(seats,), totals=(0,) * game.players, hands_played=0)
        others = tuple(seat for seat in seats if seat != game.winner)
        totals = tuple(0 if seat == game.winner else 1 for seat in seats)
        return HandOutcome(places=((game.winner,), others), totals=totals, hands_played=1)

    def state_to_json(self, state: object) -> dict[str, object]:
        game = _state(state)
        return {
            "players": game.players,
            "pile": game.pile,
            "turn": game.turn,
            "winner": game.winner,
        }

    def state_from_json(self, data: Mapping[str, object]) -> object:
        winner = data["winner"]
        return State(
            players=int(str(data["players"])),
            pile=int(str(data["pile"])),
            turn=int(str(data["turn"])),
            winner=None if winner is None else int(str(winner)),
        )

    def action_to_json(self, action: object) -> dict[str, object]:
        if not isinstance(action, Take):
            raise TypeError(f"not a nim action: {action!r}")
        return {"seat": action.seat, "count": action.count}

    def action_from_json(self, data: Mapping[str, object]) -> object:
        return Take(seat=int(str(data["seat"])), count=int(str(data["count"])))


# --- the wire conversion --------------------------------------------------------------------


class NimWire:
    name = NAME

    def owns(self, item: object) -> bool:
        return isinstance(item, State | Take)

    def owns_action(self, message: action_pb2.Action) -> bool:
        return (
            message.WhichOneof("kind") == "other_game"
            and message.other_game.TypeName() == "masa_test.nim.v1.Take"
        )

    def private_view(self, state: object, seat: int) -> object | None:
        return None

    def fill_table_view(self, view: view_pb2.TableView, state: object, seen: object | None) -> None:
        game = _state(state)
        view.hand_no = 1
        if game.winner is None:
            view.turn_seat = game.turn
            view.turn_phase = view_pb2.TURN_PHASE_PLAY
        view.other_game.Pack(proto("NimTable", pile=game.pile))

    def seat_view(
        self, table_view: view_pb2.TableView, state: object, seat: int, seen: object | None
    ) -> view_pb2.SeatView:
        return view_pb2.SeatView(table=table_view, seat=seat)

    def action_from_proto(
        self, message: action_pb2.Action, seat: int, state: object | None
    ) -> object:
        if not self.owns_action(message):
            raise WireError("a nim table takes only masa_test.nim.v1.Take actions")
        return Take(seat=seat, count=unpacked(message.other_game, "Take").count)

    def action_to_proto(self, action: object) -> action_pb2.Action:
        if not isinstance(action, Take):
            raise TypeError(f"not a nim action: {action!r}")
        return action_pb2.Action(other_game=packed("Take", count=action.count))

    def events_to_proto(
        self,
        events: Sequence[object],
        after: object,
        viewer: Viewer,
        *,
        query_deadline: timestamp_pb2.Timestamp | None,
        timed_out: bool,
    ) -> list[event_pb2.TableEvent]:
        return [
            event_pb2.TableEvent(
                other_game=packed("Took", seat=event.seat, count=event.count, left=event.left)
            )
            for event in events
            if isinstance(event, Took)
        ]

    def state_from_seat_view(self, view: view_pb2.SeatView) -> object:
        table = view.table
        if table.WhichOneof("game") != "other_game":
            raise WireError("the view is not of a nim table")
        if not table.HasField("turn_seat"):
            raise WireError("nobody is on turn")
        pile = unpacked(table.other_game, "NimTable").pile
        return State(players=len(table.seats), pile=pile, turn=table.turn_seat)

    def observe(self, observation: bot_pb2.Observation, state: object) -> None:
        """Nim's view is all there is to know."""

    def state_from_observation(self, observation: bot_pb2.Observation) -> object:
        return self.state_from_seat_view(observation.view)


# --- the bot --------------------------------------------------------------------------------


def best_take(state: State, seat: int) -> Take:
    """Leave the next seat a multiple of 4 when possible (the winning strategy of two-seat
    nim), else take one."""
    return Take(seat=seat, count=state.pile % (MAX_TAKE + 1) or 1)


def decide(
    state: object, seat: int, level: BotLevel, seed: bytes, budget_seconds: float
) -> Decision[object]:
    from masa_bot.domain.choice import Decision, NothingToDecide

    game = _state(state)
    if game.winner is not None or game.turn != seat:
        raise NothingToDecide(f"seat {seat} has nothing to do now")
    take = best_take(game, seat)
    return Decision(take, f"take {take.count}: leave a multiple of 4")


# --- the client's board ----------------------------------------------------------------------


def board_lines(table: view_pb2.TableView, style: Style) -> list[str]:
    pile = unpacked(table.other_game, "NimTable").pile
    return [style.paint(f"pile: {pile} stones", "bold") + f" (take 1 to {MAX_TAKE})"]


def register() -> None:
    """Register nim with the rules and the wire (every service has them), and with each of the
    engine, the bot and the client that is installed in this process; once per process."""
    register_game(NAME, check_table)
    register_wire(NimWire())

    if find_spec("masa_table_engine") is not None:
        from masa_table_engine.domain.games import register_game as register_engine

        register_engine(NimGame())
    if find_spec("masa_bot") is not None:
        from masa_bot.domain.games import register_decider

        register_decider(NAME, decide)
    if find_spec("masa_client") is not None:
        from masa_client.render import GameBoard, register_board

        register_board(NAME, GameBoard(title=lambda _: "Nim", lines=board_lines))
