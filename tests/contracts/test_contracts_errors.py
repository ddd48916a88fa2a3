"""Every ErrorInfo reason the code can raise is a rule id or a value of
masa.common.v1.ErrorReason (without its prefix), so clients can rely on the enum."""

from __future__ import annotations

import re
from pathlib import Path

from masa.common.v1 import error_pb2

ROOT = Path(__file__).resolve().parents[2]
RULE_ID = re.compile(r"[CFEP]-\d+")
# reason="X", reason = "X", reason: str = "X", default_reason ... = "X"; upper case only, as
# lower-case reasons are audit notes (a hold voided as "expired").
REASON_LITERAL = re.compile(
    r"""\b(?:default_)?reason(?:\s*:\s*[\w\[\], ]+)?\s*=\s*"([A-Z][A-Z0-9_-]*)\""""
)
# Reason.X: the refusals' enum (masa_rules.refusals.Reason), which mirrors ErrorReason.
REASON_MEMBER = re.compile(r"\bReason\.([A-Z][A-Z0-9_]*)\b")
PREFIX = "ERROR_REASON_"


def _reasons() -> set[str]:
    return {
        value.name.removeprefix(PREFIX)
        for value in error_pb2.ErrorReason.DESCRIPTOR.values
        if value.number != 0
    }


def _sources() -> list[Path]:
    roots = [ROOT / "libs", ROOT / "services"]
    return [
        path
        for root in roots
        for path in root.rglob("*.py")
        if "tests" not in path.parts and "proto" not in path.relative_to(ROOT).parts[:2]
    ]


def test_error_reasons_are_prefixed_names() -> None:
    names = [value.name for value in error_pb2.ErrorReason.DESCRIPTOR.values]
    assert names[0] == "ERROR_REASON_UNSPECIFIED"
    assert all(name.startswith(PREFIX) for name in names)
    assert {"INSUFFICIENT_FUNDS", "REQUEST_ID_REUSED", "TABLE_MOVED", "OVERLOADED"} <= _reasons()


def test_every_reason_the_code_raises_is_in_the_enum() -> None:
    known = _reasons()
    found: dict[str, list[str]] = {}
    for path in _sources():
        text = path.read_text(encoding="utf-8")
        for pattern in (REASON_LITERAL, REASON_MEMBER):
            for match in pattern.finditer(text):
                found.setdefault(match.group(1), []).append(str(path.relative_to(ROOT)))
    assert "INSUFFICIENT_FUNDS" in found, "the scan finds the ledger's reasons"
    unknown = {
        reason: paths
        for reason, paths in found.items()
        if reason not in known and RULE_ID.fullmatch(reason) is None
    }
    assert not unknown, f"reasons missing from masa.common.v1.ErrorReason: {unknown}"


def test_the_wire_library_default_reason_is_in_the_enum() -> None:
    source = (ROOT / "libs" / "wire" / "masa_wire" / "errors.py").read_text(encoding="utf-8")
    default = re.search(r'reason: str = "([A-Z_]+)"', source)
    assert default is not None
    assert default.group(1) in _reasons()
