"""Typed async clients for matchmaking (``masa.matchmaking.v1``), a player's chips
(``masa.ledger.v1``) and an operator's calls to one table-engine node
(``masa.table.v1.TableAdminService``).

Like :class:`~masa_client.client.TableClient` they send the bearer token on every call (renewed
from a source of tokens, :mod:`masa_client.tokens`, when given one) and retry ``UNAVAILABLE``
with backoff, sending the *same* ``request_id`` so that a write happens at most once.

>>> async def main() -> None:  # doctest: +SKIP
...     async with MatchmakingClient("127.0.0.1:50054", token) as matchmaking:
...         ticket = await matchmaking.create_ticket("salon-51")
...         async for ticket in matchmaking.watch_ticket(ticket.ticket_id):
...             ...  # SEARCHING, PLACING, then MATCHED with table_id, seat, table_address
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from types import TracebackType
from typing import Any, Self, TypeVar

import grpc
import grpc.aio
from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message
from masa.common.v1 import game_pb2
from masa.ledger.v1 import ledger_pb2, ledger_pb2_grpc
from masa.matchmaking.v1 import matchmaking_pb2 as mm
from masa.matchmaking.v1 import matchmaking_pb2_grpc
from masa.table.v1 import admin_pb2, admin_pb2_grpc

from masa_client.client import RetryPolicy, new_request_id
from masa_client.errors import MasaCallError, from_rpc_error
from masa_client.tokens import Bearer, TokenSource

__all__ = ["CLOSED_STATES", "LedgerClient", "MatchmakingClient", "TableAdminClient"]

T = TypeVar("T")

CLOSED_STATES = frozenset(
    {
        mm.Ticket.STATE_MATCHED,
        mm.Ticket.STATE_CANCELLED,
        mm.Ticket.STATE_EXPIRED,
        mm.Ticket.STATE_FAILED,
    }
)


class _Client:
    def __init__(
        self,
        address: str,
        token: TokenSource,
        *,
        retry: RetryPolicy | None = None,
        credentials: grpc.ChannelCredentials | None = None,
    ) -> None:
        self._bearer = Bearer(token)
        self._retry = retry or RetryPolicy()
        if credentials is not None:
            self._channel = grpc.aio.secure_channel(address, credentials)
        else:
            self._channel = grpc.aio.insecure_channel(address)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self._channel.close()

    async def _unary(
        self,
        method: Callable[..., Awaitable[T]],
        request: Message,
        *,
        timeout: float | None = None,
    ) -> T:
        """``method(request)`` with the current token, retried as :meth:`_call` says."""
        return await self._call(
            lambda: method(request, metadata=self._bearer.metadata(), timeout=timeout)
        )

    async def _call(self, invoke: Callable[[], Awaitable[T]]) -> T:
        """``invoke`` (which sends the same request each time), retrying UNAVAILABLE."""
        failures = 0
        renewed = False
        while True:
            try:
                return await invoke()
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


class MatchmakingClient(_Client):
    """Lobbies, tickets and ratings."""

    def __init__(self, address: str, token: TokenSource, **kwargs: Any) -> None:
        super().__init__(address, token, **kwargs)
        self._stub = matchmaking_pb2_grpc.MatchmakingServiceStub(self._channel)

    async def list_lobbies(self, filter_: str = "") -> list[mm.Lobby]:
        """Every lobby matching an AIP-160 filter (all pages)."""
        lobbies: list[mm.Lobby] = []
        token = ""
        while True:
            request = mm.ListLobbiesRequest(filter=filter_, page_token=token, page_size=200)
            page = await self._unary(self._stub.ListLobbies, request)
            lobbies.extend(page.lobbies)
            token = page.next_page_token
            if not token:
                return lobbies

    async def get_lobby(self, lobby_id: str) -> mm.Lobby:
        request = mm.GetLobbyRequest(lobby_id=lobby_id)
        response = await self._unary(self._stub.GetLobby, request)
        return response.lobby

    async def create_ticket(
        self,
        lobby_id: str,
        *,
        party_size: int = 1,
        party_code: str = "",
        bot_level: game_pb2.BotLevel.ValueType = game_pb2.BOT_LEVEL_UNSPECIFIED,
        ttl_seconds: float | None = None,
        display_name: str = "",
        request_id: str | None = None,
    ) -> mm.Ticket:
        request = mm.CreateTicketRequest(
            request_id=request_id or new_request_id(),
            lobby_id=lobby_id,
            party_size=party_size,
            party_code=party_code,
            bot_level=bot_level,
            display_name=display_name,
        )
        if ttl_seconds is not None:
            ttl = Duration()
            ttl.FromNanoseconds(round(ttl_seconds * 1e9))
            request.ttl.CopyFrom(ttl)
        response = await self._unary(self._stub.CreateTicket, request)
        return response.ticket

    async def get_ticket(self, ticket_id: str) -> mm.Ticket:
        request = mm.GetTicketRequest(ticket_id=ticket_id)
        response = await self._unary(self._stub.GetTicket, request)
        return response.ticket

    async def list_tickets(self) -> list[mm.Ticket]:
        """The caller's tickets, newest first (the open one and recent closed ones)."""
        request = mm.ListTicketsRequest(page_size=200)
        response = await self._unary(self._stub.ListTickets, request)
        return list(response.tickets)

    async def cancel_ticket(self, ticket_id: str, *, request_id: str | None = None) -> mm.Ticket:
        request = mm.CancelTicketRequest(
            request_id=request_id or new_request_id(), ticket_id=ticket_id
        )
        response = await self._unary(self._stub.CancelTicket, request)
        return response.ticket

    async def watch_ticket(self, ticket_id: str) -> AsyncIterator[mm.Ticket]:
        """The ticket now and every change until it is closed; a dropped stream, or one its
        token's expiry ended, is opened again (the first message repeats the state, which a
        caller may see twice)."""
        failures = 0
        while True:
            last: mm.Ticket | None = None
            try:
                stream = self._stub.WatchTicket(
                    mm.WatchTicketRequest(ticket_id=ticket_id), metadata=self._bearer.metadata()
                )
                async for message in stream:
                    failures = 0
                    last = message.ticket
                    yield last
            except grpc.aio.AioRpcError as error:
                failure = from_rpc_error(error)
                # Every stream opens with the ticket: one that ends unheard was refused at once.
                if last is not None and self._bearer.refused(failure):
                    continue
                if error.code() is not grpc.StatusCode.UNAVAILABLE:
                    raise failure from error
                failures += 1
                if failures >= self._retry.attempts:
                    raise failure from error
                await asyncio.sleep(self._retry.backoff(failures - 1))
                continue
            if last is not None and last.state in CLOSED_STATES:
                return

    async def get_rating(self, game: game_pb2.GameKind.ValueType, player_id: str = "") -> mm.Rating:
        request = mm.GetRatingRequest(player_id=player_id, game=game)
        response = await self._unary(self._stub.GetRating, request)
        return response.rating


class LedgerClient(_Client):
    """A player's chips: balance and transfers; grants and voids with an internal token."""

    def __init__(self, address: str, token: TokenSource, **kwargs: Any) -> None:
        super().__init__(address, token, **kwargs)
        self._stub = ledger_pb2_grpc.LedgerServiceStub(self._channel)

    async def balance(self, player_id: str = "") -> ledger_pb2.Account:
        request = ledger_pb2.GetBalanceRequest(player_id=player_id)
        response = await self._unary(self._stub.GetBalance, request)
        return response.account

    async def hold(self, hold_id: str) -> ledger_pb2.StakeHold:
        request = ledger_pb2.GetHoldRequest(hold_id=hold_id)
        response = await self._unary(self._stub.GetHold, request)
        return response.hold

    async def table_holds(self, table_id: str, game_no: int = 0) -> list[ledger_pb2.StakeHold]:
        """The caller's holds bound to ``table_id`` (to its game ``game_no``, if not 0), newest
        first: a player's stake at a table, whoever seated them."""
        request = ledger_pb2.ListHoldsRequest(table_id=table_id, game_no=game_no, page_size=50)
        response = await self._unary(self._stub.ListHolds, request)
        return list(response.holds)

    async def transfers(
        self, player_id: str = "", *, limit: int = 20, table_id: str = ""
    ) -> list[ledger_pb2.Transfer]:
        """The newest ``limit`` transfers of the wallet, of one table's games if named."""
        found: list[ledger_pb2.Transfer] = []
        token = ""
        while len(found) < limit:
            request = ledger_pb2.ListTransfersRequest(
                player_id=player_id,
                page_size=min(500, limit - len(found)),
                page_token=token,
                table_id=table_id,
            )
            page = await self._unary(self._stub.ListTransfers, request)
            found.extend(page.transfers)
            token = page.next_page_token
            if not token:
                break
        return found[:limit]

    async def grant(
        self, player_id: str, amount: int, reason: str, *, request_id: str | None = None
    ) -> ledger_pb2.GrantChipsResponse:
        """The grant, and whether ``request_id`` had granted it before (``replayed``: nothing
        moved now). An operator's token."""
        request = ledger_pb2.GrantChipsRequest(
            request_id=request_id or new_request_id(),
            player_id=player_id,
            amount=amount,
            reason=reason,
        )
        return await self._unary(self._stub.GrantChips, request)

    async def void_game(
        self, table_id: str, game_no: int, reason: str, *, request_id: str | None = None
    ) -> ledger_pb2.VoidGameResponse:
        """Void a game that cannot finish: its bound holds are voided, no chips move (P-30).
        An operator's token."""
        request = ledger_pb2.VoidGameRequest(
            request_id=request_id or new_request_id(),
            table_id=table_id,
            game_no=game_no,
            reason=reason,
        )
        return await self._unary(self._stub.VoidGame, request)

    async def settlement(self, table_id: str, game_no: int) -> ledger_pb2.Settlement | None:
        """How a game was settled or voided; None while it is neither."""
        request = ledger_pb2.GetSettlementRequest(table_id=table_id, game_no=game_no)
        try:
            response = await self._unary(self._stub.GetSettlement, request)
        except MasaCallError as error:
            if error.code is grpc.StatusCode.NOT_FOUND:
                return None
            raise
        return response.settlement


class TableAdminClient(_Client):
    """An operator's calls to one table-engine node: drain it, resume it, void one of its
    tables. Service or admin role."""

    def __init__(self, address: str, token: TokenSource, **kwargs: Any) -> None:
        super().__init__(address, token, **kwargs)
        self._stub = admin_pb2_grpc.TableAdminServiceStub(self._channel)

    async def drain_node(self, node_id: str, *, timeout: float) -> admin_pb2.DrainNodeResponse:
        """Drain the node, which must be ``node_id`` (else FAILED_PRECONDITION, NODE_MISMATCH);
        answers once every table is handed over."""
        request = admin_pb2.DrainNodeRequest(node_id=node_id)
        return await self._unary(self._stub.DrainNode, request, timeout=timeout)

    async def resume_node(self, node_id: str, *, timeout: float) -> admin_pb2.ResumeNodeResponse:
        """Return the drained node ``node_id`` to service (NODE_MISMATCH for another node);
        ``resumed`` false when it was not drained."""
        request = admin_pb2.ResumeNodeRequest(node_id=node_id)
        return await self._unary(self._stub.ResumeNode, request, timeout=timeout)

    async def void_table(
        self, table_id: str, reason: str, *, request_id: str | None = None, timeout: float
    ) -> admin_pb2.VoidTableResponse:
        """End a table the node serves with GameAbandoned; ``applied`` false when its game was
        over already."""
        request = admin_pb2.VoidTableRequest(
            request_id=request_id or new_request_id(), table_id=table_id, reason=reason
        )
        return await self._unary(self._stub.VoidTable, request, timeout=timeout)
