"""Stopping background tasks ends them even when one swallows a cancellation, as Python
3.11's ``asyncio.wait_for`` can (the drain and stop hangs of issue 12)."""

from __future__ import annotations

import asyncio

from masa_table_engine.app.tasks import stop_tasks


async def test_a_task_that_swallows_one_cancellation_is_stopped_all_the_same() -> None:
    swallowed = 0

    async def stubborn() -> None:
        nonlocal swallowed
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                swallowed += 1
                if swallowed > 1:
                    raise

    async def failing() -> None:
        raise ValueError("boom")

    tasks = [asyncio.create_task(stubborn()), asyncio.create_task(failing()), None]
    await asyncio.sleep(0)
    async with asyncio.timeout(5):
        await stop_tasks(*tasks)
    assert swallowed == 2
    assert all(task is None or task.done() for task in tasks)


async def test_a_task_stopping_itself_among_others_does_not_wait_for_itself() -> None:
    other = asyncio.create_task(asyncio.sleep(3600))

    async def stopper() -> None:
        await stop_tasks(asyncio.current_task(), other)

    async with asyncio.timeout(5):
        await asyncio.create_task(stopper())
    assert other.cancelled()
