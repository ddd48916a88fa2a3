"""A provisioned durable pull consumer that never spins: handled, retried later, or set aside.

Each message ends one of three ways:

- its handler returns: it is acknowledged (confirmed, so nothing handled comes back);
- its handler raises :class:`Poison` (it can never be handled: undecodable, forged, refused):
  it is set aside in the dead-letter stream for an operator (subject
  ``masa.deadletter.v1.<user>.<consumer>``, with where it came from and why in its headers),
  counted, and terminated, so JetStream never delivers it again;
- its handler raises anything else (a dependency is down): it is nak'ed with a delay that
  doubles with each delivery up to ``Backoff.max_seconds``, so a failing message costs a try
  per delay rather than a hot loop. On its last allowed delivery (the consumer's
  ``max_deliver``) it is set aside instead, so nothing is dropped unseen.

A message is terminated only after its dead letter was stored; when even that fails it is
nak'ed and comes back. The consumer is made by the provisioning step
(:mod:`masa_platform.bus_plan`); a service only binds to it by name, and waits (logging once)
while it does not exist yet.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

import nats.errors
import nats.js.errors
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from masa_platform import tracing
from masa_platform.acks import publish_headers
from masa_platform.bus_access import DEAD_LETTER_STREAM, dead_letter_subject
from masa_platform.metrics import ConsumerMetrics

__all__ = ["Backoff", "DurableConsumer", "Poison", "SetAside"]

_log = logging.getLogger(__name__)

_RETRY_SECONDS: Final = 1.0
# Headers of a dead letter: where the message was and why it was set aside.
STREAM_HEADER: Final = "Masa-Dead-Letter-Stream"
SEQUENCE_HEADER: Final = "Masa-Dead-Letter-Sequence"
SUBJECT_HEADER: Final = "Masa-Dead-Letter-Subject"
REASON_HEADER: Final = "Masa-Dead-Letter-Reason"
DETAIL_HEADER: Final = "Masa-Dead-Letter-Detail"
DELIVERIES_HEADER: Final = "Masa-Dead-Letter-Deliveries"
_DETAIL_LIMIT: Final = 500
# Messages aimed at a consumer's inbox from elsewhere are logged at most once a minute.
_FOREIGN_LOG_SECONDS: Final = 60.0


class SetAside(StrEnum):
    """Why a message was set aside (a label of ``masa_bus_set_aside_total``)."""

    UNDECODABLE = "undecodable"
    UNVERIFIED = "unverified"
    REFUSED = "refused"
    MAX_DELIVERIES = "max_deliveries"


class Poison(Exception):
    """The message can never be handled; set it aside rather than try it again."""

    def __init__(self, reason: SetAside, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True, slots=True)
class Backoff:
    """The delay before a failed message comes back: ``first_seconds`` after its first
    delivery, doubling with each one, never more than ``max_seconds``."""

    first_seconds: float = 1.0
    max_seconds: float = 60.0

    def delay(self, deliveries: int) -> float:
        exponent = min(max(deliveries - 1, 0), 32)
        return float(min(self.first_seconds * 2**exponent, self.max_seconds))


class DurableConsumer:
    """Fetches from the provisioned durable ``durable`` of ``stream`` and settles every message.

    ``concurrent`` handles a fetched batch at once (the handler must then be safe to run for
    several messages together); otherwise one after another.
    """

    def __init__(  # noqa: PLR0913 - the consumer's knobs, each by keyword with a default
        self,
        js: JetStreamContext,
        handle: Callable[[Msg], Awaitable[None]],
        *,
        user: str,
        stream: str,
        durable: str,
        metrics: ConsumerMetrics,
        backoff: Backoff | None = None,
        batch: int = 64,
        fetch_seconds: float = 1.0,
        concurrent: bool = False,
    ) -> None:
        self._js = js
        self._handle = handle
        self._user = user
        self._stream = stream
        self._durable = durable
        self._metrics = metrics
        self._backoff = backoff or Backoff()
        self._batch = batch
        self._fetch_seconds = fetch_seconds
        self._concurrent = concurrent
        self._max_deliver = 0
        self._foreign_logged_at = -math.inf

    async def run(self, stop: asyncio.Event) -> None:
        """Until ``stop`` is set: bind, fetch and settle; any failure of the bus is waited out."""
        while not stop.is_set():
            subscription = await self._bind(stop)
            if subscription is None:
                return
            try:
                await self._fetch_until(stop, subscription)
            except asyncio.CancelledError:
                raise
            except Exception:
                _log.warning(
                    "consumer %s stopped; binding again shortly", self._durable, exc_info=True
                )
                await _pause(stop, _RETRY_SECONDS)
            finally:
                with contextlib.suppress(Exception):
                    await subscription.unsubscribe()

    async def _bind(self, stop: asyncio.Event) -> JetStreamContext.PullSubscription | None:
        logged = False
        while not stop.is_set():
            try:
                info = await self._js.consumer_info(self._stream, self._durable)
                self._max_deliver = int(info.config.max_deliver or 0)
                subscription = await self._js.pull_subscribe_bind(
                    self._durable, stream=self._stream
                )
            except nats.js.errors.NotFoundError:
                if not logged:
                    _log.error(
                        "consumer %s of stream %s does not exist: run masa-bus provision",
                        self._durable,
                        self._stream,
                    )
                    logged = True
            except (nats.errors.Error, TimeoutError):
                _log.warning("could not bind consumer %s; again shortly", self._durable)
            else:
                self._metrics.started(self._durable)
                return subscription
            await _pause(stop, _RETRY_SECONDS)
        return None

    async def _fetch_until(
        self, stop: asyncio.Event, subscription: JetStreamContext.PullSubscription
    ) -> None:
        while not stop.is_set():
            try:
                messages = await subscription.fetch(self._batch, timeout=self._fetch_seconds)
            except TimeoutError:
                # Nothing to fetch in time (nats-py raises its own TimeoutError or asyncio's).
                self._metrics.pending(self._durable, 0)
                continue
            if self._concurrent:
                await asyncio.gather(*(self._settle(message) for message in messages))
            else:
                for message in messages:
                    await self._settle(message)
            if messages:
                self._metrics.pending(self._durable, messages[-1].metadata.num_pending)

    def _foreign(self, message: Msg) -> bool:
        """Whether ``message`` reached this consumer's inbox from anywhere but its own durable:
        a push consumer's deliver subject is not checked against NATS permissions, so another
        user could aim one here. Such a message is dropped unanswered, neither handled nor set
        aside (whose copy would be another's to fill the dead letters with)."""
        try:
            metadata = message.metadata
        except (nats.errors.Error, AttributeError, ValueError, IndexError):
            # No JetStream reply subject at all: a plain publish into the inbox.
            return True
        if (metadata.stream, metadata.consumer) == (self._stream, self._durable):
            return False
        now = time.monotonic()
        if now - self._foreign_logged_at >= _FOREIGN_LOG_SECONDS:
            self._foreign_logged_at = now
            _log.warning(
                "dropped messages another consumer delivered to this one's inbox",
                extra={
                    "nats_consumer": self._durable,
                    "from_stream": metadata.stream,
                    "from_consumer": metadata.consumer,
                },
            )
        return True

    async def _settle(self, message: Msg) -> None:
        if self._foreign(message):
            self._metrics.handled(self._durable, 0.0, outcome="foreign")
            return
        started = time.perf_counter()
        outcome = "handled"
        try:
            with tracing.consumer_span(f"consume {self._durable}", message.headers):
                await self._handle(message)
        except Poison as poison:
            outcome = await self._set_aside(message, poison.reason, poison.detail)
        except Exception as error:
            outcome = await self._failed(message, error)
        else:
            await message.ack_sync()
        self._metrics.handled(self._durable, time.perf_counter() - started, outcome=outcome)

    async def _failed(self, message: Msg, error: Exception) -> str:
        deliveries = message.metadata.num_delivered
        if self._max_deliver > 0 and deliveries >= self._max_deliver:
            return await self._set_aside(
                message, SetAside.MAX_DELIVERIES, f"failed {deliveries} times: {error!r}"
            )
        delay = self._backoff.delay(deliveries)
        _log.warning(
            "could not handle a message; it comes back in %.1f s",
            delay,
            exc_info=error,
            extra={
                "nats_subject": message.subject,
                "nats_consumer": self._durable,
                "deliveries": deliveries,
            },
        )
        await message.nak(delay=delay)
        return "failed"

    async def _set_aside(self, message: Msg, reason: SetAside, detail: str) -> str:
        metadata = message.metadata
        headers = dict(message.headers or {})
        headers.update(
            {
                STREAM_HEADER: metadata.stream,
                SEQUENCE_HEADER: str(metadata.sequence.stream),
                SUBJECT_HEADER: message.subject,
                REASON_HEADER: reason.value,
                DETAIL_HEADER: detail[:_DETAIL_LIMIT],
                DELIVERIES_HEADER: str(metadata.num_delivered),
            }
        )
        # The original's own id would make JetStream drop the dead letter as its duplicate.
        headers.pop("Nats-Msg-Id", None)
        headers.pop("Nats-Expected-Last-Subject-Sequence", None)
        try:
            await self._js.publish(
                dead_letter_subject(self._user, self._durable),
                message.data,
                stream=DEAD_LETTER_STREAM,
                headers=publish_headers(
                    msg_id=f"{self._user}:{self._durable}:{metadata.stream}:{metadata.sequence.stream}",
                    extra=headers,
                ),
            )
        except (nats.errors.Error, TimeoutError):
            _log.warning(
                "could not set a message aside; it comes back",
                extra={"nats_subject": message.subject, "nats_consumer": self._durable},
            )
            await message.nak(delay=self._backoff.delay(metadata.num_delivered))
            return "failed"
        await message.term()
        _log.error(
            "set a message aside: it can never be handled",
            extra={
                "nats_subject": message.subject,
                "nats_consumer": self._durable,
                "reason": reason.value,
                "detail": detail[:_DETAIL_LIMIT],
                "stream_sequence": metadata.sequence.stream,
            },
        )
        self._metrics.set_aside(self._durable, reason.value)
        return "set_aside"


async def _pause(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
