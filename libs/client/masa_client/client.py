"""A typed async client for the table API (``masa.table.v1.TableService``).

What it does for the caller:

- sends the bearer token on every call (``authorization: Bearer ...``), renewed before it
  expires when the client was given a source of tokens (:mod:`masa_client.tokens`); a call or
  a watch stream the server ends with ``TOKEN_EXPIRED`` goes on with a fresh token;
- retries a call that failed with ``UNAVAILABLE`` (a node restarting, a dropped connection) with
  backoff, sending the *same* ``request_id`` so the server applies a write at most once
  (AIP-155); an action the old node accepted but never acknowledged is answered from the log
  by the node that serves the table now;
- follows a table from node to node (architecture.md, issue 12). ``TABLE_MOVED``: the error's
  metadata names the node that serves the table now, and the client dials it and remembers it
  for that table. ``UNAVAILABLE`` from a table's node (it died, or drains and hands its tables
  over): the client asks the other nodes it knows (``nodes``), each of which serves the table
  or points to the node that does, with backoff, for at most ``RetryPolicy.follow_seconds``,
  the time a dead node's leases take to expire and a live node to take its tables over; then
  it gives up with a clear error. ``on_moved`` hears once of each move;
- keeps :meth:`TableClient.watch` streams alive: after a disconnect or a move it resumes from
  the last sequence it delivered, on whichever node serves the table, so no update is lost or
  repeated; a stream the node let go because its reader fell behind (``RESOURCE_EXHAUSTED``,
  ``OVERLOADED``) is resumed the same way, after a short backoff.

>>> async def main() -> None:  # doctest: +SKIP
...     async with TableClient("127.0.0.1:50051", token) as client:
...         async for message in client.watch(table_id):
...             ...
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TypeVar

import grpc
import grpc.aio
from masa.common.v1 import game_pb2
from masa.table.v1 import action_pb2, event_pb2, table_pb2, table_pb2_grpc, view_pb2

from masa_client.errors import OVERLOADED, TABLE_MOVED, MasaCallError, from_rpc_error
from masa_client.tokens import Bearer, TokenSource

__all__ = ["RetryPolicy", "TableClient", "new_request_id", "sequence_of"]

T = TypeVar("T")

_log = logging.getLogger(__name__)

# A watch that ended on an expired token after this long had lived: its token lasted, and the
# next one will too (one refused sooner was stale from the start: renewed once, not forever).
_LIVED_SECONDS = 0.5


def new_request_id() -> str:
    """A fresh idempotency key; reuse it only to retry the very same request."""
    return uuid.uuid4().hex


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How long to keep retrying ``UNAVAILABLE``: exponential backoff, capped, bounded attempts.

    The defaults ride out a table-engine restart (a few seconds) without hanging a caller for
    long when the server is really gone.
    """

    attempts: int = 8
    initial_backoff: float = 0.1
    max_backoff: float = 2.0
    multiplier: float = 2.0
    # How many TABLE_MOVED redirects one call follows in a row before it waits (a redirect
    # loop, or a redirect to a node that died).
    max_redirects: int = 3
    # How long a table's calls look for the node that serves it while none does: a dead
    # node's leases expire (15 s by default), then a live node takes its tables over.
    follow_seconds: float = 45.0

    def backoff(self, attempt: int) -> float:
        return float(min(self.max_backoff, self.initial_backoff * self.multiplier**attempt))


def sequence_of(message: table_pb2.WatchTableResponse) -> int:
    """The table sequence a watch message reflects (a snapshot's, or an update's own)."""
    kind = message.WhichOneof("payload")
    if kind == "seat_view":
        return message.seat_view.table.table.sequence
    if kind == "spectator_view":
        return message.spectator_view.table.sequence
    return message.update.sequence


class TableClient:
    """The table API of one masa deployment, reached first through ``address``."""

    def __init__(
        self,
        address: str,
        token: TokenSource,
        *,
        retry: RetryPolicy | None = None,
        credentials: grpc.ChannelCredentials | None = None,
        nodes: Sequence[str] = (),
        on_moved: Callable[[str, str], None] | None = None,
    ) -> None:
        self._address = address
        self._bearer = Bearer(token)
        self._retry = retry or RetryPolicy()
        self._credentials = credentials
        self._channels: dict[str, grpc.aio.Channel] = {}
        # Every engine node this client may ask about a table whose node does not answer.
        self._nodes = tuple(dict.fromkeys((address, *nodes)))
        # Where each table was found last: table id -> the address of the node serving it.
        self._owners: dict[str, str] = {}
        # The node that last answered for each table, to notice a move once.
        self._served: dict[str, str] = {}
        # Told (table id, new address) once each time a table is found on another node.
        self.on_moved = on_moved

    async def __aenter__(self) -> TableClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        channels, self._channels = self._channels, {}
        for channel in channels.values():
            await channel.close()

    def owner_of(self, table_id: str) -> str:
        """The address this client dials for ``table_id``."""
        return self._owners.get(table_id, self._address)

    # --- unary calls ---------------------------------------------------------------------

    async def create_table(
        self, config: game_pb2.TableConfig, *, request_id: str | None = None, table_id: str = ""
    ) -> view_pb2.Table:
        """Create a table (matchmaking's or an operator's token); the answer names its owner node.

        ``table_id`` is the caller's choice (AIP-133): retrying with the same ``request_id``
        answers with the same table, even after an engine restart.
        """
        request = table_pb2.CreateTableRequest(
            request_id=request_id or new_request_id(), config=config, table_id=table_id
        )
        response = await self._call(
            None, lambda stub: stub.CreateTable(request, metadata=self._bearer.metadata())
        )
        if response.table.owner_address:
            self._owners[response.table.table_id] = response.table.owner_address
        return response.table

    async def get_table(self, table_id: str) -> table_pb2.GetTableResponse:
        request = table_pb2.GetTableRequest(table_id=table_id)
        return await self._call(
            table_id, lambda stub: stub.GetTable(request, metadata=self._bearer.metadata())
        )

    async def submit_action(
        self,
        table_id: str,
        action: action_pb2.Action,
        expected_sequence: int,
        *,
        seat: int | None = None,
        request_id: str | None = None,
    ) -> event_pb2.TableUpdate:
        """Submit a move at ``expected_sequence``; retries keep the same ``request_id``."""
        request = table_pb2.SubmitActionRequest(
            request_id=request_id or new_request_id(),
            table_id=table_id,
            expected_sequence=expected_sequence,
            action=action,
        )
        if seat is not None:
            request.seat = seat
        response = await self._call(
            table_id, lambda stub: stub.SubmitAction(request, metadata=self._bearer.metadata())
        )
        return response.update

    async def resume_control(
        self, table_id: str, *, request_id: str | None = None
    ) -> view_pb2.SeatView:
        request = table_pb2.ResumeControlRequest(
            request_id=request_id or new_request_id(), table_id=table_id
        )
        response = await self._call(
            table_id, lambda stub: stub.ResumeControl(request, metadata=self._bearer.metadata())
        )
        return response.seat_view

    async def leave_table(self, table_id: str, *, request_id: str | None = None) -> view_pb2.Table:
        """Give up the caller's seat; the table's state says whether the game ended with it."""
        request = table_pb2.LeaveTableRequest(
            request_id=request_id or new_request_id(), table_id=table_id
        )
        response = await self._call(
            table_id, lambda stub: stub.LeaveTable(request, metadata=self._bearer.metadata())
        )
        return response.table

    # --- the watch stream ----------------------------------------------------------------

    async def watch(
        self,
        table_id: str,
        *,
        after_sequence: int | None = None,
        spectate: bool = False,
        seat: int | None = None,
    ) -> AsyncIterator[table_pb2.WatchTableResponse]:
        """Every snapshot and update of ``table_id`` for the caller, across reconnections and
        moves.

        The stream ends when the server ends it (the table finished). A dropped connection, or
        a node that hands the table over, is resumed from the last delivered sequence on the
        node that serves the table then; updates at or below it are never repeated.
        """
        last = after_sequence
        search = self._search(table_id)
        # Streams the node let go in a row, as this reader fell behind (or the node shed load).
        shed = 0
        # Whether the stream was opened again with a fresh token that was refused at once.
        renewed = False
        while True:
            request = table_pb2.WatchTableRequest(
                table_id=table_id, spectate=spectate, after_sequence=last, seat=seat
            )
            address = self.owner_of(table_id)
            stub = table_pb2_grpc.TableServiceStub(self._channel(address))
            opened = time.monotonic()
            try:
                async for message in stub.WatchTable(request, metadata=self._bearer.metadata()):
                    shed = 0
                    renewed = False
                    if search.started:
                        search = self._search(table_id)
                    self._answered(table_id, address)
                    sequence = sequence_of(message)
                    is_update = message.WhichOneof("payload") == "update"
                    if is_update and last is not None and sequence <= last:
                        continue
                    last = sequence
                    yield message
                return
            except grpc.aio.AioRpcError as error:
                _log.info("watch reconnecting", extra={"table_id": table_id, "after": last})
                failure = from_rpc_error(error)
                # The token expired with the stream open: resume after the last sequence. A
                # stream that lived is renewed each time; a fresh token refused at once, once.
                if time.monotonic() - opened >= _LIVED_SECONDS:
                    renewed = False
                if not renewed and self._bearer.refused(failure):
                    renewed = True
                    continue
                if failure.reason == OVERLOADED:
                    # The node let the stream go (it fell MASA_WATCH_BACKLOG updates behind,
                    # or the node sheds load): the same node, after the last sequence.
                    shed += 1
                    if shed >= self._retry.attempts:
                        raise failure from error
                    await asyncio.sleep(self._retry.backoff(shed - 1))
                    continue
                await self._search_on(table_id, address, error, search)

    # --- plumbing ------------------------------------------------------------------------

    def _channel(self, address: str) -> grpc.aio.Channel:
        channel = self._channels.get(address)
        if channel is None:
            if self._credentials is not None:
                channel = grpc.aio.secure_channel(address, self._credentials)
            else:
                channel = grpc.aio.insecure_channel(address)
            self._channels[address] = channel
        return channel

    def _search(self, table_id: str) -> _Search:
        return _Search(self._retry, patient=table_id in self._served)

    def _answered(self, table_id: str, address: str) -> None:
        """``address`` served the table: a move when another node served it before."""
        before = self._served.get(table_id)
        self._served[table_id] = address
        if before is not None and before != address:
            _log.info("table moved", extra={"table_id": table_id, "owner_address": address})
            if self.on_moved is not None:
                self.on_moved(table_id, address)

    async def _search_on(
        self, table_id: str, address: str, error: grpc.aio.AioRpcError, search: _Search
    ) -> None:
        """After ``error`` from ``address``: point the table at where to ask next, waiting
        first when no node is left to ask now; raise what cannot be retried."""
        failure = from_rpc_error(error)
        if failure.reason == TABLE_MOVED:
            owner = failure.metadata.get("owner_address", "")
            if owner and search.may_follow(owner, address):
                self._owners[table_id] = owner
                return
        elif error.code() is not grpc.StatusCode.UNAVAILABLE:
            raise failure from error
        else:
            search.unreachable.add(address)
        if search.expired():
            raise MasaCallError(
                code=grpc.StatusCode.UNAVAILABLE,
                message=f"no node has served table {table_id} for {search.waited():.0f} s; "
                f"the table may be gone for good ({failure})",
                reason=failure.reason,
                metadata=failure.metadata,
            ) from error
        await asyncio.sleep(search.backoff())
        self._owners[table_id] = search.next_node(self._nodes, self.owner_of(table_id))

    async def _call(
        self,
        table_id: str | None,
        invoke: Callable[[table_pb2_grpc.TableServiceAsyncStub], Awaitable[T]],
    ) -> T:
        """``invoke`` against the table's node, retrying UNAVAILABLE and following moves.

        ``invoke`` builds the same request object every time, so a retry carries the same
        ``request_id``.
        """
        if table_id is None:
            return await self._call_any(invoke)
        search = self._search(table_id)
        renewed = False
        while True:
            address = self.owner_of(table_id)
            stub = table_pb2_grpc.TableServiceStub(self._channel(address))
            try:
                answer = await invoke(stub)
            except grpc.aio.AioRpcError as error:
                if not renewed and self._bearer.refused(from_rpc_error(error)):
                    renewed = True
                    continue
                await self._search_on(table_id, address, error, search)
                continue
            self._answered(table_id, address)
            return answer

    async def _call_any(
        self, invoke: Callable[[table_pb2_grpc.TableServiceAsyncStub], Awaitable[T]]
    ) -> T:
        """A call about no table yet (CreateTable): the first address, UNAVAILABLE retried."""
        failures = 0
        renewed = False
        stub = table_pb2_grpc.TableServiceStub(self._channel(self._address))
        while True:
            try:
                return await invoke(stub)
            except grpc.aio.AioRpcError as error:
                failure = from_rpc_error(error)
                if not renewed and self._bearer.refused(failure):
                    renewed = True
                    continue
                if error.code() is not grpc.StatusCode.UNAVAILABLE:
                    raise failure from error
                failures += 1
                if failures >= self._retry.attempts:
                    raise failure from error
                await asyncio.sleep(self._retry.backoff(failures - 1))


class _Search:
    """One search for the node that serves a table, after a call or a stream failed there:
    redirects followed in a row, nodes that did not answer, and the time spent."""

    def __init__(self, retry: RetryPolicy, *, patient: bool) -> None:
        self._retry = retry
        # A table this client has been served before is waited for while it moves; one never
        # reached (a wrong address, a stack that is not running) fails after a few attempts.
        self._patient = patient
        self._started: float | None = None
        self._redirects = 0
        self._failures = 0
        self.unreachable: set[str] = set()

    @property
    def started(self) -> bool:
        return self._started is not None

    def may_follow(self, owner: str, address: str) -> bool:
        """Follow a TABLE_MOVED to ``owner``, unless it points back, to a node that did not
        answer during this search, or is one redirect too many."""
        if self._started is None:
            self._started = time.monotonic()
        if owner == address or owner in self.unreachable:
            return False
        self._redirects += 1
        return self._redirects <= self._retry.max_redirects

    def expired(self) -> bool:
        if self._started is None:
            self._started = time.monotonic()
        if not self._patient:
            return self._failures + 1 >= self._retry.attempts
        return self.waited() >= self._retry.follow_seconds

    def waited(self) -> float:
        return 0.0 if self._started is None else time.monotonic() - self._started

    def backoff(self) -> float:
        self._redirects = 0
        delay = self._retry.backoff(self._failures)
        self._failures += 1
        return min(delay, max(0.0, self._retry.follow_seconds - self.waited()))

    def next_node(self, nodes: Sequence[str], current: str) -> str:
        """The next node to ask: one that has not failed yet, in turn after ``current``;
        once every one has, all of them again from ``current``'s successor."""
        candidates = list(dict.fromkeys((*nodes, current)))
        start = (candidates.index(current) + 1) % len(candidates)
        ordered = candidates[start:] + candidates[:start]
        fresh = [node for node in ordered if node not in self.unreachable]
        if not fresh:
            self.unreachable.clear()
            fresh = ordered
        return fresh[0]
