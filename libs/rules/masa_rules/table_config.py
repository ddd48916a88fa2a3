"""What a table is made of, and what a lobby makes its tables of: one model, checked in one place.

A lobby (salon, P-2) fixes the game, the preset, the mode (P-1), the options (rules.md §2.9 and
§3), the stake and the payout rule (P-30) and the turn time (P-10) of every table it places;
filled with seats, that is a :class:`TableConfig`. The table engine creates a table only from a
configuration :func:`check_table_config` accepts, matchmaking loads only a lobby whose tables it
accepts, and the ledger pays by the same :class:`PayoutRule`, checked by :func:`check_payout`.
Every refusal is a :class:`~masa_rules.errors.RuleViolation` naming the rule. The protobuf
mapping of these values is ``masa_wire.table_config``.

>>> bots = tuple(SeatConfig(seat, SeatKind.BOT) for seat in (1, 2))
>>> config = TableConfig(
...     GameKind.ELEVATOR,
...     (SeatConfig(0, SeatKind.HUMAN, "ayse"), *bots),
...     turn_seconds=DEFAULT_TURN_SECONDS,
...     mode=Mode.TRAINING,
... )
>>> check_table_config(config)
>>> config.seat_of("ayse"), config.seat_of("bora")
(0, None)
>>> from dataclasses import replace
>>> check_table_config(replace(config, mode=Mode.SINGLES, stake=20))
Traceback (most recent call last):
...
masa_rules.errors.RuleViolation: P-13: bots never sit at a table with a stake (20 chips)
>>> check_payout(PayoutRule(place_shares=(3000, 7000)))
Traceback (most recent call last):
...
masa_rules.errors.RuleViolation: P-30: a place's share never grows from one place to the next
>>> PayoutRule().shares, PayoutRule(500, (7000, 3000)).shares
((10000,), (7000, 3000))
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from masa_rules.elevator.rules import ElevatorRules
from masa_rules.errors import RuleViolation
from masa_rules.lobby import LobbyOptions, check_chip_seating, lobby_rules
from masa_rules.ruleset import RuleSet

__all__ = [
    "BASIS_POINTS",
    "DEFAULT_PRESET",
    "DEFAULT_TURN_SECONDS",
    "MAX_SEATS",
    "MAX_STAKE",
    "MAX_TURN_SECONDS",
    "MIN_TURN_SECONDS",
    "BotLevel",
    "GameCheck",
    "GameKind",
    "GameOptions",
    "Mode",
    "PayoutRule",
    "SeatConfig",
    "SeatKind",
    "TableConfig",
    "bot_levels",
    "check_payout",
    "check_table_config",
    "fiftyone_rules",
    "hosted_games",
    "register_game",
]

# P-30: shares and the rake are in basis points of the pot; 10000 is all of it.
BASIS_POINTS: Final = 10_000
# The 51 preset of a table that names none (Preset in game.proto).
DEFAULT_PRESET: Final = "salon"
# The most seats at a table (Elevator's 6); each game checks its own count.
MAX_SEATS: Final = 6
# P-10 (decision): 20 s a turn unless the lobby says otherwise, and never under 0.1 s or over
# an hour.
DEFAULT_TURN_SECONDS: Final = 20.0
MIN_TURN_SECONDS: Final = 0.1
MAX_TURN_SECONDS: Final = 3600.0
# Far below int64, so that no sum of stakes a ledger forms can overflow.
MAX_STAKE: Final = 10**12


class GameKind(StrEnum):
    """The games masa ships. A table's ``game`` is a game's registered name: one of these, or
    a game a plugin registers with :func:`register_game`."""

    FIFTYONE = "fiftyone"
    ELEVATOR = "elevator"


class Mode(StrEnum):
    """P-1: everyone for themselves, partners opposite each other (51 only), or against bots
    for no chips."""

    SINGLES = "singles"
    TEAMS = "teams"
    TRAINING = "training"


class SeatKind(StrEnum):
    HUMAN = "human"
    BOT = "bot"


class BotLevel(StrEnum):
    """How well a bot plays (the proto's BotLevel; unspecified means normal)."""

    # A random legal move, weighted towards moves that keep the game going.
    EASY = "easy"
    # Greedy: the engine's greedy policy, driven by the meld solver in 51.
    NORMAL = "normal"
    # A search over the seat's view within a time budget (docs/bots.md).
    HARD = "hard"


@dataclass(frozen=True, slots=True)
class PayoutRule:
    """P-30: the house rake and the prize's shares by place, in basis points (10000 = all).

    No shares pays the winner all. The engine checks and forwards it; the ledger pays by it.
    """

    rake_basis_points: int = 0
    # Place 1 first.
    place_shares: tuple[int, ...] = ()

    @property
    def shares(self) -> tuple[int, ...]:
        """The shares paid by place, the winner's first: all to the winner when none are set."""
        return self.place_shares or (BASIS_POINTS,)

    def spelt_out(self) -> PayoutRule:
        """This rule with its shares spelt out (the winner's 10000 when it sets none), so that
        the same terms compare equal however they were given."""
        return PayoutRule(self.rake_basis_points, self.shares)


@dataclass(frozen=True, slots=True)
class SeatConfig:
    """Who sits on a seat when the table is created: a player (with the ledger hold of the
    stake at a chip table) or a bot of a level."""

    seat: int
    kind: SeatKind
    player_id: str = ""
    display_name: str = ""
    bot_level: BotLevel = BotLevel.NORMAL
    hold_id: str = ""


@dataclass(frozen=True, slots=True)
class GameOptions:
    """The lobby options (rules.md §2.9, E-1); None takes the preset's default."""

    decks: int | None = None
    open_threshold: int | None = None
    escalating_threshold: bool | None = None
    hands_per_game: int | None = None


@dataclass(frozen=True, slots=True)
class TableConfig:
    """What a lobby fixes for a table (P-2), with the seats it filled.

    ``preset`` names a 51 preset (empty is salon, the platform default); Elevator has none.
    """

    # A registered game's name (:func:`register_game`): a GameKind, or a plugin's game.
    game: str
    seats: tuple[SeatConfig, ...]
    turn_seconds: float
    preset: str = ""
    mode: Mode = Mode.SINGLES
    options: GameOptions = GameOptions()
    stake: int = 0
    lobby_id: str = ""
    payout: PayoutRule = PayoutRule()

    def seat_of(self, player_id: str) -> int | None:
        """The seat of a human player, or None when the player has no seat here."""
        for seat in self.seats:
            if seat.kind is SeatKind.HUMAN and seat.player_id == player_id:
                return seat.seat
        return None


def check_payout(rule: PayoutRule, *, places: int | None = None) -> None:
    """P-30: a rake of 0 to 10000 basis points, and a payout table (if any) that pays the whole
    prize, gives the winner a share, never grows from one place to the next and has at most
    ``places`` places.

    >>> check_payout(PayoutRule(200, (7000, 3000)), places=4)
    >>> check_payout(PayoutRule(place_shares=(0, 10_000)))
    Traceback (most recent call last):
    ...
    masa_rules.errors.RuleViolation: P-30: the winner's share must be positive
    """
    if not 0 <= rule.rake_basis_points <= BASIS_POINTS:
        raise RuleViolation("P-30", f"the rake is 0 to {BASIS_POINTS} basis points")
    shares = rule.place_shares
    if not shares:
        return
    if min(shares) < 0:
        raise RuleViolation("P-30", "a place's share cannot be negative")
    if sum(shares) != BASIS_POINTS:
        raise RuleViolation(
            "P-30", f"the place shares sum to {BASIS_POINTS} basis points, not {sum(shares)}"
        )
    if shares[0] <= 0:
        raise RuleViolation("P-30", "the winner's share must be positive")
    if any(later > earlier for earlier, later in itertools.pairwise(shares)):
        raise RuleViolation("P-30", "a place's share never grows from one place to the next")
    if places is not None and len(shares) > places:
        raise RuleViolation(
            "P-30", f"{len(shares)} place shares, more than the {places} places there are"
        )


def check_table_config(config: TableConfig) -> None:
    """Everything a table's configuration must be before a table is made of it: its seats
    (P-2), its turn time (P-10), its chips (P-1, P-13, P-30) and its game's options and seat
    count (§2.9, §3, P-1). Raises :class:`~masa_rules.errors.RuleViolation` naming the rule."""
    _check_seats(config)
    if not MIN_TURN_SECONDS <= config.turn_seconds <= MAX_TURN_SECONDS:
        raise RuleViolation(
            "P-10", f"the turn time is {MIN_TURN_SECONDS} s to {MAX_TURN_SECONDS:.0f} s"
        )
    _check_chips(config)
    check_payout(config.payout, places=len(config.seats))
    check = _GAMES.get(config.game)
    if check is None:
        raise RuleViolation("P-2", f"{config.game} tables are not hosted")
    levels = _LEVELS[config.game]
    for seat in config.seats:
        if seat.bot_level not in levels:
            # A human seat's level is its autopilot's (P-11).
            raise RuleViolation(
                "P-2",
                f"seat {seat.seat}: {config.game} bots play at {_names(levels)}, not {seat.bot_level}",
            )
    check(config)


def bot_levels(game: str) -> tuple[BotLevel, ...]:
    """The levels the bot plays ``game`` at (for its bot seats and autopilot); none for a game
    that is not hosted.

    >>> [level.value for level in bot_levels("fiftyone")], bot_levels("chess")
    (['easy', 'normal', 'hard'], ())
    """
    return _LEVELS.get(game, ())


def _names(levels: tuple[BotLevel, ...]) -> str:
    return ", ".join(level.value for level in levels) or "no level"


def fiftyone_rules(preset: str, options: GameOptions) -> tuple[RuleSet, int | None]:
    """A 51 table's rule set and the hands it plays (F-95) or caps (F-96): its preset (empty
    is salon) and options read by :func:`masa_rules.lobby.lobby_rules`, which raises
    ``RuleViolation`` with the rule id for an option the preset does not allow.

    >>> rules, hands = fiftyone_rules("classic", GameOptions(hands_per_game=9))
    >>> rules.preset, rules.hands_per_game, hands
    ('classic', 9, 9)
    """
    return lobby_rules(
        LobbyOptions(
            preset=preset or DEFAULT_PRESET,
            open_threshold=options.open_threshold,
            escalating_threshold=options.escalating_threshold,
            hands_per_game=options.hands_per_game,
        )
    )


def _check_seats(config: TableConfig) -> None:
    if not 1 <= len(config.seats) <= MAX_SEATS:
        raise RuleViolation("P-2", f"a table has 1 to {MAX_SEATS} seats")
    if [seat.seat for seat in config.seats] != list(range(len(config.seats))):
        raise RuleViolation("P-2", "seats must be numbered 0, 1, 2 ... in play order")
    for seat in config.seats:
        if seat.kind is SeatKind.HUMAN and not seat.player_id:
            raise RuleViolation("P-2", f"human seat {seat.seat} needs a player id")
    players = [seat.player_id for seat in config.seats if seat.kind is SeatKind.HUMAN]
    if len(set(players)) != len(players):
        raise RuleViolation("P-2", "a player can take only one seat at a table")


def _check_chips(config: TableConfig) -> None:
    """P-30, P-1, P-13: a chip table seats players only, each with a ledger hold; nothing else
    carries one."""
    if not 0 <= config.stake <= MAX_STAKE:
        raise RuleViolation("P-30", f"the stake is 0 to {MAX_STAKE} chips")
    if config.stake and config.mode is Mode.TRAINING:
        raise RuleViolation("P-1", "a training table moves no chips: its stake is 0")
    check_chip_seating(config.stake, bots=any(s.kind is SeatKind.BOT for s in config.seats))
    holds = [seat.hold_id for seat in config.seats if seat.hold_id]
    for seat in config.seats:
        if seat.kind is SeatKind.BOT and seat.hold_id:
            raise RuleViolation("P-30", f"bot seat {seat.seat} stakes nothing")
        if config.stake and seat.kind is SeatKind.HUMAN and not seat.hold_id:
            raise RuleViolation("P-30", f"seat {seat.seat} needs the ledger hold of its stake")
    if holds and not config.stake:
        raise RuleViolation("P-30", "a table without a stake holds no chips")
    if len(set(holds)) != len(holds):
        raise RuleViolation("P-30", "each seat's stake has a hold of its own")


def _check_fiftyone(config: TableConfig) -> None:
    if config.options.decks is not None:
        raise RuleViolation("F-2", "decks is an Elevator option")
    rules, _ = fiftyone_rules(config.preset, config.options)
    players = len(config.seats)
    if players not in rules.player_counts:
        raise RuleViolation(
            "F-2", f"{rules.preset} is played by {rules.players_text} players, not {players}"
        )
    if config.mode is Mode.TEAMS and not (rules.teams_allowed and players == 4):
        raise RuleViolation("F-2", "team mode needs 4 seats and a preset with teams")


def _check_elevator(config: TableConfig) -> None:
    if config.mode is Mode.TEAMS:
        raise RuleViolation("P-1", "team mode is for 51 only")
    options = config.options
    if config.preset or options.open_threshold is not None or options.hands_per_game is not None:
        raise RuleViolation("E-1", "Elevator has no preset, threshold or number of hands")
    if options.escalating_threshold is not None:
        raise RuleViolation("E-1", "Elevator has no opening threshold")
    ElevatorRules(decks=options.decks).check_players(len(config.seats))


# What a game checks of a table's configuration beyond what every table must be: its preset,
# options, mode and seat count. Raises RuleViolation naming the rule.
GameCheck = Callable[[TableConfig], None]

_NAME: Final = re.compile(r"[a-z][a-z0-9_]{1,31}")
_GAMES: dict[str, GameCheck] = {
    GameKind.FIFTYONE: _check_fiftyone,
    GameKind.ELEVATOR: _check_elevator,
}
# The bot levels of each game (docs/bots.md); a plugin's game plays the basic ones unless it
# registers a search of its own.
_BASIC_LEVELS: Final = (BotLevel.EASY, BotLevel.NORMAL)
_LEVELS: dict[str, tuple[BotLevel, ...]] = {
    GameKind.FIFTYONE: (*_BASIC_LEVELS, BotLevel.HARD),
    GameKind.ELEVATOR: (*_BASIC_LEVELS, BotLevel.HARD),
}


def register_game(
    name: str, check: GameCheck, *, levels: tuple[BotLevel, ...] = _BASIC_LEVELS
) -> None:
    """Host the game ``name`` (lower-case letters, digits and ``_``, 2 to 32 characters): its
    tables are checked by ``check``, and its bots play at ``levels``. The rules layer's one
    registry of games; registering a name twice is a mistake, not a replacement.

    >>> register_game("fiftyone", _check_fiftyone)
    Traceback (most recent call last):
    ...
    ValueError: the game fiftyone is registered already
    """
    if not _NAME.fullmatch(name):
        raise ValueError(f"a game's name is 2-32 lower-case letters, digits or _: {name!r}")
    if name in _GAMES:
        raise ValueError(f"the game {name} is registered already")
    _GAMES[name] = check
    _LEVELS[name] = levels


def hosted_games() -> tuple[str, ...]:
    """The names of every registered game, the shipped ones first."""
    return tuple(_GAMES)
