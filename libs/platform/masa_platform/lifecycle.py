"""A service's lifecycle: start in order, drain, stop in reverse.

A :class:`Lifecycle` collects, as a service starts, what its stop must do: ``draining`` steps
(stop the gRPC server within the grace period, answering the calls in flight), the background
tasks it ``spawn``\\ s, and ``closing`` steps (drain NATS, close the database). Its
:meth:`~Lifecycle.stop` runs the draining steps in the order given, sets :attr:`stopping`,
stops the tasks (after ``task_patience_seconds`` for them to end on their own, then by
cancelling them until they have: :func:`~masa_platform.loops.stop_tasks`), and runs the
closing steps in the reverse order of their registration, so what started last stops first.
A failing step is logged and the next one runs. Stopping twice stops once.

Used as an async context manager, leaving the block stops the service (the draining steps with
their default grace), and so does a start that raises, stopping what it had started; ``detach()``
keeps a started service running past the block::

    async with Lifecycle("ledger") as life:
        store = await open_store(settings)
        life.closing("store", store.close)
        ...
        life.detach()  # started: the caller stops it later with life.stop()
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Coroutine
from types import TracebackType
from typing import Any

from masa_platform.loops import stop_tasks

__all__ = ["Lifecycle"]

_log = logging.getLogger(__name__)


class Lifecycle:
    """What a running service must do to stop, gathered while it starts (see the module doc)."""

    def __init__(self, service: str, *, task_patience_seconds: float = 0.0) -> None:
        self.service = service
        self.stopping = asyncio.Event()
        self._patience = task_patience_seconds
        self._draining: list[tuple[str, Callable[[float | None], Awaitable[object]]]] = []
        self._closing: list[tuple[str, Callable[[], Awaitable[object]]]] = []
        self._tasks: list[asyncio.Task[Any]] = []
        self._detached = False
        self._stopped: asyncio.Future[None] | None = None

    def draining(self, name: str, step: Callable[[float | None], Awaitable[object]]) -> None:
        """Run ``step(grace_seconds)`` first when stopping, after the draining steps before it."""
        self._draining.append((name, step))

    def closing(self, name: str, step: Callable[[], Awaitable[object]]) -> None:
        """Run ``step()`` last when stopping, before the closing steps registered before it."""
        self._closing.append((name, step))

    def spawn(self, coroutine: Coroutine[Any, Any, object], *, name: str) -> asyncio.Task[Any]:
        """Run ``coroutine`` as a background task that the stop ends."""
        task = asyncio.get_running_loop().create_task(coroutine, name=name)
        self._tasks.append(task)
        return task

    @property
    def tasks(self) -> tuple[asyncio.Task[Any], ...]:
        return tuple(self._tasks)

    def detach(self) -> None:
        """The start succeeded: leaving the ``async with`` block no longer stops anything."""
        self._detached = True

    async def stop(self, grace_seconds: float | None = None) -> None:
        """Drain, stop the tasks, close (see the module doc); a second call waits for the first."""
        if self._stopped is not None:
            await asyncio.shield(self._stopped)
            return
        self._stopped = asyncio.get_running_loop().create_future()
        try:
            for name, drain in self._draining:
                await self._step(name, functools.partial(drain, grace_seconds))
            self.stopping.set()
            await stop_tasks(*self._tasks, patience_seconds=self._patience)
            for name, close in reversed(self._closing):
                await self._step(name, close)
        finally:
            self._stopped.set_result(None)

    async def _step(self, name: str, step: Callable[[], Awaitable[object]]) -> None:
        try:
            await step()
        except Exception:
            _log.exception("%s: stopping %s failed", self.service, name, extra={"step": name})

    async def __aenter__(self) -> Lifecycle:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if error is not None or not self._detached:
            await self.stop()
