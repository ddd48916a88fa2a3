"""The lobbies of a TOML configuration: ``[defaults]`` and one ``[[lobby]]`` table each.

>>> lobbies = parse_lobbies('''
... [[lobby]]
... id = "elevator"
... name = "Elevator"
... game = "elevator"
... mode = "singles"
... min_seats = 3
... max_seats = 6
... stake = 50
... ''')
>>> lobbies[0].lobby_id, lobbies[0].min_seats, lobbies[0].max_seats, lobbies[0].stake
('elevator', 3, 6, 50)

Every key is checked: an unknown key, a wrong type, a duplicate id or an option the rule book
does not allow is an :class:`~masa_matchmaking.domain.errors.InvalidLobby` naming the lobby, so
a typo never silently becomes a default. The shipped set is ``masa_matchmaking/lobbies.toml``.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import fields
from typing import Any, Final, TypeVar

from masa_rules.table_config import (
    DEFAULT_PRESET,
    BotLevel,
    GameKind,
    GameOptions,
    Mode,
    PayoutRule,
    hosted_games,
)

from masa_matchmaking.domain.errors import InvalidLobby
from masa_matchmaking.domain.lobby import BotFill, Lobby, MatchingPolicy

__all__ = ["MAX_LOBBIES", "parse_lobbies"]

_E = TypeVar("_E", Mode, BotLevel)

MAX_LOBBIES: Final = 200

# What [defaults] may set; a [[lobby]] may set these too, and the rest of _LOBBY_KEYS.
_DEFAULT_KEYS: Final = frozenset(
    {
        "turn_seconds",
        "short_table_after_seconds",
        "ticket_ttl_seconds",
        "bot_fill",
        "autopilot_level",
        "matching",
    }
)
_LOBBY_KEYS: Final = _DEFAULT_KEYS | {
    "id",
    "name",
    "game",
    "preset",
    "mode",
    "seats",
    "min_seats",
    "max_seats",
    "open_threshold",
    "escalating_threshold",
    "hands_per_game",
    "decks",
    "stake",
    "rake_basis_points",
    "place_shares",
}
_BOT_FILL_KEYS: Final = frozenset({"enabled", "fill_after_seconds", "min_players", "level"})
_MATCHING_KEYS: Final = frozenset({"base_spread", "spread_per_second", "open_after_seconds"})
# What a lobby is when the file does not say: the defaults :class:`Lobby` declares.
_LOBBY_DEFAULTS: Final[dict[str, Any]] = {field.name: field.default for field in fields(Lobby)}


def parse_lobbies(text: str) -> tuple[Lobby, ...]:
    """The lobbies of a TOML document, in file order."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise InvalidLobby(f"the lobby file is not TOML: {error}") from None
    unknown = set(document) - {"defaults", "lobby"}
    if unknown:
        raise InvalidLobby(f"the lobby file has unknown tables {sorted(unknown)}")
    defaults = _table(document.get("defaults", {}), "[defaults]")
    _known(defaults, _DEFAULT_KEYS, "[defaults]")
    entries = document.get("lobby", [])
    if not isinstance(entries, list) or not entries:
        raise InvalidLobby("the lobby file defines no [[lobby]]")
    if len(entries) > MAX_LOBBIES:
        raise InvalidLobby(f"the lobby file defines more than {MAX_LOBBIES} lobbies")
    lobbies = tuple(_lobby(_table(entry, "[[lobby]]"), defaults) for entry in entries)
    seen: set[str] = set()
    for lobby in lobbies:
        if lobby.lobby_id in seen:
            raise InvalidLobby(f"lobby {lobby.lobby_id!r} is defined twice")
        seen.add(lobby.lobby_id)
    return lobbies


def _lobby(entry: Mapping[str, Any], defaults: Mapping[str, Any]) -> Lobby:
    lobby_id = _get(entry, "id", str, "[[lobby]]")
    where = f"lobby {lobby_id!r}"
    _known(entry, _LOBBY_KEYS, where)
    merged = {**defaults, **entry}
    seats = merged.get("seats")
    if seats is not None and ("min_seats" in merged or "max_seats" in merged):
        raise InvalidLobby(f"{where}: give seats, or min_seats and max_seats, not both")
    game = _get(merged, "game", str, where)
    if game not in hosted_games():
        raise InvalidLobby(f"{where}: unknown game {game[:32]!r}; use {', '.join(hosted_games())}")
    max_seats = _get(merged, "max_seats", int, where, seats)
    min_seats = _get(merged, "min_seats", int, where, seats if seats is not None else max_seats)
    return Lobby(
        lobby_id=lobby_id,
        display_name=_get(merged, "name", str, where),
        game=game,
        mode=_enum(Mode, _get(merged, "mode", str, where, Mode.SINGLES.value), where, "mode"),
        max_seats=max_seats,
        min_seats=min_seats,
        # 51 without a preset is salon, the platform default (Preset in game.proto).
        preset=_get(
            merged, "preset", str, where, DEFAULT_PRESET if game == GameKind.FIFTYONE else ""
        ),
        options=GameOptions(
            decks=_optional(merged, "decks", int, where),
            open_threshold=_optional(merged, "open_threshold", int, where),
            escalating_threshold=_optional(merged, "escalating_threshold", bool, where),
            hands_per_game=_optional(merged, "hands_per_game", int, where),
        ),
        stake=_get(merged, "stake", int, where, 0),
        payout=PayoutRule(
            rake_basis_points=_get(merged, "rake_basis_points", int, where, 0),
            place_shares=tuple(_ints(merged.get("place_shares", []), where, "place_shares")),
        ),
        turn_seconds=_lobby_number(merged, "turn_seconds", where),
        short_table_after_seconds=_lobby_number(merged, "short_table_after_seconds", where),
        ticket_ttl_seconds=_lobby_number(merged, "ticket_ttl_seconds", where),
        bot_fill=_bot_fill(
            {**_table(defaults.get("bot_fill", {}), where), **_sub(entry, "bot_fill", where)},
            where,
        ),
        autopilot_level=_enum(
            BotLevel,
            _get(merged, "autopilot_level", str, where, _LOBBY_DEFAULTS["autopilot_level"].value),
            where,
            "autopilot level",
        ),
        matching=_matching(
            {**_table(defaults.get("matching", {}), where), **_sub(entry, "matching", where)},
            where,
        ),
    )


def _lobby_number(table: Mapping[str, Any], key: str, where: str) -> float:
    """A lobby's number, or when the file leaves it out the default :class:`Lobby` declares."""
    return _number(table, key, where, _LOBBY_DEFAULTS[key])


def _bot_fill(table: Mapping[str, Any], where: str) -> BotFill:
    _known(table, _BOT_FILL_KEYS, f"{where} bot_fill")
    default = BotFill()
    return BotFill(
        enabled=_get(table, "enabled", bool, where, default.enabled),
        fill_after_seconds=_number(table, "fill_after_seconds", where, default.fill_after_seconds),
        min_players=_get(table, "min_players", int, where, default.min_players),
        level=_enum(
            BotLevel, _get(table, "level", str, where, default.level.value), where, "bot level"
        ),
    )


def _matching(table: Mapping[str, Any], where: str) -> MatchingPolicy:
    _known(table, _MATCHING_KEYS, f"{where} matching")
    default = MatchingPolicy()
    return MatchingPolicy(
        base_spread=_number(table, "base_spread", where, default.base_spread),
        spread_per_second=_number(table, "spread_per_second", where, default.spread_per_second),
        open_after_seconds=_number(table, "open_after_seconds", where, default.open_after_seconds),
    )


def _table(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidLobby(f"{where} must be a table")
    return value


def _sub(entry: Mapping[str, Any], key: str, where: str) -> dict[str, Any]:
    return _table(entry.get(key, {}), f"{where} {key}")


def _known(table: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
    unknown = set(table) - allowed
    if unknown:
        raise InvalidLobby(f"{where}: unknown keys {sorted(unknown)}")


_MISSING: Final = object()


def _get(
    table: Mapping[str, Any], key: str, kind: type, where: str, default: Any = _MISSING
) -> Any:
    value = table.get(key, default)
    if value is _MISSING or value is None:
        raise InvalidLobby(f"{where}: {key} is required")
    # bool is an int in Python; a lobby that says seats = true is a typo, not 1 seat.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise InvalidLobby(f"{where}: {key} must be a {kind.__name__}, not {value!r}")
    return value


def _optional(table: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    return None if key not in table else _get(table, key, kind, where)


def _number(table: Mapping[str, Any], key: str, where: str, default: float) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidLobby(f"{where}: {key} must be a number, not {value!r}")
    return float(value)


def _ints(values: object, where: str, key: str) -> list[int]:
    if not isinstance(values, list) or not all(
        isinstance(value, int) and not isinstance(value, bool) for value in values
    ):
        raise InvalidLobby(f"{where}: {key} must be a list of integers")
    return list(values)


def _enum(kind: type[_E], value: str, where: str, what: str) -> _E:
    try:
        return kind(value)
    except ValueError:
        choices = ", ".join(member.value for member in kind)
        raise InvalidLobby(f"{where}: unknown {what} {value!r}; use {choices}") from None
