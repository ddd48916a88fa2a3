"""The table log, snapshots, leases and results on NATS JetStream (DESIGN.md §4).

- Log: stream ``MASA_TABLES``, subject ``masa.table.v1.<table_id>.log``, one
  ``TableLogEntry`` per accepted input, published with ``Nats-Msg-Id`` = the entry's event id
  and ``Nats-Expected-Last-Subject-Sequence`` = the stream sequence of the table's previous
  entry, so a node that lost the table (a zombie) cannot append behind the new owner's back.
- Snapshots: KV bucket ``masa_table_snapshots``, key = table id, value = the owner node and
  the whole table as JSON, written at creation, every N entries and at the end.
- Leases: KV bucket ``masa_table_leases`` whose TTL is the lease time, renewed by a task.
- Results: ``TableResult`` on ``masa.table.v1.<table_id>.result`` in the same stream, with
  ``Nats-Msg-Id`` = the result's event id, which is derived from the table and the entry so
  that publishing again after a crash is de-duplicated.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Final

import nats.js.errors
from masa.events.v1 import result_pb2, table_log_pb2
from masa_platform.bus import (
    KvBucket,
    Lease,
    LeaseLost,
    Leases,
    SequenceConflict,
    ensure_stream,
    last_subject_sequence,
    publish,
)
from nats.js import JetStreamContext, api

from masa_table_engine.adapters.convert import (
    config_to_proto,
    entry_to_log,
    game_finished_to_proto,
    input_from_log,
    payout_to_proto,
    timestamp,
    update_for,
)
from masa_table_engine.app.ports import LogConflict, LoggedInput
from masa_table_engine.domain.model import Entry, GameFinished
from masa_table_engine.domain.table import Table, table_from_json, table_to_json

__all__ = [
    "LEASE_BUCKET",
    "SNAPSHOT_BUCKET",
    "STREAM",
    "JetStreamLog",
    "JetStreamResults",
    "KvOwnership",
    "ensure_table_stream",
    "log_subject",
    "result_subject",
]

STREAM: Final = "MASA_TABLES"
SNAPSHOT_BUCKET: Final = "masa_table_snapshots"
LEASE_BUCKET: Final = "masa_table_leases"

_log = logging.getLogger(__name__)


def log_subject(table_id: str) -> str:
    return f"masa.table.v1.{table_id}.log"


def result_subject(table_id: str) -> str:
    return f"masa.table.v1.{table_id}.result"


async def ensure_table_stream(js: JetStreamContext) -> None:
    await ensure_stream(
        js,
        api.StreamConfig(
            name=STREAM,
            subjects=["masa.table.v1.*.log", "masa.table.v1.*.result"],
            storage=api.StorageType.FILE,
        ),
    )


class JetStreamLog:
    """The :class:`~masa_table_engine.app.ports.LogStore` of one node."""

    def __init__(
        self,
        js: JetStreamContext,
        snapshots: KvBucket,
        *,
        node_id: str,
        owner_address: str,
        default_turn_seconds: float,
    ) -> None:
        self._js = js
        self._snapshots = snapshots
        self._node_id = node_id
        self._owner_address = owner_address
        self._default_turn_seconds = default_turn_seconds
        # The stream sequence of each table's last entry: the fence of its next append.
        self._last: dict[str, int] = {}

    async def append(self, entry: Entry) -> None:
        subject = log_subject(entry.table_id)
        message = entry_to_log(entry, self._owner_address)
        expected = self._last.get(entry.table_id)
        if expected is None:
            expected = (
                0 if entry.sequence == 1 else await last_subject_sequence(self._js, STREAM, subject)
            )
        try:
            ack = await publish(
                self._js,
                subject,
                message.SerializeToString(),
                msg_id=message.event_id,
                expected_last_subject_sequence=expected,
            )
        except SequenceConflict as error:
            raise LogConflict(str(error)) from error
        self._last[entry.table_id] = ack.seq

    async def read(self, table_id: str, after_sequence: int) -> list[LoggedInput]:
        subject = log_subject(table_id)
        found: list[LoggedInput] = []
        stream_seq = 1
        while True:
            try:
                raw = await self._js.get_msg(STREAM, seq=stream_seq, subject=subject, next=True)
            except nats.js.errors.NotFoundError:
                break
            if raw.seq is None:
                break
            stream_seq = raw.seq + 1
            self._last[table_id] = raw.seq
            message = table_log_pb2.TableLogEntry.FromString(raw.data or b"")
            if message.sequence <= after_sequence:
                continue
            found.append(
                LoggedInput(
                    sequence=message.sequence,
                    at=message.occurred_at.ToNanoseconds() / 1e9,
                    input=input_from_log(message, self._default_turn_seconds),
                )
            )
        return found

    async def save_snapshot(self, table: Table) -> None:
        payload = {
            "owner": self._node_id,
            "address": self._owner_address,
            "table": table_to_json(table),
        }
        await self._snapshots.put(table.table_id, json.dumps(payload).encode())

    async def load_snapshot(self, table_id: str) -> Table | None:
        entry = await self._snapshots.get(table_id)
        if entry is None:
            return None
        return table_from_json(json.loads(entry.value)["table"])

    async def owner_address(self, table_id: str) -> str | None:
        entry = await self._snapshots.get(table_id)
        if entry is None:
            return None
        payload = json.loads(entry.value)
        if payload.get("owner") == self._node_id:
            return None
        address = payload.get("address")
        return address if isinstance(address, str) and address else None

    async def table_ids(self) -> list[str]:
        """The tables whose snapshot names this node as the owner."""
        mine: list[str] = []
        for key in await self._snapshots.keys():
            entry = await self._snapshots.get(key)
            if entry is not None and json.loads(entry.value).get("owner") == self._node_id:
                mine.append(key)
        return mine


class JetStreamResults:
    """Hand and game results (events.v1 ``TableResult``) for the ledger and matchmaking."""

    def __init__(self, js: JetStreamContext) -> None:
        self._js = js

    async def publish(self, table: Table, entry: Entry) -> None:
        config = table.config
        game = config_to_proto(config)
        player_ids = [seat.player_id for seat in config.seats]
        results: list[result_pb2.TableResult] = []
        for event in update_for(entry, None).events:
            if event.WhichOneof("kind") != "hand_finished":
                continue
            hand = event.hand_finished
            results.append(
                result_pb2.TableResult(
                    hand_finished=result_pb2.HandFinished(
                        event_id=f"{table.table_id}:1:hand:{hand.hand_no}",
                        occurred_at=timestamp(entry.at),
                        table_id=table.table_id,
                        game_no=1,
                        game=game.game,
                        preset=game.preset,
                        hand=hand,
                        player_ids=player_ids,
                    )
                )
            )
        for finished in entry.events:
            if not isinstance(finished, GameFinished):
                continue
            results.append(
                result_pb2.TableResult(
                    game_finished=result_pb2.GameFinished(
                        event_id=f"{table.table_id}:{finished.game_no}:game",
                        occurred_at=timestamp(entry.at),
                        table_id=table.table_id,
                        game_no=finished.game_no,
                        game=game.game,
                        preset=game.preset,
                        mode=game.mode,
                        stake=config.stake,
                        ranking=game_finished_to_proto(finished).ranking,
                        hands_played=finished.hands_played,
                        lobby_id=config.lobby_id,
                        started_at=timestamp(table.created_at),
                        payout=payout_to_proto(config.payout),
                    )
                )
            )
        for result in results:
            inner = getattr(result, result.WhichOneof("result") or "")
            await publish(
                self._js,
                result_subject(table.table_id),
                result.SerializeToString(),
                msg_id=inner.event_id,
            )


class KvOwnership:
    """Table leases in KV (DESIGN.md §4), renewed in the background while the node runs.

    A lost lease is only logged here: taking a dead node's tables over is a later step, and
    the log's sequence fence already stops a node that lost a table from writing to it.
    """

    def __init__(self, leases: Leases, *, renew_every: float) -> None:
        self._leases = leases
        self._renew_every = renew_every
        self._held: dict[str, Lease] = {}
        self._task: asyncio.Task[None] | None = None

    async def claim(self, table_id: str) -> bool:
        lease = await self._leases.acquire(table_id)
        if lease is None:
            return False
        self._held[table_id] = lease
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._renew())
        return True

    async def release(self, table_id: str) -> None:
        lease = self._held.pop(table_id, None)
        if lease is not None:
            await self._leases.release(lease)

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(self._renew_every)
            for table_id, lease in list(self._held.items()):
                # Tables finish (and release their lease) while this loop awaits each renewal:
                # a released lease is neither renewed, nor put back, nor reported lost.
                if self._held.get(table_id) is not lease:
                    continue
                try:
                    renewed = await self._leases.renew(lease)
                except LeaseLost:
                    if self._held.get(table_id) is lease:
                        _log.error("lost the lease of table %s", table_id)
                        del self._held[table_id]
                    continue
                except Exception:
                    _log.warning("could not renew the lease of table %s", table_id, exc_info=True)
                    continue
                if self._held.get(table_id) is lease:
                    self._held[table_id] = renewed
                else:
                    # Released during the renewal, whose new revision the release's delete
                    # missed: give the renewed lease up too.
                    await self._leases.release(renewed)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
