"""The gRPC services behind the gateway: one channel each, a call forwarded with the caller's
own token, and a table's calls sent to the node that serves it.

A table lives on one table-engine node at a time; a node asked for a table it does not serve
answers ``TABLE_MOVED`` naming the owner. The gateway remembers each table's owner (a bounded
cache), follows a ``TABLE_MOVED`` only to a node of its own list or one its pattern admits (a
channel opened then, up to ``_MAX_NODES``), and asks the next node of that list when one does
not answer. A stream that breaks after it started is ended with the
service's error: the browser opens it again after the last sequence it read, as any client
does, and the gateway finds the table's node then.
"""

from __future__ import annotations

import itertools
import re
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import grpc
import grpc.aio
from connectrpc.code import Code
from connectrpc.errors import ConnectError
from connectrpc.request import RequestContext
from masa_platform.auth import MAX_TOKEN_BYTES, bearer_token
from masa_platform.errors import Unauthenticated, Unavailable, rpc_error_info
from masa_platform.settings import TlsSettings
from masa_platform.tls import open_channel

from masa_web_gateway.api import LEDGER, MATCHMAKING, TABLE, Route
from masa_web_gateway.errors import from_masa_error, from_rpc_error

__all__ = ["Upstreams", "forwarded_metadata"]

# Request headers a service reads: the caller's token, and the trace the call belongs to.
_FORWARDED: Final = ("authorization", "traceparent", "tracestate")
_TABLE_MOVED: Final = "TABLE_MOVED"
# Tables whose node the gateway remembers; one forgotten costs a redirect on its next call.
_OWNERS_KEPT: Final = 100_000
# Table-engine nodes the pattern may add: more is not a deployment, it is an attack.
_MAX_NODES: Final = 256


def forwarded_metadata(ctx: RequestContext[Any, Any]) -> tuple[tuple[str, str], ...]:
    """The headers a service reads, once the token is one a service could accept at all.

    Every exposed method needs a token, so a call without one, or with one no service would
    parse (not ``Bearer`` and three dot-separated parts, or over 4 KiB), is refused here as the
    service would refuse it, without costing the service anything."""
    headers = ctx.request_headers
    try:
        token = bearer_token(headers.items())
    except Unauthenticated as refused:
        raise from_masa_error(refused) from None
    if len(token) > MAX_TOKEN_BYTES or token.count(".") != 2:
        raise from_masa_error(Unauthenticated("the token is not a JWT"))
    return tuple((name, value) for name in _FORWARDED if (value := headers.get(name)))


class Upstreams:
    """A channel to each service, and the calls that go through them."""

    def __init__(
        self,
        *,
        matchmaking: str,
        ledger: str,
        tables: Sequence[str],
        tls: TlsSettings | None,
        max_message_bytes: int,
        table_pattern: str = "",
    ) -> None:
        self.tables = tuple(dict.fromkeys(tables))
        self._tls = tls
        self._max_message_bytes = max_message_bytes
        self._pattern = re.compile(table_pattern) if table_pattern else None
        self._channels = {
            address: open_channel(address, tls, max_message_bytes=max_message_bytes)
            for address in dict.fromkeys((matchmaking, ledger, *self.tables))
        }
        self._service_address = {MATCHMAKING: matchmaking, LEDGER: ledger}
        self._table_nodes = set(self.tables)
        self._owners: OrderedDict[str, str] = OrderedDict()
        # Tables without a known owner are spread over the nodes.
        self._turn = itertools.cycle(self.tables)

    @property
    def channels(self) -> Mapping[str, grpc.aio.Channel]:
        return self._channels

    async def close(self) -> None:
        # A copy: a call still running may admit a node meanwhile.
        for channel in list(self._channels.values()):
            await channel.close()

    async def unary(
        self, route: Route, request: Any, ctx: RequestContext[Any, Any], timeout: float
    ) -> Any:
        metadata = forwarded_metadata(ctx)
        if route.service != TABLE:
            call = self._unary_on(self._service_address[route.service], route)
            try:
                return await call(request, metadata=metadata, timeout=timeout)
            except grpc.aio.AioRpcError as error:
                raise from_rpc_error(error) from None
        table_id: str = request.table_id
        search = _Search()
        # One deadline for the call, however many nodes it asks.
        deadline = time.monotonic() + timeout
        address = self._owner(table_id)
        while True:
            search.tried.add(address)
            left = deadline - time.monotonic()
            if left <= 0:
                raise ConnectError(
                    Code.DEADLINE_EXCEEDED, f"no node answered for {table_id} in time"
                )
            try:
                answer = await self._unary_on(address, route)(
                    request, metadata=metadata, timeout=left
                )
            except grpc.aio.AioRpcError as error:
                address = self._next(table_id, error, search)
                continue
            self._remember(table_id, address)
            return answer

    async def stream(
        self, route: Route, request: Any, ctx: RequestContext[Any, Any]
    ) -> AsyncIterator[Any]:
        metadata = forwarded_metadata(ctx)
        if route.service != TABLE:
            try:
                async for message in self._relay(
                    self._service_address[route.service], route, request, metadata
                ):
                    yield message
            except grpc.aio.AioRpcError as error:
                raise from_rpc_error(error) from None
            return
        table_id: str = request.table_id
        search = _Search()
        address = self._owner(table_id)
        while True:
            search.tried.add(address)
            relayed = False
            try:
                async for message in self._relay(address, route, request, metadata):
                    if not relayed:
                        relayed = True
                        self._remember(table_id, address)
                    yield message
                return
            except grpc.aio.AioRpcError as error:
                if relayed:
                    raise from_rpc_error(error) from None
                address = self._next(table_id, error, search)

    async def _relay(
        self,
        address: str,
        route: Route,
        request: Any,
        metadata: tuple[tuple[str, str], ...],
    ) -> AsyncIterator[Any]:
        call = self._channels[address].unary_stream(
            route.path,
            request_serializer=route.info.input.SerializeToString,
            response_deserializer=route.info.output.FromString,
        )(request, metadata=metadata)
        try:
            async for message in call:
                yield message
        finally:
            # The browser went away (or the stream ended): the service stops sending at once.
            call.cancel()

    def _unary_on(self, address: str, route: Route) -> grpc.aio.UnaryUnaryMultiCallable[Any, Any]:
        return self._channels[address].unary_unary(
            route.path,
            request_serializer=route.info.input.SerializeToString,
            response_deserializer=route.info.output.FromString,
        )

    def _reaches(self, address: str) -> bool:
        """Whether ``address`` is a table-engine node of the gateway's, opening its channel
        when the pattern admits it."""
        if address in self._table_nodes:
            return True
        if self._pattern is None or not self._pattern.fullmatch(address):
            return False
        if len(self._table_nodes) >= _MAX_NODES:
            return False
        if address not in self._channels:
            self._channels[address] = open_channel(
                address, self._tls, max_message_bytes=self._max_message_bytes
            )
        self._table_nodes.add(address)
        return True

    def _owner(self, table_id: str) -> str:
        owner = self._owners.get(table_id)
        return owner if owner is not None else next(self._turn)

    def _remember(self, table_id: str, address: str) -> None:
        self._owners[table_id] = address
        self._owners.move_to_end(table_id)
        if len(self._owners) > _OWNERS_KEPT:
            self._owners.popitem(last=False)

    def _next(self, table_id: str, error: grpc.aio.AioRpcError, search: _Search) -> str:
        """Where to ask for ``table_id`` after ``error``: the owner a ``TABLE_MOVED`` names, if
        it is one of the gateway's nodes and was not asked yet, or a node not asked yet after
        ``UNAVAILABLE``; else the answer is an error.

        A browser never gets ``TABLE_MOVED`` (it could not follow it, and it would name an
        internal address): a redirect back to a node asked already, or out of the gateway's
        reach, means the table is moving, and the answer is ``UNAVAILABLE``, which the browser
        retries with the same request id."""
        info = rpc_error_info(error)
        if info is not None and info.reason == _TABLE_MOVED:
            owner = info.metadata.get("owner_address", "")
            if owner not in search.tried and self._reaches(owner):
                return owner
            raise search.unavailable_error(table_id)
        if error.code() is grpc.StatusCode.UNAVAILABLE:
            self._owners.pop(table_id, None)
            search.unavailable = search.unavailable or error
            untried = [node for node in self.tables if node not in search.tried]
            if untried:
                return untried[0]
            raise search.unavailable_error(table_id)
        raise from_rpc_error(error) from None


@dataclass
class _Search:
    """One call's search for the node that serves its table."""

    tried: set[str] = field(default_factory=set)
    # The first UNAVAILABLE met: the answer when no node is left to ask.
    unavailable: grpc.aio.AioRpcError | None = None

    def unavailable_error(self, table_id: str) -> ConnectError:
        if self.unavailable is not None:
            return from_rpc_error(self.unavailable)
        return from_masa_error(
            Unavailable(
                f"table {table_id} is moving between nodes; retry shortly",
                metadata={"table_id": table_id},
            )
        )
