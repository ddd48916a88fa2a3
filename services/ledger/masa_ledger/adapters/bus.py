"""The ledger on NATS JetStream: table results in, ledger events out.

- :class:`ResultsConsumer` reads ``masa.table.v1.*.result`` from the table-engine's stream
  through the provisioned durable consumer ``ledger-settlement``
  (:class:`masa_platform.consumer.DurableConsumer`). A message is acknowledged only after the
  transaction that settled (or voided) its game committed, so a ledger that dies in between
  gets it again and the inbox and the settlement key make the repeat a no-op. A result is
  looked at only if a table-engine signed it (``Masa-Signature``, masa_platform.signing) for
  the table whose subject it is on: a forged, moved or altered one is set aside unread and
  counted, and never reaches the inbox, where it could stand in for the real one. A result
  that can never be paid (undecodable, or refused: it does not match the holds bound to its
  game) is set aside in the dead-letter stream too; a failure the ledger cannot fix now (the
  database is down) is retried with a growing delay.
- :class:`JetStreamResultLog` reads a table's last result for SettleGame, by subject, through
  the direct-get API (the ledger's NATS user may read that and never the log itself, which
  holds every hand and seed), and pays it only if its signature holds.
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
from google.protobuf.message import DecodeError
from masa.events.v1 import result_pb2
from masa_platform.bus import publish
from masa_platform.bus_access import LEDGER, LEDGER_RESULTS_CONSUMER, TABLES_STREAM
from masa_platform.consumer import DurableConsumer, Poison, SetAside
from masa_platform.direct import last_message
from masa_platform.logs import bound_context
from masa_platform.metrics import ConsumerMetrics, LoopMetrics
from masa_platform.signing import RESULT_SIGNATURE, ResultVerifier, UnknownKey, Unverified
from masa_rules.refusals import Reason
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from masa_ledger.adapters.convert import abandonment_from_proto, game_result_from_proto
from masa_ledger.adapters.metrics import PrometheusLedgerMetrics
from masa_ledger.app.ledger import Ledger
from masa_ledger.app.ports import InboxOutcome, Store
from masa_ledger.domain.errors import LedgerError, Refused, Unavailable
from masa_ledger.domain.model import GameAbandonment, GameKey, GameResult

__all__ = [
    "EVENTS_STREAM",
    "RESULT_SUBJECTS",
    "JetStreamResultLog",
    "OutboxRelay",
    "ResultsConsumer",
]

EVENTS_STREAM: Final = "MASA_LEDGER"
RESULT_SUBJECTS: Final = "masa.table.v1.*.result"
_RETRY_SECONDS: Final = 1.0

_log = logging.getLogger(__name__)


def result_subject(table_id: str) -> str:
    return f"masa.table.v1.{table_id}.result"


def verified_result(
    verifier: ResultVerifier, subject: str, data: bytes, signature: str | None
) -> GameResult | GameAbandonment | None:
    """The game result a result message carries (None for a hand's), once its signature holds
    and it is about the table of its subject; raises :class:`Poison` otherwise."""
    try:
        verifier.verify(subject, data, signature)
    except UnknownKey:
        # A key a rotation added that has not reached this process yet, or a forgery: retried
        # with a growing delay, and set aside at the consumer's delivery limit.
        raise
    except Unverified as unverified:
        raise Poison(SetAside.UNVERIFIED, str(unverified)) from None
    try:
        result = result_pb2.TableResult.FromString(data)
    except DecodeError:
        raise Poison(SetAside.UNDECODABLE, "not a TableResult") from None
    kind = result.WhichOneof("result")
    found: GameResult | GameAbandonment | None = None
    try:
        if kind == "game_finished":
            found = game_result_from_proto(result.game_finished)
        elif kind == "game_abandoned":
            found = abandonment_from_proto(result.game_abandoned)
    except (ValueError, LedgerError) as error:
        raise Poison(SetAside.UNDECODABLE, f"a {kind} the ledger cannot read: {error}") from None
    if found is not None and subject != result_subject(found.key.table_id):
        raise Poison(SetAside.REFUSED, f"a result of table {found.key.table_id} on {subject}")
    return found


class ResultsConsumer:
    """Settles games from the table-engine's GameFinished and GameAbandoned events."""

    def __init__(
        self,
        js: JetStreamContext,
        ledger: Ledger,
        verifier: ResultVerifier,
        *,
        fetch_seconds: float,
        metrics: ConsumerMetrics,
    ) -> None:
        self._ledger = ledger
        self._verifier = verifier
        # Results of different games settle independently, so a batch runs at once.
        self._consumer = DurableConsumer(
            js,
            self._handle,
            user=LEDGER,
            stream=TABLES_STREAM,
            durable=LEDGER_RESULTS_CONSUMER,
            metrics=metrics,
            fetch_seconds=fetch_seconds,
            concurrent=True,
        )

    async def run(self, stop: asyncio.Event) -> None:
        await self._consumer.run(stop)

    async def _handle(self, message: Msg) -> None:
        signature = (message.headers or {}).get(RESULT_SIGNATURE)
        found = verified_result(self._verifier, message.subject, message.data, signature)
        if found is None:
            return
        with bound_context(table_id=found.key.table_id, game_no=found.key.game_no):
            outcome = await self._ledger.on_result(found)
        _log.info(
            "table result handled",
            extra={"event_id": found.event_id, "game": str(found.key), "outcome": outcome.value},
        )
        if outcome is InboxOutcome.REJECTED:
            raise Poison(SetAside.REFUSED, f"the ledger refused to settle game {found.key}")


class JetStreamResultLog:
    """The :class:`~masa_ledger.app.ports.ResultLog`: a game's published result, which is the
    last message on its table's result subject once the game has ended."""

    def __init__(self, nc: Client, verifier: ResultVerifier) -> None:
        self._nc = nc
        self._verifier = verifier

    async def game_result(self, key: GameKey) -> GameResult | GameAbandonment | None:
        subject = result_subject(key.table_id)
        try:
            stored = await last_message(self._nc, TABLES_STREAM, subject)
        except (nats.errors.Error, TimeoutError) as error:
            raise Unavailable(f"the table's results cannot be read now: {error}") from error
        if stored is None:
            return None
        try:
            found = verified_result(
                self._verifier, subject, stored.data, stored.headers.get(RESULT_SIGNATURE)
            )
        except UnknownKey as unknown:
            raise _unverified(key, str(unknown)) from None
        except Poison as poison:
            if poison.reason is SetAside.UNVERIFIED:
                raise _unverified(key, poison.detail) from None
            return None
        return found if found is not None and found.key == key else None


def _unverified(key: GameKey, why: str) -> Refused:
    return Refused(
        f"the last result of table {key.table_id} is not a table-engine's: {why}",
        reason=Reason.RESULT_UNVERIFIED,
        metadata={"table_id": key.table_id, "game_no": str(key.game_no)},
    )


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
