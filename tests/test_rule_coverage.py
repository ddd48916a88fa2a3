"""Every rule of the rule book is named by at least one test (RULES.md, "Tests should name ...").

Rule ids are read from ``../shared/RULES.md``; a test names a rule by its id in the test name
(``test_F32_...``, ``test_E5_...``) or in its docstring (``F-32``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT.parent / "shared" / "RULES.md"
RULE_ID = re.compile(r"\*\*([CFEP]-\d+r?)\*\*")
# The platform rules (P-…) are covered by the service issues; the library covers these.
LIBRARY_PREFIXES = ("C-", "F-", "E-")


def rule_ids() -> list[str]:
    return sorted(
        set(RULE_ID.findall(RULES.read_text())), key=lambda r: (r[0], int(re.sub(r"\D", "", r)))
    )


def named_ids() -> set[str]:
    found: set[str] = set()
    for path in ROOT.glob("**/test_*.py"):
        if ".venv" in path.parts:
            continue
        text = path.read_text()
        for prefix, number, suffix in re.findall(
            r"\b(?:test_)?([CFEP])-?(\d+)(r?)(?=[_\s:,.)\-]|$)", text
        ):
            found.add(f"{prefix}-{number}{suffix}")
    return found


@pytest.mark.skipif(not RULES.exists(), reason="the shared rule book is not beside this checkout")
def test_every_card_51_and_elevator_rule_is_named_by_a_test() -> None:
    missing = [r for r in rule_ids() if r.startswith(LIBRARY_PREFIXES) and r not in named_ids()]
    assert missing == []
