"""How long a lobby's players waited for a seat lately, and whether one more would be seated
at once (pure): what a player choosing a lobby is shown (``Lobby.recent_waits`` and
``Lobby.seats_now``).

:class:`RecentWaits` keeps, per lobby, the waits of the last :data:`KEEP` players seated there
(from their ticket's creation to its MATCHED state), so its memory is bounded by the lobbies,
whatever the traffic. A ticket heard as MATCHED more than once (the mirror reading a record
again) counts once.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from masa_matchmaking.domain.lobby import Lobby
from masa_matchmaking.domain.ticket import Ticket, TicketState

__all__ = ["KEEP", "RecentWaits", "WaitSummary", "seats_now"]

# The placements a lobby's summary is made of: the players seated last.
KEEP: Final = 50


@dataclass(frozen=True, slots=True)
class WaitSummary:
    """The waits of a lobby's last ``placements`` seated players, in seconds."""

    placements: int
    median_seconds: float
    p90_seconds: float


@dataclass(frozen=True, slots=True)
class _Seated:
    seated_at: float
    ticket_id: str
    waited: float


class RecentWaits:
    """The waits of the last ``keep`` players seated in each lobby."""

    def __init__(self, lobby_ids: Iterable[str], keep: int = KEEP) -> None:
        self._keep = keep
        # Oldest seat first; only the lobbies named here are kept.
        self._seated: dict[str, list[_Seated]] = {lobby_id: [] for lobby_id in lobby_ids}

    def heard(self, ticket: Ticket) -> None:
        """Count a ticket once it is MATCHED (any other state, or a lobby not kept, is not)."""
        seated = self._seated.get(ticket.lobby_id)
        if seated is None or ticket.state is not TicketState.MATCHED:
            return
        if any(known.ticket_id == ticket.ticket_id for known in seated):
            return
        waited = max(0.0, ticket.updated_at - ticket.created_at)
        entry = _Seated(ticket.updated_at, ticket.ticket_id, waited)
        # Records may be heard out of order (a mirror loading the bucket): keep them by seat time.
        bisect.insort(seated, entry, key=lambda known: known.seated_at)
        if len(seated) > self._keep:
            del seated[0]

    def summary(self, lobby_id: str) -> WaitSummary | None:
        """The median and 90th percentile (nearest rank) of the lobby's recent waits; None when
        nobody was seated there yet."""
        seated = self._seated.get(lobby_id)
        if not seated:
            return None
        waits = sorted(known.waited for known in seated)
        p90 = waits[math.ceil(0.9 * len(waits)) - 1]
        return WaitSummary(len(waits), statistics.median(waits), p90)


def seats_now(lobby: Lobby, searching: Iterable[Ticket], now: float) -> bool:
    """Whether a ticket made now in ``lobby``, where ``searching`` search, completes a table at
    once: always in training (bots fill it, P-1); else when it fills a table, or makes a short
    table whose longest-waiting player has waited ``short_table_after_seconds``. Rating may
    still hold it for a while (:class:`~masa_matchmaking.domain.lobby.MatchingPolicy`)."""
    if lobby.training:
        return True
    created = [ticket.created_at for ticket in searching if ticket.state is TicketState.SEARCHING]
    players = len(created) + 1
    if players >= lobby.max_seats:
        return True
    return (
        bool(created)
        and players >= lobby.min_seats
        and now - min(created) >= lobby.short_table_after_seconds
    )
