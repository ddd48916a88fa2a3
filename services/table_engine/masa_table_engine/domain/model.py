"""The table model: seats, inputs, events and log entries, as frozen values.

A table's configuration (its game, seats, mode, options, stake and payout rule) is the rules
library's :mod:`masa_rules.table_config`, which matchmaking's lobbies build and the ledger
pays by.

Glossary:

- *input*: something the table accepts and logs: its creation, a seat's action, a timer that
  ran out, a seat's connection or control changing. Replaying the inputs in order rebuilds the
  table exactly, because the game engines are pure and every input carries its own time.
- *entry*: one accepted input with its sequence number (1 for the creation) and what it
  produced: the engine's events and the table's own events (turns, timeouts, autopilot).
- *actor*: the seat the game waits for now (the seat on turn, or an Elevator giver).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from masa_rules.table_config import BotLevel, TableConfig

__all__ = [
    "AbandonReason",
    "AutopilotChanged",
    "AutopilotReason",
    "Created",
    "Entry",
    "GameAbandoned",
    "GameEvents",
    "GameFinished",
    "Input",
    "PlayerAction",
    "SeatChange",
    "SeatChanged",
    "SeatConnectionChanged",
    "SeatForfeited",
    "SeatStatus",
    "Source",
    "Standing",
    "TableEvent",
    "TableVoided",
    "TimerFired",
    "TimerKind",
    "TurnStarted",
    "TurnTimedOut",
]


@dataclass(frozen=True, slots=True)
class SeatStatus:
    """What the table tracks about a seat besides its cards (P-10..P-12)."""

    connected: bool = False
    autopilot: bool = False
    consecutive_timeouts: int = 0
    # P-12: when a disconnected seat forfeits; None while connected or for bots.
    protection_deadline: float | None = None
    forfeited: bool = False
    # The player left on purpose (LeaveTable) and has not come back.
    left: bool = False


# --- inputs --------------------------------------------------------------------------------


class Source(enum.Enum):
    """Who produced an action (the log keeps it for audits)."""

    PLAYER = "player"
    BOT = "bot"
    AUTOPILOT = "autopilot"
    FALLBACK = "fallback"


class TimerKind(enum.Enum):
    TURN = "turn"
    QUERY = "query"
    SEAT_PROTECTION = "seat_protection"


class SeatChange(enum.Enum):
    DISCONNECTED = "disconnected"
    RECONNECTED = "reconnected"
    RESUMED = "resumed"
    # LeaveTable: a training seat goes to a bot at once, any other is protected (P-1, P-12).
    LEFT = "left"


class AbandonReason(enum.Enum):
    """Why a game that cannot be completed was voided. A table every player left is finished,
    not voided (P-12), so that is never a reason here."""

    # An operator voided the table (a stuck game).
    VOIDED = "voided"
    # A node taking the table over could not rebuild it, or its replay did not match the log.
    UNRECOVERABLE = "unrecoverable"


@dataclass(frozen=True, slots=True)
class Created:
    table_id: str
    config: TableConfig
    # F-5: the secret game seed; hand seeds derive from it and are revealed hand by hand.
    seed: bytes
    # The CreateTable request that made the table: its retry answers with this table.
    request_id: str = ""


@dataclass(frozen=True, slots=True)
class PlayerAction:
    """An engine action (``masa_rules`` object) applied for ``seat``."""

    seat: int
    action: object
    source: Source
    request_id: str = ""


@dataclass(frozen=True, slots=True)
class TimerFired:
    kind: TimerKind
    seat: int


@dataclass(frozen=True, slots=True)
class SeatChanged:
    seat: int
    change: SeatChange


@dataclass(frozen=True, slots=True)
class TableVoided:
    """The game ends without a ranking on request (an operator) or because its state could not
    be rebuilt; the stakes go back (P-30)."""

    reason: AbandonReason
    details: str = ""


Input = Created | PlayerAction | TimerFired | SeatChanged | TableVoided


# --- events --------------------------------------------------------------------------------


class AutopilotReason(enum.Enum):
    TIMEOUTS = "timeouts"
    PLAYER_ACTION = "player_action"
    RESUME = "resume"
    FORFEIT = "forfeit"


@dataclass(frozen=True, slots=True)
class GameEvents:
    """The engine's events of one input, in order, and the game state they led to."""

    events: tuple[object, ...]
    after: object
    # F-80: answers the table gave for seats whose query window ran out.
    timeout: bool = False


@dataclass(frozen=True, slots=True)
class TurnStarted:
    """P-10: ``seat`` must act by ``deadline`` (epoch seconds); ``phase`` names the step."""

    seat: int
    phase: str
    deadline: float


@dataclass(frozen=True, slots=True)
class TurnTimedOut:
    seat: int
    consecutive_timeouts: int


@dataclass(frozen=True, slots=True)
class AutopilotChanged:
    seat: int
    on: bool
    reason: AutopilotReason


@dataclass(frozen=True, slots=True)
class SeatConnectionChanged:
    seat: int
    connected: bool
    protection_deadline: float | None
    # The player left on purpose (LeaveTable) rather than losing the connection.
    left: bool = False


@dataclass(frozen=True, slots=True)
class SeatForfeited:
    seat: int
    bot_level: BotLevel


@dataclass(frozen=True, slots=True)
class Standing:
    """One seat's final place (F-97, E-11, P-12); ties share a place (1, 1, 3)."""

    seat: int
    player_id: str
    place: int
    total: int
    forfeited: bool
    team: int
    hold_id: str


@dataclass(frozen=True, slots=True)
class GameFinished:
    game_no: int
    hands_played: int
    ranking: tuple[Standing, ...]


@dataclass(frozen=True, slots=True)
class GameAbandoned:
    """The game cannot be completed (an operator's void, a state that could not be rebuilt):
    it ends without a ranking, the table is voided and the stakes go back (P-30)."""

    game_no: int
    hands_played: int
    reason: AbandonReason


TableEvent = (
    GameEvents
    | TurnStarted
    | TurnTimedOut
    | AutopilotChanged
    | SeatConnectionChanged
    | SeatForfeited
    | GameFinished
    | GameAbandoned
)


@dataclass(frozen=True, slots=True)
class Entry:
    """One accepted input: the log's unit and the unit every watcher receives."""

    table_id: str
    sequence: int
    at: float
    input: Input
    events: tuple[TableEvent, ...]
