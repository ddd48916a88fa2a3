"""The table log, snapshots, leases and results on NATS JetStream (architecture.md).

- Log: stream ``MASA_TABLES``, subject ``masa.table.v1.<table_id>.log``, one
  ``TableLogEntry`` per accepted input, published with ``Nats-Msg-Id`` = the entry's event id
  and ``Nats-Expected-Last-Subject-Sequence`` = the stream sequence of the table's previous
  entry, so a node that lost the table (a zombie) cannot append behind the new owner's back,
  and two attempts at one place never both land. Header ``Masa-Node`` names the writer, and
  ``Masa-Seal`` carries an HMAC under a key only engines hold (masa_platform.signing): an entry
  without a good seal was not written by an engine, and no table is rebuilt from it. Each
  entry records the rules library's version and the snapshot schema version of its writer.
- Snapshots: KV bucket ``masa_table_snapshots``, key = table id, value = the schema version,
  the owner node, its address, the stream sequence of the table's last entry, whether the
  owner handed the table over (a drain), and the whole table as JSON, written at creation,
  every N entries, at a hand-over and at the end, sealed like the log entries. Recovery reads
  the log from there; a snapshot of another schema, or one whose seal does not hold, is
  ignored and the log replayed from its start.
- Index: KV bucket ``masa_table_index``, key ``<node_id>.<table_id>``, one per unfinished
  table of a node, so that a start lists its tables without reading every snapshot ever
  written, and live nodes find the tables of a node that died (:class:`JetStreamDirectory`).
- Leases: KV bucket ``masa_table_leases`` whose TTL is the lease time, renewed by a task.
- Results: ``TableResult`` on ``masa.table.v1.<table_id>.result`` in the same stream, with
  ``Nats-Msg-Id`` = the result's event id, which is derived from the table and the entry so
  that publishing again after a crash is de-duplicated, and ``Masa-Signature``: the results
  key's signature, which the ledger checks before it pays and matchmaking before it rates.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterator
from importlib.metadata import version
from typing import Any, Final

import nats.errors
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from masa.events.v1 import engine_pb2, result_pb2, table_log_pb2
from masa_platform.acks import AckedPublisher, AckRefused, publish_headers
from masa_platform.bus import (
    KvBucket,
    Lease,
    LeaseLost,
    Leases,
    last_subject_sequence,
    publish,
    read_subject,
)
from masa_platform.bus_access import TABLES_STREAM
from masa_platform.bus_plan import LEASES_BUCKET, SNAPSHOTS_BUCKET, TABLE_INDEX_BUCKET
from masa_platform.loops import supervise
from masa_platform.metrics import LoopMetrics
from masa_platform.signing import RESULT_SIGNATURE, SEAL, ResultSigner, Sealer
from masa_platform.tasks import stop_tasks
from nats.aio.client import Client

from masa_table_engine.adapters.convert import entry_to_log, input_from_log
from masa_table_engine.adapters.results import result_event_id, table_results
from masa_table_engine.app.ports import (
    LogConflict,
    LoggedInput,
    LogUnavailable,
    Placement,
    Scan,
    Snapshot,
    Unserved,
)
from masa_table_engine.app.rendezvous import claim_order
from masa_table_engine.domain.model import Entry
from masa_table_engine.domain.table import Table, table_from_json, table_to_json

__all__ = [
    "INDEX_BUCKET",
    "LEASE_BUCKET",
    "SNAPSHOT_BUCKET",
    "SNAPSHOT_SCHEMA",
    "STREAM",
    "JetStreamDirectory",
    "JetStreamLog",
    "JetStreamResults",
    "KvOwnership",
    "log_subject",
    "result_subject",
]

STREAM: Final = TABLES_STREAM
SNAPSHOT_BUCKET: Final = SNAPSHOTS_BUCKET
LEASE_BUCKET: Final = LEASES_BUCKET
INDEX_BUCKET: Final = TABLE_INDEX_BUCKET
WRITER_HEADER: Final = "Masa-Node"
# The version of the snapshot format (table_to_json plus the fields around it, sealed). A node
# reads only its own; any other is ignored, and the table is replayed from its first entry.
SNAPSHOT_SCHEMA: Final = 2
RULES_VERSION: Final = version("masa-rules")
# Replayed and logged times may differ by float rounding (a deadline is the input's time plus
# the turn time, computed again from the time read back): closer than this is the same time.
_SAME_TIME_NANOS: Final = 1_000

_log = logging.getLogger(__name__)


def log_subject(table_id: str) -> str:
    return f"masa.table.v1.{table_id}.log"


def result_subject(table_id: str) -> str:
    return f"masa.table.v1.{table_id}.result"


class JetStreamLog:
    """The :class:`~masa_table_engine.app.ports.LogStore` of one node.

    NATS failures (no answer in time, no connection, JetStream not up yet) are raised as
    ``LogUnavailable``; a write fenced off by an entry already in place as ``LogConflict``.
    """

    def __init__(  # noqa: PLR0913 - the connection and stores, then the node's facts by keyword
        self,
        nc: Client,
        publisher: AckedPublisher,
        snapshots: KvBucket,
        index: KvBucket,
        *,
        node_id: str,
        owner_address: str,
        default_turn_seconds: float,
        sealer: Sealer,
    ) -> None:
        self._nc = nc
        self._sealer = sealer
        # Appends go through the shared ack inbox: one per accepted action, on the hot path.
        self._publisher = publisher
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
        message.rules_version = RULES_VERSION
        message.schema_version = SNAPSHOT_SCHEMA
        try:
            expected = self._last.get(entry.table_id)
            if expected is None:
                expected = (
                    0
                    if entry.sequence == 1
                    else await last_subject_sequence(self._nc, STREAM, subject)
                )
            payload = message.SerializeToString()
            headers = publish_headers(
                msg_id=message.event_id,
                expected_last_subject_sequence=expected,
                extra={WRITER_HEADER: self.writer, SEAL: self._sealer.seal(subject, payload)},
            )
            ack = await self._publisher.publish(subject, payload, headers)
        except AckRefused as refused:
            if refused.wrong_sequence:
                raise LogConflict(f"{subject}: {refused.description}") from None
            raise LogUnavailable(f"{subject}: {refused!r}") from None
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
                self._nc, STREAM, subject, after=self._last.get(table_id, 0)
            )
        except _UNAVAILABLE as error:
            raise LogUnavailable(f"{subject}: {error!r}") from None
        found: list[LoggedInput] = []
        for raw in stored:
            self._last[table_id] = raw.seq
            message = table_log_pb2.TableLogEntry.FromString(raw.data)
            if message.sequence <= after_sequence:
                continue
            events = table_log_pb2.TableLogEntry(events=message.events)
            found.append(
                LoggedInput(
                    sequence=message.sequence,
                    at=message.occurred_at.ToNanoseconds() / 1e9,
                    input=input_from_log(message, self._default_turn_seconds),
                    writer=raw.headers.get(WRITER_HEADER, ""),
                    logged_events=events.SerializeToString(deterministic=True),
                    authentic=self._sealer.holds(subject, raw.data, raw.headers.get(SEAL)),
                )
            )
        return found

    def matches(self, entry: Entry, logged: LoggedInput) -> bool:
        if logged.logged_events is None:
            return True
        replayed = table_log_pb2.TableLogEntry(events=entry_to_log(entry, "").events)
        if replayed.SerializeToString(deterministic=True) == logged.logged_events:
            return True
        return _same(replayed, table_log_pb2.TableLogEntry.FromString(logged.logged_events))

    async def save_snapshot(
        self,
        table: Table,
        *,
        handed_over: bool = False,
        requests: tuple[tuple[int, str, int], ...] = (),
    ) -> None:
        payload = {
            "schema": SNAPSHOT_SCHEMA,
            "owner": self.writer,
            "address": self._owner_address,
            "log_seq": self._last.get(table.table_id, 0),
            "handed_over": handed_over,
            "requests": [list(request) for request in requests],
            "table": table_to_json(table),
        }
        with _answering(f"snapshot of {table.table_id}"):
            await self._snapshots.put(table.table_id, self._sealed(table.table_id, payload))

    def _sealed(self, table_id: str, payload: dict[str, Any]) -> bytes:
        body = json.dumps(payload)
        seal = self._sealer.seal(f"{SNAPSHOT_BUCKET}.{table_id}", body.encode())
        return json.dumps({"seal": seal, "body": body}).encode()

    def _unsealed(self, table_id: str, value: bytes) -> dict[str, Any] | None:
        """A snapshot's payload, or None when its seal does not hold (it was not written by an
        engine, or in another format): the log, which is sealed entry by entry, is the truth."""
        try:
            document = json.loads(value)
            body, seal = document["body"], document["seal"]
        except (ValueError, KeyError, TypeError):
            return None
        if not isinstance(body, str) or not self._sealer.holds(
            f"{SNAPSHOT_BUCKET}.{table_id}", body.encode(), seal if isinstance(seal, str) else None
        ):
            return None
        payload = json.loads(body)
        return payload if isinstance(payload, dict) else None

    async def load_snapshot(self, table_id: str) -> Snapshot | None:
        with _answering(f"snapshot of {table_id}"):
            entry = await self._snapshots.get(table_id)
        self._last.pop(table_id, None)
        if entry is None:
            return None
        payload = self._unsealed(table_id, entry.value)
        if payload is None:
            _log.warning(
                "table %s: a snapshot without a table-engine's seal; replaying the whole log",
                table_id,
                extra={"table_id": table_id},
            )
            return None
        # Snapshots from before the schema was recorded are of the first schema.
        schema = payload.get("schema", 1)
        if schema != SNAPSHOT_SCHEMA:
            _log.warning(
                "table %s: snapshot of schema %s, not %d; replaying the whole log",
                table_id,
                schema,
                SNAPSHOT_SCHEMA,
            )
            return None
        log_seq = payload.get("log_seq")
        if isinstance(log_seq, int) and log_seq > 0:
            # The log is read from the snapshot's last entry on, not from its start.
            self._last[table_id] = log_seq
        requests = tuple(
            (int(seat), str(request_id), int(sequence))
            for seat, request_id, sequence in payload.get("requests", ())
        )
        return Snapshot(
            table_from_json(payload["table"]), bool(payload.get("handed_over")), requests
        )

    async def placement(self, table_id: str) -> Placement | None:
        with _answering(f"snapshot of {table_id}"):
            entry = await self._snapshots.get(table_id)
        if entry is None:
            return None
        payload = self._unsealed(table_id, entry.value)
        if payload is None:
            return None
        table = payload.get("table")
        return Placement(
            node=str(payload.get("owner", "")),
            address=str(payload.get("address", "")),
            finished=bool(table.get("finished")) if isinstance(table, dict) else False,
        )

    async def track(self, table_id: str) -> None:
        with _answering(f"index entry of {table_id}"):
            await self._index.put(self._index_key(table_id), b"")

    async def untrack(self, table_id: str) -> None:
        with _answering(f"index entry of {table_id}"):
            await self._index.forget(self._index_key(table_id))
        self._last.pop(table_id, None)

    async def adopt(self, table_id: str, node: str) -> None:
        await self.track(table_id)
        if node != self.writer:
            with _answering(f"index entry of {table_id}"):
                await self._index.forget(f"{node}.{table_id}")

    async def table_ids(self) -> list[str]:
        """The unfinished tables this node runs, from its index (one listing, no GETs)."""
        prefix = f"{self.writer}."
        with _answering("the index"):
            return [key[len(prefix) :] for key in await self._index.keys(prefix)]

    def _index_key(self, table_id: str) -> str:
        return f"{self.writer}.{table_id}"


# What NATS raises when it cannot be reached or JetStream does not answer in time.
_UNAVAILABLE = (nats.errors.Error, asyncio.TimeoutError, ConnectionError)


@contextlib.contextmanager
def _answering(what: str) -> Iterator[None]:
    """NATS failures (no answer, no connection, JetStream not up or electing a leader) as
    ``LogUnavailable``, which callers retry and clients see as UNAVAILABLE."""
    try:
        yield
    except _UNAVAILABLE as error:
        raise LogUnavailable(f"{what}: {error!r}") from None


def _same(one: Message, other: Message) -> bool:
    """Equal messages, but for times closer than ``_SAME_TIME_NANOS``."""
    if one.DESCRIPTOR.full_name != other.DESCRIPTOR.full_name:
        return False
    if one.DESCRIPTOR.full_name == "google.protobuf.Timestamp":
        gap = abs(one.ToNanoseconds() - other.ToNanoseconds())  # type: ignore[attr-defined]
        return bool(gap <= _SAME_TIME_NANOS)
    fields = one.ListFields()
    if [f.name for f, _ in fields] != [f.name for f, _ in other.ListFields()]:
        return False
    return all(
        _same_values(descriptor, value, getattr(other, descriptor.name))
        for descriptor, value in fields
    )


def _same_values(descriptor: FieldDescriptor, mine: Any, theirs: Any) -> bool:
    if descriptor.is_repeated:
        return len(mine) == len(theirs) and all(
            _same_value(descriptor, a, b) for a, b in zip(mine, theirs, strict=True)
        )
    return _same_value(descriptor, mine, theirs)


def _same_value(descriptor: FieldDescriptor, mine: Any, theirs: Any) -> bool:
    if descriptor.message_type is not None:
        return _same(mine, theirs)
    return bool(mine == theirs)


class JetStreamDirectory:
    """The :class:`~masa_table_engine.app.ports.Directory` over the index, the leases and the
    engine-node registry.

    A listing of every node's index entries and every lease grows with tables times nodes, so
    the periodic scan lists only what the registry gives a reason to (:meth:`worth_scanning`):

    - a node silent (it missed two rewrites of its record), starting to drain or gone since
      the last look: its own index entries (one listing filtered on the server by its prefix)
      and the leases of those tables only (read by key, a request per 256), soon for a lease's
      life after it first went so (its leases run out or are released within it), and for as
      long as its index lists tables and a lease's life after;
    - the node's own start (it has not seen who was there before), the end of a node's
      trouble, tables found left over by the last listing of everything: everything;
    - and, for a lease given up with every node well (a recovery that failed), everything once
      every ``_FULL_SCAN_SECONDS`` by one live node for the whole cluster: the one that ranks
      first for that period (:func:`~masa_table_engine.app.rendezvous.claim_order`), so the
      reads do not grow with the nodes, and again at each scan until a listing answers and
      finds nothing. With no node in trouble, such a scan says to take what it finds without
      waiting for the nodes ranked above (``Scan.claim_all``): no other node may list it soon.
    """

    def __init__(
        self,
        index: KvBucket,
        leases: KvBucket,
        nodes: KvBucket,
        *,
        node: str,
        node_ttl_seconds: float,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._index = index
        self._leases = leases
        self._nodes = nodes
        self._node = node
        # The clocks (a test's own): intervals, and the registry records' write times.
        self._monotonic = monotonic
        self._wall = wall
        # A node rewrites its record every third of the TTL: one that missed two rewrites is
        # taken for dead before the bucket drops its record, so its tables are shared out
        # among the nodes that are left.
        self._silent_after = node_ttl_seconds * 2 / 3
        # The registry as last read: a scan reads it anew, its other questions need not.
        self._records: tuple[float, dict[str, engine_pb2.EngineNode]] = (0.0, {})
        # How long to keep listing after a node went silent, drained or vanished: until the
        # leases it held have run out, and a little more.
        self._alert_seconds = (leases.ttl_seconds or node_ttl_seconds) + _ALERT_MARGIN_SECONDS
        self._everything_until = self._monotonic() + self._alert_seconds
        # Each node in trouble: since when, and until when its index is still worth listing
        # (a lease's life after it was last seen silent, started draining, vanished or had
        # tables in its index). At most the nodes the registry listed lately.
        self._troubled: dict[str, tuple[float, float]] = {}
        # The nodes draining at the last look: a drain is news once, when it starts.
        self._draining: set[str] = set()
        self._known: set[str] = set()
        # A listing of everything is owed (a node's trouble ended); the cluster's listing is
        # owed or still finding tables (until one finds none: a listing that failed is made
        # again); the last period whose lister this node looked up.
        self._owed = False
        self._for_cluster = False
        self._turn_period: int | None = None
        self._found = False

    async def worth_scanning(self) -> Scan | None:
        now = self._monotonic()
        with _answering("the engine-node registry"):
            # Read anew: a node that starts draining is seen at this scan, not a second later.
            records = await self._read_nodes(fresh=True)
        wall = self._wall()
        for node, record in records.items():
            silent = wall - record.update_time.ToNanoseconds() / 1e9 >= self._silent_after
            if silent or (record.draining and node not in self._draining):
                self._trouble(node, now)
            elif not record.draining:
                # Well again (resumed, or restarted under the same id): it serves its index.
                self._troubled.pop(node, None)
        self._draining = {node for node, record in records.items() if record.draining}
        for node in self._known - records.keys():
            self._trouble(node, now)
        self._known = set(records)
        over = [node for node, (_, until) in self._troubled.items() if now >= until]
        for node in over:
            del self._troubled[node]
        if over:
            # One listing of everything closes the incident: a table it left unserved (a
            # rebuild given up, an heir that died before moving the index entry) is found.
            self._owed = True
        soon = any(now - since < self._alert_seconds for since, _ in self._troubled.values())
        if self._my_turn(records, wall):
            self._for_cluster = True
        if self._found or self._owed or now < self._everything_until or self._for_cluster:
            # Only the cluster's listing is made by one node alone: every node makes the others.
            return Scan(soon=soon, claim_all=self._for_cluster and not self._troubled)
        if self._troubled:
            return Scan(frozenset(self._troubled), soon=soon)
        return None

    def _my_turn(self, records: dict[str, engine_pb2.EngineNode], wall: float) -> bool:
        """Whether this node lists everything for the cluster in this period: at the first
        scan of each period, the live node that ranks first for it does. Nodes that see the
        registry differently may both list, or none: a period is then listed twice, or
        skipped."""
        period = math.floor(wall / _FULL_SCAN_SECONDS)
        if period == self._turn_period:
            return False
        self._turn_period = period
        order = claim_order(f"listing/{period}", self._live(records, wall))
        return bool(order) and order[0] == self._node

    def _trouble(self, node: str, now: float) -> None:
        since, _ = self._troubled.get(node, (now, now))
        self._troubled[node] = (since, now + self._alert_seconds)

    async def unserved(self, nodes: frozenset[str] | None = None) -> list[Unserved]:
        if nodes is not None:
            return await self._unserved_of(nodes)
        with _answering("the index and the leases"):
            listed = await self._index.keys()
            leased = set(await self._leases.keys())
        found: list[Unserved] = []
        for key in listed:
            node, _, table_id = key.partition(".")
            if table_id and table_id not in leased:
                found.append(Unserved(table_id, node))
        self._owed = False
        self._found = bool(found)
        self._for_cluster = self._for_cluster and self._found
        return found

    async def _unserved_of(self, nodes: frozenset[str]) -> list[Unserved]:
        listed: dict[str, str] = {}
        with _answering("the index and the leases"):
            for node in sorted(nodes):
                for key in await self._index.keys(f"{node}."):
                    listed.setdefault(key.partition(".")[2], node)
            leased = {entry.key for entry in await self._leases.entries_of(list(listed))}
        # A node in trouble stays so while its index lists tables: they are still to move.
        now = self._monotonic()
        for node in set(listed.values()) & self._troubled.keys():
            self._trouble(node, now)
        return [
            Unserved(table_id, node)
            for table_id, node in listed.items()
            if table_id and table_id not in leased
        ]

    async def live_nodes(self) -> list[str]:
        with _answering("the engine-node registry"):
            records = await self._read_nodes()
        return self._live(records, self._wall())

    def _live(self, records: dict[str, engine_pb2.EngineNode], wall: float) -> list[str]:
        return [
            node
            for node, record in records.items()
            if not record.draining
            and wall - record.update_time.ToNanoseconds() / 1e9 < self._silent_after
        ]

    async def address_of(self, node: str) -> str | None:
        with _answering("the engine-node registry"):
            record = (await self._read_nodes()).get(node)
            if record is None:
                record = await self._read_node(node)
        return record.address if record is not None and record.address else None

    async def _read_nodes(self, *, fresh: bool = False) -> dict[str, engine_pb2.EngineNode]:
        read_at, records = self._records
        if not fresh and self._monotonic() - read_at < _NODES_FRESH_SECONDS:
            return records
        # One listing of the records with their values, not a read per node.
        records = {
            entry.key: engine_pb2.EngineNode.FromString(entry.value)
            for entry in await self._nodes.entries()
        }
        self._records = (self._monotonic(), records)
        return records

    async def _read_node(self, node: str) -> engine_pb2.EngineNode | None:
        entry = await self._nodes.get(node)
        return engine_pb2.EngineNode.FromString(entry.value) if entry is not None else None


_NODES_FRESH_SECONDS: Final = 1.0
# With every node well, one node lists every table this often (see JetStreamDirectory).
_FULL_SCAN_SECONDS: Final = 30.0
_ALERT_MARGIN_SECONDS: Final = 5.0
# Lease renewals in flight at once.
_RENEWALS_AT_ONCE: Final = 64


class JetStreamResults:
    """Hand and game results (events.v1 ``TableResult``) for the ledger and matchmaking."""

    def __init__(self, nc: Client, signer: ResultSigner) -> None:
        self._nc = nc
        self._js = nc.jetstream()
        self._signer = signer

    async def publish(self, table: Table, entry: Entry, *, recheck: bool = False) -> list[str]:
        results = table_results(table, entry)
        if not results:
            return []
        subject = result_subject(table.table_id)
        on_the_bus: set[str] = set()
        if recheck:
            for raw in await read_subject(self._nc, STREAM, subject):
                on_the_bus.add(result_event_id(result_pb2.TableResult.FromString(raw.data)))
        outcomes: list[str] = []
        for result in results:
            event_id = result_event_id(result)
            if event_id in on_the_bus:
                outcomes.append("duplicate")
                continue
            payload = result.SerializeToString()
            ack = await publish(
                self._js,
                subject,
                payload,
                msg_id=event_id,
                headers={RESULT_SIGNATURE: self._signer.header(subject, payload)},
            )
            outcomes.append("duplicate" if ack.duplicate else "published")
        return outcomes


class _RenewalsFailed(Exception):
    """Some leases of a renewal pass were not renewed (each is logged); a failed loop run."""

    def __init__(self, count: int) -> None:
        super().__init__(f"{count} leases not renewed")
        self.count = count


class KvOwnership:
    """Table leases in KV (architecture.md), renewed in the background while the node runs.

    A lease that expired while NATS was away (the bucket's TTL ran on) is taken again if
    nobody else took it; one another node holds is reported to ``on_lost``, which hands the
    table over. The log's sequence fence stops a node that lost a table from writing to it
    meanwhile.
    """

    def __init__(self, leases: Leases, *, renew_every: float, loops: LoopMetrics) -> None:
        self._leases = leases
        self._renew_every = renew_every
        self._loops = loops
        self._held: dict[str, Lease] = {}
        self._task: asyncio.Task[None] | None = None
        self.on_lost: Callable[[str], Awaitable[None]] | None = None

    async def claim(self, table_id: str) -> bool:
        if table_id in self._held:
            # Held and renewed already: acquiring it again would race with the renewal.
            return True
        with _answering(f"lease of {table_id}"):
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
            with _answering(f"lease of {table_id}"):
                await self._leases.release(lease)

    async def holder(self, table_id: str) -> str | None:
        with _answering(f"lease of {table_id}"):
            return await self._leases.holder_of(table_id)

    def held(self) -> set[str]:
        return set(self._held)

    async def _renew(self) -> None:
        # Ended by close(), which cancels it.
        await supervise(
            "lease_renewal", self._renew_pass, interval_seconds=self._renew_every, wait_first=True
        )

    async def _renew_pass(self) -> None:
        try:
            with self._loops.run("lease_renewal"):
                await self._renew_all()
        except _RenewalsFailed as failed:
            # Expected while NATS is away: said without a traceback, counted as an error run.
            _log.warning("could not renew %d leases; trying again next pass", failed.count)

    async def _renew_all(self) -> None:
        """Renew every lease held, ``_RENEWALS_AT_ONCE`` at a time (their writes leave
        together and their acks come back together, so a pass over a thousand leases takes a
        few round trips, not a thousand); raises :class:`_RenewalsFailed` after the pass when
        some renewals failed (the others are renewed all the same)."""
        held = iter(list(self._held.items()))
        failures = 0

        async def renewing() -> None:
            nonlocal failures
            for table_id, lease in held:
                if not await self._renew_one(table_id, lease):
                    failures += 1

        await asyncio.gather(*(renewing() for _ in range(_RENEWALS_AT_ONCE)))
        if failures:
            raise _RenewalsFailed(failures)

    async def _renew_one(self, table_id: str, lease: Lease) -> bool:
        """Renew one lease; False when the renewal failed (to be tried again next pass)."""
        # Tables finish (and release their lease) while renewals are awaited: a released
        # lease is neither renewed, nor put back, nor reported lost.
        if self._held.get(table_id) is not lease:
            return True
        renewed: Lease | None
        try:
            renewed = await self._leases.renew(lease)
        except LeaseLost:
            renewed = await self._take_back(table_id, lease)
        except Exception:
            _log.warning(
                "could not renew the lease of table %s",
                table_id,
                exc_info=True,
                extra={"table_id": table_id},
            )
            return False
        if renewed is None:
            return True
        if self._held.get(table_id) is lease:
            self._held[table_id] = renewed
        else:
            # Released during the renewal, whose new revision the release's delete missed:
            # give the renewed lease up too.
            await self._leases.release(renewed)
        return True

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
        await stop_tasks(self._task)
