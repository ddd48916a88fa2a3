"""A ticket: one player's search for a seat, and the only ways its state may change.

SEARCHING → PLACING (a table is being made for it) → MATCHED; a failed placement that is not
the player's fault goes back to SEARCHING at the front of the queue; SEARCHING ends as
CANCELLED or EXPIRED, and SEARCHING or PLACING as FAILED. Each change is a pure function that
returns a new ticket, or raises :class:`~masa_matchmaking.domain.errors.Refused` when the
ticket is not in a state that allows it, so a stale instance can never move a ticket twice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Final

from masa_rules.refusals import Reason
from masa_rules.table_config import BotLevel

from masa_matchmaking.domain.errors import Refused

__all__ = [
    "CLOSED",
    "OPEN",
    "PARTY_CODE",
    "Failure",
    "Placement",
    "Ticket",
    "TicketState",
]

PARTY_CODE: Final = re.compile(r"^[A-Z2-9]{8}$")


class TicketState(StrEnum):
    SEARCHING = "searching"
    PLACING = "placing"
    MATCHED = "matched"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    FAILED = "failed"


OPEN: Final = frozenset({TicketState.SEARCHING, TicketState.PLACING})
CLOSED: Final = frozenset(set(TicketState) - OPEN)


@dataclass(frozen=True, slots=True)
class Failure:
    """Why a ticket failed or expired: an ErrorInfo reason (a rule id or a platform
    reason such as INSUFFICIENT_FUNDS) and a message for the player."""

    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Placement:
    """The table being made for a ticket: chosen before anything is asked of the ledger or an
    engine, so that every step can be repeated under the same ids (a retry never makes a second
    table or a second hold)."""

    table_id: str
    seat: int
    # The table's size and the level of its bot seats (the seats no ticket of the placement
    # has), so that another instance can resume the placement from the tickets alone.
    table_seats: int
    bot_level: BotLevel
    # The tickets of the placement, so that a resume knows whether it has them all.
    players: int
    # The instance that placed it, and when; another one resumes it after placement_timeout.
    placer: str
    started_at: float
    # The engine node chosen, once chosen.
    node_id: str = ""
    address: str = ""
    hold_id: str = ""


@dataclass(frozen=True, slots=True)
class Ticket:
    ticket_id: str
    request_id: str
    lobby_id: str
    player_id: str
    display_name: str
    state: TicketState
    created_at: float
    expires_at: float
    updated_at: float
    # Players of the party, 1 when alone; the party's code is empty when alone.
    party_size: int = 1
    party_code: str = ""
    bot_level: BotLevel | None = None
    # The player's rating (OpenSkill mu) in the lobby's game when the ticket was made.
    rating: float = 25.0
    placement: Placement | None = None
    failure: Failure | None = None
    # Failed placements that counted against this ticket (see requeued).
    requeues: int = 0
    # The W3C traceparent of the request that made the ticket ("" when not tracing), so that
    # its placement, run later by a matching round, continues that trace.
    trace_parent: str = ""
    # Put back after a failed placement: matched before the tickets that never were.
    front: bool = False

    @property
    def open(self) -> bool:
        return self.state in OPEN

    def placing(self, placement: Placement) -> Ticket:
        self._require(TicketState.SEARCHING, "placed")
        return replace(
            self, state=TicketState.PLACING, placement=placement, updated_at=placement.started_at
        )

    def with_placement(self, placement: Placement) -> Ticket:
        """The same placement with more of it known (the node, the hold)."""
        self._require(TicketState.PLACING, "placed")
        return replace(self, placement=placement)

    def matched(self, now: float) -> Ticket:
        self._require(TicketState.PLACING, "seated")
        return replace(self, state=TicketState.MATCHED, updated_at=now)

    def requeued(self, now: float, *, counted: bool = True) -> Ticket:
        """Back to the front of the queue after a placement that failed for a reason not the
        player's. ``counted`` is False when another player of the table was the cause (one who
        could not pay): an innocent player's ticket never fails for what others did."""
        self._require(TicketState.PLACING, "put back in the queue")
        return replace(
            self,
            state=TicketState.SEARCHING,
            placement=None,
            updated_at=now,
            requeues=self.requeues + 1 if counted else self.requeues,
            front=True,
        )

    def returned(self, now: float) -> Ticket:
        """Back to the queue untouched: its placement was given up before anything was asked
        of the ledger or an engine (another ticket of the table could not be claimed)."""
        self._require(TicketState.PLACING, "put back in the queue")
        return replace(self, state=TicketState.SEARCHING, placement=None, updated_at=now)

    def cancelled(self, now: float) -> Ticket:
        if self.state is TicketState.PLACING:
            raise Refused(
                f"ticket {self.ticket_id} is being seated and cannot be cancelled now",
                reason=Reason.TICKET_PLACING,
            )
        self._require(TicketState.SEARCHING, "cancelled")
        return replace(self, state=TicketState.CANCELLED, updated_at=now)

    def expired(self, now: float) -> Ticket:
        self._require(TicketState.SEARCHING, "expired")
        failure = Failure("TICKET_EXPIRED", "no table was found before the ticket expired")
        return replace(self, state=TicketState.EXPIRED, failure=failure, updated_at=now)

    def failed(self, failure: Failure, now: float) -> Ticket:
        if not self.open:
            raise self._closed("failed")
        return replace(self, state=TicketState.FAILED, failure=failure, updated_at=now)

    def _require(self, state: TicketState, verb: str) -> None:
        if self.state is not state:
            raise self._closed(verb)

    def _closed(self, verb: str) -> Refused:
        return Refused(
            f"ticket {self.ticket_id} is {self.state.value} and cannot be {verb}",
            reason=Reason.TICKET_CLOSED,
            metadata={"state": self.state.value},
        )
