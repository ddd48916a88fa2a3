"""Stopping background tasks for sure: the standard library only, so that every layer of every
service may use it (the table engine's use cases, which import nothing else of the platform,
included).

``task.cancel(); await task`` can wait for ever on Python 3.11: ``asyncio.wait_for`` (which
nats-py and grpc use inside their calls) swallows a cancellation that arrives as its inner
call completes, and a task that loops then runs on. :func:`stop_tasks` cancels again until
every task has ended.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Final

__all__ = ["stop_tasks"]

_log = logging.getLogger(__name__)

# How long stop_tasks waits for cancelled tasks to end before cancelling the stragglers again.
_RECANCEL_SECONDS: Final = 0.5


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
