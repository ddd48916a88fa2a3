"""``masa_rules`` stays pure: standard library only, no I/O (architecture.md)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "masa_rules"
IO_CALLS = {"open", "print", "input"}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_rules_library_imports_only_the_standard_library_and_itself() -> None:
    allowed = set(sys.stdlib_module_names) | {"masa_rules"}
    offenders = {
        str(path.relative_to(PACKAGE)): sorted(imported_modules(path) - allowed)
        for path in PACKAGE.rglob("*.py")
        if imported_modules(path) - allowed
    }
    assert offenders == {}


def test_rules_library_does_no_io_outside_its_command_line() -> None:
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path.name in {"cli.py", "__main__.py"}:
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in IO_CALLS
            ):
                offenders.append(f"{path.name}:{node.lineno} {node.func.id}()")
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                if any(
                    n.split(".")[0] in {"socket", "subprocess", "os", "pathlib", "io"}
                    for n in names
                ):
                    offenders.append(f"{path.name}:{node.lineno} imports I/O")
    assert offenders == []
