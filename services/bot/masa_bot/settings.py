"""The bot's settings, read once from ``MASA_*`` (architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from masa_platform.settings import PlatformSettings, SettingsError

__all__ = ["BotSettings"]

# A search longer than this would hold a turn timer's seconds (P-10) for little gain.
_MAX_SEARCH_SECONDS: Final = 10.0
_MAX_WORKERS: Final = 1024
# A worker process each: more than the cores of a large machine buys nothing.
_MAX_SEARCH_SLOTS: Final = 64


@dataclass(frozen=True, slots=True)
class BotSettings:
    """The platform settings plus ``MASA_DECIDE_BUDGET_SECONDS``, ``MASA_SEARCH_BUDGET_SECONDS``,
    ``MASA_SEARCH_SLOTS`` and ``MASA_DECIDE_WORKERS``.

    The decide budget applies when a request sets no ``time_budget``; it stays well inside the
    default 20 s turn (P-10), so a slow decision falls back to a fast level long before a turn
    could time out. The ``hard`` level searches for the search budget (200 ms, and never more
    than 80% of the request's budget) counted from the request's arrival, in ``search_slots``
    worker processes (one search each at a time: one per core the event loop does not need; a
    decision that finds none free before its deadline plays ``normal``); the decide workers
    are the threads the other levels run in.
    """

    platform: PlatformSettings = field(default_factory=PlatformSettings)
    decide_budget_seconds: float = 1.0
    search_budget_seconds: float = 0.2
    search_slots: int = 1
    decide_workers: int = 16

    def __post_init__(self) -> None:
        if self.decide_budget_seconds <= 0:
            raise SettingsError("MASA_DECIDE_BUDGET_SECONDS must be positive")
        if not 0 < self.search_budget_seconds <= _MAX_SEARCH_SECONDS:
            raise SettingsError(
                f"MASA_SEARCH_BUDGET_SECONDS must be above 0 and at most {_MAX_SEARCH_SECONDS}"
            )
        if not 1 <= self.decide_workers <= _MAX_WORKERS:
            raise SettingsError(f"MASA_DECIDE_WORKERS must be 1 to {_MAX_WORKERS}")
        if not 1 <= self.search_slots <= _MAX_SEARCH_SLOTS:
            raise SettingsError(f"MASA_SEARCH_SLOTS must be 1 to {_MAX_SEARCH_SLOTS}")
