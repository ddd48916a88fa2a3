"""Stopping background tasks (masa_platform.tasks): a task that stops others among which it
is does not wait for itself. (One that swallows a cancellation: test_platform_loops.)"""

from __future__ import annotations

import asyncio

from masa_platform.tasks import stop_tasks


async def test_a_task_stopping_itself_among_others_does_not_wait_for_itself() -> None:
    other = asyncio.create_task(asyncio.sleep(3600))

    async def stopper() -> None:
        await stop_tasks(asyncio.current_task(), other)

    async with asyncio.timeout(5):
        await asyncio.create_task(stopper())
    assert other.cancelled()
