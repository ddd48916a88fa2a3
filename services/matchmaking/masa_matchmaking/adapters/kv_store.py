"""Matchmaking's shared state in JetStream KV buckets: tickets, ratings and lobby leases.

- ``masa_matchmaking_tickets``: one record per player (key ``p.<sha256 of the player id>``,
  since a player id is not a valid key), holding the player's open ticket and recent closed
  ones. Every instance mirrors the whole bucket in memory through a KV watch, for the rounds,
  WatchTicket and the lobbies' queue lengths; the bucket's TTL forgets the records of players
  gone quiet, and the mirror forgets them on the same schedule.
- ``masa_matchmaking_ratings``: one rating per player and game (``r.<game>.<sha256>``), one
  record per rated game (``g.<sha256 of table/game>``) fixing its outcome, and a mark
  (``a.<sha256 of table/game>``) once its RatingChanged events are all published.
- ``masa_matchmaking_leases``: one lease per lobby, whose life is the bucket's TTL.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Callable
from typing import Final

import nats.errors
import nats.js.errors
from masa_platform.acks import (
    EXPECTED_LAST_SUBJECT_SEQUENCE,
    AckedPublisher,
    AckRefused,
)
from masa_platform.bus import KvBucket, Lease, LeaseLost, Leases, RevisionConflict
from nats.aio.client import Client
from nats.js.kv import KeyValue

from masa_matchmaking.adapters.records import (
    decode_rating,
    decode_tickets,
    encode_rating,
    encode_tickets,
)
from masa_matchmaking.app.ports import Conflict, PlayerTickets, Unreachable
from masa_matchmaking.domain.rating import PlayerRating
from masa_matchmaking.domain.ticket import Ticket

__all__ = [
    "LEASE_BUCKET",
    "RATING_BUCKET",
    "TICKET_BUCKET",
    "KvLeaseStore",
    "KvRatingStore",
    "KvTicketStore",
]

_log = logging.getLogger(__name__)

TICKET_BUCKET: Final = "masa_matchmaking_tickets"
RATING_BUCKET: Final = "masa_matchmaking_ratings"
LEASE_BUCKET: Final = "masa_matchmaking_leases"
_NATS_ERRORS: Final = (nats.errors.Error, TimeoutError, asyncio.TimeoutError)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def player_key(player_id: str) -> str:
    return f"p.{_digest(player_id)}"


class KvTicketStore:
    """The ticket records, with a local mirror kept current by a watch of the bucket.

    Writes go through the shared :class:`AckedPublisher` straight to the bucket's subject with
    the expected revision as a header (what a KV update is), and return once JetStream has
    stored them.
    """

    def __init__(
        self,
        bucket: KvBucket,
        kv: KeyValue,
        publisher: AckedPublisher,
        *,
        retention_seconds: float,
    ) -> None:
        self._bucket = bucket
        self._kv = kv
        self._publisher = publisher
        self._retention = retention_seconds
        self._records: dict[str, tuple[PlayerTickets, int]] = {}
        self._tickets: dict[str, Ticket] = {}
        self._open_by_lobby: dict[str, dict[str, Ticket]] = {}
        self._listeners: list[Callable[[Ticket], None]] = []
        self._task: asyncio.Task[None] | None = None
        self.ready = asyncio.Event()
        # Writes refused for a stale revision: each costs a read and a retry.
        self.conflicts = 0

    @classmethod
    async def open(cls, nc: Client, publisher: AckedPublisher) -> KvTicketStore:
        """The provisioned bucket; a record is kept as long as the bucket's TTL."""
        bucket = await KvBucket.open(nc, TICKET_BUCKET)
        if bucket.ttl_seconds is None:
            raise RuntimeError(f"bucket {TICKET_BUCKET} has no TTL: run masa-bus provision")
        return cls(
            bucket,
            await nc.jetstream().key_value(TICKET_BUCKET),
            publisher,
            retention_seconds=bucket.ttl_seconds,
        )

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._follow(), name="ticket-mirror")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def read(self, player_id: str) -> tuple[PlayerTickets, int]:
        try:
            stored = await self._publisher.last_message(
                f"KV_{TICKET_BUCKET}", f"$KV.{TICKET_BUCKET}.{player_key(player_id)}"
            )
        except AckRefused as refused:
            raise Unreachable(f"the ticket store refused a read: {refused}") from None
        # A delete or expiry marker has no value: no record.
        if stored is None or not stored.data:
            return PlayerTickets(player_id), 0
        return decode_tickets(stored.data), stored.seq

    async def write(self, record: PlayerTickets, revision: int) -> int:
        key = player_key(record.player_id)
        data = encode_tickets(record)
        try:
            ack = await self._publisher.publish(
                f"$KV.{TICKET_BUCKET}.{key}", data, {EXPECTED_LAST_SUBJECT_SEQUENCE: str(revision)}
            )
            written = ack.seq
        except AckRefused as refused:
            if not refused.wrong_sequence:
                raise Unreachable(f"the ticket store refused a write: {refused}") from None
            if revision == 0:
                # The key may hold a delete marker, over which a create is allowed.
                written = await self._create_over_marker(key, data, record.player_id)
            else:
                self.conflicts += 1
                raise Conflict(f"the tickets of {record.player_id} changed meanwhile") from None
        # The watch brings the same change; taking it now saves a lag for this instance.
        self._take(key, record, written)
        return written

    async def _create_over_marker(self, key: str, data: bytes, player_id: str) -> int:
        try:
            return await self._bucket.create(key, data)
        except RevisionConflict:
            self.conflicts += 1
            raise Conflict(f"the tickets of {player_id} changed meanwhile") from None
        except _NATS_ERRORS as error:
            raise Unreachable(f"the ticket store did not answer: {error}") from None

    def cached(self, player_id: str) -> tuple[PlayerTickets, int] | None:
        return self._records.get(player_key(player_id))

    def ticket(self, ticket_id: str) -> Ticket | None:
        return self._tickets.get(ticket_id)

    def lobby_tickets(self, lobby_id: str) -> list[Ticket]:
        return list(self._open_by_lobby.get(lobby_id, {}).values())

    def open_count(self, lobby_id: str) -> int:
        return len(self._open_by_lobby.get(lobby_id, {}))

    def listen(self, callback: Callable[[Ticket], None]) -> Callable[[], None]:
        self._listeners.append(callback)
        return lambda: self._listeners.remove(callback)

    async def _follow(self) -> None:
        """Mirror the bucket for ever, starting over after any interruption."""
        while True:
            try:
                watcher = await self._kv.watch(">")
                try:
                    async for entry in watcher:
                        if entry is None:
                            self.ready.set()
                            continue
                        if entry.operation in ("DEL", "PURGE") or not entry.value:
                            self._forget(entry.key)
                            continue
                        known = self._records.get(entry.key)
                        if known is not None and known[1] >= (entry.revision or 0):
                            # This instance's own write, taken when it was made.
                            continue
                        self._take(entry.key, decode_tickets(entry.value), entry.revision or 0)
                finally:
                    with contextlib.suppress(Exception):
                        await watcher.stop()  # type: ignore[no-untyped-call]
            except asyncio.CancelledError:
                raise
            except Exception:
                _log.exception("the ticket mirror stopped; following again")
                await asyncio.sleep(0.5)

    def _take(self, key: str, record: PlayerTickets, revision: int) -> None:
        known = self._records.get(key)
        if known is not None and known[1] >= revision:
            return
        old = {t.ticket_id: t for t in known[0].tickets} if known is not None else {}
        self._records[key] = (record, revision)
        changed: list[Ticket] = []
        for ticket in record.tickets:
            before = old.pop(ticket.ticket_id, None)
            self._tickets[ticket.ticket_id] = ticket
            lobby = self._open_by_lobby.setdefault(ticket.lobby_id, {})
            if ticket.open:
                lobby[ticket.ticket_id] = ticket
            else:
                lobby.pop(ticket.ticket_id, None)
            if before != ticket:
                changed.append(ticket)
        for gone in old.values():
            self._drop(gone)
        for ticket in changed:
            for listener in list(self._listeners):
                listener(ticket)

    def _forget(self, key: str) -> None:
        known = self._records.pop(key, None)
        if known is not None:
            for ticket in known[0].tickets:
                self._drop(ticket)

    def _drop(self, ticket: Ticket) -> None:
        self._tickets.pop(ticket.ticket_id, None)
        self._open_by_lobby.get(ticket.lobby_id, {}).pop(ticket.ticket_id, None)

    def prune(self, now: float) -> int:
        """Forget the records the bucket has expired by now (a TTL expiry sends no event)."""
        cutoff = now - self._retention
        stale = [
            key
            for key, (record, _) in self._records.items()
            if all(not t.open and t.updated_at < cutoff for t in record.tickets)
        ]
        for key in stale:
            self._forget(key)
        return len(stale)


class KvRatingStore:
    """Ratings; a read (one per CreateTicket) goes through the shared :class:`AckedPublisher`."""

    def __init__(self, bucket: KvBucket, publisher: AckedPublisher) -> None:
        self._bucket = bucket
        self._publisher = publisher

    @classmethod
    async def open(cls, nc: Client, publisher: AckedPublisher) -> KvRatingStore:
        return cls(await KvBucket.open(nc, RATING_BUCKET), publisher)

    async def read(self, player_id: str, game: str) -> tuple[PlayerRating, int]:
        key = _rating_key(player_id, game)
        try:
            stored = await self._publisher.last_message(
                f"KV_{RATING_BUCKET}", f"$KV.{RATING_BUCKET}.{key}"
            )
        except AckRefused as refused:
            raise Unreachable(f"the rating store refused a read: {refused}") from None
        # A delete or expiry marker has no value: no rating.
        if stored is None or not stored.data:
            return PlayerRating(player_id, game), 0
        return decode_rating(stored.data), stored.seq

    async def write(self, rating: PlayerRating, revision: int) -> int:
        key = _rating_key(rating.player_id, rating.game)
        data = encode_rating(rating)
        try:
            if revision == 0:
                return await self._bucket.create(key, data)
            return await self._bucket.update(key, data, revision)
        except RevisionConflict:
            raise Conflict(f"the rating of {rating.player_id} changed meanwhile") from None
        except _NATS_ERRORS as error:
            raise Unreachable(f"the rating store did not answer: {error}") from None

    async def decide(self, game_key: str, outcome: bytes) -> bytes:
        key = f"g.{_digest(game_key)}"
        try:
            await self._bucket.create(key, outcome)
        except RevisionConflict:
            entry = await self._bucket.get(key)
            if entry is not None and entry.value:
                return entry.value
            raise Conflict(f"the outcome of {game_key} is being written") from None
        return outcome

    async def announced(self, game_key: str) -> bool:
        try:
            entry = await self._bucket.get(_announced_key(game_key))
        except _NATS_ERRORS as error:
            raise Unreachable(f"the rating store did not answer: {error}") from None
        return entry is not None and bool(entry.value)

    async def mark_announced(self, game_key: str) -> None:
        try:
            await self._bucket.put(_announced_key(game_key), b"1")
        except _NATS_ERRORS as error:
            raise Unreachable(f"the rating store did not answer: {error}") from None


def _announced_key(game_key: str) -> str:
    return f"a.{_digest(game_key)}"


def _rating_key(player_id: str, game: str) -> str:
    return f"r.{game}.{_digest(player_id)}"


class KvLeaseStore:
    """Lobby leases held by this instance (the platform's :class:`Leases`)."""

    def __init__(self, leases: Leases, *, ttl_seconds: float) -> None:
        self._leases = leases
        # A lease lasts as long as the bucket keeps it (the bus plan's lobby lease TTL).
        self.ttl_seconds = ttl_seconds

    @classmethod
    async def open(cls, nc: Client, *, holder: str) -> KvLeaseStore:
        bucket = await KvBucket.open(nc, LEASE_BUCKET)
        if bucket.ttl_seconds is None:
            raise RuntimeError(f"bucket {LEASE_BUCKET} has no TTL: run masa-bus provision")
        return cls(Leases(bucket, holder), ttl_seconds=bucket.ttl_seconds)

    async def acquire(self, key: str) -> int | None:
        lease = await self._leases.acquire(key)
        return None if lease is None else lease.revision

    async def renew(self, key: str, revision: int) -> int | None:
        try:
            lease = await self._leases.renew(Lease(key, self._leases.holder, revision))
        except LeaseLost:
            return None
        return lease.revision

    async def release(self, key: str, revision: int) -> None:
        await self._leases.release(Lease(key, self._leases.holder, revision))
