"""The Decide use case: run a level's decider within the time budget, never stall a table.

The decider is pure but may be slow (the 51 solver on a dense hand, the ``hard`` search), so it
never runs on the event loop. ``hard`` searches run in the ``searchers`` executor the service
gives (worker processes: a search holds the interpreter lock for as long as it runs, and in a
thread it would starve the event loop that answers every call), one per worker at a time;
the other levels run in a small pool of threads. A search is given until
:data:`SEARCH_SHARE` of ``search_budget_seconds`` (or of the request's budget, if shorter)
after the request arrived, the rest being for the conversions and the answer, and keeps the
best move found when it is up; its answer is awaited for the search budget at most. A ``hard``
decision that could not get a search slot before its deadline, or gets one with under
:data:`MIN_SEARCH_SECONDS` left, plays ``normal`` (and is recorded so). If a decider overruns
its time the decision falls back to a fast level (``hard`` to ``normal``, ``normal`` to
``easy``, a single weighted draw): a bot seat or an autopilot turn must get *some* legal move
in time (P-10, P-11).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from concurrent.futures import BrokenExecutor, Executor, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Final, Protocol

from masa_rules.table_config import BotLevel

from masa_bot.domain import Decision
from masa_bot.domain.games import Decider

__all__ = ["MIN_SEARCH_SECONDS", "SEARCH_SHARE", "DecideUseCase", "DecisionRecorder", "Job"]

# The share of a request's budget a search may spend.
SEARCH_SHARE: Final = 0.8
# The least time worth searching for: a few play-outs choose worse than the greedy policy
# they play out.
MIN_SEARCH_SECONDS: Final = 0.02
# The fast level to play when a decider overran its budget.
_FALLBACK: Final = {
    BotLevel.HARD: BotLevel.NORMAL,
    BotLevel.NORMAL: BotLevel.EASY,
    BotLevel.EASY: BotLevel.EASY,
}

# How long hard plays normal after the search workers could not be started.
_RETRY_SECONDS: Final = 30.0

_log = logging.getLogger(__name__)


def _started() -> bool:
    """A search worker's answer to "are you there" (it ran its initializer)."""
    return True


class DecisionRecorder(Protocol):
    """Where decisions are counted and timed (Prometheus in the service, a list in tests)."""

    def record(self, game: str, level: BotLevel, seconds: float) -> None: ...


@dataclass(frozen=True, slots=True)
class Job:
    """One decision to make: a game's registered decider and what it reads. Every part can be
    sent to a worker process (the decider is a module-level function)."""

    decider: Decider
    state: object
    seat: int
    seed: bytes


def run_job(job: Job, level: BotLevel, search_until: float) -> tuple[Decision[object], BotLevel]:
    """Decide ``job`` at ``level``, searching until ``search_until`` (``time.monotonic``, one
    clock for every process of the machine); the decision and the level it was made at."""
    left = search_until - time.monotonic()
    if level is BotLevel.HARD and left < MIN_SEARCH_SECONDS:
        level = _FALLBACK[level]
    return job.decider(job.state, job.seat, level, job.seed, max(0.0, left)), level


class DecideUseCase:
    """Decide for one seat; ``default_budget_seconds`` applies when the request sets none."""

    def __init__(
        self,
        recorder: DecisionRecorder,
        *,
        default_budget_seconds: float,
        searchers: Callable[[], Executor],
        search_slots: int,
        search_budget_seconds: float = 0.2,
        workers: int = 16,
    ) -> None:
        self._recorder = recorder
        self._default_budget = default_budget_seconds
        self._search_budget = search_budget_seconds
        self._new_searchers = searchers
        # None while no pool could be started: hard plays normal until the next try.
        self._searchers: Executor | None = None
        self._retry_at = 0.0
        self._start_searchers()
        self._searches = asyncio.Semaphore(search_slots)
        # When each running search ends, and how many decisions wait for a slot: a decision
        # that could not get one before its deadline plays normal at once instead of waiting.
        self._search_ends: list[float] = []
        self._waiting = 0
        self._threads = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="decide")

    async def decide(
        self, game: str, level: BotLevel, job: Job, *, budget_seconds: float | None = None
    ) -> Decision[object]:
        budget = budget_seconds if budget_seconds and budget_seconds > 0 else self._default_budget
        started = time.monotonic()
        # The whole decision answers within the search budget (or the request's, if shorter):
        # the search takes its share, the rest is for the conversions and the answer.
        search_until = started + SEARCH_SHARE * min(self._search_budget, budget)
        searchers = self._searchers or self._start_searchers()
        searching = (
            level is BotLevel.HARD
            and searchers is not None
            and await self._search_slot(search_until - MIN_SEARCH_SECONDS)
        )
        if level is BotLevel.HARD and not searching:
            level = _FALLBACK[level]
        executor = searchers if searching and searchers is not None else self._threads
        # A search's answer is awaited no longer than the search budget: a worker that is not
        # there (still starting, replaced) must not hold the decision to the whole budget,
        # which is the caller's deadline too.
        wait_until = started + (min(self._search_budget, budget) if searching else budget)
        loop = asyncio.get_running_loop()
        try:
            running = executor.submit(run_job, job, level, search_until)
            if searching:
                # The slot is free when the search ends, not when the call stops waiting for
                # it: a search past its caller's budget still holds its worker.
                self._search_ends.append(search_until)
                running.add_done_callback(lambda _: self._free_slot(loop, search_until))
                searching = False
            left = wait_until - time.monotonic()
            decision, level = await asyncio.wait_for(asyncio.wrap_future(running), max(left, 0.001))
        except (TimeoutError, BrokenExecutor) as failed:
            if isinstance(failed, BrokenExecutor):
                # A search worker died (killed, out of memory): start others for the next
                # searches, and answer this one at the fast level.
                _log.error("search workers broken, starting new ones", extra={"game": game})
                self._renew(executor)
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
            decision = job.decider(job.state, job.seat, fallback, job.seed, 0.0)
        finally:
            if searching:
                # Never submitted (the pool was broken): nothing will free the slot but this.
                self._searches.release()
        self._recorder.record(game, level, time.monotonic() - started)
        return decision

    async def ready(self, timeout: float) -> bool:
        """Wait until the search workers answer (they start with the service), at most
        ``timeout`` seconds; whether they did. Until they do, hard decisions play normal."""
        searchers = self._searchers
        if searchers is None:
            return False
        try:
            await asyncio.wait_for(asyncio.wrap_future(searchers.submit(_started)), timeout)
        except (TimeoutError, BrokenExecutor):
            return False
        return True

    def close(self) -> None:
        """Stop the workers: running searches end by their own deadlines."""
        if self._searchers is not None:
            self._searchers.shutdown(wait=False, cancel_futures=True)
        self._threads.shutdown(wait=False, cancel_futures=True)

    def _start_searchers(self) -> Executor | None:
        """A new pool of search workers, unless the last try failed less than
        :data:`_RETRY_SECONDS` ago (a start that fails, out of processes or memory, is retried
        then, and hard plays normal meanwhile)."""
        if time.monotonic() < self._retry_at:
            return None
        try:
            self._searchers = self._new_searchers()
        except OSError:
            _log.exception("search workers could not start; hard plays normal for a while")
            self._searchers, self._retry_at = None, time.monotonic() + _RETRY_SECONDS
        return self._searchers

    def _free_slot(self, loop: asyncio.AbstractEventLoop, until: float) -> None:
        # Called in the executor's thread when a search ends.
        with contextlib.suppress(RuntimeError):  # the loop closed: nothing waits for a slot
            loop.call_soon_threadsafe(self._search_ended, until)

    def _search_ended(self, until: float) -> None:
        self._search_ends.remove(until)
        self._searches.release()

    def _renew(self, broken: Executor) -> None:
        if broken is self._searchers:
            broken.shutdown(wait=False, cancel_futures=True)
            self._searchers = None
            self._start_searchers()

    async def _search_slot(self, deadline: float) -> bool:
        """Take a search slot, waiting at most until ``deadline``; whether one was taken.

        Slots go to the waiting decisions in turn as the running searches end, each at its
        own deadline: when the slot this one would get frees after ``deadline``, it does not
        wait at all (a burst of decisions is answered at once, not at its deadline)."""
        if not self._searches.locked():
            await self._searches.acquire()
            return True
        ends = sorted(self._search_ends)
        now = time.monotonic()
        # A search already past its planned end (its worker was late) ends at no known time.
        if now >= deadline or self._waiting >= len(ends):
            return False
        if not now < ends[self._waiting] <= deadline:
            return False
        wait = deadline - now
        self._waiting += 1
        try:
            await asyncio.wait_for(self._searches.acquire(), wait)
        except TimeoutError:
            return False
        finally:
            self._waiting -= 1
        return True
