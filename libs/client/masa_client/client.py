"""A typed async client for the table API (``masa.table.v1.TableService``).

What it does for the caller:

- sends the bearer token on every call (``authorization: Bearer ...``);
- retries a call that failed with ``UNAVAILABLE`` (a node restarting, a dropped connection) with
  backoff, sending the *same* ``request_id`` so the server applies a write at most once
  (AIP-155);
- follows ``TABLE_MOVED``: the error's metadata names the node that owns the table now, and the
  client dials it and remembers it for that table;
- keeps :meth:`TableClient.watch` streams alive: after a disconnect it resumes from the last
  sequence it delivered, so no update is lost or repeated.

>>> async def main() -> None:  # doctest: +SKIP
...     async with TableClient("127.0.0.1:50051", token) as client:
...         async for message in client.watch(table_id):
...             ...
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import TypeVar

import grpc
import grpc.aio
from masa.common.v1 import game_pb2
from masa.table.v1 import action_pb2, event_pb2, table_pb2, table_pb2_grpc, view_pb2

from masa_client.errors import TABLE_MOVED, MasaCallError, from_rpc_error

__all__ = ["RetryPolicy", "TableClient", "new_request_id", "sequence_of"]

T = TypeVar("T")

_log = logging.getLogger(__name__)


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
    # How many TABLE_MOVED redirects one call follows before giving up (a redirect loop).
    max_redirects: int = 3

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
        token: str,
        *,
        retry: RetryPolicy | None = None,
        credentials: grpc.ChannelCredentials | None = None,
    ) -> None:
        self._address = address
        self._metadata = (("authorization", f"Bearer {token}"),)
        self._retry = retry or RetryPolicy()
        self._credentials = credentials
        self._channels: dict[str, grpc.aio.Channel] = {}
        # TABLE_MOVED redirects learned so far: table id -> owner address.
        self._owners: dict[str, str] = {}

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
        """Create a table (service or admin role); the answer names its owner node.

        ``table_id`` is the caller's choice (AIP-133): retrying with the same ``request_id``
        answers with the same table, even after an engine restart.
        """
        request = table_pb2.CreateTableRequest(
            request_id=request_id or new_request_id(), config=config, table_id=table_id
        )
        response = await self._call(
            None, lambda stub: stub.CreateTable(request, metadata=self._metadata)
        )
        if response.table.owner_address:
            self._owners[response.table.table_id] = response.table.owner_address
        return response.table

    async def get_table(self, table_id: str) -> table_pb2.GetTableResponse:
        request = table_pb2.GetTableRequest(table_id=table_id)
        return await self._call(
            table_id, lambda stub: stub.GetTable(request, metadata=self._metadata)
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
            table_id, lambda stub: stub.SubmitAction(request, metadata=self._metadata)
        )
        return response.update

    async def resume_control(
        self, table_id: str, *, request_id: str | None = None
    ) -> view_pb2.SeatView:
        request = table_pb2.ResumeControlRequest(
            request_id=request_id or new_request_id(), table_id=table_id
        )
        response = await self._call(
            table_id, lambda stub: stub.ResumeControl(request, metadata=self._metadata)
        )
        return response.seat_view

    async def leave_table(self, table_id: str, *, request_id: str | None = None) -> view_pb2.Table:
        """Give up the caller's seat; the table's state says whether the game ended with it."""
        request = table_pb2.LeaveTableRequest(
            request_id=request_id or new_request_id(), table_id=table_id
        )
        response = await self._call(
            table_id, lambda stub: stub.LeaveTable(request, metadata=self._metadata)
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
        """Every snapshot and update of ``table_id`` for the caller, across reconnections.

        The stream ends when the server ends it (the table finished). A dropped connection is
        resumed from the last delivered sequence; updates at or below it are never repeated.
        """
        last = after_sequence
        failures = 0
        redirects = 0
        while True:
            request = table_pb2.WatchTableRequest(table_id=table_id, spectate=spectate)
            if last is not None:
                request.after_sequence = last
            if seat is not None:
                request.seat = seat
            stub = table_pb2_grpc.TableServiceStub(self._channel(self.owner_of(table_id)))
            try:
                async for message in stub.WatchTable(request, metadata=self._metadata):
                    failures = 0
                    sequence = sequence_of(message)
                    is_update = message.WhichOneof("payload") == "update"
                    if is_update and last is not None and sequence <= last:
                        continue
                    last = sequence
                    yield message
                return
            except grpc.aio.AioRpcError as error:
                failure = from_rpc_error(error)
                if self._follow(table_id, failure) and redirects < self._retry.max_redirects:
                    redirects += 1
                    continue
                if error.code() is not grpc.StatusCode.UNAVAILABLE:
                    raise failure from error
                if failures + 1 >= self._retry.attempts:
                    raise failure from error
                _log.info("watch reconnecting", extra={"table_id": table_id, "after": last})
                await asyncio.sleep(self._retry.backoff(failures))
                failures += 1

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

    def _follow(self, table_id: str | None, failure: MasaCallError) -> bool:
        """Remember a TABLE_MOVED owner; True when the call should go again to it."""
        if table_id is None or failure.reason != TABLE_MOVED:
            return False
        owner = failure.metadata.get("owner_address", "")
        if not owner or owner == self.owner_of(table_id):
            return False
        _log.info("table moved", extra={"table_id": table_id, "owner_address": owner})
        self._owners[table_id] = owner
        return True

    async def _call(
        self,
        table_id: str | None,
        invoke: Callable[[table_pb2_grpc.TableServiceAsyncStub], Awaitable[T]],
    ) -> T:
        """``invoke`` against the table's owner, retrying UNAVAILABLE and following moves.

        ``invoke`` builds the same request object every time, so a retry carries the same
        ``request_id``.
        """
        failures = 0
        redirects = 0
        while True:
            address = self._address if table_id is None else self.owner_of(table_id)
            stub = table_pb2_grpc.TableServiceStub(self._channel(address))
            try:
                return await invoke(stub)
            except grpc.aio.AioRpcError as error:
                failure = from_rpc_error(error)
                if self._follow(table_id, failure) and redirects < self._retry.max_redirects:
                    redirects += 1
                    continue
                if error.code() is not grpc.StatusCode.UNAVAILABLE:
                    raise failure from error
                failures += 1
                if failures >= self._retry.attempts:
                    raise failure from error
                await asyncio.sleep(self._retry.backoff(failures - 1))
