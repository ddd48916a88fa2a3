"""NATS and JetStream helpers: connect, de-duplicated publishes, pull consumers, KV, leases.

- :func:`publish` sets ``Nats-Msg-Id`` (JetStream drops a repeat within the stream's duplicate
  window) through :func:`masa_platform.acks.publish_headers`. Fenced appends (a writer that
  lost its lease is refused) go through :class:`masa_platform.acks.AckedPublisher`.
- :func:`read_subject` reads the messages of one subject after a stream sequence in a few
  round trips (an ephemeral pull consumer fetching batches), not one round trip per message.
- :class:`KvBucket` returns plain entries and raises one :class:`RevisionConflict` for every
  optimistic-concurrency failure nats-py reports in its various ways; its ``keys(prefix)``
  and ``entries(prefix)`` list live keys (with their values) filtered on the server.
- :class:`Leases` builds ownership with a TTL on a bucket whose entries expire (per-bucket TTL).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass

import nats
import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext, api
from nats.js.kv import KeyValue

from masa_platform import tracing
from masa_platform.acks import WRONG_LAST_SEQUENCE, publish_headers
from masa_platform.bus_access import inbox_prefix
from masa_platform.metrics import ConsumerMetrics

__all__ = [
    "KvBucket",
    "KvEntry",
    "Lease",
    "LeaseLost",
    "Leases",
    "RevisionConflict",
    "StoredMessage",
    "connect",
    "consume",
    "ensure_stream",
    "last_subject_sequence",
    "publish",
    "read_subject",
]

_log = logging.getLogger(__name__)

# JSStreamNameExistErr: the stream exists with another configuration.
_STREAM_NAME_IN_USE = 10058
# Messages per fetch of read_subject and KvBucket.keys.
_BATCH = 256
# KV entries whose last message says the key is gone (nats-server 2.11+ marks a TTL expiry
# with Nats-Marker-Reason instead of KV-Operation).
_GONE_OPERATIONS = frozenset({"DEL", "PURGE"})
_GONE_MARKERS = frozenset({"MaxAge", "Purge", "Remove"})


class RevisionConflict(Exception):
    """A KV write whose expected revision is not the key's current one."""


class LeaseLost(Exception):
    """The lease expired or was taken by another holder; stop acting as the owner."""


async def connect(
    url: str, *, name: str, user: str = "", password: str = "", connect_timeout: float = 2.0
) -> Client:
    """Connect to ``url`` and keep reconnecting for ever after a disconnect (never give up).

    ``url`` may name several servers of one cluster, separated by commas; the client moves to
    another when the one it uses goes away.

    With ``user``, replies come back on that user's own inbox (``_INBOX.<user>``), the only
    one its permissions let it subscribe to (:mod:`masa_platform.bus_access`).
    """

    async def on_error(error: Exception) -> None:
        _log.warning("nats error: %s", error, extra={"nats_client": name})

    async def on_disconnected() -> None:
        _log.warning("nats disconnected", extra={"nats_client": name})

    async def on_reconnected() -> None:
        _log.info("nats reconnected", extra={"nats_client": name})

    credentials: dict[str, str] = {"user": user, "password": password} if user else {}
    return await nats.connect(
        servers=[server.strip() for server in url.split(",") if server.strip()],
        name=name,
        inbox_prefix=inbox_prefix(user),
        **credentials,
        connect_timeout=connect_timeout,
        allow_reconnect=True,
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.25,
        error_cb=on_error,
        disconnected_cb=on_disconnected,
        reconnected_cb=on_reconnected,
    )


async def ensure_stream(js: JetStreamContext, config: api.StreamConfig) -> api.StreamInfo:
    """Create the stream, or bring an existing one to ``config``."""
    try:
        return await js.add_stream(config)
    except nats.js.errors.BadRequestError as error:
        if error.err_code != _STREAM_NAME_IN_USE:
            raise
        return await js.update_stream(config)


async def publish(
    js: JetStreamContext,
    subject: str,
    payload: bytes,
    *,
    msg_id: str | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> api.PubAck:
    """Publish to JetStream; ``PubAck.duplicate`` tells a de-duplicated repeat of ``msg_id``."""
    return await js.publish(
        subject,
        payload,
        timeout=timeout,
        headers=publish_headers(msg_id=msg_id, extra=headers) or None,
    )


async def last_subject_sequence(js: JetStreamContext, stream: str, subject: str) -> int:
    """The stream sequence of the last message on ``subject``, or 0 when there is none."""
    try:
        message = await js.get_last_msg(stream, subject)
    except nats.js.errors.NotFoundError:
        return 0
    return message.seq or 0


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message as the stream stores it: its stream sequence, payload and headers."""

    seq: int
    data: bytes
    headers: Mapping[str, str]


async def read_subject(
    js: JetStreamContext,
    stream: str,
    subject: str,
    *,
    after: int = 0,
    timeout: float = 5.0,
) -> list[StoredMessage]:
    """Every message on ``subject`` whose stream sequence is above ``after``, in order.

    One round trip finds the subject's last message; when nothing is newer than ``after`` that
    is all. Otherwise the messages come from an ephemeral pull consumer that starts at
    ``after + 1`` and is fetched in batches, so a long log costs a few round trips, not one per
    message.
    """
    try:
        last = await js.get_last_msg(stream, subject)
    except nats.js.errors.NotFoundError:
        return []
    last_seq = last.seq or 0
    if last_seq <= after:
        return []
    config = api.ConsumerConfig(
        deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE,
        opt_start_seq=after + 1,
        filter_subject=subject,
    )
    found: list[StoredMessage] = []
    async with _ephemeral_consumer(js, stream, config, timeout) as (_, subscription):
        while not found or found[-1].seq < last_seq:
            for message in await subscription.fetch(_BATCH, timeout=timeout):
                metadata = message.metadata
                found.append(
                    StoredMessage(metadata.sequence.stream, message.data, message.headers or {})
                )
    return found


@asynccontextmanager
async def _ephemeral_consumer(
    js: JetStreamContext, stream: str, config: api.ConsumerConfig, timeout: float
) -> AsyncIterator[tuple[api.ConsumerInfo, JetStreamContext.PullSubscription]]:
    """A pull consumer for one read (no acks, in memory), deleted right after it.

    Its name is chosen here, so it can be deleted at once rather than after its idle time.
    """
    name = uuid.uuid4().hex
    config = config.evolve(
        name=name,
        ack_policy=api.AckPolicy.NONE,
        mem_storage=True,
        inactive_threshold=max(timeout * 2, 5.0),
    )
    info = await js.add_consumer(stream, config=config, timeout=timeout)
    try:
        subscription = await js.pull_subscribe_bind(name, stream=stream)
        try:
            yield info, subscription
        finally:
            await subscription.unsubscribe()
    finally:
        try:
            await js.delete_consumer(stream, name)
        except (nats.errors.Error, TimeoutError):
            _log.debug("could not delete consumer %s of %s; it expires when idle", name, stream)


async def consume(  # noqa: PLR0913 - the pull consumer's knobs, each by keyword with a default
    js: JetStreamContext,
    subject: str,
    handle: Callable[[Msg], Awaitable[None]],
    *,
    durable: str,
    stream: str | None = None,
    batch: int = 64,
    fetch_timeout: float = 1.0,
    stop: asyncio.Event | None = None,
    metrics: ConsumerMetrics | None = None,
) -> None:
    """Fetch from a durable pull consumer and ack each message that ``handle`` handled.

    A message whose handler raises is nak'ed for redelivery, so handlers must be idempotent
    (on ``event_id``). Runs until ``stop`` is set or the task is cancelled. ``metrics`` counts
    and times each message under the durable's name, and keeps its lag.
    """
    subscription = await js.pull_subscribe(subject, durable=durable, stream=stream)
    if metrics is not None:
        metrics.started(durable)
    try:
        while stop is None or not stop.is_set():
            try:
                messages = await subscription.fetch(batch, timeout=fetch_timeout)
            except TimeoutError:
                # Nothing to fetch in time; nats-py raises its own TimeoutError or asyncio's
                # (the builtin), depending on where the wait ran out.
                if metrics is not None:
                    metrics.pending(durable, 0)
                continue
            for message in messages:
                started = time.perf_counter()
                try:
                    with tracing.consumer_span(f"consume {durable}", message.headers):
                        await handle(message)
                except Exception:
                    _log.exception(
                        "message handler failed; asking for redelivery",
                        extra={"nats_subject": message.subject, "nats_consumer": durable},
                    )
                    await message.nak()
                    ok = False
                else:
                    # Confirmed acks: once consume returns, nothing handled is redelivered.
                    await message.ack_sync()
                    ok = True
                if metrics is not None:
                    metrics.handled(durable, time.perf_counter() - started, ok=ok)
            if metrics is not None and messages:
                metrics.pending(durable, messages[-1].metadata.num_pending)
    finally:
        await subscription.unsubscribe()


@dataclass(frozen=True, slots=True)
class KvEntry:
    key: str
    value: bytes
    revision: int


class KvBucket:
    """A JetStream key-value bucket with revisions; a missing or deleted key reads as ``None``."""

    def __init__(self, kv: KeyValue, js: JetStreamContext, bucket: str) -> None:
        self._kv = kv
        self._js = js
        self.bucket = bucket

    @classmethod
    async def ensure(
        cls,
        js: JetStreamContext,
        bucket: str,
        *,
        ttl_seconds: float | None = None,
        history: int = 1,
        replicas: int = 1,
    ) -> KvBucket:
        """Open ``bucket``, creating it when missing (stored on ``replicas`` servers of a
        cluster); with a TTL every entry expires after it."""
        try:
            return cls(await js.key_value(bucket), js, bucket)
        except nats.js.errors.BucketNotFoundError:
            config = api.KeyValueConfig(
                bucket=bucket, ttl=ttl_seconds, history=history, replicas=replicas
            )
            return cls(await js.create_key_value(config), js, bucket)

    async def get(self, key: str) -> KvEntry | None:
        try:
            entry = await self._kv.get(key)
        except nats.js.errors.KeyNotFoundError:
            return None
        return KvEntry(key, entry.value or b"", entry.revision or 0)

    async def keys(self, prefix: str = "", *, timeout: float = 5.0) -> list[str]:
        """Every live key starting with ``prefix`` (a whole token: ``"node-a."``), without the
        deleted and expired ones; empty when there is none.

        The server filters by subject and sends only each key's last message, headers only;
        the listing ends with the message after which the consumer had nothing pending.
        (nats-py's ``keys()`` filters on the client and can end before the last key arrives.)
        """
        return [entry.key for entry in await self._latest(prefix, timeout, headers_only=True)]

    async def entries(self, prefix: str = "", *, timeout: float = 5.0) -> list[KvEntry]:
        """Every live entry starting with ``prefix``, values included: one listing as
        :meth:`keys`, not a GET per key."""
        return await self._latest(prefix, timeout, headers_only=False)

    async def _latest(self, prefix: str, timeout: float, *, headers_only: bool) -> list[KvEntry]:
        stream = f"KV_{self.bucket}"
        config = api.ConsumerConfig(
            deliver_policy=api.DeliverPolicy.LAST_PER_SUBJECT,
            headers_only=headers_only,
            filter_subject=f"$KV.{self.bucket}.{prefix}>",
        )
        found: list[KvEntry] = []
        async with _ephemeral_consumer(self._js, stream, config, timeout) as (info, subscription):
            pending = info.num_pending or 0
            while pending:
                for message in await subscription.fetch(min(pending, _BATCH), timeout=timeout):
                    metadata = message.metadata
                    pending = metadata.num_pending
                    headers = message.headers or {}
                    if (
                        headers.get("KV-Operation") not in _GONE_OPERATIONS
                        and headers.get("Nats-Marker-Reason") not in _GONE_MARKERS
                    ):
                        key = message.subject[len(f"$KV.{self.bucket}.") :]
                        found.append(KvEntry(key, message.data, metadata.sequence.stream))
        return found

    async def put(self, key: str, value: bytes) -> int:
        """Write unconditionally; returns the new revision."""
        return await self._kv.put(key, value)

    async def create(self, key: str, value: bytes) -> int:
        """Write only if the key is absent (or deleted, or expired)."""
        try:
            return await self._kv.create(key, value)
        except nats.js.errors.KeyWrongLastSequenceError as error:
            raise RevisionConflict(f"{key} already exists") from error

    async def update(self, key: str, value: bytes, revision: int) -> int:
        """Write only if ``revision`` is still the key's current revision."""
        try:
            return await self._kv.update(key, value, last=revision)
        except nats.js.errors.KeyWrongLastSequenceError as error:
            raise RevisionConflict(f"{key} is not at revision {revision}") from error

    async def forget(self, key: str) -> None:
        """Remove ``key`` and leave nothing behind (a delete leaves a marker per key, which a
        bucket of short-lived keys would pile up for ever)."""
        await self._js.purge_stream(f"KV_{self.bucket}", subject=f"$KV.{self.bucket}.{key}")

    async def delete(self, key: str, revision: int | None = None) -> None:
        """Delete, only at ``revision`` when it is given."""
        try:
            await self._kv.delete(key, last=revision)
        except nats.js.errors.APIError as error:
            if error.err_code in WRONG_LAST_SEQUENCE:
                raise RevisionConflict(f"{key} is not at revision {revision}") from error
            raise


@dataclass(frozen=True, slots=True)
class Lease:
    """Ownership of ``key`` by ``holder`` at KV ``revision``; renew before the bucket TTL."""

    key: str
    holder: str
    revision: int


class Leases:
    """Leases held by ``holder`` (a node id) on a bucket whose TTL is the lease duration."""

    def __init__(self, bucket: KvBucket, holder: str) -> None:
        self._bucket = bucket
        self.holder = holder

    async def acquire(self, key: str) -> Lease | None:
        """Take the lease if it is free or already ours (after a restart); else ``None``."""
        value = self.holder.encode()
        try:
            return Lease(key, self.holder, await self._bucket.create(key, value))
        except RevisionConflict:
            current = await self._bucket.get(key)
        if current is None or current.value != value:
            return None
        try:
            return Lease(key, self.holder, await self._bucket.update(key, value, current.revision))
        except RevisionConflict:
            return None

    async def renew(self, lease: Lease) -> Lease:
        """Extend the lease by another TTL; raises :class:`LeaseLost` if it is no longer ours."""
        try:
            revision = await self._bucket.update(lease.key, lease.holder.encode(), lease.revision)
        except RevisionConflict as error:
            raise LeaseLost(f"lease {lease.key} is no longer held by {lease.holder}") from error
        return Lease(lease.key, lease.holder, revision)

    async def release(self, lease: Lease) -> None:
        """Give the lease up; a lease someone else holds by now is left alone."""
        try:
            await self._bucket.delete(lease.key, lease.revision)
        except RevisionConflict:
            _log.info("lease %s was already taken over", lease.key)

    async def holder_of(self, key: str) -> str | None:
        entry = await self._bucket.get(key)
        return entry.value.decode() if entry is not None else None
