"""A table's configuration (``masa_rules.table_config``) to and from ``masa.common.v1``.

The one mapping of the game kind, preset, mode, seat kind, bot level, options, payout rule and
the whole ``TableConfig``: the engine reads CreateTable and writes its log and views with it,
matchmaking writes CreateTable, its lobbies and tickets with it, the ledger reads and writes
payout rules and the bot service reads levels. Unspecified enums read as their platform
defaults (mode singles, bot level normal, a 51 preset salon); a value that names nothing is a
:class:`~masa_wire.errors.WireError` (``BAD_REQUEST``; ``P-2`` for a preset at an Elevator
table). The rules (seat counts, options, chips, payout tables) are judged by
:func:`masa_rules.table_config.check_table_config`, not here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, TypeVar

from google.protobuf import duration_pb2
from masa.common.v1 import chips_pb2, game_pb2
from masa_rules.table_config import (
    DEFAULT_PRESET,
    BotLevel,
    GameKind,
    GameOptions,
    Mode,
    PayoutRule,
    SeatConfig,
    SeatKind,
    TableConfig,
    hosted_games,
)

from masa_wire.errors import WireError

T = TypeVar("T")

__all__ = [
    "bot_level_from_proto",
    "bot_level_to_proto",
    "config_from_proto",
    "config_to_proto",
    "game_from_proto",
    "game_name_to_proto",
    "game_to_proto",
    "mode_from_proto",
    "mode_to_proto",
    "named_game_from_proto",
    "options_from_proto",
    "options_to_proto",
    "payout_from_proto",
    "payout_to_proto",
    "preset_from_proto",
    "preset_to_proto",
    "seat_from_proto",
    "seat_kind_to_proto",
    "seat_to_proto",
]

_MALFORMED: Final = "BAD_REQUEST"

_GAMES: Final[dict[str, game_pb2.GameKind.ValueType]] = {
    GameKind.FIFTYONE: game_pb2.GAME_KIND_FIFTYONE,
    GameKind.ELEVATOR: game_pb2.GAME_KIND_ELEVATOR,
}
_GAME_OF: Final[dict[int, GameKind]] = {value: GameKind(key) for key, value in _GAMES.items()}
_PRESETS: Final = {
    "": game_pb2.PRESET_UNSPECIFIED,
    "classic": game_pb2.PRESET_CLASSIC,
    "salon": game_pb2.PRESET_SALON,
    "remi": game_pb2.PRESET_REMI,
}
_PRESET_OF: Final[dict[int, str]] = {value: key for key, value in _PRESETS.items()}
_MODES: Final = {
    Mode.SINGLES: game_pb2.MODE_SINGLES,
    Mode.TEAMS: game_pb2.MODE_TEAMS,
    Mode.TRAINING: game_pb2.MODE_TRAINING,
}
_MODE_OF: Final[dict[int, Mode]] = {
    game_pb2.MODE_UNSPECIFIED: Mode.SINGLES,
    **{value: key for key, value in _MODES.items()},
}
_LEVELS: Final = {
    BotLevel.EASY: game_pb2.BOT_LEVEL_EASY,
    BotLevel.NORMAL: game_pb2.BOT_LEVEL_NORMAL,
    BotLevel.HARD: game_pb2.BOT_LEVEL_HARD,
}
_LEVEL_OF: Final[dict[int, BotLevel]] = {
    game_pb2.BOT_LEVEL_UNSPECIFIED: BotLevel.NORMAL,
    **{value: key for key, value in _LEVELS.items()},
}
_KINDS: Final = {SeatKind.HUMAN: game_pb2.SEAT_KIND_HUMAN, SeatKind.BOT: game_pb2.SEAT_KIND_BOT}
_KIND_OF: Final[dict[int, SeatKind]] = {value: key for key, value in _KINDS.items()}


def _known(table: Mapping[int, T], value: int, refusal: str) -> T:
    """What ``value`` names in ``table``; a value it does not name is malformed."""
    found = table.get(value)
    if found is None:
        raise WireError(refusal, _MALFORMED)
    return found


def game_to_proto(game: str) -> game_pb2.GameKind.ValueType:
    """The enum value of a shipped game; GAME_KIND_UNSPECIFIED for a plugin's, which the
    message names in ``game_name``."""
    return _GAMES.get(game, game_pb2.GAME_KIND_UNSPECIFIED)


def game_from_proto(value: int) -> GameKind:
    return _known(_GAME_OF, value, "the game must be fiftyone or elevator")


def preset_to_proto(preset: str) -> game_pb2.Preset.ValueType:
    """A 51 preset's name ("" for none) as the enum; an unknown name is refused (F-2)."""
    value = _PRESETS.get(preset)
    if value is None:
        raise WireError(f"unknown preset {preset!r}", "F-2")
    return value


def preset_from_proto(value: int) -> str:
    """The preset's name; "" when the message names none."""
    return _known(_PRESET_OF, value, f"unknown preset {value}")


def mode_to_proto(mode: Mode) -> game_pb2.Mode.ValueType:
    return _MODES[mode]


def mode_from_proto(value: int) -> Mode:
    """The mode; unspecified is singles."""
    return _known(_MODE_OF, value, f"unknown mode {value}")


def bot_level_to_proto(level: BotLevel) -> game_pb2.BotLevel.ValueType:
    return _LEVELS[level]


def bot_level_from_proto(value: int) -> BotLevel:
    """The level; unspecified is normal."""
    return _known(_LEVEL_OF, value, f"unknown bot level {value}")


def payout_to_proto(rule: PayoutRule) -> chips_pb2.PayoutRule:
    return chips_pb2.PayoutRule(
        rake_basis_points=rule.rake_basis_points, place_shares=list(rule.place_shares)
    )


def payout_from_proto(message: chips_pb2.PayoutRule) -> PayoutRule:
    """The rule as sent: no shares is the winner taking all (``PayoutRule.shares``)."""
    return PayoutRule(message.rake_basis_points, tuple(message.place_shares))


def options_to_proto(game: str, options: GameOptions) -> game_pb2.GameOptions:
    """The options of ``game``'s arm, set even when every option keeps its default; none for
    a plugin's game, which has no options."""
    message = game_pb2.GameOptions()
    if game not in _GAMES:
        return message
    if game == GameKind.ELEVATOR:
        message.elevator.SetInParent()
        if options.decks is not None:
            message.elevator.decks = options.decks
        return message
    fiftyone = message.fiftyone
    fiftyone.SetInParent()
    if options.open_threshold is not None:
        fiftyone.open_threshold = options.open_threshold
    if options.escalating_threshold is not None:
        fiftyone.escalating_threshold = options.escalating_threshold
    if options.hands_per_game is not None:
        fiftyone.hands_per_game = options.hands_per_game
    return message


def options_from_proto(message: game_pb2.GameOptions, game: str) -> GameOptions:
    """The options of ``game``; the other game's arm is refused, no arm keeps every default."""
    which = message.WhichOneof("game")
    if which == "elevator" and game == GameKind.ELEVATOR:
        elevator = message.elevator
        return GameOptions(decks=elevator.decks if elevator.HasField("decks") else None)
    if which == "fiftyone" and game == GameKind.FIFTYONE:
        fiftyone = message.fiftyone
        return GameOptions(
            open_threshold=(
                fiftyone.open_threshold if fiftyone.HasField("open_threshold") else None
            ),
            escalating_threshold=(
                fiftyone.escalating_threshold if fiftyone.HasField("escalating_threshold") else None
            ),
            hands_per_game=(
                fiftyone.hands_per_game if fiftyone.HasField("hands_per_game") else None
            ),
        )
    if which is not None:
        raise WireError(f"{which} options do not fit a {game} table", _MALFORMED)
    return GameOptions()


def seat_kind_to_proto(kind: SeatKind) -> game_pb2.SeatKind.ValueType:
    return _KINDS[kind]


def seat_to_proto(seat: SeatConfig) -> game_pb2.SeatAssignment:
    return game_pb2.SeatAssignment(
        seat=seat.seat,
        kind=_KINDS[seat.kind],
        player_id=seat.player_id,
        display_name=seat.display_name,
        bot_level=_LEVELS[seat.bot_level],
        hold_id=seat.hold_id,
    )


def seat_from_proto(message: game_pb2.SeatAssignment) -> SeatConfig:
    """A seat; a bot's seat names no player whatever the message says."""
    kind = _KIND_OF.get(message.kind)
    if kind is None:
        raise WireError(f"seat {message.seat} needs a kind, human or bot", _MALFORMED)
    level = _LEVEL_OF.get(message.bot_level)
    if level is None:
        raise WireError(f"seat {message.seat}: unknown bot level {message.bot_level}", _MALFORMED)
    return SeatConfig(
        seat=message.seat,
        kind=kind,
        player_id=message.player_id if kind is SeatKind.HUMAN else "",
        display_name=message.display_name,
        bot_level=level,
        hold_id=message.hold_id,
    )


def config_to_proto(config: TableConfig) -> game_pb2.TableConfig:
    turn_time = duration_pb2.Duration()
    turn_time.FromNanoseconds(round(config.turn_seconds * 1e9))
    return game_pb2.TableConfig(
        game=game_to_proto(config.game),
        game_name=game_name_to_proto(config.game),
        preset=preset_to_proto(config.preset),
        mode=_MODES[config.mode],
        options=options_to_proto(config.game, config.options),
        seats=[seat_to_proto(seat) for seat in config.seats],
        stake=config.stake,
        turn_time=turn_time,
        lobby_id=config.lobby_id,
        payout=payout_to_proto(config.payout),
    )


def config_from_proto(message: game_pb2.TableConfig, default_turn_seconds: float) -> TableConfig:
    """The configuration a message describes; ``default_turn_seconds`` when it sets no turn
    time. A 51 table without a preset is salon; an Elevator table with one is refused (P-2)."""
    game = named_game_from_proto(message.game, message.game_name)
    preset = preset_from_proto(message.preset)
    if game != GameKind.FIFTYONE and preset:
        raise WireError(f"{game} has no presets", "P-2")
    if game == GameKind.FIFTYONE and not preset:
        preset = DEFAULT_PRESET
    mode = mode_from_proto(message.mode)
    seats = tuple(seat_from_proto(seat) for seat in message.seats)
    if not seats:
        raise WireError("config.seats must list the seats", _MALFORMED)
    turn_seconds = default_turn_seconds
    if message.HasField("turn_time"):
        turn_seconds = message.turn_time.ToNanoseconds() / 1e9
    return TableConfig(
        game=game,
        seats=seats,
        turn_seconds=turn_seconds,
        preset=preset,
        mode=mode,
        options=options_from_proto(message.options, game),
        stake=message.stake,
        lobby_id=message.lobby_id,
        payout=payout_from_proto(message.payout),
    )


def game_name_to_proto(game: str) -> str:
    """What a message's ``game_name`` says of ``game``: a plugin's game's name, "" for a
    shipped game (which its GameKind names)."""
    return "" if game in _GAMES else game


def named_game_from_proto(kind: int, name: str) -> str:
    """The game a message names by its ``game`` and ``game_name`` fields: a shipped game by
    its kind, or a game a plugin registered by its name (never both)."""
    if not name:
        return game_from_proto(kind)
    if kind != game_pb2.GAME_KIND_UNSPECIFIED:
        raise WireError("a message names its game by kind or by name, not both", _MALFORMED)
    if name not in hosted_games() or name in _GAMES:
        raise WireError(f"no game named {name[:32]!r} is hosted here", "P-2")
    return name
