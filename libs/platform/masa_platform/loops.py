"""Supervised background loops.

:func:`supervise` runs a named step now (or after one interval) and then every interval, or at
once when its ``wake`` event is set, until ``stop`` is set or it is cancelled. A step that
fails is logged and counted (``masa_loop_runs_total{loop,outcome="error"}`` through
:class:`LoopRecorder`, which :class:`~masa_platform.metrics.LoopMetrics` is), and the loop waits longer after each failure in
a row: the interval doubled per failure, capped at ``backoff_max_seconds`` (by default the
interval itself, so a failed round is simply retried on time). Nothing a step raises ends the
loop; cancellation does, at once.

The loop's pauses use ``asyncio.wait``, which never swallows a cancellation; stopping a task
for sure is :func:`masa_platform.tasks.stop_tasks` (re-exported here).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from typing import Protocol

from masa_platform.tasks import stop_tasks

__all__ = ["LoopRecorder", "stop_tasks", "supervise"]

_log = logging.getLogger(__name__)


class LoopRecorder(Protocol):
    """Counts and times the runs of a loop (:class:`masa_platform.metrics.LoopMetrics`): the
    standard library's view of it, so that any layer may run a supervised loop."""

    def run(self, loop: str) -> AbstractContextManager[None]: ...


async def supervise(  # noqa: PLR0913 - each option is a keyword with a default
    name: str,
    step: Callable[[], Awaitable[object]],
    *,
    interval_seconds: float,
    stop: asyncio.Event | None = None,
    metrics: LoopRecorder | None = None,
    wake: asyncio.Event | None = None,
    wait_first: bool = False,
    backoff_max_seconds: float | None = None,
) -> None:
    """Run ``step`` as the loop ``name`` until ``stop`` is set (see the module doc); without
    ``stop``, until the task is cancelled (:func:`stop_tasks`).

    ``wait_first`` waits one interval (or a wake) before the first run. ``wake``, when set,
    ends the current pause at once and is cleared as the next run starts.
    """
    stop = stop or asyncio.Event()
    cap = interval_seconds if backoff_max_seconds is None else backoff_max_seconds
    failures = 0
    if wait_first:
        await _pause(interval_seconds, stop, wake)
    while not stop.is_set():
        if wake is not None:
            wake.clear()
        try:
            if metrics is None:
                await step()
            else:
                with metrics.run(name):
                    await step()
        except Exception:
            failures += 1
            pause = max(interval_seconds, min(interval_seconds * 2 ** (failures - 1), cap))
            _log.exception(
                "%s failed; again in %g s", name, pause, extra={"loop": name, "failures": failures}
            )
        else:
            failures = 0
            pause = interval_seconds
        await _pause(pause, stop, wake)


async def _pause(seconds: float, stop: asyncio.Event, wake: asyncio.Event | None) -> None:
    """Wait ``seconds``, or until ``stop`` or ``wake`` is set, whichever comes first."""
    waiters = [asyncio.ensure_future(stop.wait())]
    if wake is not None:
        waiters.append(asyncio.ensure_future(wake.wait()))
    try:
        await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
