"""How fast a load run acts: a cap that no burst can break, and human think times.

:class:`RateCap` lets sends go one at a time, in the order asked, across every table of the
run, each due one gap (``1 / rate``) after the one before was due. A send the event loop woke
late for, by up to half a gap, is caught up on, so that late timers do not pull the run below
its rate: asyncio's loop wakes a sleeper up to a millisecond late, which held a 300/s cap at
235/s. A send later than that starts the schedule afresh instead of bursting to catch up. So
however the tables' schedules line up, or however late a waiter is woken, no window of a second
sends more than ``rate`` actions (plus the one that opens it).

The times are read on ``time.monotonic``, not on the event loop's clock: uvloop's clock moves
in whole milliseconds and is read once per loop iteration.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass

__all__ = ["RateCap", "ThinkTime"]


class RateCap:
    """At most ``rate`` sends a second across every caller (``None``: no cap)."""

    def __init__(self, rate: float | None) -> None:
        if rate is not None and rate <= 0:
            raise ValueError("a rate cap must be positive")
        self._gap = 1.0 / rate if rate else 0.0
        self._due = float("-inf")
        self._lock = asyncio.Lock()

    async def slot(self) -> float:
        """Wait for this caller's turn to send; the send follows at once. Returns when the turn
        was granted (``time.monotonic``), the time the cap's promise is about: a process the
        OS suspends between the grant and the send moves the send, not the grant."""
        if not self._gap:
            return time.monotonic()
        async with self._lock:
            # A sleep may end early by the loop's timer resolution (uvloop runs one of under
            # half a millisecond at once): wait until the send is due, letting the other tasks
            # run meanwhile.
            while (wait := self._due - (granted := time.monotonic())) > 0:
                await asyncio.sleep(wait)
            self._due = max(self._due, granted - self._gap / 2) + self._gap
            return granted


@dataclass(frozen=True, slots=True)
class ThinkTime:
    """A human's pause before each move: uniform in [low, high] seconds."""

    low: float
    high: float

    def __post_init__(self) -> None:
        if not 0 <= self.low <= self.high:
            raise ValueError("think times need 0 <= low <= high")

    def draw(self, rng: random.Random) -> float:
        return rng.uniform(self.low, self.high)
