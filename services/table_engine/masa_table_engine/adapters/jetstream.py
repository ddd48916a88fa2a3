"""The table log, snapshots, leases and results on NATS JetStream (DESIGN.md §4).

- Log: stream ``MASA_TABLES``, subject ``masa.table.v1.<table_id>.log``, one
  ``TableLogEntry`` per accepted input, published with ``Nats-Msg-Id`` = the entry's event id
  and ``Nats-Expected-Last-Subject-Sequence`` = the stream sequence of the table's previous
  entry, so a node that lost the table (a zombie) cannot append behind the new owner's back,
  and two attempts at one place never both land. Header ``Masa-Node`` names the writer.
- Snapshots: KV bucket ``masa_table_snapshots``, key = table id, value = the owner node, its
  address, the stream sequence of the table's last entry and the whole table as JSON,
  written at creation, every N entries and at the end. Recovery reads the log from there.
- Index: KV bucket ``masa_table_index``, key ``<node_id>.<table_id>``, one per unfinished
  table of a node, so that a start lists its tables without reading every snapshot ever
  written.
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
from collections.abc import Awaitable, Callable
from typing import Final

import nats.errors
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
    read_subject,
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
from masa_table_engine.app.ports import LogConflict, LoggedInput, LogUnavailable
from masa_table_engine.domain.model import AbandonReason, Entry, GameAbandoned, GameFinished
from masa_table_engine.domain.table import Table, table_from_json, table_to_json

__all__ = [
    "INDEX_BUCKET",
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
INDEX_BUCKET: Final = "masa_table_index"
WRITER_HEADER: Final = "Masa-Node"

_log = logging.getLogger(__name__)

# GameAbandoned.reason in words, for the ledger's records.
_ABANDONED_BECAUSE: Final = {
    AbandonReason.NO_PLAYER_LEFT: "P-12: every player left or forfeited; no one played on",
}


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
    """The :class:`~masa_table_engine.app.ports.LogStore` of one node.

    NATS failures (no answer in time, no connection, JetStream not up yet) are raised as
    ``LogUnavailable``; a write fenced off by an entry already in place as ``LogConflict``.
    """

    def __init__(
        self,
        js: JetStreamContext,
        snapshots: KvBucket,
        index: KvBucket,
        *,
        node_id: str,
        owner_address: str,
        default_turn_seconds: float,
    ) -> None:
        self._js = js
        self._snapshots = snapshots
        self._index = index
        self.writer = node_id
        self._owner_address = owner_address
        self._default_turn_seconds = default_turn_seconds
        # The stream sequence of each table's last entry: the fence of its next append.
        self._last: dict[str, int] = {}

    async def append(self, entry: Entry) -> None:
        subject = log_subject(entry.table_id)
        message = entry_to_log(entry, self._owner_address)
        try:
            expected = self._last.get(entry.table_id)
            if expected is None:
                expected = (
                    0
                    if entry.sequence == 1
                    else await last_subject_sequence(self._js, STREAM, subject)
                )
            ack = await publish(
                self._js,
                subject,
                message.SerializeToString(),
                msg_id=message.event_id,
                expected_last_subject_sequence=expected,
                headers={WRITER_HEADER: self.writer},
            )
        except SequenceConflict as error:
            raise LogConflict(str(error)) from None
        except _UNAVAILABLE as error:
            raise LogUnavailable(f"{subject}: {error!r}") from None
        if ack.duplicate:
            # An entry with this event id is stored already: an earlier attempt that landed
            # late. Whose it is, and whether it is this one, only the log can tell.
            raise LogConflict(f"{subject}: entry {entry.sequence} is there already")
        self._last[entry.table_id] = ack.seq

    async def read(self, table_id: str, after_sequence: int) -> list[LoggedInput]:
        subject = log_subject(table_id)
        try:
            stored = await read_subject(
                self._js, STREAM, subject, after=self._last.get(table_id, 0)
            )
        except _UNAVAILABLE as error:
            raise LogUnavailable(f"{subject}: {error!r}") from None
        found: list[LoggedInput] = []
        for raw in stored:
            self._last[table_id] = raw.seq
            message = table_log_pb2.TableLogEntry.FromString(raw.data)
            if message.sequence <= after_sequence:
                continue
            found.append(
                LoggedInput(
                    sequence=message.sequence,
                    at=message.occurred_at.ToNanoseconds() / 1e9,
                    input=input_from_log(message, self._default_turn_seconds),
                    writer=raw.headers.get(WRITER_HEADER, ""),
                )
            )
        return found

    async def save_snapshot(self, table: Table) -> None:
        payload = {
            "owner": self.writer,
            "address": self._owner_address,
            "log_seq": self._last.get(table.table_id, 0),
            "table": table_to_json(table),
        }
        await self._snapshots.put(table.table_id, json.dumps(payload).encode())

    async def load_snapshot(self, table_id: str) -> Table | None:
        entry = await self._snapshots.get(table_id)
        if entry is None:
            return None
        payload = json.loads(entry.value)
        log_seq = payload.get("log_seq")
        if isinstance(log_seq, int) and log_seq > 0:
            # The log is read from the snapshot's last entry on, not from its start.
            self._last[table_id] = log_seq
        else:
            self._last.pop(table_id, None)
        return table_from_json(payload["table"])

    async def owner_address(self, table_id: str) -> str | None:
        entry = await self._snapshots.get(table_id)
        if entry is None:
            return None
        payload = json.loads(entry.value)
        if payload.get("owner") == self.writer:
            return None
        address = payload.get("address")
        return address if isinstance(address, str) and address else None

    async def track(self, table_id: str) -> None:
        await self._index.put(self._index_key(table_id), b"")

    async def untrack(self, table_id: str) -> None:
        await self._index.forget(self._index_key(table_id))
        self._last.pop(table_id, None)

    async def table_ids(self) -> list[str]:
        """The unfinished tables this node runs, from its index (one listing, no GETs)."""
        prefix = f"{self.writer}."
        return [key[len(prefix) :] for key in await self._index.keys(prefix)]

    def _index_key(self, table_id: str) -> str:
        return f"{self.writer}.{table_id}"


# What NATS raises when it cannot be reached or JetStream does not answer in time.
_UNAVAILABLE = (nats.errors.Error, asyncio.TimeoutError, ConnectionError)


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
        for abandoned in entry.events:
            if not isinstance(abandoned, GameAbandoned):
                continue
            results.append(
                result_pb2.TableResult(
                    game_abandoned=result_pb2.GameAbandoned(
                        event_id=f"{table.table_id}:{abandoned.game_no}:abandoned",
                        occurred_at=timestamp(entry.at),
                        table_id=table.table_id,
                        game_no=abandoned.game_no,
                        hold_ids=[seat.hold_id for seat in config.seats if seat.hold_id],
                        reason=_ABANDONED_BECAUSE[abandoned.reason],
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

    A lease that expired while NATS was away (the bucket's TTL ran on) is taken again if
    nobody else took it; one another node holds is reported to ``on_lost``, which hands the
    table over. The log's sequence fence stops a node that lost a table from writing to it
    meanwhile.
    """

    def __init__(self, leases: Leases, *, renew_every: float) -> None:
        self._leases = leases
        self._renew_every = renew_every
        self._held: dict[str, Lease] = {}
        self._task: asyncio.Task[None] | None = None
        self.on_lost: Callable[[str], Awaitable[None]] | None = None

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

    async def holder(self, table_id: str) -> str | None:
        return await self._leases.holder_of(table_id)

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(self._renew_every)
            for table_id, lease in list(self._held.items()):
                # Tables finish (and release their lease) while this loop awaits each renewal:
                # a released lease is neither renewed, nor put back, nor reported lost.
                if self._held.get(table_id) is not lease:
                    continue
                renewed: Lease | None
                try:
                    renewed = await self._leases.renew(lease)
                except LeaseLost:
                    renewed = await self._take_back(table_id, lease)
                except Exception:
                    _log.warning("could not renew the lease of table %s", table_id, exc_info=True)
                    continue
                if renewed is None:
                    continue
                if self._held.get(table_id) is lease:
                    self._held[table_id] = renewed
                else:
                    # Released during the renewal, whose new revision the release's delete
                    # missed: give the renewed lease up too.
                    await self._leases.release(renewed)

    async def _take_back(self, table_id: str, lease: Lease) -> Lease | None:
        """A lease that is no longer at our revision: ours again if it expired meanwhile."""
        try:
            again = await self._leases.acquire(table_id)
        except Exception:
            _log.warning("lease of table %s: could not take it back yet", table_id, exc_info=True)
            return None
        if again is not None:
            _log.info("took back the lease of table %s after it expired", table_id)
            return again
        if self._held.get(table_id) is lease:
            del self._held[table_id]
            _log.error("lost the lease of table %s to another node", table_id)
            if self.on_lost is not None:
                await self.on_lost(table_id)
        return None

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
