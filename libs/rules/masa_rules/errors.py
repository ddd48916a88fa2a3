"""The one error type of the rules library: every rejection names the rule id it enforces.

>>> error = RuleViolation("F-36", "a taken discard is not discarded again this turn")
>>> error.rule, str(error)
('F-36', 'F-36: a taken discard is not discarded again this turn')
"""

from __future__ import annotations

__all__ = ["IllegalAction", "RuleViolation"]


class RuleViolation(ValueError):
    """Input that a rule forbids. ``rule`` is the rule id (``F-11``, ``E-4``, ``C-1`` ...)."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(f"{rule}: {message}")
        self.rule = rule
        self.message = message


class IllegalAction(RuleViolation):
    """An action an engine rejects; the state it was applied to is unchanged."""
