"""The ticket use cases: create (alone or in a party), read, list, cancel and watch.

A player's tickets are one record in the shared store, so "at most one open ticket" and every
state change are single compare-and-set writes, whichever instance serves the call. A retry of
CreateTicket with the same request_id finds its ticket in that record and returns it, also on
another instance or after a restart.

A searching ticket in a lobby that bots never complete (P-13: every chip lobby) is told how
many more players its lobby needs (:meth:`TicketDesk.players_needed`), counted from this
instance's mirror of the store; a watch sends the ticket again whenever that number changes.
The count of a lobby is kept until one of its tickets changes, so a crowd of watchers in one
lobby counts its queue once per change, not once each.

The same mirror tells each lobby how long its last seated players waited
(:class:`~masa_matchmaking.domain.waits.RecentWaits`, every instance hearing every MATCHED
ticket) and whether a ticket made now would be seated at once (:func:`seats_now`).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import uuid
from collections import deque
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Final

from masa_rules.refusals import Reason
from masa_rules.table_config import BotLevel, bot_levels

from masa_matchmaking.app.ports import Conflict, PlayerTickets, RatingStore, TicketStore
from masa_matchmaking.domain.errors import (
    BadInput,
    NotFound,
    Refused,
    RequestIdReused,
    Unavailable,
)
from masa_matchmaking.domain.lobby import Lobby
from masa_matchmaking.domain.matching import players_needed
from masa_matchmaking.domain.ticket import PARTY_CODE, Ticket, TicketState
from masa_matchmaking.domain.waits import RecentWaits, WaitSummary, seats_now

__all__ = ["NewTicket", "TicketDesk", "mutate"]

# Closed tickets a player's record keeps for ListTickets.
HISTORY: Final = 20
_WRITE_ATTEMPTS: Final = 8
_CODE_ALPHABET: Final = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
_MAX_NAME: Final = 40
_MAX_REQUEST_ID: Final = 128


@dataclass(frozen=True, slots=True)
class NewTicket:
    request_id: str
    lobby_id: str
    party_size: int = 1
    party_code: str = ""
    bot_level: BotLevel | None = None
    ttl_seconds: float | None = None
    display_name: str = ""


async def mutate(
    store: TicketStore, player_id: str, ticket_id: str, change: Callable[[Ticket], Ticket]
) -> Ticket:
    """Apply ``change`` to one ticket with compare-and-set, re-reading on a conflict.

    ``change`` raises (a domain :class:`Refused`) when the ticket's state does not allow it;
    returning the ticket unchanged writes nothing.
    """
    cached = store.cached(player_id)
    for attempt in range(_WRITE_ATTEMPTS):
        if attempt == 0 and cached is not None:
            record, revision = cached
        else:
            record, revision = await store.read(player_id)
        ticket = record.find(ticket_id)
        if ticket is None:
            if attempt == 0 and cached is not None:
                continue
            raise NotFound(f"no ticket {ticket_id}", reason=Reason.TICKET_NOT_FOUND)
        changed = change(ticket)
        if changed == ticket:
            return ticket
        tickets = tuple(changed if t.ticket_id == ticket_id else t for t in record.tickets)
        try:
            await store.write(replace(record, tickets=tickets), revision)
        except Conflict:
            continue
        return changed
    raise Unavailable(f"ticket {ticket_id} changed too often to be written; retry")


class TicketDesk:
    def __init__(
        self,
        lobbies: Mapping[str, Lobby],
        store: TicketStore,
        ratings: RatingStore,
        clock: Callable[[], float],
        *,
        new_id: Callable[[], str] = lambda: uuid.uuid4().hex,
        new_code: Callable[[], str] = lambda: "".join(
            secrets.choice(_CODE_ALPHABET) for _ in range(8)
        ),
        trace_parent: Callable[[], str] = lambda: "",
    ) -> None:
        self._lobbies = lobbies
        self._store = store
        self._ratings = ratings
        self._clock = clock
        self._new_id = new_id
        self._new_code = new_code
        self._trace_parent = trace_parent
        # The players searching in each lobby (of self._lobbies, so bounded by them), until
        # one of its tickets changes.
        self._searching: dict[str, int] = {}
        self._waits = RecentWaits(lobbies)
        self._store.listen(self._ticket_changed)

    def _ticket_changed(self, ticket: Ticket) -> None:
        self._searching.pop(ticket.lobby_id, None)
        self._waits.heard(ticket)

    def recent_waits(self, lobby_id: str) -> WaitSummary | None:
        """How long the lobby's last seated players waited; None before anyone was seated."""
        return self._waits.summary(lobby_id)

    def seats_now(self, lobby: Lobby) -> bool:
        """Whether a ticket made now in ``lobby`` would be seated at once."""
        return seats_now(lobby, self._store.lobby_tickets(lobby.lobby_id), self._clock())

    def players_needed(self, ticket: Ticket) -> int:
        """How many more players the ticket's lobby needs before a table can be made for it
        (P-13); 0 once enough search, where bots complete the tables, or when not searching."""
        lobby = self._lobbies.get(ticket.lobby_id)
        if lobby is None or ticket.state is not TicketState.SEARCHING:
            return 0
        searching = self._searching.get(lobby.lobby_id)
        if searching is None:
            searching = sum(
                1
                for queued in self._store.lobby_tickets(lobby.lobby_id)
                if queued.state is TicketState.SEARCHING
            )
            self._searching[lobby.lobby_id] = searching
        # The mirror may not show the ticket yet; it searches, so it counts.
        return players_needed(lobby, max(searching, 1))

    def lobby(self, lobby_id: str) -> Lobby:
        lobby = self._lobbies.get(lobby_id)
        if lobby is None:
            known = ", ".join(self._lobbies)
            raise NotFound(
                f"no lobby {lobby_id!r}; the lobbies are: {known}",
                reason=Reason.LOBBY_NOT_FOUND,
                metadata={"lobbies": ",".join(self._lobbies)},
            )
        return lobby

    async def create(self, player_id: str, request: NewTicket) -> Ticket:
        lobby = self.lobby(request.lobby_id)
        _check_request(lobby, request)
        rating, _ = await self._ratings.read(player_id, lobby.game)
        # The mirror holds every record, so a player it does not know has none yet: the create
        # is tried without reading first, and a conflict sends it to the store.
        known: tuple[PlayerTickets, int] | None = self._store.cached(player_id) or (
            PlayerTickets(player_id),
            0,
        )
        for _ in range(_WRITE_ATTEMPTS):
            fresh = known is None
            if known is None:
                known = await self._store.read(player_id)
            record, revision = known
            try:
                ticket = self._new_or_retried(lobby, player_id, request, record, rating.mu)
            except Refused:
                if fresh:
                    raise
                # The mirror may lag behind a ticket that has just closed: ask the store.
                known = None
                continue
            if ticket in record.tickets:
                return ticket
            tickets = (ticket, *record.tickets)[: HISTORY + 1]
            try:
                await self._store.write(PlayerTickets(player_id, tickets), revision)
            except Conflict:
                # A stale mirror or a concurrent write: read the record itself and decide again.
                known = None
                continue
            return ticket
        raise Unavailable("your tickets changed too often to be written; retry")

    def _new_or_retried(
        self,
        lobby: Lobby,
        player_id: str,
        request: NewTicket,
        record: PlayerTickets,
        rating: float,
    ) -> Ticket:
        for ticket in record.tickets:
            if ticket.request_id == request.request_id:
                if ticket.lobby_id != request.lobby_id:
                    raise RequestIdReused(
                        f"request_id {request.request_id!r} made a ticket for another lobby"
                    )
                return ticket
        current = record.open_ticket
        if current is not None:
            raise Refused(
                f"you already have an open ticket in {current.lobby_id} "
                f"({current.ticket_id}); cancel it first (CancelTicket)",
                reason=Reason.TICKET_OPEN,
                metadata={"ticket_id": current.ticket_id, "lobby_id": current.lobby_id},
            )
        party_code = request.party_code
        if request.party_size > 1:
            party_code = party_code or self._new_code()
            if request.party_code:
                self._check_party(lobby, request, player_id)
        now = self._clock()
        ttl = lobby.ticket_ttl_seconds
        if request.ttl_seconds is not None:
            ttl = min(ttl, request.ttl_seconds)
        return Ticket(
            ticket_id=self._new_id(),
            request_id=request.request_id,
            lobby_id=lobby.lobby_id,
            player_id=player_id,
            display_name=request.display_name or player_id,
            state=TicketState.SEARCHING,
            created_at=now,
            expires_at=now + ttl,
            updated_at=now,
            party_size=max(1, request.party_size),
            party_code=party_code if request.party_size > 1 else "",
            bot_level=request.bot_level,
            rating=rating,
            trace_parent=self._trace_parent(),
        )

    def _check_party(self, lobby: Lobby, request: NewTicket, player_id: str) -> None:
        members = [
            ticket
            for ticket in self._store.lobby_tickets(lobby.lobby_id)
            if ticket.party_code == request.party_code and ticket.state is TicketState.SEARCHING
        ]
        if not members:
            raise NotFound(
                f"no party {request.party_code} is searching in {lobby.lobby_id}",
                reason=Reason.PARTY_NOT_FOUND,
            )
        if members[0].party_size != request.party_size:
            raise Refused(
                f"party {request.party_code} is of {members[0].party_size} players",
                reason=Reason.PARTY_MISMATCH,
            )
        if len(members) >= request.party_size or any(m.player_id == player_id for m in members):
            raise Refused(f"party {request.party_code} is complete", reason=Reason.PARTY_FULL)

    async def get(self, player_id: str, ticket_id: str) -> Ticket:
        record, _ = self._store.cached(player_id) or await self._store.read(player_id)
        ticket = record.find(ticket_id)
        if ticket is None:
            record, _ = await self._store.read(player_id)
            ticket = record.find(ticket_id)
        if ticket is None:
            # Another player's ticket answers as an unknown one: ids reveal nothing.
            raise NotFound(f"no ticket {ticket_id} of yours", reason=Reason.TICKET_NOT_FOUND)
        return ticket

    async def list(self, player_id: str) -> list[Ticket]:
        record, _ = await self._store.read(player_id)
        return list(record.tickets)

    async def cancel(self, player_id: str, ticket_id: str) -> Ticket:
        now = self._clock()

        def cancel(ticket: Ticket) -> Ticket:
            if ticket.state is TicketState.CANCELLED:
                return ticket
            return ticket.cancelled(now)

        return await mutate(self._store, player_id, ticket_id, cancel)

    async def watch(self, player_id: str, ticket_id: str) -> AsyncGenerator[tuple[Ticket, int]]:
        """The ticket now, then each change, until it is closed; each with the players its
        lobby needs (:meth:`players_needed`), and again whenever only that number changes."""
        changes: deque[Ticket] = deque()
        woken = asyncio.Event()
        # The lobby whose other tickets change the number, once the ticket is read; none
        # where bots complete the tables.
        counted = ""

        def heard(ticket: Ticket) -> None:
            if ticket.ticket_id == ticket_id:
                changes.append(ticket)
                woken.set()
            elif ticket.lobby_id == counted:
                woken.set()

        unsubscribe = self._store.listen(heard)
        try:
            # Read after subscribing, so that no change falls between the two.
            last = await self.get(player_id, ticket_id)
            lobby = self._lobbies.get(last.lobby_id)
            if lobby is not None and players_needed(lobby, 0):
                counted = lobby.lobby_id
            needed = self.players_needed(last)
            yield last, needed
            while last.open:
                await woken.wait()
                woken.clear()
                while changes and last.open:
                    ticket = changes.popleft()
                    if ticket.updated_at < last.updated_at or ticket == last:
                        continue
                    last = ticket
                    needed = self.players_needed(last)
                    yield last, needed
                now = self.players_needed(last)
                if last.open and now != needed:
                    needed = now
                    yield last, needed
        finally:
            with contextlib.suppress(Exception):
                unsubscribe()


def _check_request(lobby: Lobby, request: NewTicket) -> None:
    if not 0 < len(request.request_id) <= _MAX_REQUEST_ID:
        raise BadInput(f"request_id must be 1 to {_MAX_REQUEST_ID} characters")
    if not 0 <= request.party_size <= lobby.max_party:
        raise BadInput(f"a party in {lobby.lobby_id} is 1 to {lobby.max_party} players")
    if request.party_code and not PARTY_CODE.fullmatch(request.party_code):
        raise BadInput("a party code is 8 characters of A-Z and 2-9, as a ticket shows it")
    if request.party_code and request.party_size <= 1:
        raise BadInput("joining a party needs its party_size")
    if request.bot_level is not None and not lobby.training:
        raise BadInput("bot_level is for training lobbies; the others fill with their own")
    if request.bot_level is not None and request.bot_level not in bot_levels(lobby.game):
        offered = ", ".join(level.value for level in bot_levels(lobby.game))
        raise BadInput(f"{lobby.game} bots play at {offered}, not {request.bot_level.value} (P-2)")
    if request.ttl_seconds is not None and request.ttl_seconds <= 0:
        raise BadInput("a ticket's ttl must be positive")
    if len(request.display_name) > _MAX_NAME or not request.display_name.isprintable():
        raise BadInput(f"a display name is at most {_MAX_NAME} printable characters")
