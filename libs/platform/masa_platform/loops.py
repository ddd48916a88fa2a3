"""Supervised background loops, and stopping tasks for sure.

:func:`supervise` runs a named step now (or after one interval) and then every interval, or at
once when its ``wake`` event is set, until ``stop`` is set or it is cancelled. A step that
fails is logged and counted (``masa_loop_runs_total{loop,outcome="error"}`` through
:class:`~masa_platform.metrics.LoopMetrics`), and the loop waits longer after each failure in
a row: the interval doubled per failure, capped at ``backoff_max_seconds`` (by default the
interval itself, so a failed round is simply retried on time). Nothing a step raises ends the
loop; cancellation does, at once.

``task.cancel(); await task`` can wait for ever on Python 3.11: ``asyncio.wait_for`` (which
nats-py and grpc use inside their calls) swallows a cancellation that arrives as its inner
call completes, and a task that loops then runs on. :func:`stop_tasks` cancels again until
every task has ended. The loop's own pauses use ``asyncio.wait``, which never swallows one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Final

from masa_platform.metrics import LoopMetrics

__all__ = ["stop_tasks", "supervise"]

_log = logging.getLogger(__name__)

# How long stop_tasks waits for cancelled tasks to end before cancelling the stragglers again.
_RECANCEL_SECONDS: Final = 0.5


async def supervise(  # noqa: PLR0913 - each option is a keyword with a default
    name: str,
    step: Callable[[], Awaitable[object]],
    *,
    interval_seconds: float,
    stop: asyncio.Event,
    metrics: LoopMetrics | None = None,
    wake: asyncio.Event | None = None,
    wait_first: bool = False,
    backoff_max_seconds: float | None = None,
) -> None:
    """Run ``step`` as the loop ``name`` until ``stop`` is set (see the module doc).

    ``wait_first`` waits one interval (or a wake) before the first run. ``wake``, when set,
    ends the current pause at once and is cleared as the next run starts.
    """
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


async def stop_tasks(*tasks: asyncio.Task[Any] | None, patience_seconds: float = 0.0) -> None:
    """Wait up to ``patience_seconds`` for ``tasks`` (None and the calling task skipped) to end
    on their own, then cancel them until all have ended; an error a task ended with is
    logged, not raised."""
    me = asyncio.current_task()
    chosen = [task for task in tasks if task is not None and task is not me]
    if patience_seconds > 0 and chosen:
        await asyncio.wait(chosen, timeout=patience_seconds)
    while pending := [task for task in chosen if not task.done()]:
        for task in pending:
            task.cancel()
        await asyncio.wait(pending, timeout=_RECANCEL_SECONDS)
    for task in chosen:
        if not task.cancelled() and task.exception() is not None:
            _log.warning("task %s ended with %r", task.get_name(), task.exception())
