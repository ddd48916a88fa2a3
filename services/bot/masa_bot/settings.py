"""The bot's settings, read once from ``MASA_*`` (architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass, field

from masa_platform.settings import PlatformSettings, SettingsError

__all__ = ["BotSettings"]


@dataclass(frozen=True, slots=True)
class BotSettings:
    """The platform settings plus ``MASA_DECIDE_BUDGET_SECONDS``.

    The budget applies when a request sets no ``time_budget``; it stays well inside the
    default 20 s turn (P-10), so a slow decision falls back to the easy level long before a
    turn could time out.
    """

    platform: PlatformSettings = field(default_factory=PlatformSettings)
    decide_budget_seconds: float = 1.0

    def __post_init__(self) -> None:
        if self.decide_budget_seconds <= 0:
            raise SettingsError("MASA_DECIDE_BUDGET_SECONDS must be positive")
