"""Group commit: requests of one kind that arrive while transactions of that kind are running
wait, and go together in the next transaction.

A database commit, and every statement, costs the same for one request as for many, so under
load the ledger writes many holds (or settlements) per transaction, each still answered on its
own: one request's refusal is its own, and nothing of it is written. With no load a request
runs at once, alone, with no added wait. Up to ``parallel`` transactions of a kind run at a
time (PostgreSQL runs them side by side; SQLite, one writer, one after the other).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

__all__ = ["GroupCommit"]

RequestT = TypeVar("RequestT")
AnswerT = TypeVar("AnswerT")


class GroupCommit(Generic[RequestT, AnswerT]):
    def __init__(
        self,
        run: Callable[[Sequence[RequestT]], Awaitable[Sequence[AnswerT | BaseException]]],
        *,
        max_batch: int = 64,
        parallel: int = 4,
    ) -> None:
        self._run = run
        self._max_batch = max_batch
        self._parallel = parallel
        self._queue: list[tuple[RequestT, asyncio.Future[AnswerT]]] = []
        self._running = 0

    async def submit(self, request: RequestT) -> AnswerT:
        future: asyncio.Future[AnswerT] = asyncio.get_running_loop().create_future()
        self._queue.append((request, future))
        self._start()
        return await future

    def _start(self) -> None:
        while self._queue and self._running < self._parallel:
            batch = self._queue[: self._max_batch]
            del self._queue[: self._max_batch]
            self._running += 1
            asyncio.get_running_loop().create_task(self._batch(batch))

    async def _batch(self, batch: list[tuple[RequestT, asyncio.Future[AnswerT]]]) -> None:
        try:
            answers = await self._run([request for request, _ in batch])
        except BaseException as error:
            for _, future in batch:
                if not future.done():
                    future.set_exception(error)
            if isinstance(error, asyncio.CancelledError | KeyboardInterrupt | SystemExit):
                raise
        else:
            for (_, future), answer in zip(batch, answers, strict=True):
                if future.done():
                    continue  # its caller went away; the answer is in the database anyway
                if isinstance(answer, BaseException):
                    future.set_exception(answer)
                else:
                    future.set_result(answer)
        finally:
            self._running -= 1
            self._start()
