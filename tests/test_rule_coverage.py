"""Every rule of the rule book is named by at least one test, and the book in the repository
is complete.

Rule ids are read from ``docs/rules.md``, the rule book inside the repository, where each rule
starts with its id in bold (``**F-32**``). A test names a rule by its id in the test name
(``test_F32_...``, ``test_E5_...``) or in its docstring (``F-32``). When
``MASA_RULES_SPECIFICATION`` names a specification the book follows (the rule text the project
agreed on, in the same ``**F-32**`` form), the book must name every one of its ids too.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "docs" / "rules.md"
SPECIFICATION = Path(os.environ.get("MASA_RULES_SPECIFICATION", ROOT / "docs" / "rules.md"))
RULE_ID = re.compile(r"\*\*([CFEP]-\d+r?)\*\*")
# The platform rules (P-…) are covered by the service tests; the rules library covers these.
LIBRARY_PREFIXES = ("C-", "F-", "E-")


def rule_ids(book: Path) -> list[str]:
    return sorted(
        set(RULE_ID.findall(book.read_text())), key=lambda r: (r[0], int(re.sub(r"\D", "", r)))
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


def test_the_rule_book_has_every_section_of_rules() -> None:
    ids = rule_ids(BOOK)
    for prefix, first in (("C-", "C-1"), ("F-", "F-1"), ("E-", "E-11"), ("P-", "P-31")):
        assert first in ids, f"{first} is missing from docs/rules.md"
        assert sum(r.startswith(prefix) for r in ids) >= 4


def test_every_card_51_and_elevator_rule_is_named_by_a_test() -> None:
    missing = [r for r in rule_ids(BOOK) if r.startswith(LIBRARY_PREFIXES) and r not in named_ids()]
    assert missing == []


@pytest.mark.skipif(
    not SPECIFICATION.is_file(), reason="MASA_RULES_SPECIFICATION names no file to compare"
)
def test_the_rule_book_names_every_rule_of_the_shared_specification() -> None:
    missing = sorted(set(rule_ids(SPECIFICATION)) - set(rule_ids(BOOK)))
    assert missing == []
