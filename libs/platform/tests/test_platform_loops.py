"""The supervised loop, stop_tasks and the service lifecycle, run for real on the event loop."""

from __future__ import annotations

import asyncio
import logging

import pytest
from masa_platform import loops
from masa_platform.lifecycle import Lifecycle
from masa_platform.loops import stop_tasks, supervise
from masa_platform.metrics import LoopMetrics
from prometheus_client import CollectorRegistry


def runs(registry: CollectorRegistry, loop: str, outcome: str) -> float:
    value = registry.get_sample_value("masa_loop_runs_total", {"loop": loop, "outcome": outcome})
    return value or 0.0


async def test_a_loop_runs_every_interval_and_stops_when_told() -> None:
    registry = CollectorRegistry()
    stop = asyncio.Event()
    ran: list[float] = []

    async def step() -> None:
        ran.append(asyncio.get_running_loop().time())
        if len(ran) == 3:
            stop.set()

    await asyncio.wait_for(
        supervise("tick", step, interval_seconds=0.01, stop=stop, metrics=LoopMetrics(registry)),
        5,
    )
    assert len(ran) == 3
    assert runs(registry, "tick", "ok") == 3


async def test_a_failing_step_is_logged_counted_and_retried_with_a_capped_backoff(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = CollectorRegistry()
    stop = asyncio.Event()
    runs_so_far = 0
    pauses: list[float] = []

    async def step() -> None:
        nonlocal runs_so_far
        runs_so_far += 1
        if runs_so_far == 5:
            stop.set()
            return
        raise RuntimeError("the database is down")

    async def pause(seconds: float, stop: asyncio.Event, wake: asyncio.Event | None) -> None:
        # The pauses the loop asks for, not how long a busy machine took to end them.
        pauses.append(seconds)

    monkeypatch.setattr(loops, "_pause", pause)
    with caplog.at_level(logging.ERROR, logger="masa_platform.loops"):
        await asyncio.wait_for(
            supervise(
                "flaky",
                step,
                interval_seconds=0.05,
                stop=stop,
                metrics=LoopMetrics(registry),
                backoff_max_seconds=0.2,
            ),
            5,
        )
    assert runs(registry, "flaky", "error") == 4
    assert runs(registry, "flaky", "ok") == 1
    failed = [record for record in caplog.records if record.name == "masa_platform.loops"]
    assert len(failed) == 4
    # The interval doubled after each failure in a row, capped; then one interval after the
    # run that succeeded.
    assert pauses == [0.05, 0.1, 0.2, 0.2, 0.05]


async def test_a_wake_runs_the_step_at_once_and_wait_first_waits_for_it() -> None:
    stop = asyncio.Event()
    wake = asyncio.Event()
    ran = asyncio.Event()
    count = 0

    async def step() -> None:
        nonlocal count
        count += 1
        ran.set()

    task = asyncio.create_task(
        supervise("woken", step, interval_seconds=60, stop=stop, wake=wake, wait_first=True)
    )
    await asyncio.sleep(0.05)
    assert count == 0
    wake.set()
    await asyncio.wait_for(ran.wait(), 5)
    assert count == 1
    stop.set()
    await asyncio.wait_for(task, 5)
    assert count == 1


async def test_cancelling_a_loop_ends_it_at_once() -> None:
    stop = asyncio.Event()
    task = asyncio.create_task(
        supervise("idle", asyncio.sleep, interval_seconds=60, stop=stop)  # type: ignore[arg-type]
    )
    await asyncio.sleep(0.01)
    await asyncio.wait_for(stop_tasks(task), 5)
    assert task.cancelled()


async def test_stop_tasks_ends_a_task_whose_cancellation_was_swallowed() -> None:
    """Python 3.11's ``asyncio.wait_for`` can swallow a cancellation: a task that does so and
    loops on is cancelled again until it ends."""
    swallowed = 0

    async def stubborn() -> None:
        nonlocal swallowed
        while True:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                swallowed += 1
                if swallowed == 1:
                    continue
                raise

    task = asyncio.create_task(stubborn())
    await asyncio.sleep(0.01)
    await asyncio.wait_for(stop_tasks(task, None), 5)
    assert task.cancelled()
    assert swallowed == 2


async def test_stop_tasks_lets_a_task_end_on_its_own_within_its_patience() -> None:
    stop = asyncio.Event()
    ended_cleanly = False

    async def polite() -> None:
        nonlocal ended_cleanly
        await stop.wait()
        await asyncio.sleep(0.01)
        ended_cleanly = True

    task = asyncio.create_task(polite())
    stop.set()
    await stop_tasks(task, patience_seconds=5)
    assert ended_cleanly and not task.cancelled()


async def test_a_lifecycle_drains_then_stops_tasks_then_closes_in_reverse() -> None:
    order: list[str] = []
    life = Lifecycle("test")

    async def drain(grace: float | None) -> None:
        order.append(f"drain {grace}")

    def closer(name: str) -> object:
        async def close() -> None:
            order.append(f"close {name}")

        return close

    async def background() -> None:
        try:
            await asyncio.sleep(60)
        finally:
            order.append(f"task ends, stopping={life.stopping.is_set()}")

    async with life:
        life.closing("store", closer("store"))  # type: ignore[arg-type]
        life.closing("nats", closer("nats"))  # type: ignore[arg-type]
        life.draining("grpc", drain)
        life.spawn(background(), name="background")
        life.detach()
    await asyncio.sleep(0.01)
    assert order == []
    await life.stop(1.5)
    await life.stop(1.5)
    assert order == [
        "drain 1.5",
        "task ends, stopping=True",
        "close nats",
        "close store",
    ]


async def test_a_start_that_fails_stops_what_it_started_and_a_failing_step_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    closed: list[str] = []

    async def close_store() -> None:
        closed.append("store")

    async def close_nats() -> None:
        raise ConnectionError("nats is gone")

    async def start() -> None:
        async with Lifecycle("test") as life:
            life.closing("store", close_store)
            life.closing("nats", close_nats)
            raise OSError("no such database")

    with (
        caplog.at_level(logging.ERROR, logger="masa_platform.lifecycle"),
        pytest.raises(OSError, match="no such database"),
    ):
        await start()
    assert closed == ["store"]
    assert "stopping nats failed" in caplog.text
