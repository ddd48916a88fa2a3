"""What the use cases need from the outside world, as protocols the adapters (or fakes) fill.

Every port speaks the domain's types; protobuf, gRPC and NATS stay in the adapters.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from masa_rules.table_config import PayoutRule, TableConfig

from masa_matchmaking.domain.rating import PlayerRating
from masa_matchmaking.domain.ticket import Ticket

__all__ = [
    "Conflict",
    "EngineFull",
    "EngineNode",
    "EngineNodes",
    "EngineRefused",
    "Engines",
    "Events",
    "GameStarted",
    "HoldBound",
    "HoldRequest",
    "InsufficientFunds",
    "LeaseStore",
    "Ledger",
    "LedgerRefused",
    "Metrics",
    "PlayerTickets",
    "RatingStore",
    "TicketStore",
    "Unreachable",
]


class Conflict(Exception):
    """A write whose expected revision is stale: someone else changed the record first."""


class Unreachable(Exception):
    """A dependency (NATS, the ledger, an engine node) did not answer; retrying may work."""


class InsufficientFunds(Exception):
    """HoldStakes refused the group: these players cannot pay the stake."""

    def __init__(self, players: Sequence[str], message: str) -> None:
        super().__init__(message)
        self.players = tuple(players)
        self.message = message


class HoldBound(Exception):
    """A hold that cannot be released because a table's game took it as its stake."""

    def __init__(self, hold_id: str) -> None:
        super().__init__(f"hold {hold_id} is a table's stake")
        self.hold_id = hold_id


class LedgerRefused(Exception):
    """The ledger refused a call for a reason that a retry will not change."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class EngineRefused(Exception):
    """An engine node refused CreateTable for a reason that a retry will not change."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class EngineFull(Exception):
    """An engine node refused CreateTable because it runs all the tables it may: nothing was
    made there, and another node may take the table."""


@dataclass(frozen=True, slots=True)
class PlayerTickets:
    """A player's tickets, newest first: at most one open (the newest), then recent closed
    ones. Stored as one record, so every change to a player's tickets is one atomic write."""

    player_id: str
    tickets: tuple[Ticket, ...] = ()

    @property
    def open_ticket(self) -> Ticket | None:
        newest = self.tickets[0] if self.tickets else None
        return newest if newest is not None and newest.open else None

    def find(self, ticket_id: str) -> Ticket | None:
        return next((t for t in self.tickets if t.ticket_id == ticket_id), None)


class TicketStore(Protocol):
    """Every player's tickets, shared by every instance, with optimistic concurrency.

    The reads marked *local* answer from this instance's mirror of the store, which follows
    every write within milliseconds but may lag; writes always check the revision they are
    given, so a stale read can never overwrite a newer change.
    """

    async def read(self, player_id: str) -> tuple[PlayerTickets, int]:
        """The player's record and its revision (0: no record yet), read from the store."""
        ...

    async def write(self, record: PlayerTickets, revision: int) -> int:
        """Write at ``revision`` (0: only if there is no record); raises :class:`Conflict`."""
        ...

    def cached(self, player_id: str) -> tuple[PlayerTickets, int] | None:
        """Local: the mirror's record and revision, if it has one."""
        ...

    def ticket(self, ticket_id: str) -> Ticket | None:
        """Local: a ticket by id."""
        ...

    def lobby_tickets(self, lobby_id: str) -> list[Ticket]:
        """Local: the open tickets of a lobby."""
        ...

    def listen(self, callback: Callable[[Ticket], None]) -> Callable[[], None]:
        """Call ``callback`` with every ticket the mirror sees change; returns the unsubscribe."""
        ...


@dataclass(frozen=True, slots=True)
class HoldRequest:
    hold_id: str
    player_id: str
    amount: int
    lobby_id: str
    ticket_id: str
    # The lobby's rake and payout table: the ledger binds the hold under these terms only.
    payout: PayoutRule


class Ledger(Protocol):
    async def hold_stakes(
        self, request_id: str, holds: Sequence[HoldRequest], ttl_seconds: float
    ) -> None:
        """All or nothing; raises :class:`InsufficientFunds`, :class:`LedgerRefused` or
        :class:`Unreachable`."""
        ...

    async def release_hold(self, hold_id: str, reason: str) -> None:
        """Void an unbound hold; an unknown or already released hold is fine. Raises
        :class:`HoldBound` when the hold is a table's stake already (bound, or posted once its
        game was settled): the table was made."""
        ...


@dataclass(frozen=True, slots=True)
class EngineNode:
    node_id: str
    address: str
    # The registered names of the games the node hosts.
    games: frozenset[str]
    tables: int
    capacity: int
    load: float
    draining: bool


class EngineNodes(Protocol):
    async def live(self) -> list[EngineNode]:
        """The nodes whose registry record has not expired."""
        ...


class Engines(Protocol):
    async def create_table(
        self, address: str, table_id: str, request_id: str, config: TableConfig
    ) -> str:
        """Create (or find, for the same request) the table of ``config`` (its lobby's
        :meth:`~masa_matchmaking.domain.lobby.Lobby.table_config`); returns its owner's address.

        Raises :class:`EngineFull`, :class:`EngineRefused` or :class:`Unreachable`."""
        ...


class LeaseStore(Protocol):
    async def acquire(self, key: str) -> int | None:
        """Take the lease (or take back our own); its revision, or None if another holds it."""
        ...

    async def renew(self, key: str, revision: int) -> int | None:
        """Extend it; None when it was lost."""
        ...

    async def release(self, key: str, revision: int) -> None: ...


@dataclass(frozen=True, slots=True)
class GameStarted:
    table_id: str
    config: TableConfig
    node_id: str
    address: str


class Events(Protocol):
    async def ticket_matched(self, ticket: Ticket, now: float) -> None: ...

    async def game_started(self, started: GameStarted, now: float) -> None: ...

    async def rating_changed(
        self,
        before: PlayerRating,
        after: PlayerRating,
        *,
        table_id: str,
        game_no: int,
        place: int,
        now: float,
    ) -> None:
        """Publish once per game and player (a repeat is dropped); raises
        :class:`Unreachable` when it could not, so that the game is delivered again."""
        ...


class RatingStore(Protocol):
    async def read(self, player_id: str, game: str) -> tuple[PlayerRating, int]:
        """The rating and its revision; a player never rated gets the initial one at 0."""
        ...

    async def write(self, rating: PlayerRating, revision: int) -> int:
        """Raises :class:`Conflict` when ``revision`` is stale."""
        ...

    async def decide(self, game_key: str, outcome: bytes) -> bytes:
        """Record a game's outcome once: the first one recorded under the key wins and is
        returned, so every instance that rates the game applies the same result."""
        ...

    async def announced(self, game_key: str) -> bool:
        """Whether every RatingChanged of the game has been published."""
        ...

    async def mark_announced(self, game_key: str) -> None: ...


class Metrics(Protocol):
    def queue_depth(self, lobby_id: str, depth: int) -> None: ...

    def round_run(self, lobby_id: str, seconds: float) -> None:
        """A matching round of the lobby ended (failed or not) after ``seconds``."""
        ...

    def matched(self, lobby_id: str, waits: Sequence[float], spread: float) -> None: ...

    def placement_failed(self, reason: str) -> None: ...
