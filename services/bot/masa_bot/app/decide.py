"""The Decide use case: run a level's decider within the time budget, never stall a table.

The decider is pure but may be slow (the 51 solver on a dense hand, the ``hard`` search), so it
runs in a worker thread of the use case's own pool and the event loop keeps serving other
tables. A search is given until ``search_budget_seconds`` after the request arrived (at most
:data:`SEARCH_SHARE` of the request's budget, the rest for the conversions and the answer) and
keeps the best move found when it is up. Searches hold the interpreter lock for as long as they
run, so at most ``search_slots`` run at once: more would only split the same core between
them and starve the event loop that answers every call. A ``hard`` decision that finds no slot
free before its deadline plays ``normal`` (recorded so). If a decider overruns the whole
budget the decision falls back to a fast level (``hard`` to ``normal``, ``normal`` to
``easy``, a single weighted draw): a bot seat or an autopilot turn must get *some* legal move
in time (P-10, P-11).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Final, Protocol, TypeVar

from masa_rules.table_config import BotLevel

from masa_bot.domain import Decision

__all__ = ["SEARCH_SHARE", "DecideUseCase", "DecisionRecorder", "LevelDecider"]

ActionT = TypeVar("ActionT")

# A decider: the level, then the seconds it may search for (only ``hard`` reads them).
LevelDecider = Callable[[BotLevel, float], Decision[ActionT]]

# The share of a request's budget a search may spend.
SEARCH_SHARE: Final = 0.8
# The fast level to play when a decider overran its budget.
_FALLBACK: Final = {
    BotLevel.HARD: BotLevel.NORMAL,
    BotLevel.NORMAL: BotLevel.EASY,
    BotLevel.EASY: BotLevel.EASY,
}
# The least time worth searching for.
_MIN_SEARCH_SECONDS: Final = 0.02
# Searches in many threads share one interpreter lock; switching every half millisecond
# (Python's default: 5 ms) lets each look at its clock often enough to answer on time.
_SWITCH_INTERVAL_SECONDS: Final = 0.0005

_log = logging.getLogger(__name__)


class DecisionRecorder(Protocol):
    """Where decisions are counted and timed (Prometheus in the service, a list in tests)."""

    def record(self, game: str, level: BotLevel, seconds: float) -> None: ...


class DecideUseCase:
    """Decide for one seat; ``default_budget_seconds`` applies when the request sets none."""

    def __init__(
        self,
        recorder: DecisionRecorder,
        *,
        default_budget_seconds: float,
        search_budget_seconds: float = 0.2,
        search_slots: int = 2,
        workers: int = 16,
    ) -> None:
        self._recorder = recorder
        self._default_budget = default_budget_seconds
        self._search_budget = search_budget_seconds
        self._searches = asyncio.Semaphore(search_slots)
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="decide")
        sys.setswitchinterval(min(sys.getswitchinterval(), _SWITCH_INTERVAL_SECONDS))

    async def decide(
        self,
        game: str,
        level: BotLevel,
        decider: LevelDecider[ActionT],
        *,
        budget_seconds: float | None = None,
    ) -> Decision[ActionT]:
        budget = budget_seconds if budget_seconds and budget_seconds > 0 else self._default_budget
        started = time.monotonic()
        search_until = started + min(self._search_budget, budget * SEARCH_SHARE)
        searching = level is BotLevel.HARD and await self._search_slot(search_until)
        if level is BotLevel.HARD and not searching:
            level = _FALLBACK[level]

        def run(level: BotLevel) -> tuple[Decision[ActionT], BotLevel]:
            left = search_until - time.monotonic()
            if level is BotLevel.HARD and left < _MIN_SEARCH_SECONDS:
                # A few play-outs choose worse than the greedy policy they play out.
                level = _FALLBACK[level]
            return decider(level, max(0.0, left)), level

        loop = asyncio.get_running_loop()
        try:
            left = budget - (time.monotonic() - started)
            decision, level = await asyncio.wait_for(
                loop.run_in_executor(self._executor, run, level), left
            )
        except TimeoutError:
            fallback = _FALLBACK[level]
            _log.warning(
                "decision over budget, falling back",
                extra={
                    "game": game,
                    "level": level.value,
                    "fallback": fallback.value,
                    "budget_seconds": budget,
                },
            )
            level = fallback
            decision = decider(fallback, 0.0)
        finally:
            if searching:
                self._searches.release()
        self._recorder.record(game, level, time.monotonic() - started)
        return decision

    async def _search_slot(self, deadline: float) -> bool:
        """Take a search slot, waiting at most until ``deadline``; whether one was taken."""
        if not self._searches.locked():
            await self._searches.acquire()
            return True
        try:
            await asyncio.wait_for(self._searches.acquire(), deadline - time.monotonic())
        except TimeoutError:
            return False
        return True
