"""A lobby (salon, P-2): what every table it places is, and how its queue is matched.

A lobby fixes the game, preset, mode (P-1), table size, options (rules.md §2.9 and §3), stake,
rake, payout table, turn time and bot fill. Its options are checked where the engine checks
them, by :func:`masa_rules.lobby.lobby_rules` (51),
:meth:`masa_rules.elevator.rules.ElevatorRules.check_players` and
:func:`masa_rules.lobby.check_chip_seating` (P-13: a lobby with a stake seats players only,
so it never fills with bots), so a lobby the engine would refuse never loads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from masa_rules.elevator.rules import ElevatorRules
from masa_rules.errors import RuleViolation
from masa_rules.lobby import LobbyOptions, check_chip_seating, lobby_rules

from masa_matchmaking.domain.errors import InvalidLobby

__all__ = [
    "LOBBY_ID",
    "BotFill",
    "BotLevel",
    "Game",
    "Lobby",
    "MatchingPolicy",
    "Mode",
    "Payout",
]

LOBBY_ID: Final = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")
BASIS_POINTS: Final = 10_000
# A lobby's limits: long enough for any real table, short enough that nothing waits for ever.
MAX_TURN_SECONDS: Final = 600.0
MAX_TICKET_TTL_SECONDS: Final = 3_600.0
MAX_STAKE: Final = 1_000_000_000


class Game(StrEnum):
    FIFTYONE = "fiftyone"
    ELEVATOR = "elevator"


class Mode(StrEnum):
    SINGLES = "singles"
    TEAMS = "teams"
    TRAINING = "training"


class BotLevel(StrEnum):
    EASY = "easy"
    NORMAL = "normal"


@dataclass(frozen=True, slots=True)
class Payout:
    """The house rake and the prize's shares by place, in basis points (P-30)."""

    rake_basis_points: int = 0
    # Place 1 first; empty means the winner takes all.
    place_shares: tuple[int, ...] = ()


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
    game: Game
    mode: Mode
    max_seats: int
    min_seats: int
    preset: str = ""
    open_threshold: int | None = None
    escalating_threshold: bool | None = None
    hands_per_game: int | None = None
    decks: int | None = None
    stake: int = 0
    payout: Payout = field(default_factory=Payout)
    turn_seconds: float = 20.0
    bot_fill: BotFill = field(default_factory=BotFill)
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


def _check_lobby(lobby: Lobby) -> None:
    where = f"lobby {lobby.lobby_id!r}"
    if not LOBBY_ID.fullmatch(lobby.lobby_id):
        raise InvalidLobby(f"{where}: an id is 1-40 of a-z, 0-9 and '-', starting alphanumeric")
    if not lobby.display_name or len(lobby.display_name) > 80:
        raise InvalidLobby(f"{where}: a name is 1-80 characters")
    if not 1 <= lobby.min_seats <= lobby.max_seats:
        raise InvalidLobby(f"{where}: min_seats must be 1 to max_seats")
    try:
        if lobby.game is Game.FIFTYONE:
            _check_fiftyone(lobby)
        else:
            _check_elevator(lobby)
        check_chip_seating(lobby.stake, bots=lobby.bot_fill.enabled)
    except RuleViolation as violation:
        raise InvalidLobby(f"{where}: {violation}", rule=violation.rule) from None
    if lobby.training and lobby.stake != 0:
        raise InvalidLobby(f"{where}: training moves no chips (P-1), so its stake is 0")
    if not 0 <= lobby.stake <= MAX_STAKE:
        raise InvalidLobby(f"{where}: the stake must be 0 to {MAX_STAKE}")
    _check_payout(where, lobby)
    _check_waiting(where, lobby)


def _check_waiting(where: str, lobby: Lobby) -> None:
    """The lobby's timers, bot fill and matching spread are within their bounds."""
    if not 0 < lobby.turn_seconds <= MAX_TURN_SECONDS:
        raise InvalidLobby(f"{where}: turn_seconds must be above 0 and at most {MAX_TURN_SECONDS}")
    if not 0 < lobby.ticket_ttl_seconds <= MAX_TICKET_TTL_SECONDS:
        raise InvalidLobby(f"{where}: ticket_ttl_seconds must be above 0, at most 3600")
    if lobby.short_table_after_seconds < 0 or lobby.bot_fill.fill_after_seconds < 0:
        raise InvalidLobby(f"{where}: waiting times must not be negative")
    if not 1 <= lobby.bot_fill.min_players <= lobby.max_seats:
        raise InvalidLobby(f"{where}: bot_fill.min_players must be 1 to max_seats")
    policy = lobby.matching
    if policy.base_spread < 0 or policy.spread_per_second < 0 or policy.open_after_seconds < 0:
        raise InvalidLobby(f"{where}: the matching spread must not be negative")


def _check_fiftyone(lobby: Lobby) -> None:
    rules, _ = lobby_rules(
        LobbyOptions(
            preset=lobby.preset or "salon",
            open_threshold=lobby.open_threshold,
            escalating_threshold=lobby.escalating_threshold,
            hands_per_game=lobby.hands_per_game,
        )
    )
    for seats in {lobby.min_seats, lobby.max_seats}:
        if seats not in rules.player_counts:
            raise RuleViolation(
                "F-2", f"{rules.preset} is for {rules.player_counts} players, not {seats}"
            )
    if lobby.mode is Mode.TEAMS and not (rules.teams_allowed and lobby.min_seats == 4):
        raise RuleViolation("F-2", "team mode needs 4 seats and a preset with teams")
    if lobby.decks is not None:
        raise RuleViolation("F-2", "decks is an Elevator option")


def _check_elevator(lobby: Lobby) -> None:
    if lobby.mode is Mode.TEAMS:
        raise RuleViolation("P-1", "team mode is for 51 only")
    if lobby.preset or lobby.open_threshold is not None or lobby.hands_per_game is not None:
        raise RuleViolation("E-1", "Elevator has no preset, threshold or number of hands")
    if lobby.escalating_threshold is not None:
        raise RuleViolation("E-1", "Elevator has no opening threshold")
    rules = ElevatorRules(decks=lobby.decks)
    for seats in {lobby.min_seats, lobby.max_seats}:
        rules.check_players(seats)


def _check_payout(where: str, lobby: Lobby) -> None:
    payout = lobby.payout
    if not 0 <= payout.rake_basis_points <= BASIS_POINTS:
        raise InvalidLobby(f"{where}: the rake is 0 to {BASIS_POINTS} basis points")
    shares = payout.place_shares
    if shares and (sum(shares) != BASIS_POINTS or any(share < 0 for share in shares)):
        raise InvalidLobby(f"{where}: the place shares must sum to {BASIS_POINTS} basis points")
    if len(shares) > lobby.max_seats:
        raise InvalidLobby(f"{where}: more place shares than seats")
