"""The table-engine's results, read by matchmaking: ratings, and the lobbies' tables in play.

The provisioned durable consumer ``matchmaking-ratings`` on ``masa.table.v1.*.result`` (stream
MASA_TABLES) hands every ``GameFinished`` to the ratings and ends the table's entry in the
live-tables bucket; ``GameAbandoned`` ends it too. The consumer is shared by every instance (a
result goes to one of them); handlers are idempotent, so a redelivery changes nothing. A result
whose signature (``Masa-Signature``, masa_platform.signing) does not hold, or that cannot be
read, is set aside for an operator and counted, never rated and never retried in a loop
(:class:`masa_platform.consumer.DurableConsumer`).

The live tables: ``masa_matchmaking_tables`` holds one key per table matchmaking placed whose
game has not ended (the value is its lobby); every instance follows it to count each lobby's
tables in play. Its TTL forgets a table whose end was never heard.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from typing import Final

import nats.errors
from google.protobuf.message import DecodeError
from masa.common.v1 import game_pb2
from masa.events.v1 import result_pb2
from masa_platform.bus import KvBucket
from masa_platform.bus_access import MATCHMAKING, MATCHMAKING_RESULTS_CONSUMER, TABLES_STREAM
from masa_platform.consumer import DurableConsumer, Poison, SetAside
from masa_platform.metrics import ConsumerMetrics
from masa_platform.signing import RESULT_SIGNATURE, ResultVerifier, UnknownKey, Unverified
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from masa_matchmaking.adapters.convert import game_from_proto
from masa_matchmaking.app.ratings import FinishedGame, Ratings
from masa_matchmaking.domain.rating import Result

__all__ = ["TABLES_BUCKET", "KvLiveTables", "ResultsConsumer", "finished_game"]

_log = logging.getLogger(__name__)

TABLES_BUCKET: Final = "masa_matchmaking_tables"


class KvLiveTables:
    def __init__(self, bucket: KvBucket, kv: KeyValue, *, ttl_seconds: float) -> None:
        self._bucket = bucket
        self._kv = kv
        self._ttl = ttl_seconds
        self._lobby_of: dict[str, str] = {}
        self._seen_at: dict[str, float] = {}
        self._counts: Counter[str] = Counter()
        self._task: asyncio.Task[None] | None = None

    @classmethod
    async def open(cls, nc: Client) -> KvLiveTables:
        """The provisioned bucket; its TTL forgets a table whose end was never heard."""
        bucket = await KvBucket.open(nc, TABLES_BUCKET)
        if bucket.ttl_seconds is None:
            raise RuntimeError(f"bucket {TABLES_BUCKET} has no TTL: run masa-bus provision")
        kv = await nc.jetstream().key_value(TABLES_BUCKET)
        return cls(bucket, kv, ttl_seconds=bucket.ttl_seconds)

    def count(self, lobby_id: str) -> int:
        return self._counts[lobby_id]

    async def started(self, table_id: str, lobby_id: str) -> None:
        await self._bucket.put(table_id, lobby_id.encode())
        self._add(table_id, lobby_id)

    async def ended(self, table_id: str) -> None:
        with contextlib.suppress(nats.errors.Error):
            await self._bucket.delete(table_id)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._follow(), name="live-tables")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _follow(self) -> None:
        while True:
            try:
                watcher = await self._kv.watch(">")
                try:
                    async for entry in watcher:
                        if entry is None:
                            continue
                        if entry.operation in ("DEL", "PURGE") or not entry.value:
                            self._drop(entry.key)
                        else:
                            self._add(entry.key, entry.value.decode())
                finally:
                    with contextlib.suppress(Exception):
                        await watcher.stop()  # type: ignore[no-untyped-call]
            except asyncio.CancelledError:
                raise
            except Exception:
                _log.exception("the live-tables mirror stopped; following again")
                await asyncio.sleep(0.5)

    def _add(self, table_id: str, lobby_id: str) -> None:
        if table_id not in self._lobby_of:
            self._lobby_of[table_id] = lobby_id
            self._seen_at[table_id] = time.monotonic()
            self._counts[lobby_id] += 1

    def _drop(self, table_id: str) -> None:
        lobby_id = self._lobby_of.pop(table_id, None)
        self._seen_at.pop(table_id, None)
        if lobby_id is not None:
            self._counts[lobby_id] -= 1

    def prune(self) -> int:
        """Forget the tables the bucket has expired by now (a TTL expiry sends no event)."""
        cutoff = time.monotonic() - self._ttl
        stale = [table_id for table_id, at in self._seen_at.items() if at < cutoff]
        for table_id in stale:
            self._drop(table_id)
        return len(stale)


def finished_game(event: result_pb2.GameFinished) -> FinishedGame:
    """The human seats of a finished game, for the ratings (bots are never rated)."""
    return FinishedGame(
        table_id=event.table_id,
        game_no=event.game_no,
        game=game_from_proto(event.game, event.game_name),
        training=event.mode == game_pb2.MODE_TRAINING,
        teams=event.mode == game_pb2.MODE_TEAMS,
        results=tuple(
            Result(standing.player_id, standing.place, standing.team, standing.forfeited)
            for standing in event.ranking
            if standing.player_id
        ),
    )


class ResultsConsumer:
    def __init__(
        self,
        js: JetStreamContext,
        ratings: Ratings,
        tables: KvLiveTables,
        verifier: ResultVerifier,
        *,
        metrics: ConsumerMetrics,
    ) -> None:
        self._ratings = ratings
        self._verifier = verifier
        self._tables = tables
        self._consumer = DurableConsumer(
            js,
            self._handle,
            user=MATCHMAKING,
            stream=TABLES_STREAM,
            durable=MATCHMAKING_RESULTS_CONSUMER,
            metrics=metrics,
        )

    async def run(self, stop: asyncio.Event) -> None:
        await self._consumer.run(stop)

    async def _handle(self, message: Msg) -> None:
        signature = (message.headers or {}).get(RESULT_SIGNATURE)
        try:
            self._verifier.verify(message.subject, message.data, signature)
        except UnknownKey:
            # A key a rotation added that has not reached this process yet, or a forgery:
            # retried with a growing delay, set aside at the consumer's delivery limit.
            raise
        except Unverified as unverified:
            raise Poison(SetAside.UNVERIFIED, str(unverified)) from None
        try:
            result = result_pb2.TableResult.FromString(message.data)
        except DecodeError:
            raise Poison(SetAside.UNDECODABLE, "not a TableResult") from None
        kind = result.WhichOneof("result")
        if kind == "game_finished":
            finished = result.game_finished
            await self._tables.ended(finished.table_id)
            changed = await self._ratings.apply(finished_game(finished))
            _log.info(
                "game rated",
                extra={
                    "table_id": finished.table_id,
                    "game_no": finished.game_no,
                    "changed": changed,
                },
            )
        elif kind == "game_abandoned":
            await self._tables.ended(result.game_abandoned.table_id)
