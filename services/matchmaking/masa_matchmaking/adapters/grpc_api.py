"""``masa.matchmaking.v1.MatchmakingService`` over gRPC: protobuf in, use cases, protobuf out.

Every call is a player's: the JWT subject is the player. Domain refusals become platform
errors with their reason (TICKET_OPEN, LOBBY_NOT_FOUND, INSUFFICIENT_FUNDS ...).

A page token of ListLobbies or ListTickets holds the offset of the next page, sealed with
matchmaking's key (masa_platform.page_tokens) to the method, the player and the filter; any
other token is INVALID_ARGUMENT, reason INVALID_PAGE_TOKEN.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Final, TypeVar

import grpc
from masa.matchmaking.v1 import matchmaking_pb2 as mm
from masa.matchmaking.v1 import matchmaking_pb2_grpc
from masa_platform.auth import AuthPolicy, Role, require_principal, until_token_expires
from masa_platform.errors import BadRequest
from masa_platform.page_tokens import PageTokens
from masa_platform.server import ServiceRegistration

from masa_matchmaking.adapters.convert import (
    game_from_proto,
    lobby_to_proto,
    new_ticket_from_proto,
    rating_to_proto,
    ticket_to_proto,
)
from masa_matchmaking.app.ratings import Ratings
from masa_matchmaking.app.tickets import TicketDesk
from masa_matchmaking.domain.lobby import Lobby
from masa_matchmaking.domain.lobby_filter import parse_filter
from masa_matchmaking.domain.ticket import Ticket

__all__ = ["SERVICE_NAME", "MatchmakingServicer", "auth_policy", "registration"]

SERVICE_NAME: Final = "masa.matchmaking.v1.MatchmakingService"
_DEFAULT_PAGE: Final = 50
_MAX_PAGE: Final = 200
_T = TypeVar("_T")


def auth_policy() -> AuthPolicy:
    """Who may call what (docs/security.md): matchmaking is the players'; an operator may look
    at the lobbies and ratings too. No service calls it."""
    player = frozenset({Role.PLAYER})
    looking = frozenset({Role.PLAYER, Role.ADMIN})
    allowed = {
        "ListLobbies": looking,
        "GetLobby": looking,
        "GetRating": looking,
        "CreateTicket": player,
        "GetTicket": player,
        "ListTickets": player,
        "CancelTicket": player,
        "WatchTicket": player,
    }
    return AuthPolicy(
        allowed={f"/{SERVICE_NAME}/{method}": roles for method, roles in allowed.items()}
    )


@dataclass(frozen=True, slots=True)
class _Offset:
    """Where the next page of a listing starts: the index of its first item."""

    offset: int


class _Pages:
    """Pages of one List method's items, their tokens bound to the player and the filter."""

    def __init__(self, tokens: PageTokens, method: str) -> None:
        self._tokens = tokens
        self._listing = f"/{SERVICE_NAME}/{method}"

    def page(
        self, items: Sequence[_T], size: int, token: str, *, player: str, filter_: str
    ) -> tuple[Sequence[_T], str]:
        """One page of ``items`` and the next page's token ("" on the last page)."""
        if size < 0:
            raise BadRequest("page_size must not be negative")
        size = min(size or _DEFAULT_PAGE, _MAX_PAGE)
        start = self._tokens.open(
            token, _Offset, listing=self._listing, caller=player, filters=(filter_,)
        )
        offset = 0 if start is None else start.offset
        following = offset + size
        if following >= len(items):
            return items[offset:], ""
        next_token = self._tokens.seal(
            _Offset(following), listing=self._listing, caller=player, filters=(filter_,)
        )
        return items[offset:following], next_token


class MatchmakingServicer(matchmaking_pb2_grpc.MatchmakingServiceServicer):
    def __init__(
        self,
        lobbies: Sequence[Lobby],
        desk: TicketDesk,
        ratings: Ratings,
        *,
        queue_length: Callable[[str], int],
        tables_in_play: Callable[[str], int],
        page_tokens: PageTokens,
    ) -> None:
        self._lobbies = list(lobbies)
        self._desk = desk
        self._ratings = ratings
        self._queue_length = queue_length
        self._tables_in_play = tables_in_play
        self._lobby_pages = _Pages(page_tokens, "ListLobbies")
        self._ticket_pages = _Pages(page_tokens, "ListTickets")

    def _lobby(self, lobby: Lobby) -> mm.Lobby:
        return lobby_to_proto(
            lobby,
            queue_length=self._queue_length(lobby.lobby_id),
            tables_in_play=self._tables_in_play(lobby.lobby_id),
            recent_waits=self._desk.recent_waits(lobby.lobby_id),
            seats_now=self._desk.seats_now(lobby),
        )

    def _ticket(self, ticket: Ticket) -> mm.Ticket:
        return ticket_to_proto(ticket, players_needed=self._desk.players_needed(ticket))

    async def _player(self) -> str:
        return require_principal().subject

    async def ListLobbies(  # noqa: N802 - the generated servicer names the methods
        self,
        request: mm.ListLobbiesRequest,
        context: grpc.aio.ServicerContext[mm.ListLobbiesRequest, mm.ListLobbiesResponse],
    ) -> mm.ListLobbiesResponse:
        player = await self._player()
        matches = parse_filter(request.filter)
        found = [lobby for lobby in self._lobbies if matches(lobby)]
        page, token = self._lobby_pages.page(
            found, request.page_size, request.page_token, player=player, filter_=request.filter
        )
        return mm.ListLobbiesResponse(
            lobbies=[self._lobby(lobby) for lobby in page], next_page_token=token
        )

    async def GetLobby(  # noqa: N802
        self,
        request: mm.GetLobbyRequest,
        context: grpc.aio.ServicerContext[mm.GetLobbyRequest, mm.GetLobbyResponse],
    ) -> mm.GetLobbyResponse:
        lobby = self._desk.lobby(request.lobby_id)
        return mm.GetLobbyResponse(lobby=self._lobby(lobby))

    async def CreateTicket(  # noqa: N802
        self,
        request: mm.CreateTicketRequest,
        context: grpc.aio.ServicerContext[mm.CreateTicketRequest, mm.CreateTicketResponse],
    ) -> mm.CreateTicketResponse:
        player = await self._player()
        ticket = await self._desk.create(player, new_ticket_from_proto(request))
        return mm.CreateTicketResponse(ticket=self._ticket(ticket))

    async def GetTicket(  # noqa: N802
        self,
        request: mm.GetTicketRequest,
        context: grpc.aio.ServicerContext[mm.GetTicketRequest, mm.GetTicketResponse],
    ) -> mm.GetTicketResponse:
        player = require_principal().subject
        ticket = await self._desk.get(player, request.ticket_id)
        return mm.GetTicketResponse(ticket=self._ticket(ticket))

    async def ListTickets(  # noqa: N802
        self,
        request: mm.ListTicketsRequest,
        context: grpc.aio.ServicerContext[mm.ListTicketsRequest, mm.ListTicketsResponse],
    ) -> mm.ListTicketsResponse:
        player = require_principal().subject
        tickets = await self._desk.list(player)
        page, token = self._ticket_pages.page(
            tickets, request.page_size, request.page_token, player=player, filter_=""
        )
        return mm.ListTicketsResponse(
            tickets=[self._ticket(ticket) for ticket in page], next_page_token=token
        )

    async def CancelTicket(  # noqa: N802
        self,
        request: mm.CancelTicketRequest,
        context: grpc.aio.ServicerContext[mm.CancelTicketRequest, mm.CancelTicketResponse],
    ) -> mm.CancelTicketResponse:
        player = require_principal().subject
        if not request.request_id:
            raise BadRequest("request_id is required")
        ticket = await self._desk.cancel(player, request.ticket_id)
        return mm.CancelTicketResponse(ticket=self._ticket(ticket))

    async def WatchTicket(  # noqa: N802
        self,
        request: mm.WatchTicketRequest,
        context: grpc.aio.ServicerContext[mm.WatchTicketRequest, mm.WatchTicketResponse],
    ) -> AsyncIterator[mm.WatchTicketResponse]:
        player = require_principal().subject
        watched = self._desk.watch(player, request.ticket_id)
        # The stream ends when the caller's token does: it resumes with a new one.
        async with aclosing(watched):
            async for ticket, needed in until_token_expires(watched):
                yield mm.WatchTicketResponse(ticket=ticket_to_proto(ticket, players_needed=needed))

    async def GetRating(  # noqa: N802
        self,
        request: mm.GetRatingRequest,
        context: grpc.aio.ServicerContext[mm.GetRatingRequest, mm.GetRatingResponse],
    ) -> mm.GetRatingResponse:
        player = request.player_id or require_principal().subject
        if len(player) > 128:
            raise BadRequest("a player id is at most 128 characters")
        rating = await self._ratings.get(player, game_from_proto(request.game, request.game_name))
        return mm.GetRatingResponse(rating=rating_to_proto(rating))


def registration(servicer: MatchmakingServicer) -> ServiceRegistration:
    return ServiceRegistration(
        SERVICE_NAME,
        lambda server: matchmaking_pb2_grpc.add_MatchmakingServiceServicer_to_server(
            servicer, server
        ),
    )
