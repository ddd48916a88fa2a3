"""A 51 lobby's configuration (P-2, rules.md §2.9) from ``masa.common.v1.TableConfig``.

The options are checked by :func:`masa_rules.lobby.lobby_rules`, the one place that turns
lobby options into a rule set; this module only reads them off the message.
"""

from __future__ import annotations

from typing import Final

from masa.common.v1 import game_pb2
from masa_rules.errors import RuleViolation
from masa_rules.lobby import LobbyOptions, lobby_rules
from masa_rules.ruleset import RuleSet

from masa_wire.errors import WireError

__all__ = ["rules_from_config"]

_PRESET: Final = {
    game_pb2.PRESET_UNSPECIFIED: "salon",
    game_pb2.PRESET_CLASSIC: "classic",
    game_pb2.PRESET_SALON: "salon",
    game_pb2.PRESET_REMI: "remi",
}


def rules_from_config(config: game_pb2.TableConfig) -> tuple[RuleSet, int | None]:
    """The rule set of a 51 lobby and the number of hands it plays (or caps, F-96).

    Raises :class:`WireError` with the rule id for an option the preset does not allow.
    """
    preset = _PRESET.get(config.preset)
    if preset is None:
        raise WireError(f"unknown preset {config.preset}", "F-2")
    options = config.options.fiftyone
    lobby = LobbyOptions(
        preset=preset,
        open_threshold=(options.open_threshold if options.HasField("open_threshold") else None),
        escalating_threshold=(
            options.escalating_threshold if options.HasField("escalating_threshold") else None
        ),
        hands_per_game=(options.hands_per_game if options.HasField("hands_per_game") else None),
    )
    try:
        return lobby_rules(lobby)
    except RuleViolation as error:
        raise WireError(error.message, error.rule) from None
