"""Placing a table: from a plan of seats to players seated on an engine node (P-30).

1. Claim: every ticket of the plan goes from SEARCHING to PLACING with the table id chosen
   now, one compare-and-set each. A ticket another instance (or the player) changed first makes
   the claim fail, and the tickets claimed so far go back untouched: two instances never place
   one ticket.
2. Hold: for a chip lobby, ``HoldStakes`` for every player at once, all or nothing, with hold
   ids derived from the table id. A player who cannot pay gets a clear failure
   (INSUFFICIENT_FUNDS) and the others go back to the front of the queue.
3. Node: the least-loaded live table-engine node of the registry that hosts the game.
4. Create: ``CreateTable`` there under the table id, with the table id as request_id, so a
   retry (on any node, by any instance) answers with the same table and never makes a second
   one; the engine binds the holds to the table's game before it starts it (and answers
   only once they are bound).
5. Seat: every ticket goes to MATCHED with the table, seat, address and hold, and TicketMatched
   and GameStarted are published.

When a step fails the holds are released and the tickets go back to the front of the queue.
A failure that is the system's (the ledger or every engine node did not answer, no node hosts
the game or every one is full, a placement was abandoned) never counts against the players:
their tickets wait, and the lobby's rounds back off (:class:`Outcome.UNAVAILABLE`). A refusal
that a retry will not change (an engine or the ledger refusing the table) counts, and after
``max_requeues`` of them a ticket fails with the last reason. A create whose outcome is unknown
(the node did not answer) is fenced by releasing the holds: a hold the ledger reports bound (or
posted) means the table exists, and the tickets stay PLACING for the resume, which seats them
there. Every step repeats under the same ids, so :meth:`Placer.resume` can finish a placement
whose instance died, from the tickets alone.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Final

from masa_rules.table_config import SeatConfig, SeatKind, TableConfig

from masa_matchmaking.app.ports import (
    EngineFull,
    EngineNode,
    EngineNodes,
    EngineRefused,
    Engines,
    Events,
    GameStarted,
    HoldBound,
    HoldRequest,
    InsufficientFunds,
    Ledger,
    LedgerRefused,
    Metrics,
    TicketStore,
    Unreachable,
)
from masa_matchmaking.app.tickets import mutate
from masa_matchmaking.domain.errors import MatchmakingError, NotFound, Refused
from masa_matchmaking.domain.lobby import Lobby
from masa_matchmaking.domain.matching import TablePlan
from masa_matchmaking.domain.ticket import Failure, Placement, Ticket, TicketState

__all__ = ["Outcome", "PlacementSettings", "Placer"]

_log = logging.getLogger(__name__)

_CREATE_ATTEMPTS: Final = 3
_GIVE_UP_AFTER_TIMEOUTS: Final = 4


class Outcome(Enum):
    """How a placement (or a resume) ended, for the lobby's rounds."""

    # The players sit at the table.
    SEATED = "seated"
    # Not seated, for a reason waiting will not mend: a claim lost, a player who could not pay,
    # a refusal, or no room in the registry (nothing was tried).
    NOT_SEATED = "not_seated"
    # The system failed it (the ledger or the engines did not answer, no node hosts the game or
    # every one was full, the placement was abandoned): the tickets wait uncounted and the
    # lobby backs off.
    UNAVAILABLE = "unavailable"


@dataclass(frozen=True, slots=True)
class PlacementSettings:
    # How long a hold placed for a table may stay unbound (the create must finish first).
    hold_ttl_seconds: float = 120.0
    # Placements refused for a reason a retry will not change (an engine or the ledger refused
    # the table, no node hosts the game) before a ticket fails for good. An outage never
    # counts.
    max_requeues: int = 3
    # A placement older than this whose instance is gone is resumed by another.
    placement_timeout_seconds: float = 30.0


class Placer:
    def __init__(  # noqa: PLR0913 - each port is its own argument, so tests pass fakes for any
        self,
        store: TicketStore,
        ledger: Ledger | None,
        nodes: EngineNodes,
        engines: Engines,
        *,
        events: Events,
        metrics: Metrics,
        clock: Callable[[], float],
        instance_id: str,
        settings: PlacementSettings,
        new_table_id: Callable[[], str] = lambda: f"t{uuid.uuid4().hex[:24]}",
    ) -> None:
        self._store = store
        self._ledger = ledger
        self._nodes = nodes
        self._engines = engines
        self._events = events
        self._metrics = metrics
        self._clock = clock
        self._instance = instance_id
        self._settings = settings
        self._new_table_id = new_table_id

    @property
    def placement_timeout_seconds(self) -> float:
        return self._settings.placement_timeout_seconds

    async def place(self, lobby: Lobby, plan: TablePlan, tickets: Sequence[Ticket]) -> Outcome:
        """Place one planned table.

        While the registry shows no node with room for the game, nothing is claimed: the
        tickets keep searching untouched until a node has room."""
        if not await self._room_for(lobby):
            self._metrics.placement_failed("node_at_capacity")
            return Outcome.NOT_SEATED
        by_id = {ticket.ticket_id: ticket for ticket in tickets}
        table_id = self._new_table_id()
        now = self._clock()
        level = next((s.bot_level for s in plan.seats if s.bot_level is not None), None)
        claims = []
        for seat in plan.seats:
            if seat.ticket_id is None:
                continue
            placement = Placement(
                table_id=table_id,
                seat=seat.seat,
                table_seats=len(plan.seats),
                bot_level=level or lobby.bot_fill.level,
                players=len(plan.ticket_ids),
                placer=self._instance,
                started_at=now,
            )
            ticket = by_id[seat.ticket_id]
            claims.append(
                mutate(self._store, ticket.player_id, ticket.ticket_id, _placing(placement))
            )
        # The claims are independent records: written at once, they cost one round trip.
        outcomes = await asyncio.gather(*claims, return_exceptions=True)
        claimed = [outcome for outcome in outcomes if isinstance(outcome, Ticket)]
        failed = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
        if not failed:
            return await self._complete(lobby, claimed)
        if all(isinstance(error, Refused | NotFound) for error in failed):
            # Cancelled meanwhile, or (never while one instance leads) claimed by another.
            self._metrics.placement_failed("claim_lost")
            await self._give_back(claimed)
            return Outcome.NOT_SEATED
        # The store failed: what was claimed stays PLACING, for the resume.
        raise next(error for error in failed if not isinstance(error, Refused | NotFound))

    async def _room_for(self, lobby: Lobby) -> bool:
        hosts = [node for node in await self._nodes.live() if lobby.game in node.games]
        # No node at all is NO_ENGINE, reported by the placement itself.
        return not hosts or any(_has_room(node) and not node.draining for node in hosts)

    async def resume(self, lobby: Lobby, tickets: Sequence[Ticket]) -> Outcome:
        """Finish the placement of these PLACING tickets (one table) whose placer is gone.

        With every ticket of the placement still PLACING it runs again from the holds, under
        the same ids: the engine answers a create it made with that table. With only some (the
        placer died while seating or requeueing them), or after several resumes failed, the
        table exists exactly when its holds are bound (or posted): then the players are seated
        there; when the holds are released the tickets go back to the front of the queue,
        uncounted (the placement was abandoned, not by them); and while the ledger does not
        answer, nobody can tell, so the tickets stay PLACING for the next resume.
        """
        placement = _placement(tickets[0])
        _log.info(
            "resuming a placement",
            extra={"table_id": placement.table_id, "lobby_id": lobby.lobby_id},
        )
        age = self._clock() - placement.started_at
        # A placement resumed again and again stops being retried: a defect would otherwise
        # hold its tickets for ever (a PLACING ticket never expires).
        given_up = age >= _GIVE_UP_AFTER_TIMEOUTS * self._settings.placement_timeout_seconds
        if len(tickets) == placement.players and not given_up:
            return await self._complete(lobby, list(tickets))
        holds = [_hold_id(t) for t in tickets] if lobby.chips else []
        released = await self._release(holds)
        if released == "bound":
            return await self._complete(lobby, list(tickets))
        if released == "unknown":
            self._metrics.placement_failed("ledger_unavailable")
            return Outcome.UNAVAILABLE
        self._metrics.placement_failed("placement_abandoned")
        await self._put_back(list(tickets))
        return Outcome.UNAVAILABLE

    async def _complete(self, lobby: Lobby, tickets: list[Ticket]) -> Outcome:
        first = _placement(tickets[0])
        table_id = first.table_id
        config = lobby.table_config(_seats(lobby, tickets))
        holds = [seat.hold_id for seat in config.seats if seat.hold_id]
        if lobby.chips:
            unheld = await self._hold(lobby, table_id, tickets)
            if unheld is not None:
                return unheld
        try:
            node_id, address = await self._create(config, table_id)
        except _Failed as failed:
            await self._fail_placement(tickets, holds, failed.reason, failed.message)
            return Outcome.NOT_SEATED
        except _Full:
            # Every node runs all the tables it may: the players wait for room, uncounted.
            await self._fail_placement(
                tickets,
                holds,
                "NODE_AT_CAPACITY",
                "every table-engine node is full",
                counted=False,
            )
            return Outcome.UNAVAILABLE
        except _NoEngine:
            # The system's, like a full house: the players wait for a node, uncounted.
            await self._fail_placement(
                tickets,
                holds,
                "NO_ENGINE",
                "no live table-engine node hosts this game now",
                counted=False,
            )
            return Outcome.UNAVAILABLE
        except _Unknown:
            return await self._fence(tickets, holds)
        await self._seat(lobby, tickets, config, node_id, address)
        return Outcome.SEATED

    async def _hold(self, lobby: Lobby, table_id: str, tickets: list[Ticket]) -> Outcome | None:
        """Hold every player's stake; None when held, else how the placement ended."""
        ledger = self._ledger
        if ledger is None:
            await self._fail_placement(
                tickets, [], "LEDGER_UNAVAILABLE", "no ledger holds the stakes"
            )
            return Outcome.NOT_SEATED
        requests = [
            HoldRequest(
                _hold_id(t), t.player_id, lobby.stake, lobby.lobby_id, t.ticket_id, lobby.payout
            )
            for t in tickets
        ]
        try:
            await ledger.hold_stakes(f"{table_id}-holds", requests, self._settings.hold_ttl_seconds)
        except InsufficientFunds as short:
            self._metrics.placement_failed("insufficient_funds")
            now = self._clock()
            failure = Failure(
                "INSUFFICIENT_FUNDS", f"you need {lobby.stake} chips to sit in {lobby.lobby_id}"
            )
            for ticket in tickets:
                if ticket.player_id in short.players:
                    await self._change(ticket, lambda t: t.failed(failure, now))
                else:
                    # Not their fault: back to the front without counting against them.
                    await self._change(ticket, lambda t: t.requeued(now, counted=False))
            return Outcome.NOT_SEATED
        except LedgerRefused as refused:
            # All or nothing, so this call held nothing; but a hold an earlier try placed under
            # these ids (REQUEST_ID_REUSED: the lobby's stake or terms changed since) would
            # keep its chips reserved until it expired.
            holds = [request.hold_id for request in requests]
            await self._fail_placement(tickets, holds, refused.reason, refused.message)
            return Outcome.NOT_SEATED
        except Unreachable as error:
            # The ledger is away: the players wait, uncounted, and the lobby backs off.
            holds = [request.hold_id for request in requests]
            await self._fail_placement(
                tickets, holds, "LEDGER_UNAVAILABLE", str(error), counted=False
            )
            return Outcome.UNAVAILABLE
        return None

    async def _create(self, config: TableConfig, table_id: str) -> tuple[str, str]:
        """CreateTable on the least-loaded node with room, another when one is full or does
        not answer; raises _Full when every node said it is full, _Unknown when some did not
        answer (the table may exist there)."""
        nodes = [
            node
            for node in await self._nodes.live()
            if config.game in node.games and not node.draining
        ]
        if not nodes:
            raise _NoEngine
        # The registry's counts lag: a node it shows full is still asked, last.
        nodes.sort(key=lambda node: (not _has_room(node), node.load, node.tables, node.node_id))
        full: set[str] = set()
        unanswered = 0
        turn = 0
        while unanswered < _CREATE_ATTEMPTS and len(full) < len(nodes):
            node = nodes[turn % len(nodes)]
            turn += 1
            if node.node_id in full:
                continue
            try:
                address = await self._engines.create_table(node.address, table_id, table_id, config)
            except EngineFull:
                # Refused before anything was written there: the next node may take it.
                full.add(node.node_id)
                continue
            except EngineRefused as refused:
                raise _Failed(refused.reason, refused.message) from None
            except Unreachable as error:
                _log.warning(
                    "CreateTable did not answer; trying again",
                    extra={"table_id": table_id, "node_id": node.node_id, "error": str(error)},
                )
                unanswered += 1
                await asyncio.sleep(0.05 * unanswered)
                continue
            return node.node_id, address or node.address
        if len(full) == len(nodes):
            raise _Full
        raise _Unknown

    async def _fence(self, tickets: list[Ticket], holds: list[str]) -> Outcome:
        """No node answered CreateTable: release the holds, so that a create still in flight
        can no longer bind them. A hold the ledger reports bound means the table was made, and
        a ledger that does not answer leaves it unknown: the tickets stay PLACING, and the
        resume after placement_timeout finishes the placement either way (it seats them at
        that table when it was made). Released holds mean no table: the tickets go back to the
        front, uncounted.

        A table without stakes (training, free lobbies) has no hold to fence it with: its
        tickets stay PLACING and the resume asks again under the same table id, which the
        engine answers with the table if the first create made it. Requeueing them would
        place them again under a new id while the first table may be starting."""
        self._metrics.placement_failed("engine_unavailable")
        if holds and await self._release(holds) == "released":
            await self._put_back(tickets)
        return Outcome.UNAVAILABLE

    async def _release(self, holds: Sequence[str]) -> str:
        """Release the holds: "released", "bound" (one is a table's stake) or "unknown"."""
        if self._ledger is None:
            return "released"
        for hold in holds:
            try:
                await self._ledger.release_hold(hold, "the table could not be created")
            except HoldBound:
                return "bound"
            except LedgerRefused as refused:
                _log.warning("could not release hold %s: %s", hold, refused)
            except Unreachable:
                return "unknown"
        return "released"

    async def _fail_placement(
        self,
        tickets: list[Ticket],
        holds: list[str],
        reason: str,
        message: str,
        *,
        counted: bool = True,
    ) -> None:
        self._metrics.placement_failed(reason.lower())
        _log.warning(
            "placement failed",
            extra={"table_id": _placement(tickets[0]).table_id, "reason": reason},
        )
        if self._ledger is not None:
            for hold in holds:
                try:
                    await self._ledger.release_hold(hold, f"placement failed: {reason}")
                except (HoldBound, LedgerRefused) as error:
                    _log.warning("could not release hold %s: %s", hold, error)
                except Unreachable as error:
                    # Nor would the others now; an unbound hold expires by itself
                    # (hold_ttl_seconds).
                    _log.warning("could not release hold %s: %s", hold, error)
                    break
        if not counted:
            await self._put_back(tickets)
            return
        now = self._clock()
        failure = Failure(reason, message)
        for ticket in tickets:
            if ticket.requeues + 1 >= self._settings.max_requeues:
                await self._change(ticket, lambda t: t.failed(failure, now))
            else:
                await self._change(ticket, lambda t: t.requeued(now))

    async def _put_back(self, tickets: list[Ticket]) -> None:
        """Back to the front of the queue, uncounted: the placement failed for no fault of
        the players."""
        now = self._clock()
        for ticket in tickets:
            await self._change(ticket, lambda t: t.requeued(now, counted=False))

    async def _seat(
        self,
        lobby: Lobby,
        tickets: list[Ticket],
        config: TableConfig,
        node_id: str,
        address: str,
    ) -> None:
        now = self._clock()
        table_id = _placement(tickets[0]).table_id
        await self._events.game_started(GameStarted(table_id, config, node_id, address), now)

        def matched(t: Ticket) -> Ticket:
            if t.state is TicketState.MATCHED:
                return t
            placement = _placement(t)
            hold = _hold_id(t) if lobby.chips else ""
            done = replace(placement, node_id=node_id, address=address, hold_id=hold)
            return t.with_placement(done).matched(now)

        changes = await asyncio.gather(*(self._change(ticket, matched) for ticket in tickets))
        seated = [ticket for ticket in changes if ticket is not None]
        await asyncio.gather(*(self._events.ticket_matched(ticket, now) for ticket in seated))
        waits = [now - ticket.created_at for ticket in seated]
        ratings = [ticket.rating for ticket in tickets]
        self._metrics.matched(lobby.lobby_id, waits, max(ratings) - min(ratings))
        _log.info(
            "table placed",
            extra={"table_id": table_id, "lobby_id": lobby.lobby_id, "node_id": node_id},
        )

    async def _give_back(self, claimed: list[Ticket]) -> None:
        now = self._clock()
        for ticket in claimed:
            await self._change(ticket, lambda t: t.returned(now))

    async def _change(self, ticket: Ticket, change: Callable[[Ticket], Ticket]) -> Ticket | None:
        """Change a ticket of this placement; one that moved on meanwhile is left as it is."""
        table_id = _placement(ticket).table_id if ticket.placement else ""

        def guarded(current: Ticket) -> Ticket:
            placement = current.placement
            if placement is None or placement.table_id != table_id:
                raise Refused(f"ticket {current.ticket_id} is no longer this placement's")
            return change(current)

        try:
            return await mutate(self._store, ticket.player_id, ticket.ticket_id, guarded)
        except MatchmakingError as error:
            _log.info("ticket %s left as it is: %s", ticket.ticket_id, error)
            return None


class _Failed(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class _Unknown(Exception):
    """No node answered CreateTable: whether the table exists is unknown."""


class _Full(Exception):
    """Every node hosting the game refused CreateTable for want of room."""


class _NoEngine(Exception):
    """No live node hosts the game now (every one is down, draining or yet to start)."""


def _has_room(node: EngineNode) -> bool:
    return node.tables < node.capacity


def _placing(placement: Placement) -> Callable[[Ticket], Ticket]:
    return lambda ticket: ticket.placing(placement)


def _placement(ticket: Ticket) -> Placement:
    if ticket.placement is None:
        raise Refused(f"ticket {ticket.ticket_id} has no placement")
    return ticket.placement


def _hold_id(ticket: Ticket) -> str:
    placement = _placement(ticket)
    return f"{placement.table_id}-s{placement.seat}"


def _seats(lobby: Lobby, tickets: Sequence[Ticket]) -> tuple[SeatConfig, ...]:
    """The placement's seats: its players, each with the hold of the stake at a chip table,
    and bots of the placement's level on the seats nobody took."""
    first = _placement(tickets[0])
    humans = {_placement(t).seat: t for t in tickets}
    seats: list[SeatConfig] = []
    for seat in range(first.table_seats):
        ticket = humans.get(seat)
        if ticket is None:
            seats.append(SeatConfig(seat, SeatKind.BOT, bot_level=first.bot_level))
        else:
            hold = _hold_id(ticket) if lobby.chips else ""
            seats.append(
                SeatConfig(
                    seat,
                    SeatKind.HUMAN,
                    ticket.player_id,
                    ticket.display_name,
                    bot_level=lobby.autopilot_level,
                    hold_id=hold,
                )
            )
    return tuple(seats)
