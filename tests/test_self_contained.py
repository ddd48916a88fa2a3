"""The clone is the whole story: nothing in the repository cites a document that is not in it.

The project began from documents kept outside the repository (a first design and a rule
specification); the rule book (``docs/rules.md``) and the architecture (``docs/architecture.md``)
now say what they said, in the project's own words. A reference to those outside names, or a
relative link in the docs to a file that does not exist, leaves a reader who has only a clone
with nothing to follow.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Names of the documents outside the repository, and a path that climbs out of it.
OUTSIDE = re.compile(r"\b(?:DESIGN|RULES|STYLE)\.md\b|\.\./shared\b")
# Markdown links to a relative path: [text](path) or [text](path#anchor).
LINK = re.compile(r"\]\((?!https?:|mailto:|#)([^)\s#]+)(?:#[^)]*)?\)")
TEXT_SUFFIXES = {".py", ".md", ".proto", ".toml", ".yaml", ".yml", ".sh", ".ts", ".json", ".cfg"}


def tracked() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [ROOT / name for name in listed if Path(name).suffix in TEXT_SUFFIXES or "/" not in name]


def test_no_file_cites_a_document_outside_the_repository() -> None:
    this = Path(__file__).resolve()
    cited = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in tracked()
        if path.resolve() != this and path.is_file()
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert cited == []


def test_every_relative_link_in_the_docs_leads_to_a_file_of_the_repository() -> None:
    broken = [
        f"{path.relative_to(ROOT)}: {target}"
        for path in tracked()
        if path.suffix == ".md" and path.is_file()
        for target in LINK.findall(path.read_text())
        if not (path.parent / target).resolve().exists()
    ]
    assert broken == []
