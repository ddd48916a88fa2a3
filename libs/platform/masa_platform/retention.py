"""The sweep of finished tables (``masa-bus sweep``): what a table leaves on the bus goes once
its result is settled and its retention has passed.

``MASA_TABLES`` has no age limit (a live table's log is its state and must never age out), so
without this a finished table's log, results, snapshot and index entry would stay for ever.
One run of :func:`sweep`, as the ``retention`` NATS user (:mod:`masa_platform.bus_access`):

1. How far the results are finished with: the ack floor of each result consumer
   (``ledger-settlement``, ``matchmaking-ratings``), the stream sequence at and below which it
   acknowledged every result. A result above either floor is not settled or not rated yet,
   and its table is kept however old.
2. Which results were set aside in ``MASA_DEAD_LETTERS`` (:mod:`masa_platform.consumer`): a
   consumer terminates them, so they fall under its floor, yet they are not settled, and the
   ledger's SettleGame by hand reads the table's result from ``MASA_TABLES``; such a table is
   kept while its dead letter is.
3. The results in stream order, oldest first, in batches, through a consumer of the retention
   user's own that sees the result subjects only (the user may read no table log). A table is
   finished when its result subject holds ``GameFinished`` or ``GameAbandoned`` (an operator's
   void, a state that could not be rebuilt): every table that ends publishes one of the two.
   A finished table is swept when that result was published more than
   ``MASA_TABLE_RETENTION_SECONDS`` ago, is at or below both floors and was not set aside;
   otherwise it is kept, counted by why. A run looks at ``MASA_SWEEP_TABLES_LIMIT`` finished
   tables at most (``more`` in its report says there were others).
4. A swept table loses its snapshot and index entries (purged from their buckets), then every
   subject of it in ``MASA_TABLES`` (``masa.table.v1.<id>.>``: its log and results), its
   result last, so a run that stops half-way finds the table again the next time. Its lease
   is gone already: the lease bucket's entries expire.

A second run sweeps nothing the first one swept (their results are gone). Ages are the
stream's timestamps against this host's clock.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import time
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Final

import nats.js.errors
from google.protobuf.message import DecodeError
from masa.events.v1 import result_pb2
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import api

from masa_platform.bus_access import (
    DEAD_LETTER_STREAM,
    LEDGER_RESULTS_CONSUMER,
    MATCHMAKING_RESULTS_CONSUMER,
    RESULTS,
    RETENTION_READER,
    TABLES_STREAM,
)
from masa_platform.bus_plan import DEAD_LETTER_SUBJECTS, SNAPSHOTS_BUCKET, TABLE_INDEX_BUCKET
from masa_platform.consumer import STREAM_HEADER, SUBJECT_HEADER
from masa_platform.direct import batches_after
from masa_platform.settings import SettingsError

__all__ = ["SweepFailed", "SweepReport", "SweepSettings", "sweep"]

_log = logging.getLogger(__name__)

_DAY: Final = 86_400.0
# A table id as the table-engine accepts it: one subject token, no wildcard.
_TABLE_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
_RESULT_SUBJECT: Final = re.compile(r"masa\.table\.v1\.([^.]+)\.result")
_FINAL: Final = frozenset({"game_finished", "game_abandoned"})
_READ_BATCH: Final = 256
_ANSWER_SECONDS: Final = 5.0
# The reader of a run that died goes away by itself once idle this long.
_READER_IDLE_SECONDS: Final = 60.0
# Tables whose results were set aside, held in memory at most; past them an operator looks
# at the dead letters first.
_SET_ASIDE_LIMIT: Final = 100_000
# A pull request's answers that end it short of its batch: nothing more (no_wait), or it ran out.
_NO_MORE: Final = frozenset({"404", "408"})


class SweepFailed(Exception):
    """The bus is not in a state to sweep (a result consumer is missing, JetStream refused a
    call, too many results are set aside); nothing more is purged in this run."""


@dataclass(frozen=True, slots=True)
class SweepSettings:
    """The sweep's knobs, read from ``MASA_*``."""

    # How long a finished table stays on the bus after its result was published (and settled).
    table_retention_seconds: float = 7 * _DAY
    # Finished tables one run looks at, swept or kept.
    sweep_tables_limit: int = 10_000

    def __post_init__(self) -> None:
        if not 1.0 <= self.table_retention_seconds <= 3_660 * _DAY:
            raise SettingsError(
                "MASA_TABLE_RETENTION_SECONDS must be at least 1 second and at most 10 years"
            )
        if not 1 <= self.sweep_tables_limit <= 1_000_000:
            raise SettingsError("MASA_SWEEP_TABLES_LIMIT must be 1 to 1,000,000")


@dataclass(slots=True)
class SweepReport:
    """What one run did: finished tables swept, and kept because a result consumer has not
    acknowledged their result yet, because a consumer set it aside, or because they are
    younger than the retention; the messages purged; whether the run stopped at its limit with
    results left unread; and the stream sequence through which both consumers acknowledged."""

    swept: int = 0
    kept_unsettled: int = 0
    kept_set_aside: int = 0
    kept_young: int = 0
    purged_messages: int = 0
    more: bool = False
    settled_through: int = 0

    def as_json(self) -> dict[str, int | bool]:
        return {
            "swept": self.swept,
            "kept_unsettled": self.kept_unsettled,
            "kept_set_aside": self.kept_set_aside,
            "kept_young": self.kept_young,
            "purged_messages": self.purged_messages,
            "more": self.more,
            "settled_through": self.settled_through,
        }


async def sweep(nc: Client, settings: SweepSettings) -> SweepReport:
    """One run (see the module doc); raises :class:`SweepFailed`, or a NATS error when the bus
    does not answer, after purging only whole tables."""
    cutoff = time.time() - settings.table_retention_seconds
    report = SweepReport(settled_through=await _settled_through(nc))
    set_aside = await _set_aside(nc)
    looked_at = 0
    async with _results(nc) as results:
        async for message in results:
            table_id = table_of(message.subject)
            if table_id is None or _kind(message.data) not in _FINAL:
                continue
            looked_at += 1
            metadata = message.metadata
            if metadata.timestamp.timestamp() > cutoff:
                report.kept_young += 1
            elif table_id in set_aside:
                report.kept_set_aside += 1
            elif metadata.sequence.stream > report.settled_through:
                report.kept_unsettled += 1
            else:
                report.purged_messages += await _purge_table(nc, table_id)
                report.swept += 1
            if looked_at >= settings.sweep_tables_limit:
                report.more = metadata.num_pending > 0
                break
    _log.info("sweep done", extra=report.as_json())
    return report


def table_of(subject: str) -> str | None:
    """The table id of a result subject (``masa.table.v1.<id>.result``), or None."""
    match = _RESULT_SUBJECT.fullmatch(subject)
    if match is None or not _TABLE_ID.fullmatch(match.group(1)):
        return None
    return match.group(1)


def _kind(data: bytes) -> str | None:
    try:
        return result_pb2.TableResult.FromString(data).WhichOneof("result")
    except DecodeError:
        return None


async def _settled_through(nc: Client) -> int:
    """The lower of the two result consumers' ack floors (stream sequences)."""
    js = nc.jetstream()
    floors: list[int] = []
    for name in (LEDGER_RESULTS_CONSUMER, MATCHMAKING_RESULTS_CONSUMER):
        try:
            info = await js.consumer_info(TABLES_STREAM, name, timeout=_ANSWER_SECONDS)
        except nats.js.errors.NotFoundError:
            raise SweepFailed(
                f"consumer {TABLES_STREAM}/{name} does not exist: run masa-bus provision"
            ) from None
        floors.append(int(info.ack_floor.stream_seq or 0) if info.ack_floor else 0)
    return min(floors)


async def _set_aside(nc: Client) -> frozenset[str]:
    """The tables whose results a consumer set aside, while the dead letters are kept."""
    tables: set[str] = set()
    async for batch in batches_after(
        nc, DEAD_LETTER_STREAM, DEAD_LETTER_SUBJECTS, timeout=_ANSWER_SECONDS
    ):
        for letter in batch:
            if letter.headers.get(STREAM_HEADER) != TABLES_STREAM:
                continue
            table_id = table_of(letter.headers.get(SUBJECT_HEADER, ""))
            if table_id is not None:
                tables.add(table_id)
        if len(tables) > _SET_ASIDE_LIMIT:
            raise SweepFailed(
                f"results of more than {_SET_ASIDE_LIMIT} tables are set aside in "
                f"{DEAD_LETTER_STREAM}: look at them before sweeping"
            )
    return frozenset(tables)


@asynccontextmanager
async def _results(nc: Client) -> AsyncIterator[AsyncGenerator[Msg, None]]:
    """The results of ``MASA_TABLES`` in stream order, read through the retention user's own
    consumer: made afresh (a reader a dead run left would start where that run stopped),
    removed afterwards, and gone by itself when a run dies."""
    js = nc.jetstream()
    await _remove_reader(nc)
    await js.add_consumer(
        TABLES_STREAM,
        api.ConsumerConfig(
            name=RETENTION_READER,
            filter_subject=RESULTS,
            deliver_policy=api.DeliverPolicy.ALL,
            ack_policy=api.AckPolicy.NONE,
            inactive_threshold=_READER_IDLE_SECONDS,
            mem_storage=True,
            num_replicas=1,
        ),
        timeout=_ANSWER_SECONDS,
    )
    reading = _read(nc)
    try:
        yield reading
    finally:
        await reading.aclose()
        await _remove_reader(nc)


async def _remove_reader(nc: Client) -> None:
    with contextlib.suppress(nats.js.errors.NotFoundError):
        await nc.jetstream().delete_consumer(TABLES_STREAM, RETENTION_READER)


async def _read(nc: Client) -> AsyncGenerator[Msg, None]:
    while True:
        batch = await _next_batch(nc)
        for message in batch:
            yield message
        if len(batch) < _READ_BATCH:
            return


async def _next_batch(nc: Client) -> list[Msg]:
    """Up to ``_READ_BATCH`` results from the reader, without waiting for new ones."""
    inbox = nc.new_inbox()
    subscription = await nc.subscribe(inbox)
    try:
        await nc.publish(
            f"$JS.API.CONSUMER.MSG.NEXT.{TABLES_STREAM}.{RETENTION_READER}",
            json.dumps({"batch": _READ_BATCH, "no_wait": True}).encode(),
            reply=inbox,
        )
        found: list[Msg] = []
        while len(found) < _READ_BATCH:
            reply = await subscription.next_msg(timeout=_ANSWER_SECONDS)
            headers = reply.headers or {}
            status = headers.get("Status")
            if status is None:
                found.append(reply)
            elif status in _NO_MORE:
                break
            else:
                raise SweepFailed(
                    f"reading the results: status {status} {headers.get('Description', '')}"
                )
        return found
    finally:
        await subscription.unsubscribe()


async def _purge_table(nc: Client, table_id: str) -> int:
    """Everything the bus keeps of a finished table; the messages purged."""
    purged = await _purge(nc, f"KV_{SNAPSHOTS_BUCKET}", f"$KV.{SNAPSHOTS_BUCKET}.{table_id}")
    # Index keys are <node>.<table>.
    purged += await _purge(nc, f"KV_{TABLE_INDEX_BUCKET}", f"$KV.{TABLE_INDEX_BUCKET}.*.{table_id}")
    purged += await _purge(nc, TABLES_STREAM, f"masa.table.v1.{table_id}.>")
    _log.info("table swept", extra={"table_id": table_id, "purged_messages": purged})
    return purged


async def _purge(nc: Client, stream: str, subjects: str) -> int:
    """Purge ``subjects`` from ``stream``; the messages it removed."""
    reply = await nc.request(
        f"$JS.API.STREAM.PURGE.{stream}",
        json.dumps({"filter": subjects}).encode(),
        timeout=_ANSWER_SECONDS,
    )
    answer = json.loads(reply.data or b"{}")
    if not isinstance(answer, dict) or not answer.get("success"):
        error = answer.get("error") if isinstance(answer, dict) else answer
        raise SweepFailed(f"purging {subjects} from {stream}: {error}")
    return int(answer.get("purged", 0))
