"""The table: a pure state machine over the game engine, its seats and its timers.

:func:`accept` is the only transition: ``accept(table, input, at) -> (table, entry)``. It is
used live and, unchanged, to replay a table's log after a restart, so every decision here reads
the time from ``at`` (the input's logged time), never from a clock. Timers are data: deadlines
in epoch seconds that :func:`due_timers` turns into inputs once they have passed.

Seat rules (P-10..P-12):

- every turn gets ``turn_seconds``; when it runs out the autopilot plays that turn (P-10), and
  after ``autopilot_after`` consecutive timeouts it plays all the seat's turns (P-11) until
  the player acts or resumes;
- a human seat without a connection forfeits ``seat_protection_seconds`` after its
  disconnection was logged (P-12; the node logs it once the seat has been without a stream
  for a grace window, app/presence.py): it is ranked last and a bot plays it to the end. A seat starts disconnected, so a
  player who never shows up forfeits too;
- a player who leaves (LeaveTable) gives the seat to a bot at once at a training table, where
  nothing is at stake (P-1); elsewhere the seat is protected as after a dropped connection
  (P-12), so the player may still come back;
- bots never play on alone (P-12, decision): once every human seat has left or forfeited, the
  game ends at once and is finished, not voided (:class:`GameFinished`): the seats are ranked
  as the game stood, the forfeited ones last, so forfeited stakes stay lost and, with no seat
  left to pay, the pot goes to the house (P-30). A training table ends the same way and moves
  no chips (P-1). A table with no connected human therefore ends at most
  ``seat_protection_seconds`` after its last player's disconnection was logged. Tables
  created with bots only play to the end, as the engines guarantee every game ends;
- bots never sit at a chip table (P-13): a table with a stake seats players only, and bots
  play only its forfeited and autopilot seats.

:class:`GameAbandoned` is for games that cannot be completed: an operator's void, or a table
whose state could not be rebuilt (:class:`TableVoided`); its stakes go back (P-30).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, assert_never

from masa_rules.errors import IllegalAction, RuleViolation
from masa_rules.frozen import evolve
from masa_rules.table_config import (
    BotLevel,
    GameOptions,
    Mode,
    PayoutRule,
    SeatConfig,
    SeatKind,
    TableConfig,
    check_table_config,
)

from masa_table_engine.domain.games import Game, game_for
from masa_table_engine.domain.model import (
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
    SeatStatus,
    Source,
    Standing,
    TableEvent,
    TableVoided,
    TimerFired,
    TimerKind,
    TurnStarted,
    TurnTimedOut,
)

__all__ = [
    "Table",
    "TimerPolicy",
    "accept",
    "automated_level",
    "automated_seat",
    "config_from_json",
    "config_to_json",
    "decode_snapshot",
    "due_timers",
    "encode_snapshot",
    "next_deadline",
    "replay",
    "table_from_json",
    "table_to_json",
    "void_entry",
]


@dataclass(frozen=True, slots=True)
class TimerPolicy:
    """The table timers (P-10..P-12, F-80); short values make tests run in seconds."""

    seat_protection_seconds: float = 180.0
    query_seconds: float = 15.0
    autopilot_after: int = 3


@dataclass(frozen=True, slots=True)
class Table:
    table_id: str
    config: TableConfig
    seed: bytes
    created_at: float
    # The number of entries in the log: 1 after the creation.
    sequence: int
    game: object
    seats: tuple[SeatStatus, ...]
    # P-10: when the actor's turn times out; None while nobody is on turn.
    turn_deadline: float | None
    # P-10: the seat whose turn timed out and that the autopilot must play now.
    timed_out: int | None
    finished: bool
    ranking: tuple[Standing, ...]
    # The CreateTable request that made the table; empty for one made without a request id.
    request_id: str = ""
    # The game ended without a ranking: it was voided (GameAbandoned).
    abandoned: bool = False

    @property
    def engine(self) -> Game:
        return game_for(self.config.game)

    @property
    def unattended(self) -> bool:
        """Whether every human seat left or forfeited (P-12); False at a table of bots only."""
        humans = [seat.seat for seat in self.config.seats if seat.kind is SeatKind.HUMAN]
        return bool(humans) and all(self.seats[seat].forfeited for seat in humans)

    @property
    def actor(self) -> int | None:
        return None if self.finished else self.engine.actor(self.game)


def accept(table: Table | None, item: Input, at: float, timers: TimerPolicy) -> tuple[Table, Entry]:
    """Apply ``item`` at time ``at``; raise ``RuleViolation`` and change nothing if refused."""
    if isinstance(item, Created):
        if table is not None:
            raise RuleViolation("P-2", "the table exists already")
        return _create(item, at, timers)
    if table is None:
        raise RuleViolation("P-2", "the table does not exist")
    if table.finished:
        raise IllegalAction("P-2", "the game at this table is over")
    events: list[TableEvent]
    match item:
        case PlayerAction():
            table, events = _act(table, item, at, timers)
        case TimerFired():
            table, events = _timer(table, item, at, timers)
        case TableVoided():
            table, events = _voided(table, item)
        case SeatChanged():
            table, events = _seat_changed(table, item, at, timers)
        case _:
            assert_never(item)
    # evolve, not replace, on the path every action takes: a table is copied three times per
    # action, and replace's checks cost more than the copy.
    table = evolve(table, sequence=table.sequence + 1)
    return table, Entry(table.table_id, table.sequence, at, item, tuple(events))


def _create(item: Created, at: float, timers: TimerPolicy) -> tuple[Table, Entry]:
    config = item.config
    check_table_config(config)
    engine = game_for(config.game)
    game, dealt = engine.start(config, item.seed)
    seats = tuple(
        SeatStatus(
            connected=False,
            protection_deadline=(
                at + timers.seat_protection_seconds if seat.kind is SeatKind.HUMAN else None
            ),
        )
        for seat in config.seats
    )
    table = Table(
        table_id=item.table_id,
        config=config,
        seed=item.seed,
        created_at=at,
        sequence=1,
        game=game,
        seats=seats,
        turn_deadline=None,
        timed_out=None,
        finished=False,
        ranking=(),
        request_id=item.request_id,
    )
    events: list[TableEvent] = [GameEvents(tuple(dealt), game)]
    table, more = _after_game_change(table, at, timers)
    events.extend(more)
    return table, Entry(item.table_id, 1, at, item, tuple(events))


def _act(
    table: Table, item: PlayerAction, at: float, timers: TimerPolicy
) -> tuple[Table, list[TableEvent]]:
    engine = table.engine
    if not 0 <= item.seat < len(table.seats):
        raise IllegalAction("P-2", f"there is no seat {item.seat}")
    status = table.seats[item.seat]
    if item.source is Source.PLAYER and status.forfeited:
        raise IllegalAction("P-12", "this seat forfeited; a bot plays it to the end")
    if engine.seat_of(item.action) != item.seat:
        raise IllegalAction("P-2", "the action names another seat")
    before = table.game
    game, happened = engine.apply(before, item.action)
    events: list[TableEvent] = []
    timed_out = table.timed_out
    if item.source is Source.PLAYER:
        # P-11: any own action takes control back and ends the run of timeouts.
        if status.autopilot:
            events.append(AutopilotChanged(item.seat, False, AutopilotReason.PLAYER_ACTION))
        status = evolve(status, autopilot=False, consecutive_timeouts=0)
        if timed_out == item.seat:
            timed_out = None
    # P-10: the autopilot plays the whole of a timed-out turn, which in 51 takes many actions.
    if not engine.same_turn(before, game):
        timed_out = None
    table = evolve(
        table,
        game=game,
        seats=_with(table.seats, item.seat, status),
        timed_out=timed_out,
    )
    events.append(GameEvents(tuple(happened), game))
    table, more = _after_game_change(table, at, timers, before)
    events.extend(more)
    return table, events


def _after_game_change(
    table: Table, at: float, timers: TimerPolicy, before: object = None
) -> tuple[Table, list[TableEvent]]:
    """Start or keep the timer of the turn (or of the F-80 query), or rank the seats at the end.

    A 51 turn is many actions: it keeps the deadline it started with (P-10), and a change of
    step (draw, then meld) is announced with that same deadline. A query gets its own window
    (F-80); when it closes the taker's turn starts afresh.
    """
    engine = table.engine
    game = table.game
    if engine.is_over(game):
        ranking = _ranking(table)
        outcome = engine.outcome(game)
        finished = GameFinished(1, outcome.hands_played, ranking)
        return evolve(table, finished=True, turn_deadline=None, ranking=ranking), [finished]
    actor = engine.actor(game)
    if actor is None:
        return evolve(table, turn_deadline=None), []
    phase = engine.phase(game)
    same = before is not None and engine.same_turn(before, game)
    before_phase = engine.phase(before) if same else None
    if phase == "query":
        if before_phase == "query" and table.turn_deadline is not None:
            return table, []
        deadline = at + min(engine.query_seconds(game), timers.query_seconds)
    elif table.timed_out is not None:
        # P-10: the autopilot finishes the timed-out turn; no clock runs meanwhile.
        return evolve(table, turn_deadline=None), []
    elif same and before_phase != "query" and table.turn_deadline is not None:
        if phase == before_phase:
            return table, []
        deadline = table.turn_deadline
    else:
        deadline = at + table.config.turn_seconds
    return evolve(table, turn_deadline=deadline), [TurnStarted(actor, phase, deadline)]


def _ranking(table: Table) -> tuple[Standing, ...]:
    """F-97, E-11, P-12: the engine's places, with forfeited seats moved behind everyone."""
    outcome = table.engine.outcome(table.game)
    forfeited = {seat for seat, status in enumerate(table.seats) if status.forfeited}
    groups = [tuple(s for s in group if s not in forfeited) for group in outcome.places]
    groups = [group for group in groups if group]
    if forfeited:
        groups.append(tuple(sorted(forfeited)))
    standings: list[Standing] = []
    for group in groups:
        place = len(standings) + 1
        for seat in group:
            config = table.config.seats[seat]
            standings.append(
                Standing(
                    seat=seat,
                    player_id=config.player_id,
                    place=place,
                    total=outcome.totals[seat],
                    forfeited=seat in forfeited,
                    team=seat % 2 if table.config.mode is Mode.TEAMS else 0,
                    hold_id=config.hold_id,
                )
            )
    return tuple(standings)


def _timer(
    table: Table, item: TimerFired, at: float, timers: TimerPolicy
) -> tuple[Table, list[TableEvent]]:
    status = table.seats[item.seat]
    if item.kind is TimerKind.SEAT_PROTECTION:
        if status.connected or status.forfeited:
            raise IllegalAction("P-12", f"seat {item.seat} is not under seat protection")
        return _finish_if_unattended(*_forfeit(table, item.seat, status))
    if table.actor != item.seat or table.turn_deadline is None:
        raise IllegalAction("P-10", f"seat {item.seat} is not on turn")
    if item.kind is TimerKind.QUERY:
        return _query_closed(table, at, timers)
    events: list[TableEvent] = []
    if table.config.seats[item.seat].kind is SeatKind.HUMAN and not status.forfeited:
        count = status.consecutive_timeouts + 1
        events.append(TurnTimedOut(item.seat, count))
        autopilot = status.autopilot or count >= timers.autopilot_after
        if autopilot and not status.autopilot:
            events.append(AutopilotChanged(item.seat, True, AutopilotReason.TIMEOUTS))
        status = replace(status, consecutive_timeouts=count, autopilot=autopilot)
    return (
        replace(
            table,
            seats=_with(table.seats, item.seat, status),
            turn_deadline=None,
            timed_out=item.seat,
        ),
        events,
    )


def _query_closed(table: Table, at: float, timers: TimerPolicy) -> tuple[Table, list[TableEvent]]:
    """F-80: the query window closed; every seat that has not answered gives the card."""
    engine = table.engine
    if engine.phase(table.game) != "query":
        raise IllegalAction("F-80", "no query is open")
    start = game = table.game
    events: list[TableEvent] = []
    for seat in engine.waiting(start):
        action = engine.timeout_action(game, seat)
        if action is None:
            continue
        game, happened = engine.apply(game, action)
        events.append(GameEvents(tuple(happened), game, timeout=True))
    table = replace(table, game=game)
    table, more = _after_game_change(table, at, timers, start)
    return table, [*events, *more]


def _seat_changed(
    table: Table, item: SeatChanged, at: float, timers: TimerPolicy
) -> tuple[Table, list[TableEvent]]:
    status = table.seats[item.seat]
    if table.config.seats[item.seat].kind is not SeatKind.HUMAN:
        raise IllegalAction("P-12", f"seat {item.seat} is a bot seat")
    events: list[TableEvent]
    if item.change is SeatChange.LEFT:
        return _left(table, item.seat, at, timers)
    if item.change is SeatChange.DISCONNECTED:
        deadline = None if status.forfeited else at + timers.seat_protection_seconds
        status = replace(status, connected=False, protection_deadline=deadline)
        events = [SeatConnectionChanged(item.seat, False, deadline)]
    elif item.change is SeatChange.RECONNECTED:
        status = replace(status, connected=True, protection_deadline=None, left=False)
        events = [SeatConnectionChanged(item.seat, True, None)]
    else:
        if status.forfeited:
            raise IllegalAction("P-12", "this seat forfeited; a bot plays it to the end")
        events = []
        if status.autopilot:
            events.append(AutopilotChanged(item.seat, False, AutopilotReason.RESUME))
        status = replace(status, autopilot=False, consecutive_timeouts=0)
    return replace(table, seats=_with(table.seats, item.seat, status)), events


def _left(
    table: Table, seat: int, at: float, timers: TimerPolicy
) -> tuple[Table, list[TableEvent]]:
    """LeaveTable: a training seat goes to a bot now (P-1); any other is protected (P-12)."""
    status = table.seats[seat]
    if status.left and not status.connected:
        raise IllegalAction("P-12", "this seat has left the table already")
    if table.config.mode is Mode.TRAINING or status.forfeited:
        status = replace(status, connected=False, left=True, protection_deadline=None)
        events: list[TableEvent] = [SeatConnectionChanged(seat, False, None, left=True)]
        table = replace(table, seats=_with(table.seats, seat, status))
        if not status.forfeited:
            table, forfeit = _forfeit(table, seat, status)
            events.extend(forfeit)
        return _finish_if_unattended(table, events)
    deadline = at + timers.seat_protection_seconds
    status = replace(status, connected=False, left=True, protection_deadline=deadline)
    return replace(table, seats=_with(table.seats, seat, status)), [
        SeatConnectionChanged(seat, False, deadline, left=True)
    ]


def _forfeit(table: Table, seat: int, status: SeatStatus) -> tuple[Table, list[TableEvent]]:
    """P-12: the seat is out of the game, ranked last, and a bot plays it to the end."""
    forfeited = replace(status, forfeited=True, autopilot=True, protection_deadline=None)
    return replace(table, seats=_with(table.seats, seat, forfeited)), [
        SeatForfeited(seat, BotLevel.NORMAL),
        AutopilotChanged(seat, True, AutopilotReason.FORFEIT),
    ]


def _finish_if_unattended(table: Table, events: list[TableEvent]) -> tuple[Table, list[TableEvent]]:
    """P-12: once no human seat is left to play for, the game is finished at once, ranked as it
    stood with every forfeited seat last (module doc); never voided, so no stake goes back."""
    if not table.unattended:
        return table, events
    ranking = _ranking(table)
    finished = GameFinished(1, table.engine.outcome(table.game).hands_played, ranking)
    table = replace(table, finished=True, turn_deadline=None, timed_out=None, ranking=ranking)
    return table, [*events, finished]


def _voided(table: Table, item: TableVoided) -> tuple[Table, list[TableEvent]]:
    """End the game at once without a ranking (an operator, or a table that cannot go on)."""
    hands = table.engine.outcome(table.game).hands_played
    table = replace(table, finished=True, abandoned=True, turn_deadline=None, timed_out=None)
    return table, [GameAbandoned(1, hands, item.reason)]


def void_entry(table_id: str, sequence: int, at: float, item: TableVoided) -> Entry:
    """The entry that voids a table whose state could not be rebuilt: nothing to judge it
    against, so it holds the end of the game only (zero hands counted)."""
    return Entry(table_id, sequence, at, item, (GameAbandoned(1, 0, item.reason),))


def _with(seats: tuple[SeatStatus, ...], seat: int, status: SeatStatus) -> tuple[SeatStatus, ...]:
    return (*seats[:seat], status, *seats[seat + 1 :])


def automated_seat(table: Table) -> tuple[int, Source] | None:
    """A seat the game waits for that a bot, the autopilot or a timed-out turn must play now.

    Usually that is the actor; during a 51 query (F-80) it is any asked seat that is a bot,
    forfeited or on autopilot, while asked players answer themselves or time out.
    """
    if table.finished:
        return None
    for seat in table.engine.waiting(table.game):
        status = table.seats[seat]
        if table.config.seats[seat].kind is SeatKind.BOT or status.forfeited:
            return seat, Source.BOT
        if status.autopilot or table.timed_out == seat:
            return seat, Source.AUTOPILOT
    return None


def automated_level(table: Table, seat: int) -> BotLevel:
    """The level a seat is played at when it does not play itself: a bot seat's own level; a
    player's autopilot (after timeouts, or for one timed-out turn) at the level its seat's
    configuration carries (the lobby's ``autopilot_level``, P-11); a forfeited seat at the
    normal level (P-12), as its forfeit recorded."""
    config = table.config.seats[seat]
    if config.kind is SeatKind.HUMAN and table.seats[seat].forfeited:
        return BotLevel.NORMAL
    return config.bot_level


def next_deadline(table: Table) -> float | None:
    """The earliest timer of the table, or None when none runs."""
    if table.finished:
        return None
    deadlines = [table.turn_deadline] if table.turn_deadline is not None else []
    deadlines.extend(
        status.protection_deadline
        for status in table.seats
        if status.protection_deadline is not None and not status.forfeited
    )
    return min(deadlines, default=None)


def due_timers(table: Table, now: float) -> list[TimerFired]:
    """The timers that have run out at ``now``, the turn's (or the F-80 query's) first."""
    if table.finished:
        return []
    due: list[TimerFired] = []
    actor = table.actor
    if table.turn_deadline is not None and table.turn_deadline <= now and actor is not None:
        query = table.engine.phase(table.game) == "query"
        due.append(TimerFired(TimerKind.QUERY if query else TimerKind.TURN, actor))
    for seat, status in enumerate(table.seats):
        deadline = status.protection_deadline
        protected = not status.connected and not status.forfeited
        if protected and deadline is not None and deadline <= now:
            due.append(TimerFired(TimerKind.SEAT_PROTECTION, seat))
    return due


# --- snapshots -----------------------------------------------------------------------------


def table_to_json(table: Table) -> dict[str, Any]:
    """The whole table, secrets included: for the snapshot store only."""
    return {
        "table_id": table.table_id,
        "config": config_to_json(table.config),
        "seed": table.seed.hex(),
        "created_at": table.created_at,
        "sequence": table.sequence,
        "game": table.engine.state_to_json(table.game),
        "seats": [
            {
                "connected": s.connected,
                "autopilot": s.autopilot,
                "consecutive_timeouts": s.consecutive_timeouts,
                "protection_deadline": s.protection_deadline,
                "forfeited": s.forfeited,
                "left": s.left,
            }
            for s in table.seats
        ],
        "turn_deadline": table.turn_deadline,
        "timed_out": table.timed_out,
        "finished": table.finished,
        "request_id": table.request_id,
        "abandoned": table.abandoned,
    }


def table_from_json(data: Mapping[str, Any]) -> Table:
    config = config_from_json(data["config"])
    game = game_for(config.game).state_from_json(data["game"])
    table = Table(
        table_id=data["table_id"],
        config=config,
        seed=bytes.fromhex(data["seed"]),
        created_at=float(data["created_at"]),
        sequence=int(data["sequence"]),
        game=game,
        seats=tuple(SeatStatus(**seat) for seat in data["seats"]),
        turn_deadline=data["turn_deadline"],
        timed_out=data["timed_out"],
        finished=bool(data["finished"]),
        ranking=(),
        request_id=data.get("request_id", ""),
        abandoned=bool(data.get("abandoned", False)),
    )
    if table.finished and not table.abandoned:
        return replace(table, ranking=_ranking(table))
    return table


def config_to_json(config: TableConfig) -> dict[str, Any]:
    return {
        "game": str(config.game),
        "seats": [
            {
                "seat": s.seat,
                "kind": s.kind.value,
                "player_id": s.player_id,
                "display_name": s.display_name,
                "bot_level": s.bot_level.value,
                "hold_id": s.hold_id,
            }
            for s in config.seats
        ],
        "turn_seconds": config.turn_seconds,
        "preset": config.preset,
        "mode": config.mode.value,
        "options": {
            "decks": config.options.decks,
            "open_threshold": config.options.open_threshold,
            "escalating_threshold": config.options.escalating_threshold,
            "hands_per_game": config.options.hands_per_game,
        },
        "stake": config.stake,
        "lobby_id": config.lobby_id,
        "payout": {
            "rake_basis_points": config.payout.rake_basis_points,
            "place_shares": list(config.payout.place_shares),
        },
    }


def config_from_json(data: Mapping[str, Any]) -> TableConfig:
    # Snapshots written before payout rules existed have none: no rake, the winner takes all.
    payout = data.get("payout", {})
    return TableConfig(
        game=str(data["game"]),
        seats=tuple(
            SeatConfig(
                seat=s["seat"],
                kind=SeatKind(s["kind"]),
                player_id=s["player_id"],
                display_name=s["display_name"],
                bot_level=BotLevel(s["bot_level"]),
                hold_id=s["hold_id"],
            )
            for s in data["seats"]
        ),
        turn_seconds=float(data["turn_seconds"]),
        preset=data["preset"],
        mode=Mode(data["mode"]),
        options=GameOptions(**data["options"]),
        stake=int(data["stake"]),
        lobby_id=data["lobby_id"],
        payout=PayoutRule(
            int(payout.get("rake_basis_points", 0)), tuple(payout.get("place_shares", ()))
        ),
    )


def encode_snapshot(table: Table) -> bytes:
    return json.dumps(table_to_json(table), separators=(",", ":")).encode()


def decode_snapshot(payload: bytes) -> Table:
    return table_from_json(json.loads(payload))


def replay(entries: Sequence[Input], at: Sequence[float], timers: TimerPolicy) -> Table:
    """The table a log of inputs (with their times) leads to."""
    table: Table | None = None
    for item, when in zip(entries, at, strict=True):
        table, _ = accept(table, item, when, timers)
    if table is None:
        raise RuleViolation("P-2", "an empty log holds no table")
    return table
