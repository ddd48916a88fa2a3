"""What the session's stack fixture (``conftest.running_stack``) hands the end-to-end tests.

(Kept out of conftest.py so that tests import it by a unique name.)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Stack:
    """A running stack: service addresses by name, its run folder, what the launcher printed."""

    addresses: dict[str, str]
    run_dir: Path
    printed: Path
