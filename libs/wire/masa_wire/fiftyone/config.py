"""A 51 lobby's configuration (P-2, rules.md §2.9) from ``masa.common.v1.TableConfig``.

The options are checked by :func:`masa_rules.table_config.fiftyone_rules`, the one place that
turns a table's preset and options into a rule set; this module only reads them off the
message, through :mod:`masa_wire.table_config`.
"""

from __future__ import annotations

from masa.common.v1 import game_pb2
from masa_rules.errors import RuleViolation
from masa_rules.ruleset import RuleSet
from masa_rules.table_config import GameKind, fiftyone_rules

from masa_wire.errors import WireError
from masa_wire.table_config import options_from_proto, preset_from_proto

__all__ = ["rules_from_config"]


def rules_from_config(config: game_pb2.TableConfig) -> tuple[RuleSet, int | None]:
    """The rule set of a 51 lobby and the number of hands it plays (or caps, F-96).

    Raises :class:`WireError` with the rule id for an option the preset does not allow.
    """
    preset = preset_from_proto(config.preset)
    options = options_from_proto(config.options, GameKind.FIFTYONE)
    try:
        return fiftyone_rules(preset, options)
    except RuleViolation as error:
        raise WireError(error.message, error.rule) from None
