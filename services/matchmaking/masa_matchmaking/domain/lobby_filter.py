"""The AIP-160 filter of ListLobbies: comparisons of game, preset, mode and stake, joined by AND.

>>> matches = parse_filter('game = ELEVATOR AND stake <= 50')
>>> from masa_matchmaking.domain.lobby import Lobby
>>> from masa_rules.table_config import GameKind, Mode
>>> matches(Lobby("e", "E", GameKind.ELEVATOR, Mode.SINGLES, 6, 3, stake=20))
True

Enum values may be written bare (``ELEVATOR``), with the proto prefix (``GAME_KIND_ELEVATOR``),
in any case, or quoted. Anything else (OR, NOT, parentheses, another field, an operator a
field does not have) is refused with :class:`~masa_matchmaking.domain.errors.BadInput`, never
read loosely.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from typing import Any, Final

from masa_rules.table_config import hosted_games

from masa_matchmaking.domain.errors import BadInput
from masa_matchmaking.domain.lobby import Lobby

__all__ = ["MAX_FILTER_LENGTH", "parse_filter"]

MAX_FILTER_LENGTH: Final = 500
_COMPARISON: Final = re.compile(r'^\s*(\w+)\s*(<=|>=|!=|=|<|>)\s*("[^"]*"|[\w-]+)\s*$')
_OPERATORS: Final[dict[str, Callable[[Any, Any], bool]]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_PREFIXES: Final = {"game": "GAME_KIND_", "preset": "PRESET_", "mode": "MODE_"}
# The games are every hosted game's name (masa_rules.table_config.hosted_games).
_ENUMS: Final = {
    "game": frozenset(),
    "preset": frozenset({"CLASSIC", "SALON", "REMI", "UNSPECIFIED"}),
    "mode": frozenset({"SINGLES", "TEAMS", "TRAINING"}),
}

Predicate = Callable[[Lobby], bool]


def parse_filter(text: str) -> Predicate:
    """A predicate over lobbies; an empty filter matches every lobby."""
    if len(text) > MAX_FILTER_LENGTH:
        raise BadInput(f"a filter is at most {MAX_FILTER_LENGTH} characters")
    if not text.strip():
        return lambda lobby: True
    predicates = [_comparison(part) for part in re.split(r"\s+AND\s+", text.strip())]
    return lambda lobby: all(predicate(lobby) for predicate in predicates)


def _comparison(part: str) -> Predicate:
    found = _COMPARISON.fullmatch(part)
    if found is None:
        raise BadInput(
            f"cannot read the filter term {part.strip()!r}: write field op value, "
            "joined by AND (game, preset, mode: = !=; stake: = != < <= > >=)"
        )
    field, op, raw = found.groups()
    compare = _OPERATORS[op]
    value = raw.strip('"')
    if field == "stake":
        try:
            amount = int(value)
        except ValueError:
            raise BadInput(f"stake is compared with a whole number, not {value!r}") from None
        return lambda lobby: compare(lobby.stake, amount)
    if field not in _ENUMS:
        raise BadInput(f"lobbies are filtered on game, preset, mode and stake, not {field!r}")
    if op not in ("=", "!="):
        raise BadInput(f"{field} is compared with = or != only")
    name = value.upper().removeprefix(_PREFIXES[field])
    known = _ENUMS[field] if field != "game" else {game.upper() for game in hosted_games()}
    if name not in known:
        raise BadInput(f"unknown {field} {value!r}; use {', '.join(sorted(known))}")
    return lambda lobby: compare(_enum_name(lobby, field), name)


def _enum_name(lobby: Lobby, field: str) -> str:
    if field == "game":
        return lobby.game.upper()
    if field == "mode":
        return lobby.mode.value.upper()
    return (lobby.preset or "unspecified").upper()
