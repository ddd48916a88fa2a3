"""Lobby options to a 51 rule set, and who may sit at a table with a stake: the one place
where they are read and checked (P-2, §2.9, P-13).

A lobby (the table engine's configuration, the wire's ``FiftyOneOptions``, a matchmaking
queue) names a preset and may change a few options; :func:`lobby_rules` turns them into the
:class:`~masa_rules.ruleset.RuleSet` the engine plays and the number of hands, and refuses any
value the rule book does not allow with a :class:`~masa_rules.errors.RuleViolation` naming
the rule. :func:`check_chip_seating` refuses bots at a table with a stake, for a matchmaking
lobby that would fill its tables with bots as for a table the engine is asked to create.

>>> rules, hands = lobby_rules(LobbyOptions("classic", open_threshold=81, hands_per_game=9))
>>> rules.open_threshold, rules.hands_per_game, hands
(81, 9, 9)
>>> lobby_rules(LobbyOptions("remi", escalating_threshold=True))
Traceback (most recent call last):
...
masa_rules.errors.RuleViolation: F-41: remi tables never escalate the threshold
>>> check_chip_seating(20, bots=True)
Traceback (most recent call last):
...
masa_rules.errors.RuleViolation: P-13: bots never sit at a table with a stake (20 chips)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from masa_rules.errors import RuleViolation
from masa_rules.ruleset import GameLength, RuleSet

__all__ = ["MAX_HANDS_PER_GAME", "PRESETS", "LobbyOptions", "check_chip_seating", "lobby_rules"]

PRESETS: Final = ("classic", "salon", "remi")
# F-95 (decision): tables choose 9, 11 or 13 hands and any odd number is allowed; a lobby may
# not ask for more than this (a game must end in reasonable time), nor an elimination cap above.
MAX_HANDS_PER_GAME: Final = 25


@dataclass(frozen=True, slots=True)
class LobbyOptions:
    """What a 51 lobby fixes; None keeps the preset's default.

    ``hands_per_game`` is the game length of classic and remi (F-95, an odd number); in
    salon, whose game is an elimination (F-96), it caps the number of hands instead.
    """

    preset: str = "salon"
    open_threshold: int | None = None
    escalating_threshold: bool | None = None
    hands_per_game: int | None = None


def lobby_rules(options: LobbyOptions) -> tuple[RuleSet, int | None]:
    """The rule set of a lobby and the hands its game plays (F-95) or at most plays (F-96).

    Raises :class:`~masa_rules.errors.RuleViolation` with the rule id for an unknown preset
    (F-2), a threshold the preset does not allow (F-40), an escalating remi table (F-41) or a
    number of hands out of range (F-95, F-96).
    """
    if options.preset not in PRESETS:
        raise RuleViolation("F-2", f"unknown preset {options.preset!r}; use {', '.join(PRESETS)}")
    changes: dict[str, object] = {}
    if options.open_threshold is not None:
        changes["open_threshold"] = options.open_threshold
    if options.escalating_threshold is not None:
        changes["escalating_threshold"] = options.escalating_threshold
    rules = RuleSet.preset_named(options.preset, **changes)
    if rules.escalating_threshold and options.preset == "remi":
        raise RuleViolation("F-41", "remi tables never escalate the threshold")
    hands = options.hands_per_game
    if hands is None:
        return rules, None
    _check_hands(rules, hands)
    if rules.game_length is GameLength.HANDS:
        rules = rules.with_options(hands_per_game=hands)
    return rules, hands


def _check_hands(rules: RuleSet, hands: int) -> None:
    elimination = rules.game_length is GameLength.ELIMINATION
    rule = "F-96" if elimination else "F-95"
    if not 1 <= hands <= MAX_HANDS_PER_GAME:
        raise RuleViolation(rule, f"hands_per_game must be 1 to {MAX_HANDS_PER_GAME}, not {hands}")
    if not elimination and hands % 2 == 0:
        raise RuleViolation(rule, f"a {rules.preset} game is an odd number of hands, not {hands}")


def check_chip_seating(stake: int, *, bots: bool) -> None:
    """P-13: a table with a stake seats players only; ``bots`` says whether bots would sit.

    Bots stake nothing, so a bot at a chip table would let a player alone win back their own
    stake. Bots play training tables, and the seats of players on autopilot or forfeited
    (P-11, P-12), which this does not concern.
    """
    if stake > 0 and bots:
        raise RuleViolation("P-13", f"bots never sit at a table with a stake ({stake} chips)")
