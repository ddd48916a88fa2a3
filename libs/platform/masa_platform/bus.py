"""NATS and JetStream helpers: connect, de-duplicated publishes, reads, KV, leases.

- :func:`publish` sets ``Nats-Msg-Id`` (JetStream drops a repeat within the stream's duplicate
  window) through :func:`masa_platform.acks.publish_headers`. Fenced appends (a writer that
  lost its lease is refused) go through :class:`masa_platform.acks.AckedPublisher`.
- :func:`read_subject` reads the messages of one subject after a stream sequence in a few
  round trips through the direct-get API (:mod:`masa_platform.direct`): no consumer is made.
- :class:`KvBucket` opens a provisioned bucket (:mod:`masa_platform.bus_plan`; a service never
  makes one), returns plain entries and raises one :class:`RevisionConflict` for every
  optimistic-concurrency failure nats-py reports in its various ways; its ``keys(prefix)`` and
  ``entries(prefix)`` list live keys (with their values) filtered on the server.
- :class:`Leases` builds ownership with a TTL on a bucket whose entries expire (per-bucket TTL).
  Given an :class:`~masa_platform.acks.AckedPublisher`, its renewals (a node renews every
  lease it holds every third of the TTL: hundreds a second on a busy node) go through it, a
  reply token and a future each, instead of nats-py's request and ``PubAck`` per renewal.

Durable consumers are :class:`masa_platform.consumer.DurableConsumer`.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Final

import nats
import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js import JetStreamContext, api
from nats.js.kv import KeyValue

from masa_platform.acks import (
    EXPECTED_LAST_SUBJECT_SEQUENCE,
    WRONG_LAST_SEQUENCE,
    AckedPublisher,
    AckRefused,
    publish_headers,
)
from masa_platform.bus_access import inbox_prefix
from masa_platform.direct import StoredMessage, last_message, last_messages, messages_after

__all__ = [
    "KvBucket",
    "KvEntry",
    "Lease",
    "LeaseLost",
    "Leases",
    "RevisionConflict",
    "StoredMessage",
    "connect",
    "last_subject_sequence",
    "publish",
    "read_subject",
]

_log = logging.getLogger(__name__)

# How long the marker of a forgotten key stays (it must outlive the duplicate window, in
# which a repeat of the key's last write would otherwise be taken for new).
_FORGOTTEN_MARKER_TTL: Final = "5m"
# How many times a create whose key expired while nats-py looked at it is tried again.
_CREATE_TRIES: Final = 3
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


async def last_subject_sequence(nc: Client, stream: str, subject: str) -> int:
    """The stream sequence of the last message on ``subject``, or 0 when there is none."""
    message = await last_message(nc, stream, subject)
    return message.seq if message is not None else 0


async def read_subject(
    nc: Client,
    stream: str,
    subject: str,
    *,
    after: int = 0,
    timeout: float = 5.0,
) -> list[StoredMessage]:
    """Every message on ``subject`` whose stream sequence is above ``after``, in order.

    One round trip per batch of stored messages, through the direct-get API: reading needs no
    consumer, so a service that may read a stream need not be allowed to make consumers on it.
    """
    return await messages_after(nc, stream, subject, after=after, timeout=timeout)


@dataclass(frozen=True, slots=True)
class KvEntry:
    key: str
    value: bytes
    revision: int


class KvBucket:
    """A provisioned JetStream key-value bucket with revisions; a missing or deleted key reads
    as ``None``. ``ttl_seconds`` is the bucket's entry TTL as provisioned (``None``: kept)."""

    def __init__(
        self, kv: KeyValue, nc: Client, bucket: str, *, ttl_seconds: float | None = None
    ) -> None:
        self._kv = kv
        self._nc = nc
        self._js = nc.jetstream()
        self.bucket = bucket
        self.ttl_seconds = ttl_seconds
        # The subjects of the bucket's keys start with this.
        self._subjects = f"$KV.{bucket}."

    @classmethod
    async def open(cls, nc: Client, bucket: str) -> KvBucket:
        """Open ``bucket``, which the provisioning step made; raises
        ``nats.js.errors.BucketNotFoundError`` when it did not (yet)."""
        js = nc.jetstream()
        kv = await js.key_value(bucket)
        info = await js.stream_info(f"KV_{bucket}")
        return cls(kv, nc, bucket, ttl_seconds=info.config.max_age or None)

    async def get(self, key: str) -> KvEntry | None:
        try:
            entry = await self._kv.get(key)
        except nats.js.errors.KeyNotFoundError:
            return None
        return KvEntry(key, entry.value or b"", entry.revision or 0)

    async def keys(self, prefix: str = "", *, timeout: float = 5.0) -> list[str]:
        """Every live key starting with ``prefix`` (a whole token: ``"node-a."``), without the
        deleted and expired ones; empty when there is none.

        The server filters by subject; the listing is read in batches of direct gets, and ends
        when the server says nothing more matches. (nats-py's ``keys()`` filters on the client
        and can end before the last key arrives.)
        """
        return [entry.key for entry in await self.entries(prefix, timeout=timeout)]

    async def entries(self, prefix: str = "", *, timeout: float = 5.0) -> list[KvEntry]:
        """Every live entry starting with ``prefix``, values included: one listing as
        :meth:`keys`, not a GET per key."""
        return await self._latest(prefix, timeout)

    async def _latest(self, prefix: str, timeout: float) -> list[KvEntry]:
        # A bucket keeps a key's last writes only (its history), so reading the stream in
        # order and keeping each key's last message finds every live entry.
        stored = await messages_after(
            self._nc, f"KV_{self.bucket}", f"{self._subjects}{prefix}>", timeout=timeout
        )
        latest: dict[str, KvEntry | None] = {}
        for message in stored:
            latest[self._key(message)] = self._live(message)
        return [entry for entry in latest.values() if entry is not None]

    async def entries_of(self, keys: Collection[str], *, timeout: float = 5.0) -> list[KvEntry]:
        """The live entries of ``keys`` (the others are absent, deleted or expired): one
        request per batch of keys, not a GET per key, and no listing of the whole bucket."""
        stored = await last_messages(
            self._nc,
            f"KV_{self.bucket}",
            [f"{self._subjects}{key}" for key in keys],
            timeout=timeout,
        )
        return [entry for entry in map(self._live, stored) if entry is not None]

    def _key(self, message: StoredMessage) -> str:
        return message.subject[len(self._subjects) :]

    def _live(self, message: StoredMessage) -> KvEntry | None:
        headers = message.headers
        if (
            headers.get("KV-Operation") in _GONE_OPERATIONS
            or headers.get("Nats-Marker-Reason") in _GONE_MARKERS
        ):
            return None
        return KvEntry(self._key(message), message.data, message.seq)

    async def put(self, key: str, value: bytes) -> int:
        """Write unconditionally; returns the new revision."""
        return await self._kv.put(key, value)

    async def create(self, key: str, value: bytes) -> int:
        """Write only if the key is absent (or deleted, or expired)."""
        for _ in range(_CREATE_TRIES):
            try:
                return await self._kv.create(key, value)
            except nats.js.errors.KeyWrongLastSequenceError as error:
                raise RevisionConflict(f"{key} already exists") from error
            except nats.js.errors.KeyNotFoundError:
                # nats-py's create found the key there, then gone when it looked why (its
                # TTL ran out in between): it is absent now, so try again.
                continue
        raise RevisionConflict(f"{key} kept appearing and expiring")

    async def update(self, key: str, value: bytes, revision: int) -> int:
        """Write only if ``revision`` is still the key's current revision."""
        try:
            return await self._kv.update(key, value, last=revision)
        except nats.js.errors.KeyWrongLastSequenceError as error:
            raise RevisionConflict(f"{key} is not at revision {revision}") from error

    async def forget(self, key: str) -> None:
        """Remove ``key`` and, after a while, its trace too: a delete leaves a marker per key,
        which a bucket of short-lived keys would pile up for ever. This purge rolls up the
        key's history and its marker expires by itself (a per-message TTL; no service may
        purge a stream)."""
        await self._js.publish(
            f"$KV.{self.bucket}.{key}",
            b"",
            headers={
                "KV-Operation": "PURGE",
                "Nats-Rollup": "sub",
                "Nats-TTL": _FORGOTTEN_MARKER_TTL,
            },
        )

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

    def __init__(
        self, bucket: KvBucket, holder: str, *, publisher: AckedPublisher | None = None
    ) -> None:
        self._bucket = bucket
        self.holder = holder
        self._publisher = publisher

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
        value = lease.holder.encode()
        try:
            if self._publisher is None:
                revision = await self._bucket.update(lease.key, value, lease.revision)
            else:
                # The same write as KvBucket.update: the key's subject, fenced at its revision.
                ack = await self._publisher.publish(
                    f"$KV.{self._bucket.bucket}.{lease.key}",
                    value,
                    {EXPECTED_LAST_SUBJECT_SEQUENCE: str(lease.revision)},
                )
                revision = ack.seq
        except RevisionConflict as error:
            raise LeaseLost(f"lease {lease.key} is no longer held by {lease.holder}") from error
        except AckRefused as refused:
            if refused.wrong_sequence:
                raise LeaseLost(f"lease {lease.key} is no longer held by {lease.holder}") from None
            raise
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
