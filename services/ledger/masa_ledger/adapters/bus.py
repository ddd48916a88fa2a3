"""The ledger on NATS JetStream: table results in, ledger events out.

- :class:`ResultsConsumer` reads ``masa.table.v1.*.result`` from the table-engine's stream
  through a durable pull consumer with explicit acks. A message is acknowledged only after the
  transaction that settled (or voided, or rejected) its game committed, so a ledger that dies
  in between gets it again and the inbox and the settlement key make the repeat a no-op. A
  failure it cannot fix now (the database is down) asks for redelivery after a pause.
- :class:`JetStreamResultLog` reads a game's result from the same subject for SettleGame.
- :class:`OutboxRelay` publishes the outbox to stream ``MASA_LEDGER`` with ``Nats-Msg-Id`` =
  event id, then marks the rows published; a row published twice (a crash between the two) is
  dropped by JetStream's duplicate window, and consumers are idempotent on event_id anyway.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Final

import nats.errors
import nats.js.errors
from google.protobuf.message import DecodeError
from masa.events.v1 import result_pb2
from masa_platform import tracing
from masa_platform.bus import ensure_stream, publish
from masa_platform.logs import bound_context
from masa_platform.metrics import ConsumerMetrics, LoopMetrics
from nats.aio.msg import Msg
from nats.js import JetStreamContext, api

from masa_ledger.adapters.convert import (
    EVENT_SUBJECTS,
    abandonment_from_proto,
    game_result_from_proto,
)
from masa_ledger.adapters.metrics import PrometheusLedgerMetrics
from masa_ledger.app.ledger import Ledger
from masa_ledger.app.ports import Store
from masa_ledger.domain.errors import Unavailable
from masa_ledger.domain.model import GameAbandonment, GameKey, GameResult

__all__ = [
    "EVENTS_STREAM",
    "RESULT_SUBJECTS",
    "JetStreamResultLog",
    "OutboxRelay",
    "ResultsConsumer",
    "ensure_events_stream",
]

EVENTS_STREAM: Final = "MASA_LEDGER"
RESULT_SUBJECTS: Final = "masa.table.v1.*.result"
_RETRY_SECONDS: Final = 1.0
# Results fetched at once; they settle concurrently.
_BATCH: Final = 64

_log = logging.getLogger(__name__)


def result_subject(table_id: str) -> str:
    return f"masa.table.v1.{table_id}.result"


async def ensure_events_stream(js: JetStreamContext, *, max_age_seconds: float) -> None:
    await ensure_stream(
        js,
        api.StreamConfig(
            name=EVENTS_STREAM,
            subjects=list(EVENT_SUBJECTS),
            storage=api.StorageType.FILE,
            max_age=max_age_seconds,
        ),
    )


class ResultsConsumer:
    """Settles games from the table-engine's GameFinished and GameAbandoned events."""

    def __init__(
        self,
        js: JetStreamContext,
        ledger: Ledger,
        *,
        stream: str,
        durable: str,
        ack_wait_seconds: float,
        fetch_seconds: float,
        metrics: ConsumerMetrics,
    ) -> None:
        self._js = js
        self._ledger = ledger
        self._metrics = metrics
        self._stream = stream
        self._durable = durable
        self._ack_wait = ack_wait_seconds
        self._fetch_seconds = fetch_seconds

    async def run(self, stop: asyncio.Event) -> None:
        subscription = await self._subscribe(stop)
        if subscription is None:
            return
        self._metrics.started(self._durable)
        try:
            while not stop.is_set():
                try:
                    messages = await subscription.fetch(_BATCH, timeout=self._fetch_seconds)
                except TimeoutError:
                    # No result within the pull's time (nats-py raises its own TimeoutError
                    # or asyncio's, both this one).
                    self._metrics.pending(self._durable, 0)
                    continue
                except Exception:
                    # Whatever went wrong, the consumer must not die: settlements would stop.
                    _log.warning("fetching table results failed; again shortly", exc_info=True)
                    await _pause(stop, _RETRY_SECONDS)
                    continue
                # Results of different games settle independently, so a batch runs at once.
                await asyncio.gather(*(self._measured(message) for message in messages))
                if messages:
                    self._metrics.pending(self._durable, messages[-1].metadata.num_pending)
        finally:
            await subscription.unsubscribe()

    async def _subscribe(self, stop: asyncio.Event) -> JetStreamContext.PullSubscription | None:
        config = api.ConsumerConfig(
            durable_name=self._durable,
            ack_policy=api.AckPolicy.EXPLICIT,
            ack_wait=self._ack_wait,
            max_deliver=-1,
            max_ack_pending=1024,
            filter_subject=RESULT_SUBJECTS,
        )
        waiting_logged = False
        while not stop.is_set():
            try:
                return await self._js.pull_subscribe(
                    RESULT_SUBJECTS, durable=self._durable, stream=self._stream, config=config
                )
            except nats.js.errors.NotFoundError:
                if not waiting_logged:
                    _log.info("waiting for stream %s (the table-engine creates it)", self._stream)
                    waiting_logged = True
            except (nats.errors.Error, nats.js.errors.Error):
                _log.warning("could not subscribe to table results; again shortly", exc_info=True)
            await _pause(stop, _RETRY_SECONDS)
        return None

    async def _measured(self, message: Msg) -> None:
        started = time.perf_counter()
        with tracing.consumer_span(f"consume {self._durable}", message.headers):
            ok = await self._handle(message)
        self._metrics.handled(self._durable, time.perf_counter() - started, ok=ok)

    async def _handle(self, message: Msg) -> bool:
        """Settle one result; False when it could not be handled (dropped or to come back)."""
        try:
            result = result_pb2.TableResult.FromString(message.data)
        except DecodeError:
            _log.error(
                "a table result that is not a TableResult; dropped",
                extra={"subject": message.subject},
            )
            await message.term()
            return False
        found: GameResult | GameAbandonment | None = None
        kind = result.WhichOneof("result")
        if kind == "game_finished":
            found = game_result_from_proto(result.game_finished)
        elif kind == "game_abandoned":
            found = abandonment_from_proto(result.game_abandoned)
        if found is not None:
            try:
                with bound_context(table_id=found.key.table_id, game_no=found.key.game_no):
                    outcome = await self._ledger.on_result(found)
            except Exception:
                _log.exception(
                    "could not settle a table result; it comes back",
                    extra={"event_id": found.event_id},
                )
                await message.nak(delay=_RETRY_SECONDS)
                return False
            _log.info(
                "table result handled",
                extra={
                    "event_id": found.event_id,
                    "game": str(found.key),
                    "outcome": outcome.value,
                },
            )
        await message.ack_sync()
        return True


class JetStreamResultLog:
    """The :class:`~masa_ledger.app.ports.ResultLog`: a game's last published result.

    It reads through a short-lived consumer filtered on the table's result subject, the one
    way the ledger's NATS user may read the table stream: it may never read the log itself,
    which holds every hand and seed.
    """

    def __init__(self, js: JetStreamContext, *, stream: str) -> None:
        self._js = js
        self._stream = stream

    async def game_result(self, key: GameKey) -> GameResult | GameAbandonment | None:
        try:
            messages = await self._read(result_subject(key.table_id))
        except (nats.errors.Error, nats.js.errors.Error) as error:
            raise Unavailable(f"the table log cannot be read now: {error}") from error
        found: GameResult | GameAbandonment | None = None
        for data in messages:
            try:
                result = result_pb2.TableResult.FromString(data)
            except DecodeError:
                continue
            if result.HasField("game_finished") and result.game_finished.game_no == key.game_no:
                found = game_result_from_proto(result.game_finished)
            elif result.HasField("game_abandoned") and result.game_abandoned.game_no == key.game_no:
                found = abandonment_from_proto(result.game_abandoned)
        return found

    async def _read(self, subject: str) -> list[bytes]:
        subscription = await self._js.pull_subscribe(
            subject,
            stream=self._stream,
            config=api.ConsumerConfig(
                ack_policy=api.AckPolicy.NONE,
                deliver_policy=api.DeliverPolicy.ALL,
                inactive_threshold=30.0,
                mem_storage=True,
            ),
        )
        found: list[bytes] = []
        try:
            pending = (await subscription.consumer_info()).num_pending or 0
            while pending > 0:
                messages = await subscription.fetch(min(pending, 256), timeout=5.0)
                found.extend(message.data for message in messages)
                pending -= len(messages)
        finally:
            await subscription.unsubscribe()
        return found


class OutboxRelay:
    """Publishes the outbox, oldest first; :meth:`wake` after a commit publishes at once."""

    def __init__(
        self,
        js: JetStreamContext,
        store: Store,
        metrics: PrometheusLedgerMetrics,
        loops: LoopMetrics,
        *,
        batch: int = 256,
        idle_seconds: float = 1.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._js = js
        self._store = store
        self._metrics = metrics
        self._loops = loops
        self._batch = batch
        self._idle_seconds = idle_seconds
        self._clock = clock
        self._wake = asyncio.Event()

    def wake(self) -> None:
        self._wake.set()

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self._wake.clear()
            try:
                with self._loops.run("outbox_relay"):
                    published = await self.publish_once()
            except Exception:
                _log.warning("publishing the outbox failed; again shortly", exc_info=True)
                await _pause(stop, _RETRY_SECONDS)
                continue
            if published < self._batch:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self._idle_seconds)

    async def publish_once(self) -> int:
        """Publish one batch; returns how many rows went out."""
        rows = await self._store.outbox_batch(self._batch)
        now = self._clock()
        self._metrics.outbox_lag.set(max(0.0, now - rows[0].created_at) if rows else 0.0)
        if not rows:
            return 0
        answers = await asyncio.gather(
            *(publish(self._js, row.subject, row.payload, msg_id=row.event_id) for row in rows),
            return_exceptions=True,
        )
        done = [
            row.seq
            for row, answer in zip(rows, answers, strict=True)
            if not isinstance(answer, BaseException)
        ]
        await self._store.mark_published(done, self._clock())
        failed = len(rows) - len(done)
        if failed:
            raise RuntimeError(f"{failed} of {len(rows)} ledger events were not published")
        return len(done)


async def _pause(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
