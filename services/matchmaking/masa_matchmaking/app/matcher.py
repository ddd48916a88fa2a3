"""Leadership and rounds: each lobby is matched by one instance at a time.

Every lobby is a shard with a lease in the shared lease store (a KV bucket whose TTL is the
lease's life). Each instance tries to take the free leases every ``lease_ttl / 3`` and renews
the ones it holds; while it holds a lobby's lease it runs that lobby's rounds. A lease counts
as held only until ``lease_ttl`` after the last renewal *sent* that succeeded: a renewal that
fails or does not answer in time (a loaded machine, NATS away) never extends it, so the rounds
stop placing before the lease can have expired in the store and another instance can have
taken it; two instances never run one lobby's rounds at once. When a renewal says the lease
is lost, the rounds stop, and the placements already started finish (each is short, and the
new leader resumes a placement only after ``placement_timeout``): cancelling them half-way
would leave their tickets PLACING and their stakes held until then. An instance that dies
stops renewing, its leases expire and another instance takes the lobbies over, resuming the
placements it left behind. The compare-and-set claim of every ticket (see
:mod:`~masa_matchmaking.app.placement`) is what makes a ticket placed at most once whatever
the instances believe.

A round runs every ``round_seconds``, and at once when a new ticket makes a full table
possible. It expires the tickets past their expiry, resumes placements older than the
placer's ``placement_timeout_seconds`` that no running placement of this instance owns, and
places the
tables of :func:`~masa_matchmaking.domain.matching.match_round`, each in its own task so that a
slow engine never holds the round up. A round plans only the tables it may start (at most
``_MAX_PLACEMENTS`` placements run at once), so its cost follows what it places.

A placement the system failed (:attr:`~masa_matchmaking.app.placement.Outcome.UNAVAILABLE`:
the ledger or the engines away) puts its tickets back at the front, uncounted, which would
make a new round at once and fail again within milliseconds for as long as the outage lasts.
So the lobby backs off: no round runs for ``backoff_seconds``, doubled after each such failure
up to ``backoff_max_seconds``, and back to none once a table is seated. The failures of the
placements that ran beside the one that started a pause add nothing to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Final

from masa_matchmaking.app.placement import Outcome, Placer
from masa_matchmaking.app.ports import LeaseStore, Metrics, TicketStore
from masa_matchmaking.app.tickets import mutate
from masa_matchmaking.domain.errors import MatchmakingError
from masa_matchmaking.domain.lobby import Lobby
from masa_matchmaking.domain.matching import match_round
from masa_matchmaking.domain.ticket import Ticket, TicketState

__all__ = ["MatcherSettings", "Matchmaker"]

_log = logging.getLogger(__name__)
# Placements one lobby runs at once; more wait for the next round.
_MAX_PLACEMENTS: Final = 64
_COALESCE_SECONDS: Final = 0.005

# Runs a block in a span continuing a saved trace: (span name, W3C traceparent).
Traced = Callable[[str, str], contextlib.AbstractContextManager[None]]


def _untraced(name: str, traceparent: str) -> contextlib.AbstractContextManager[None]:
    return contextlib.nullcontext()


@dataclass(frozen=True, slots=True)
class MatcherSettings:
    round_seconds: float = 1.0
    lease_ttl_seconds: float = 6.0
    # The pause of a lobby's rounds after a placement the system failed, doubled after each
    # such failure up to the most, and forgotten once a table is seated.
    backoff_seconds: float = 0.5
    backoff_max_seconds: float = 8.0


@dataclass(frozen=True, slots=True)
class _Held:
    revision: int
    # The loop time until which the lease is surely ours: lease_ttl after the renewal was sent.
    until: float


class Matchmaker:
    """Holds the lobby leases this instance can get and runs their rounds."""

    def __init__(  # noqa: PLR0913 - each port is its own argument, so tests pass fakes for any
        self,
        lobbies: Mapping[str, Lobby],
        store: TicketStore,
        leases: LeaseStore,
        placer: Placer,
        *,
        metrics: Metrics,
        clock: Callable[[], float],
        settings: MatcherSettings,
        traced: Traced = _untraced,
    ) -> None:
        self._traced = traced
        self._lobbies = lobbies
        self._store = store
        self._leases = leases
        self._placer = placer
        self._metrics = metrics
        self._clock = clock
        self._settings = settings
        self._held: dict[str, _Held] = {}
        self._rounds: dict[str, _LobbyRounds] = {}
        # Placements of lobbies whose lease was lost, left to finish.
        self._finishing: set[asyncio.Task[None]] = set()
        self._unlisten: Callable[[], None] | None = None

    @property
    def leading(self) -> frozenset[str]:
        """The lobbies this instance matches now (whose lease is surely still its own)."""
        return frozenset(lobby_id for lobby_id in self._held if self._leads(lobby_id))

    def _leads(self, lobby_id: str) -> bool:
        held = self._held.get(lobby_id)
        return held is not None and asyncio.get_running_loop().time() < held.until

    async def run(self, stop: asyncio.Event) -> None:
        self._unlisten = self._store.listen(self._heard)
        try:
            while not stop.is_set():
                try:
                    await self._tend_leases()
                except Exception:
                    _log.exception("could not tend the lobby leases")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self._settings.lease_ttl_seconds / 3)
        finally:
            self._unlisten()
            await self._give_up_all()

    def _heard(self, ticket: Ticket) -> None:
        rounds = self._rounds.get(ticket.lobby_id)
        if rounds is not None and ticket.state is TicketState.SEARCHING:
            rounds.poke(ticket)

    async def _tend_leases(self) -> None:
        for lobby_id, lobby in self._lobbies.items():
            try:
                await self._tend(lobby_id, lobby)
            except Exception as error:
                # Not lost, not renewed: the lease stays ours only until its last renewal's
                # TTL runs out, and then the rounds stop before anyone else can take it.
                _log.warning(
                    "could not renew or take a lobby lease",
                    extra={"lobby_id": lobby_id, "error": repr(error)},
                )
                if lobby_id in self._held and not self._leads(lobby_id):
                    _log.warning("the lease of lobby %s may have lapsed", lobby_id)
                    await self._stop_rounds(lobby_id)

    async def _tend(self, lobby_id: str, lobby: Lobby) -> None:
        loop = asyncio.get_running_loop()
        ttl = self._settings.lease_ttl_seconds
        held = self._held.get(lobby_id)
        sent = loop.time()
        if held is not None:
            renewed = await self._leases.renew(lobby_id, held.revision)
            if renewed is None:
                _log.warning("lost the lease of lobby %s", lobby_id)
                await self._stop_rounds(lobby_id)
                return
            self._held[lobby_id] = _Held(renewed, sent + ttl)
            return
        acquired = await self._leases.acquire(lobby_id)
        if acquired is not None:
            _log.info("leading lobby %s", lobby_id)
            self._held[lobby_id] = _Held(acquired, sent + ttl)
            rounds = _LobbyRounds(
                lobby,
                self._store,
                self._placer,
                self._metrics,
                self._clock,
                settings=self._settings,
                leads=lambda: self._leads(lobby_id),
                traced=self._traced,
            )
            rounds.start()
            self._rounds[lobby_id] = rounds

    async def _stop_rounds(self, lobby_id: str) -> None:
        """Stop the rounds; the placements they started finish by themselves."""
        self._held.pop(lobby_id, None)
        rounds = self._rounds.pop(lobby_id, None)
        if rounds is not None:
            for task in await rounds.stop():
                self._finishing.add(task)
                task.add_done_callback(self._finishing.discard)

    async def _give_up_all(self) -> None:
        for lobby_id in list(self._rounds):
            held = self._held.get(lobby_id)
            await self._stop_rounds(lobby_id)
            if held is not None:
                with contextlib.suppress(Exception):
                    await self._leases.release(lobby_id, held.revision)
        # Stopping: what is still being placed is resumed by the next leader.
        tasks = list(self._finishing)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


class _LobbyRounds:
    """The rounds of one lobby while this instance holds its lease."""

    def __init__(  # noqa: PLR0913 - the matchmaker's ports and settings, passed on by keyword
        self,
        lobby: Lobby,
        store: TicketStore,
        placer: Placer,
        metrics: Metrics,
        clock: Callable[[], float],
        *,
        settings: MatcherSettings,
        traced: Traced,
        leads: Callable[[], bool],
    ) -> None:
        self._traced = traced
        self._lobby = lobby
        self._leads = leads
        self._store = store
        self._placer = placer
        self._metrics = metrics
        self._clock = clock
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # Tickets of this instance's running placements, left out of the next rounds.
        self._placing: set[str] = set()
        # What the searching tickets make possible, counted as they arrive (see poke).
        self._counted: set[str] = set()
        self._party_members: dict[str, int] = {}
        self._ready_players = 0
        self._placements: set[asyncio.Task[None]] = set()
        self._round_seconds = settings.round_seconds
        self._backoff = _Backoff(settings.backoff_seconds, settings.backoff_max_seconds)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._loop(), name=f"matchmaking-{self._lobby.lobby_id}"
        )

    def poke(self, ticket: Ticket) -> None:
        """A ticket started searching: run a round now if a full table has become possible.

        Counted as tickets arrive (a ticket alone, or a party once its last member came), so
        that each arrival costs the same however long the queue is; each round counts again
        from the queue itself, which also forgets the tickets that left.
        """
        if ticket.ticket_id in self._counted:
            return
        self._counted.add(ticket.ticket_id)
        if ticket.party_size <= 1:
            self._ready_players += 1
        else:
            members = self._party_members.get(ticket.party_code, 0) + 1
            self._party_members[ticket.party_code] = members
            if members == ticket.party_size:
                self._ready_players += members
        self._wake_if_placeable()

    def _wake_if_placeable(self) -> None:
        """Run a round now if it could start a placement (a full table and a free slot)."""
        possible = self._lobby.training or self._ready_players >= self._lobby.max_seats
        if possible and len(self._placements) < _MAX_PLACEMENTS:
            self._wake.set()

    def _recount(self, waiting: list[Ticket]) -> None:
        self._counted = {ticket.ticket_id for ticket in waiting}
        self._party_members = {}
        self._ready_players = 0
        for ticket in waiting:
            if ticket.party_size <= 1:
                self._ready_players += 1
            else:
                members = self._party_members.get(ticket.party_code, 0) + 1
                self._party_members[ticket.party_code] = members
                if members == ticket.party_size:
                    self._ready_players += members

    async def stop(self) -> set[asyncio.Task[None]]:
        """Stop the rounds; returns the placements still running, left to finish."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        return set(self._placements)

    def _waiting(self) -> list[Ticket]:
        return [
            ticket
            for ticket in self._store.lobby_tickets(self._lobby.lobby_id)
            if ticket.state is TicketState.SEARCHING and ticket.ticket_id not in self._placing
        ]

    async def _loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._round_seconds)
            # Arrivals within a few milliseconds share one round instead of one each.
            await asyncio.sleep(_COALESCE_SECONDS)
            # Backing off: the tickets put back wait, and so do the rounds they would wake.
            await asyncio.sleep(self._backoff.remaining(asyncio.get_running_loop().time()))
            self._wake.clear()
            started = time.perf_counter()
            try:
                await self._round()
            except asyncio.CancelledError:
                raise
            except Exception:
                _log.exception("matching round of %s failed", self._lobby.lobby_id)
            self._metrics.round_run(self._lobby.lobby_id, time.perf_counter() - started)

    async def _round(self) -> None:
        lobby = self._lobby
        if not self._leads():
            # The lease is not surely ours now: place nothing until it is renewed.
            return
        now = self._clock()
        every = self._store.lobby_tickets(lobby.lobby_id)
        await self._resume_stale(every, now, self._placer.placement_timeout_seconds)
        waiting: list[Ticket] = []
        for ticket in self._waiting():
            if ticket.expires_at <= now:
                await self._expire(ticket, now)
            else:
                waiting.append(ticket)
        self._metrics.queue_depth(lobby.lobby_id, len(waiting))
        slots = _MAX_PLACEMENTS - len(self._placements)
        if slots <= 0:
            return
        plans = match_round(lobby, waiting, now, limit=slots)
        matched = {ticket_id for plan in plans for ticket_id in plan.ticket_ids}
        self._recount([ticket for ticket in waiting if ticket.ticket_id not in matched])
        for plan in plans:
            ids = set(plan.ticket_ids)
            tickets = [ticket for ticket in waiting if ticket.ticket_id in ids]
            self._spawn(tickets, self._placer.place(lobby, plan, tickets))

    async def _resume_stale(self, tickets: list[Ticket], now: float, timeout: float) -> None:
        stale: dict[str, list[Ticket]] = {}
        for ticket in tickets:
            placement = ticket.placement
            if (
                ticket.state is TicketState.PLACING
                and placement is not None
                and ticket.ticket_id not in self._placing
                and now - placement.started_at >= timeout
            ):
                stale.setdefault(placement.table_id, []).append(ticket)
        for group in stale.values():
            self._spawn(group, self._placer.resume(self._lobby, group))

    def _spawn(self, tickets: list[Ticket], placing: Coroutine[Any, Any, Outcome]) -> None:
        ids = {ticket.ticket_id for ticket in tickets}
        self._placing |= ids
        # The placement continues the trace of the ticket that waited longest.
        first = min(tickets, key=lambda ticket: ticket.created_at)

        async def run() -> None:
            try:
                with self._traced("place table", first.trace_parent):
                    outcome = await placing
                self._placed(outcome)
            except asyncio.CancelledError:
                raise
            except Exception:
                _log.exception("placement in %s failed", self._lobby.lobby_id)
            finally:
                self._placing -= ids

        def done(task: asyncio.Task[None]) -> None:
            self._placements.discard(task)
            # A slot is free: the tables waiting for one go now, not at the next tick.
            self._wake_if_placeable()

        task = asyncio.get_running_loop().create_task(run())
        self._placements.add(task)
        task.add_done_callback(done)

    def _placed(self, outcome: Outcome) -> None:
        if outcome is Outcome.SEATED:
            self._backoff.reset()
        elif outcome is Outcome.UNAVAILABLE:
            pause = self._backoff.failed(asyncio.get_running_loop().time())
            if pause:
                _log.warning(
                    "a placement failed for want of the ledger or the engines; backing off",
                    extra={"lobby_id": self._lobby.lobby_id, "seconds": pause},
                )

    async def _expire(self, ticket: Ticket, now: float) -> None:
        try:
            await mutate(self._store, ticket.player_id, ticket.ticket_id, lambda t: t.expired(now))
        except MatchmakingError as error:
            _log.info("ticket %s not expired: %s", ticket.ticket_id, error)


class _Backoff:
    """A lobby's pause after placements the system failed: ``first`` seconds, doubled after
    each failure up to ``most``, none again after a success."""

    def __init__(self, first: float, most: float) -> None:
        self._first = first
        self._most = most
        self._pause = 0.0
        self._until = float("-inf")

    def remaining(self, now: float) -> float:
        return max(0.0, self._until - now)

    def failed(self, now: float) -> float:
        """A failure at ``now``; returns the new pause, or 0 when one is running already (the
        placements that ran beside the one that started it failed with it)."""
        if now < self._until:
            return 0.0
        self._pause = min(self._most, self._pause * 2 or self._first)
        self._until = now + self._pause
        return self._pause

    def reset(self) -> None:
        self._pause = 0.0
        self._until = float("-inf")
