"""JetStream publishes (and reads) whose answers come back on one inbox subscription.

nats-py's ``js.publish`` is a request: a fresh reply token, a future, a timer
(``asyncio.wait_for``) and a parsed ``PubAck`` object for every message. Matchmaking writes
about five messages per ticket (the ticket record three times, the events), and the
table-engine one log entry per accepted action, so that overhead was a measurable share of
what a ticket and an action cost (issues 11 and 14). Here every publish carries a reply subject
under one inbox subscription; its future is settled by the ack, and one sweeper fails the
futures whose ack is late. A caller still awaits its own ack, so nothing is reported written
before JetStream has stored it; concurrent writers' messages leave in one socket write per
event-loop tick (the client's flusher) and their acks come back together.

:meth:`AckedPublisher.last_message` reads a subject's last message (a KV get) the same way,
through the stream's message-get API.

At most ``max_pending`` calls wait for their answer at once: one more is refused at once rather
than queued without bound. A late answer, a lost connection and that refusal raise the
``unavailable`` exception type the owner names (its own port's "not reachable" error), so that
the service's code above needs no NATS exception of its own.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from masa_platform import tracing

__all__ = [
    "EXPECTED_LAST_SUBJECT_SEQUENCE",
    "MSG_ID",
    "WRONG_LAST_SEQUENCE",
    "Ack",
    "AckRefused",
    "AckUnavailable",
    "AckedPublisher",
    "StoredMessage",
    "publish_headers",
]

EXPECTED_LAST_SUBJECT_SEQUENCE: Final = "Nats-Expected-Last-Subject-Sequence"
MSG_ID: Final = "Nats-Msg-Id"
# JetStream's err_codes for a stale expected sequence (JSStreamWrongLastSequence...).
WRONG_LAST_SEQUENCE: Final = frozenset({10071, 10164})
_SWEEP_SECONDS: Final = 0.25
_NO_RESPONDERS: Final = "503"
_NOT_FOUND: Final = 404


def publish_headers(
    *,
    msg_id: str | None = None,
    expected_last_subject_sequence: int | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The headers of a JetStream publish: ``extra``, then the de-duplication id (JetStream
    drops a repeat of ``msg_id`` within the stream's duplicate window), the fence
    (``expected_last_subject_sequence=0``: the subject must still be empty; a stale one is
    refused with :attr:`AckRefused.wrong_sequence`) and the trace context, so that the
    reader's span continues the writer's trace when tracing is on."""
    headers = dict(extra) if extra else {}
    if msg_id is not None:
        headers[MSG_ID] = msg_id
    if expected_last_subject_sequence is not None:
        headers[EXPECTED_LAST_SUBJECT_SEQUENCE] = str(expected_last_subject_sequence)
    tracing.inject(headers)
    return headers


class AckUnavailable(Exception):
    """No answer in time, no connection, or too many answers awaited: the default of
    ``unavailable``. The message may have been stored."""


@dataclass(frozen=True, slots=True)
class Ack:
    """JetStream's answer to a stored publish: the message's stream sequence, and whether it
    was a repeat of a ``Nats-Msg-Id`` already stored (nothing new was stored then)."""

    seq: int
    duplicate: bool


@dataclass(frozen=True, slots=True)
class StoredMessage:
    seq: int
    data: bytes
    # The stored headers' block, raw ("NATS/1.0" and its lines), or b"" without headers.
    headers: bytes


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
        return self.err_code in WRONG_LAST_SEQUENCE


class AckedPublisher:
    def __init__(
        self,
        nc: Client,
        *,
        unavailable: type[Exception] = AckUnavailable,
        timeout_seconds: float = 5.0,
        max_pending: int = 20_000,
    ) -> None:
        self._nc = nc
        self._unavailable = unavailable
        self._timeout = timeout_seconds
        self._max_pending = max_pending
        self._prefix = ""
        self._tokens = itertools.count()
        # token -> (the loop time after which the answer is late, its future)
        self._pending: dict[str, tuple[float, asyncio.Future[Msg]]] = {}
        self._subscription: Subscription | None = None
        self._sweeper: asyncio.Task[None] | None = None
        # The loop start() ran on: asyncio.get_running_loop() makes a getpid system call on
        # Python 3.11, and every append of every table would make it again (issue 22).
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def pending(self) -> int:
        return len(self._pending)

    @classmethod
    async def started(
        cls, nc: Client, *, unavailable: type[Exception] = AckUnavailable
    ) -> AckedPublisher:
        publisher = cls(nc, unavailable=unavailable)
        await publisher.start()
        return publisher

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._prefix = self._nc.new_inbox()
        self._subscription = await self._nc.subscribe(f"{self._prefix}.*", cb=self._answered)
        self._sweeper = self._loop.create_task(self._sweep(), name="ack-sweeper")

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
                future.set_exception(self._unavailable("the publisher closed before the answer"))
        self._pending.clear()
        # Closed is as not started: a publish now is refused, not left waiting for an answer
        # nobody listens for, and a start() again begins afresh on its own loop.
        self._subscription = None
        self._sweeper = None
        self._loop = None

    async def publish(
        self, subject: str, payload: bytes, headers: Mapping[str, str] | None = None
    ) -> Ack:
        """Publish and wait for JetStream's ack.

        Raises :class:`AckRefused` when JetStream refused it, ``unavailable`` when the ack did
        not come in time (it may have been stored) or too many answers are awaited.
        """
        answer = self._json(await self._ask(subject, payload, headers))
        _raise_refusal(answer)
        return Ack(int(answer["seq"]), bool(answer.get("duplicate", False)))

    async def last_message(self, stream: str, subject: str) -> StoredMessage | None:
        """The last message ``stream`` holds on ``subject``, or None when it holds none."""
        request = json.dumps({"last_by_subj": subject}).encode()
        answer = self._json(await self._ask(f"$JS.API.STREAM.MSG.GET.{stream}", request, None))
        error = answer.get("error")
        if error is not None and int(error.get("code", 0)) == _NOT_FOUND:
            return None
        _raise_refusal(answer)
        message = answer["message"]
        return StoredMessage(
            seq=int(message["seq"]),
            data=base64.b64decode(message.get("data") or ""),
            headers=base64.b64decode(message.get("hdrs") or ""),
        )

    async def _ask(self, subject: str, payload: bytes, headers: Mapping[str, str] | None) -> Msg:
        loop = self._loop
        if self._subscription is None or loop is None:
            raise self._unavailable("the publisher is not started")
        if len(self._pending) >= self._max_pending:
            raise self._unavailable(f"{len(self._pending)} calls await their answer; retry shortly")
        token = str(next(self._tokens))
        future: asyncio.Future[Msg] = loop.create_future()
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
            raise self._unavailable(f"could not publish to {subject}: {error}") from None
        finally:
            self._pending.pop(token, None)

    async def _answered(self, msg: Msg) -> None:
        token = msg.subject[len(self._prefix) + 1 :]
        waiting = self._pending.get(token)
        if waiting is None or waiting[1].done():
            return
        if msg.headers and msg.headers.get("Status") == _NO_RESPONDERS:
            waiting[1].set_exception(self._unavailable("no stream takes this subject"))
            return
        waiting[1].set_result(msg)

    async def _sweep(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(_SWEEP_SECONDS)
            now = loop.time()
            for late_at, future in list(self._pending.values()):
                if late_at <= now and not future.done():
                    future.set_exception(self._unavailable("JetStream did not answer in time"))

    def _json(self, msg: Msg) -> dict[str, Any]:
        try:
            answer = json.loads(msg.data)
        except ValueError:
            raise self._unavailable("JetStream answered with something that is not JSON") from None
        if not isinstance(answer, dict):
            raise self._unavailable("JetStream answered with something that is not an object")
        return answer


def _raise_refusal(answer: Mapping[str, Any]) -> None:
    error = answer.get("error")
    if error is not None:
        raise AckRefused(
            int(error.get("code", 0)),
            int(error.get("err_code", 0)),
            str(error.get("description", "")),
        )
