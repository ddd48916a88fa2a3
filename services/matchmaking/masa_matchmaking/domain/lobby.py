"""A lobby (salon, P-2): what every table it places is, and how its queue is matched.

A lobby fixes the game, preset, mode (P-1), table size, options (rules.md §2.9 and §3), stake,
payout rule (P-30), turn time (P-10) and bot fill: the table model of
:mod:`masa_rules.table_config`, which it fills with seats to make each table's
:meth:`Lobby.table_config`. Loading a lobby checks the configuration of a table of its
``min_seats`` and of its ``max_seats``, seated as it seats them (bots beside the first player
when it fills with bots, a ledger hold for each player when it has a stake), with
:func:`masa_rules.table_config.check_table_config`, the check the table engine creates tables
by: a lobby that loads is a lobby whose tables the engine accepts.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from masa_rules.errors import RuleViolation
from masa_rules.table_config import (
    DEFAULT_TURN_SECONDS,
    BotLevel,
    GameOptions,
    Mode,
    PayoutRule,
    SeatConfig,
    SeatKind,
    TableConfig,
    check_table_config,
)

from masa_matchmaking.domain.errors import InvalidLobby

__all__ = [
    "LOBBY_ID",
    "MAX_LOBBY_STAKE",
    "MAX_LOBBY_TURN_SECONDS",
    "BotFill",
    "Lobby",
    "MatchingPolicy",
]

LOBBY_ID: Final = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")
# A lobby's limits, within the table model's: long enough for any real table, short enough
# that nothing waits for ever.
MAX_LOBBY_TURN_SECONDS: Final = 600.0
MAX_TICKET_TTL_SECONDS: Final = 3_600.0
MAX_LOBBY_STAKE: Final = 1_000_000_000


@dataclass(frozen=True, slots=True)
class BotFill:
    """When bots complete a short table (training lobbies fill at once, whatever this says).

    Only a lobby without a stake may enable it: bots never sit at a chip table (P-13).
    """

    enabled: bool = False
    fill_after_seconds: float = 30.0
    min_players: int = 1
    level: BotLevel = BotLevel.NORMAL


@dataclass(frozen=True, slots=True)
class MatchingPolicy:
    """How far apart in rating (OpenSkill mu) the players of one table may be.

    A ticket accepts players within ``base_spread`` of its own rating at first; the spread
    grows by ``spread_per_second`` while it waits and stops mattering after
    ``open_after_seconds``, so nobody waits for ever for a close match.
    """

    base_spread: float = 5.0
    spread_per_second: float = 0.5
    open_after_seconds: float = 30.0

    def spread(self, waited_seconds: float) -> float:
        """The rating distance a ticket that has waited this long accepts."""
        if waited_seconds >= self.open_after_seconds:
            return float("inf")
        return self.base_spread + self.spread_per_second * max(0.0, waited_seconds)


@dataclass(frozen=True, slots=True)
class Lobby:
    lobby_id: str
    display_name: str
    game: str
    mode: Mode
    max_seats: int
    min_seats: int
    # A 51 preset; empty is salon (the catalog names it), and Elevator has none.
    preset: str = ""
    options: GameOptions = field(default_factory=GameOptions)
    stake: int = 0
    payout: PayoutRule = field(default_factory=PayoutRule)
    turn_seconds: float = DEFAULT_TURN_SECONDS
    bot_fill: BotFill = field(default_factory=BotFill)
    # The level the autopilot plays a player's seat at (P-11): a human seat's bot_level.
    autopilot_level: BotLevel = BotLevel.NORMAL
    short_table_after_seconds: float = 15.0
    ticket_ttl_seconds: float = 300.0
    matching: MatchingPolicy = field(default_factory=MatchingPolicy)

    def __post_init__(self) -> None:
        _check_lobby(self)

    @property
    def training(self) -> bool:
        return self.mode is Mode.TRAINING

    @property
    def chips(self) -> bool:
        """Whether its tables are staked: players need chips to sit (P-30)."""
        return self.stake > 0

    @property
    def max_party(self) -> int:
        """The most players one party may bring: partners in teams, a full table otherwise."""
        return 2 if self.mode is Mode.TEAMS else self.max_seats

    def table_config(self, seats: Sequence[SeatConfig]) -> TableConfig:
        """The configuration of this lobby's table with these seats, as CreateTable asks for."""
        return TableConfig(
            game=self.game,
            seats=tuple(seats),
            turn_seconds=self.turn_seconds,
            preset=self.preset,
            mode=self.mode,
            options=self.options,
            stake=self.stake,
            lobby_id=self.lobby_id,
            payout=self.payout,
        )


def _check_lobby(lobby: Lobby) -> None:
    where = f"lobby {lobby.lobby_id!r}"
    if not LOBBY_ID.fullmatch(lobby.lobby_id):
        raise InvalidLobby(f"{where}: an id is 1-40 of a-z, 0-9 and '-', starting alphanumeric")
    if not lobby.display_name or len(lobby.display_name) > 80:
        raise InvalidLobby(f"{where}: a name is 1-80 characters")
    if not 1 <= lobby.min_seats <= lobby.max_seats:
        raise InvalidLobby(f"{where}: min_seats must be 1 to max_seats")
    try:
        for seats in sorted({lobby.min_seats, lobby.max_seats}):
            check_table_config(lobby.table_config(_seated(lobby, seats)))
    except RuleViolation as violation:
        raise InvalidLobby(f"{where}: {violation}", rule=violation.rule) from None
    if lobby.stake > MAX_LOBBY_STAKE:
        raise InvalidLobby(f"{where}: a lobby's stake is at most {MAX_LOBBY_STAKE}", rule="P-30")
    if lobby.turn_seconds > MAX_LOBBY_TURN_SECONDS:
        raise InvalidLobby(
            f"{where}: a lobby's turn_seconds is at most {MAX_LOBBY_TURN_SECONDS}", rule="P-10"
        )
    _check_waiting(where, lobby)


def _seated(lobby: Lobby, count: int) -> tuple[SeatConfig, ...]:
    """A table of ``count`` seats as the lobby seats it: a player first, then bots if it fills
    with bots (training, or a bot fill) and players otherwise, each player with the hold of
    the stake at a chip lobby."""
    bots = lobby.training or lobby.bot_fill.enabled
    return tuple(
        SeatConfig(seat, SeatKind.BOT, bot_level=lobby.bot_fill.level)
        if seat and bots
        else SeatConfig(
            seat,
            SeatKind.HUMAN,
            f"player-{seat}",
            bot_level=lobby.autopilot_level,
            hold_id=f"hold-{seat}" if lobby.chips else "",
        )
        for seat in range(count)
    )


def _check_waiting(where: str, lobby: Lobby) -> None:
    """The lobby's ticket lifetime, bot fill and matching spread are within their bounds."""
    if not 0 < lobby.ticket_ttl_seconds <= MAX_TICKET_TTL_SECONDS:
        raise InvalidLobby(f"{where}: ticket_ttl_seconds must be above 0, at most 3600")
    if lobby.short_table_after_seconds < 0 or lobby.bot_fill.fill_after_seconds < 0:
        raise InvalidLobby(f"{where}: waiting times must not be negative")
    if not 1 <= lobby.bot_fill.min_players <= lobby.max_seats:
        raise InvalidLobby(f"{where}: bot_fill.min_players must be 1 to max_seats")
    policy = lobby.matching
    if policy.base_spread < 0 or policy.spread_per_second < 0 or policy.open_after_seconds < 0:
        raise InvalidLobby(f"{where}: the matching spread must not be negative")
