"""JetStream publishes whose acknowledgements come back on one inbox subscription.

nats-py's ``js.publish`` is a request: a fresh reply token, a future, a timer
(``asyncio.wait_for``) and a parsed ``PubAck`` object for every message. Matchmaking writes
about five messages per ticket (the ticket record three times, the events), so that overhead
was a measurable share of what a ticket costs. Here every publish carries a reply subject under
one inbox subscription; its future is settled by the ack, and one sweeper fails the futures
whose ack is late. A caller still awaits its own ack, so nothing is reported written before
JetStream has stored it; concurrent tickets' messages leave in one socket write per
event-loop tick (the client's flusher) and their acks come back together.

At most ``max_pending`` publishes wait for their ack at once: one more is refused with
:class:`Unreachable` at once rather than queued without bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import Mapping
from typing import Final

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from masa_matchmaking.app.ports import Unreachable

__all__ = ["EXPECTED_LAST_SUBJECT_SEQUENCE", "AckRefused", "AckedPublisher"]

EXPECTED_LAST_SUBJECT_SEQUENCE: Final = "Nats-Expected-Last-Subject-Sequence"
# JetStream's err_codes for a stale expected sequence (JSStreamWrongLastSequence...).
_WRONG_LAST_SEQUENCE: Final = frozenset({10071, 10164})
_SWEEP_SECONDS: Final = 0.25
_NO_RESPONDERS: Final = "503"


class AckRefused(Exception):
    """JetStream answered the publish with an error (``code``, ``err_code``): nothing stored."""

    def __init__(self, code: int, err_code: int, description: str) -> None:
        super().__init__(description)
        self.code = code
        self.err_code = err_code
        self.description = description

    @property
    def wrong_sequence(self) -> bool:
        """The subject's last sequence was not the one the publish expected."""
        return self.err_code in _WRONG_LAST_SEQUENCE


class AckedPublisher:
    def __init__(
        self, nc: Client, *, timeout_seconds: float = 5.0, max_pending: int = 20_000
    ) -> None:
        self._nc = nc
        self._timeout = timeout_seconds
        self._max_pending = max_pending
        self._prefix = ""
        self._tokens = itertools.count()
        # token -> (the loop time after which the ack is late, its future)
        self._pending: dict[str, tuple[float, asyncio.Future[int]]] = {}
        self._subscription: Subscription | None = None
        self._sweeper: asyncio.Task[None] | None = None

    @property
    def pending(self) -> int:
        return len(self._pending)

    @classmethod
    async def started(cls, nc: Client) -> AckedPublisher:
        publisher = cls(nc)
        await publisher.start()
        return publisher

    async def start(self) -> None:
        self._prefix = self._nc.new_inbox()
        self._subscription = await self._nc.subscribe(f"{self._prefix}.*", cb=self._acked)
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep(), name="ack-sweeper")

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        if self._subscription is not None:
            with contextlib.suppress(nats.errors.Error):
                await self._subscription.unsubscribe()
        for _, future in self._pending.values():
            if not future.done():
                future.set_exception(Unreachable("the publisher closed before the ack"))
        self._pending.clear()

    async def publish(
        self, subject: str, payload: bytes, headers: Mapping[str, str] | None = None
    ) -> int:
        """Publish and wait for JetStream's ack; the stored message's stream sequence.

        Raises :class:`AckRefused` when JetStream refused it, :class:`Unreachable` when the
        ack did not come in time (it may have been stored) or too many acks are awaited.
        """
        if self._subscription is None:
            raise Unreachable("the publisher is not started")
        if len(self._pending) >= self._max_pending:
            raise Unreachable(f"{len(self._pending)} writes await their ack; retry shortly")
        loop = asyncio.get_running_loop()
        token = str(next(self._tokens))
        future: asyncio.Future[int] = loop.create_future()
        self._pending[token] = (loop.time() + self._timeout, future)
        try:
            await self._nc.publish(
                subject,
                payload,
                reply=f"{self._prefix}.{token}",
                headers=dict(headers) if headers else None,
            )
            return await future
        except nats.errors.Error as error:
            raise Unreachable(f"could not publish to {subject}: {error}") from None
        finally:
            self._pending.pop(token, None)

    async def _acked(self, msg: Msg) -> None:
        token = msg.subject[len(self._prefix) + 1 :]
        waiting = self._pending.get(token)
        if waiting is None or waiting[1].done():
            return
        future = waiting[1]
        if msg.headers and msg.headers.get("Status") == _NO_RESPONDERS:
            future.set_exception(Unreachable("no stream takes this subject"))
            return
        try:
            answer = json.loads(msg.data)
        except ValueError:
            future.set_exception(Unreachable("JetStream answered with something not an ack"))
            return
        error = answer.get("error")
        if error is not None:
            future.set_exception(
                AckRefused(
                    int(error.get("code", 0)),
                    int(error.get("err_code", 0)),
                    str(error.get("description", "")),
                )
            )
            return
        future.set_result(int(answer["seq"]))

    async def _sweep(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(_SWEEP_SECONDS)
            now = loop.time()
            for late_at, future in list(self._pending.values()):
                if late_at <= now and not future.done():
                    future.set_exception(Unreachable("JetStream did not acknowledge in time"))
