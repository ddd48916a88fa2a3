"""The Decide use case: run a level's decider within the time budget, never stall a table.

The decider is pure but may be slow (the 51 solver on a dense hand), so it runs in a worker
thread and the event loop keeps serving other tables. If it overruns the budget the decision
falls back to the easy level, which is a single weighted draw and always fast: a bot seat or
an autopilot turn must get *some* legal move in time (P-10, P-11).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Protocol, TypeVar

from masa_rules.table_config import BotLevel

from masa_bot.domain import Decision

__all__ = ["DecideUseCase", "DecisionRecorder"]

ActionT = TypeVar("ActionT")

_log = logging.getLogger(__name__)


class DecisionRecorder(Protocol):
    """Where decisions are counted and timed (Prometheus in the service, a list in tests)."""

    def record(self, game: str, level: BotLevel, seconds: float) -> None: ...


class DecideUseCase:
    """Decide for one seat; ``default_budget_seconds`` applies when the request sets none."""

    def __init__(self, recorder: DecisionRecorder, *, default_budget_seconds: float) -> None:
        self._recorder = recorder
        self._default_budget = default_budget_seconds

    async def decide(
        self,
        game: str,
        level: BotLevel,
        decider: Callable[[BotLevel], Decision[ActionT]],
        *,
        budget_seconds: float | None = None,
    ) -> Decision[ActionT]:
        budget = budget_seconds if budget_seconds and budget_seconds > 0 else self._default_budget
        started = time.perf_counter()
        try:
            decision = await asyncio.wait_for(asyncio.to_thread(decider, level), budget)
        except TimeoutError:
            _log.warning(
                "decision over budget, falling back to easy",
                extra={"game": game, "level": level.value, "budget_seconds": budget},
            )
            level = BotLevel.EASY
            decision = decider(BotLevel.EASY)
        self._recorder.record(game, level, time.perf_counter() - started)
        return decision
