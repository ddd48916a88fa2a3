"""The table's own values (seats, entries, views) to and from protobuf.

Game objects (cards, actions, engine events, game views) and the table's configuration are
converted by ``masa_wire`` only; this module adds what belongs to the table: the resource, the
seats, the platform events and the log entry envelope. Hidden information (P-20) is filtered by ``masa_wire`` per viewer.
"""

from __future__ import annotations

from typing import Final, assert_never

from google.protobuf import timestamp_pb2
from masa.common.v1 import game_pb2
from masa.events.v1 import table_log_pb2
from masa.table.v1 import action_pb2, event_pb2, view_pb2
from masa_platform.errors import BadRequest
from masa_rules.table_config import Mode, SeatKind, TableConfig
from masa_wire import WireError
from masa_wire import elevator as elevator_wire
from masa_wire import table_config as table_config_wire
from masa_wire.games import wire_for, wire_of, wire_of_action
from masa_wire.table_config import bot_level_to_proto, config_to_proto, seat_kind_to_proto

from masa_table_engine.domain.model import (
    AbandonReason,
    AutopilotChanged,
    AutopilotReason,
    Created,
    Entry,
    GameAbandoned,
    GameEvents,
    GameFinished,
    Input,
    PlayerAction,
    SeatChange,
    SeatChanged,
    SeatConnectionChanged,
    SeatForfeited,
    Source,
    Standing,
    TableVoided,
    TimerFired,
    TimerKind,
    TurnStarted,
    TurnTimedOut,
)
from masa_table_engine.domain.table import Table

__all__ = [
    "LOG",
    "Viewer",
    "action_from_proto",
    "config_from_proto",
    "entry_to_log",
    "input_from_log",
    "same_action",
    "seat_view",
    "spectator_view",
    "standing_to_proto",
    "table_to_proto",
    "timestamp",
    "update_for",
]

LOG: Final = elevator_wire.LOG
Viewer = int | None

_PHASE: Final = {
    "draw": view_pb2.TURN_PHASE_DRAW,
    "meld": view_pb2.TURN_PHASE_MELD,
    "query": view_pb2.TURN_PHASE_QUERY,
    "play": view_pb2.TURN_PHASE_PLAY,
    "give": view_pb2.TURN_PHASE_GIVE,
}
_REASON: Final = {
    AutopilotReason.TIMEOUTS: event_pb2.AUTOPILOT_REASON_TIMEOUTS,
    AutopilotReason.PLAYER_ACTION: event_pb2.AUTOPILOT_REASON_PLAYER_ACTION,
    AutopilotReason.RESUME: event_pb2.AUTOPILOT_REASON_RESUME,
    AutopilotReason.FORFEIT: event_pb2.AUTOPILOT_REASON_FORFEIT,
}
_SOURCE: Final = {
    Source.PLAYER: table_log_pb2.INPUT_SOURCE_PLAYER,
    Source.BOT: table_log_pb2.INPUT_SOURCE_BOT,
    Source.AUTOPILOT: table_log_pb2.INPUT_SOURCE_AUTOPILOT,
    Source.FALLBACK: table_log_pb2.INPUT_SOURCE_FALLBACK,
}
_SOURCE_BACK: Final = {value: key for key, value in _SOURCE.items()}
_TIMER: Final = {
    TimerKind.TURN: table_log_pb2.TIMER_KIND_TURN,
    TimerKind.QUERY: table_log_pb2.TIMER_KIND_QUERY,
    TimerKind.SEAT_PROTECTION: table_log_pb2.TIMER_KIND_SEAT_PROTECTION,
}
_TIMER_BACK: Final = {value: key for key, value in _TIMER.items()}
_CHANGE: Final = {
    SeatChange.DISCONNECTED: table_log_pb2.SEAT_CHANGE_DISCONNECTED,
    SeatChange.RECONNECTED: table_log_pb2.SEAT_CHANGE_RECONNECTED,
    SeatChange.RESUMED: table_log_pb2.SEAT_CHANGE_RESUMED,
    SeatChange.LEFT: table_log_pb2.SEAT_CHANGE_LEFT,
}
_CHANGE_BACK: Final = {value: key for key, value in _CHANGE.items()}
_ABANDON: Final = {
    AbandonReason.VOIDED: event_pb2.ABANDON_REASON_VOIDED,
    AbandonReason.UNRECOVERABLE: event_pb2.ABANDON_REASON_UNRECOVERABLE,
}
_ABANDON_BACK: Final = {value: key for key, value in _ABANDON.items()}


_NANOS: Final = 1_000_000_000


def timestamp(seconds: float) -> timestamp_pb2.Timestamp:
    # What Timestamp.FromNanoseconds does, without its pure-Python path on every view.
    nanos = round(seconds * 1e9)
    return timestamp_pb2.Timestamp(seconds=nanos // _NANOS, nanos=nanos % _NANOS)


# --- configuration and the table resource ---------------------------------------------------


def config_from_proto(message: game_pb2.TableConfig, default_turn_seconds: float) -> TableConfig:
    """A lobby configuration (``masa_wire.table_config``); raises ``BadRequest`` for one that is
    malformed. The rules judge it when the table is created."""
    try:
        return table_config_wire.config_from_proto(message, default_turn_seconds)
    except WireError as error:
        raise BadRequest(error.message, reason=error.reason) from None


class _ConfigMessages:
    """The configuration message of the latest tables, by the configuration itself.

    Every view and every table resource carries its table's configuration, which never
    changes while the table lives (it keeps the same object), and building it costs as much as
    the rest of a small view. Kept by identity (the entry holds the configuration, so its id
    is not reused while kept), at most ``kept`` of them, the oldest going first. A message
    given here is shared: it is copied into the messages that carry it, never changed.
    """

    def __init__(self, kept: int) -> None:
        self._kept = kept
        self._messages: dict[int, tuple[TableConfig, game_pb2.TableConfig]] = {}

    def of(self, config: TableConfig) -> game_pb2.TableConfig:
        found = self._messages.get(id(config))
        if found is not None and found[0] is config:
            return found[1]
        message = config_to_proto(config)
        if len(self._messages) >= self._kept:
            del self._messages[next(iter(self._messages))]
        self._messages[id(config)] = (config, message)
        return message


# As many as a node's live tables (MASA_MAX_TABLES defaults to 5,000), besides finished ones.
_CONFIGS: Final = _ConfigMessages(kept=8192)


def table_to_proto(table: Table, owner_address: str) -> view_pb2.Table:
    return view_pb2.Table(
        table_id=table.table_id,
        config=_CONFIGS.of(table.config),
        state=_state(table),
        owner_address=owner_address,
        create_time=timestamp(table.created_at),
        sequence=table.sequence,
        game_no=1,
    )


def _state(table: Table) -> view_pb2.Table.State.ValueType:
    if table.abandoned:
        return view_pb2.Table.STATE_VOIDED
    return view_pb2.Table.STATE_FINISHED if table.finished else view_pb2.Table.STATE_PLAYING


def standing_to_proto(standing: Standing) -> game_pb2.Standing:
    return game_pb2.Standing(
        seat=standing.seat,
        player_id=standing.player_id,
        place=standing.place,
        total=standing.total,
        forfeited=standing.forfeited,
        team=standing.team,
        hold_id=standing.hold_id,
    )


# --- views ---------------------------------------------------------------------------------


def spectator_view(
    table: Table, owner_address: str, seen: object | None = None
) -> view_pb2.TableView:
    """Everything public about the table (P-20); ``seen`` is what a seat may know of the game
    (``GameWire.private_view``), when the caller has worked it out already (its public fields
    are everyone's)."""
    view = view_pb2.TableView(
        table=table_to_proto(table, owner_address),
        seats=[_seat_state(table, seat) for seat in range(len(table.seats))],
        ranking=[standing_to_proto(standing) for standing in table.ranking],
    )
    wire_for(table.config.game).fill_table_view(view, table.game, seen)
    if table.finished:
        # An abandoned game stopped mid-turn; nobody is on turn at a table that ended.
        view.ClearField("turn_seat")
        view.turn_phase = view_pb2.TURN_PHASE_UNSPECIFIED
    if table.turn_deadline is not None:
        view.turn_deadline.CopyFrom(timestamp(table.turn_deadline))
        if view.WhichOneof("game") == "fiftyone" and view.fiftyone.HasField("query"):
            # F-80: the table's timer is the query window while a query runs.
            view.fiftyone.query.deadline.CopyFrom(timestamp(table.turn_deadline))
    return view


def seat_view(table: Table, seat: int, owner_address: str) -> view_pb2.SeatView:
    wire = wire_for(table.config.game)
    seen = wire.private_view(table.game, seat)
    return wire.seat_view(spectator_view(table, owner_address, seen), table.game, seat, seen)


def _seat_state(table: Table, seat: int) -> view_pb2.SeatState:
    config, status = table.config.seats[seat], table.seats[seat]
    state = view_pb2.SeatState(
        seat=seat,
        kind=seat_kind_to_proto(config.kind),
        player_id=config.player_id,
        display_name=config.display_name,
        bot_level=bot_level_to_proto(config.bot_level),
        connected=status.connected or config.kind is SeatKind.BOT,
        autopilot=status.autopilot,
        forfeited=status.forfeited,
        team=seat % 2 if table.config.mode is Mode.TEAMS else 0,
        consecutive_timeouts=status.consecutive_timeouts,
        left=status.left,
    )
    if status.protection_deadline is not None and not status.forfeited:
        state.protection_deadline.CopyFrom(timestamp(status.protection_deadline))
    return state


# --- actions -------------------------------------------------------------------------------


def action_from_proto(table: Table, message: action_pb2.Action, seat: int) -> object:
    """The engine action ``seat`` submits; raises ``BadRequest`` for a malformed one."""
    try:
        return wire_for(table.config.game).action_from_proto(message, seat, table.game)
    except WireError as error:
        raise BadRequest(error.message, reason=error.reason) from None


def same_action(action: object, message: action_pb2.Action) -> bool:
    """Whether ``message`` asks for ``action`` (a retry's check, whatever the hand now holds)."""
    return wire_of(action).action_to_proto(action) == message


def _logged_action(message: action_pb2.Action, seat: int) -> object:
    """A logged action, read without the table: the message names its game."""
    return wire_of_action(message).action_from_proto(message, seat, None)


# --- entries -------------------------------------------------------------------------------


def update_for(entry: Entry, viewer: Viewer) -> event_pb2.TableUpdate:
    """The entry as ``viewer`` (a seat, None for a spectator, ``LOG``) may see it."""
    return event_pb2.TableUpdate(
        sequence=entry.sequence,
        occurred_at=timestamp(entry.at),
        events=_events(entry, viewer),
    )


def _game_events(
    event: GameEvents, viewer: Viewer, query_deadline: timestamp_pb2.Timestamp | None
) -> list[event_pb2.TableEvent]:
    """The game's own events, as ``viewer`` may see them, in that game's messages."""
    return wire_of(event.after).events_to_proto(
        event.events,
        event.after,
        viewer,
        query_deadline=query_deadline,
        timed_out=event.timeout,
    )


def _events(entry: Entry, viewer: Viewer) -> list[event_pb2.TableEvent]:
    out: list[event_pb2.TableEvent] = []
    query_deadline = next(
        (
            timestamp(e.deadline)
            for e in entry.events
            if isinstance(e, TurnStarted) and e.phase == "query"
        ),
        None,
    )
    for event in entry.events:
        if isinstance(event, GameEvents):
            out.extend(_game_events(event, viewer, query_deadline))
        else:
            out.append(_table_event(event))
    return out


def _table_event(
    event: TurnStarted
    | TurnTimedOut
    | AutopilotChanged
    | SeatConnectionChanged
    | SeatForfeited
    | GameFinished
    | GameAbandoned,
) -> event_pb2.TableEvent:
    """A table's own event (every kind but the game's), the same for every viewer."""
    match event:
        case TurnStarted():
            phase = _PHASE.get(event.phase, view_pb2.TURN_PHASE_UNSPECIFIED)
            message = event_pb2.TableEvent(
                turn_started=event_pb2.TurnStarted(
                    seat=event.seat, phase=phase, deadline=timestamp(event.deadline)
                )
            )
        case TurnTimedOut():
            message = event_pb2.TableEvent(
                turn_timed_out=event_pb2.TurnTimedOut(
                    seat=event.seat, consecutive_timeouts=event.consecutive_timeouts
                )
            )
        case AutopilotChanged():
            message = event_pb2.TableEvent(
                autopilot_changed=event_pb2.AutopilotChanged(
                    seat=event.seat, on=event.on, reason=_REASON[event.reason]
                )
            )
        case SeatConnectionChanged():
            changed = event_pb2.SeatConnectionChanged(
                seat=event.seat, connected=event.connected, left=event.left
            )
            if event.protection_deadline is not None:
                changed.protection_deadline.CopyFrom(timestamp(event.protection_deadline))
            message = event_pb2.TableEvent(seat_connection_changed=changed)
        case SeatForfeited():
            message = event_pb2.TableEvent(
                seat_forfeited=event_pb2.SeatForfeited(
                    seat=event.seat, bot_level=bot_level_to_proto(event.bot_level)
                )
            )
        case GameAbandoned():
            message = event_pb2.TableEvent(
                game_abandoned=event_pb2.GameAbandoned(
                    game_no=event.game_no,
                    reason=_ABANDON[event.reason],
                    hands_played=event.hands_played,
                )
            )
        case GameFinished():
            message = event_pb2.TableEvent(game_finished=game_finished_to_proto(event))
        case _:
            assert_never(event)
    return message


def game_finished_to_proto(event: GameFinished) -> event_pb2.GameFinished:
    return event_pb2.GameFinished(
        game_no=event.game_no,
        hands_played=event.hands_played,
        ranking=[standing_to_proto(standing) for standing in event.ranking],
    )


def entry_to_log(entry: Entry, owner_address: str) -> table_log_pb2.TableLogEntry:
    """The log record of ``entry``: its input and every event with its hidden fields."""
    message = table_log_pb2.TableLogEntry(
        event_id=f"{entry.table_id}:{entry.sequence}",
        occurred_at=timestamp(entry.at),
        table_id=entry.table_id,
        sequence=entry.sequence,
        events=_events(entry, LOG),
    )
    item = entry.input
    match item:
        case Created():
            created = view_pb2.Table(
                table_id=item.table_id,
                config=config_to_proto(item.config),
                state=view_pb2.Table.STATE_PLAYING,
                owner_address=owner_address,
                create_time=timestamp(entry.at),
                sequence=1,
                game_no=1,
            )
            message.table_created.CopyFrom(
                table_log_pb2.TableCreated(
                    table=created, seed=item.seed, request_id=item.request_id
                )
            )
        case PlayerAction():
            message.action_applied.CopyFrom(
                table_log_pb2.ActionApplied(
                    seat=item.seat,
                    action=wire_of(item.action).action_to_proto(item.action),
                    request_id=item.request_id,
                    source=_SOURCE[item.source],
                )
            )
        case TimerFired():
            message.timer_fired.CopyFrom(
                table_log_pb2.TimerFired(kind=_TIMER[item.kind], seat=item.seat)
            )
        case TableVoided():
            message.table_voided.CopyFrom(
                table_log_pb2.TableVoided(reason=_ABANDON[item.reason], details=item.details)
            )
        case SeatChanged():
            message.seat_changed.CopyFrom(
                table_log_pb2.SeatChanged(seat=item.seat, change=_CHANGE[item.change])
            )
        case _:
            assert_never(item)
    return message


def input_from_log(message: table_log_pb2.TableLogEntry, default_turn_seconds: float) -> Input:
    """The input a log record holds, to be replayed through the domain."""
    which = message.WhichOneof("input")
    if which == "table_created":
        created = message.table_created
        config = config_from_proto(created.table.config, default_turn_seconds)
        return Created(created.table.table_id, config, created.seed, created.request_id)
    if which == "action_applied":
        applied = message.action_applied
        try:
            action = _logged_action(applied.action, applied.seat)
        except WireError as error:
            raise ValueError(f"a logged action cannot be read: {error}") from error
        return PlayerAction(applied.seat, action, _SOURCE_BACK[applied.source], applied.request_id)
    if which == "timer_fired":
        return TimerFired(_TIMER_BACK[message.timer_fired.kind], message.timer_fired.seat)
    if which == "seat_changed":
        return SeatChanged(message.seat_changed.seat, _CHANGE_BACK[message.seat_changed.change])
    if which == "table_voided":
        voided = message.table_voided
        return TableVoided(_ABANDON_BACK[voided.reason], voided.details)
    raise ValueError(f"log entry {message.sequence} holds no input")
