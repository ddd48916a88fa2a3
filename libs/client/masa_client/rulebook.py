"""One line per rule id of docs/rules.md, so a client can say what a rejected move broke.

The lines are in ``rulebook.json`` beside this module, which the web client bundles too, so
the terminal and the browser say the same thing.

The server's error names the rule (the ``ErrorInfo`` reason) and says what went wrong in this
case; this glossary adds what the rule is about, for players who do not know the book by id.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Final

__all__ = ["RULES", "meaning"]

# The glossary itself is data shared with the web client (clients/web/src/rulebook.ts).
RULES: Final[dict[str, str]] = json.loads(
    resources.files(__package__).joinpath("rulebook.json").read_text(encoding="utf-8")
)


def meaning(rule: str) -> str:
    """What ``rule`` is about, or ``""`` for an id the glossary does not know.

    >>> meaning("E-4")
    'play the opposite colour, strictly higher going up or strictly lower going down'
    """
    return RULES.get(rule, "")
