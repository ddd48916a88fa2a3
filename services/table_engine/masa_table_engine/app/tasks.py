"""Stopping background tasks for sure.

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

# How long to wait for the tasks to end before cancelling the stragglers again.
_RECANCEL_SECONDS: Final = 0.5


async def stop_tasks(*tasks: asyncio.Task[Any] | None) -> None:
    """Cancel ``tasks`` (None and the calling task skipped) and wait until all have ended;
    an error a task ended with is logged, not raised."""
    me = asyncio.current_task()
    chosen = [task for task in tasks if task is not None and task is not me]
    while pending := [task for task in chosen if not task.done()]:
        for task in pending:
            task.cancel()
        await asyncio.wait(pending, timeout=_RECANCEL_SECONDS)
    for task in chosen:
        if not task.cancelled() and task.exception() is not None:
            _log.warning("task %s ended with %r", task.get_name(), task.exception())
