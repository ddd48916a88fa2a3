"""One matching round of a lobby: searching tickets in, tables to place out (pure).

The queue is read as *units*: a ticket alone, or a party once every member's ticket is
searching. Units are served oldest first, a unit put back after a failed placement before any
other (the front of the queue). Each unit in turn anchors a table: it takes the closest other
units by rating (OpenSkill mu), as long as the distance is within the spread that both the
anchor and the candidate accept after their waits (:meth:`MatchingPolicy.spread`), until the
table is full. A table that is not full is still placed:

- with at least ``min_seats`` players once the anchor has waited ``short_table_after_seconds``;
- completed with bots up to ``min_seats`` once the anchor has waited the bot fill's
  ``fill_after_seconds``, where the lobby fills with bots and the table has at least its
  ``min_players``. Only a lobby without a stake fills with bots (:class:`Lobby` refuses a bot
  fill with a stake, P-13), so a chip table is planned with players only; one that cannot be
  filled keeps its tickets searching;
- in training (P-1), at once: the unit and bots of the level the ticket asked for, up to
  ``max_seats``.

In a teams lobby (P-1, F-2) a party of two are partners, on seats 0 and 2 or 1 and 3, and two
players alone are paired into a team; bots complete a team when bots fill the table.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from masa_rules.table_config import BotLevel, Mode

from masa_matchmaking.domain.lobby import Lobby
from masa_matchmaking.domain.ticket import Ticket, TicketState

__all__ = ["SeatPlan", "TablePlan", "match_round", "players_needed", "units"]


@dataclass(frozen=True, slots=True)
class SeatPlan:
    seat: int
    # The ticket seated here; None for a bot.
    ticket_id: str | None
    player_id: str
    bot_level: BotLevel | None = None

    @property
    def bot(self) -> bool:
        return self.ticket_id is None


@dataclass(frozen=True, slots=True)
class TablePlan:
    seats: tuple[SeatPlan, ...]
    # The distance between the highest and the lowest rated player.
    spread: float

    @property
    def ticket_ids(self) -> tuple[str, ...]:
        return tuple(seat.ticket_id for seat in self.seats if seat.ticket_id is not None)


@dataclass(frozen=True, slots=True)
class _Unit:
    tickets: tuple[Ticket, ...]
    rating: float
    waited: float
    # Sorts the front of the queue first, then the oldest.
    order: tuple[bool, float]

    @property
    def size(self) -> int:
        return len(self.tickets)


def units(tickets: Iterable[Ticket], now: float) -> list[_Unit]:
    """The searching tickets as units, in queue order; incomplete parties wait."""
    parties: dict[str, list[Ticket]] = {}
    found: list[_Unit] = []
    for ticket in tickets:
        if ticket.state is not TicketState.SEARCHING:
            continue
        if ticket.party_size <= 1:
            found.append(_unit((ticket,), now))
        else:
            parties.setdefault(ticket.party_code, []).append(ticket)
    for members in parties.values():
        size = members[0].party_size
        if len(members) == size and all(member.party_size == size for member in members):
            found.append(_unit(tuple(sorted(members, key=lambda t: t.created_at)), now))
    found.sort(key=lambda unit: unit.order)
    return found


def _unit(tickets: tuple[Ticket, ...], now: float) -> _Unit:
    rating = sum(ticket.rating for ticket in tickets) / len(tickets)
    oldest = min(ticket.created_at for ticket in tickets)
    front = any(ticket.front for ticket in tickets)
    return _Unit(tickets, rating, max(0.0, now - oldest), (not front, oldest))


def players_needed(lobby: Lobby, searching: int) -> int:
    """P-13: how many more players must search in ``lobby``, where ``searching`` players search
    now, before a table can be made; 0 where bots complete the tables (training, a bot fill).
    """
    if lobby.training or lobby.bot_fill.enabled:
        return 0
    return max(0, lobby.min_seats - searching)


def match_round(
    lobby: Lobby, tickets: Iterable[Ticket], now: float, *, limit: int | None = None
) -> list[TablePlan]:
    """The tables this round places, at most ``limit`` (the placements the caller may start
    now); the tickets of no plan stay in the queue.

    A round's work follows the tables it makes, not the length of the queue: it stops at
    ``limit``, and each anchor skips the units already seated this round in constant time, so a
    long queue of equally rated players (whose walks would otherwise cross every unit seated
    before them) costs a sort, not a square.
    """
    if limit is not None and limit <= 0:
        return []
    queue = units(tickets, now)
    if lobby.training:
        tables = [_training_table(lobby, unit) for unit in queue if unit.size <= lobby.max_seats]
        return tables if limit is None else tables[:limit]
    by_rating = sorted(queue, key=lambda unit: unit.rating)
    ratings = [unit.rating for unit in by_rating]
    position = {id(unit): index for index, unit in enumerate(by_rating)}
    free = _Free(len(by_rating))
    plans: list[TablePlan] = []
    for anchor in queue:
        if limit is not None and len(plans) >= limit:
            break
        here = position[id(anchor)]
        if not free.is_free(here) or anchor.size > lobby.max_seats:
            continue
        chosen = _fill(lobby, anchor, here, by_rating=by_rating, ratings=ratings, free=free)
        plan = _plan(lobby, anchor, chosen)
        if plan is not None:
            for unit in chosen:
                free.take(position[id(unit)])
            plans.append(plan)
    return plans


class _Free:
    """The positions of the rating order not yet seated this round: the nearest free one on
    either side of a position, found in near-constant time (union-find with path halving)."""

    def __init__(self, size: int) -> None:
        # _right[i]: towards the nearest free position >= i (size: none).
        self._right = list(range(size + 1))
        # _left[i + 1]: towards the nearest free position <= i (0: none).
        self._left = list(range(size + 1))

    def is_free(self, index: int) -> bool:
        return self._right[index] == index

    def right(self, index: int) -> int:
        """The nearest free position at or after ``index``; the size when there is none."""
        parent = self._right
        while parent[index] != index:
            parent[index] = parent[parent[index]]
            index = parent[index]
        return index

    def left(self, index: int) -> int:
        """The nearest free position at or before ``index``; -1 when there is none."""
        parent = self._left
        slot = index + 1
        while parent[slot] != slot:
            parent[slot] = parent[parent[slot]]
            slot = parent[slot]
        return slot - 1

    def take(self, index: int) -> None:
        self._right[index] = index + 1
        self._left[index + 1] = index


def _fill(
    lobby: Lobby,
    anchor: _Unit,
    here: int,
    *,
    by_rating: Sequence[_Unit],
    ratings: Sequence[float],
    free: _Free,
) -> list[_Unit]:
    """The anchor and the closest acceptable units not seated yet, closest first (the older on
    a tie), up to a full table."""
    chosen = [anchor]
    seats = anchor.size
    window = lobby.matching.spread(anchor.waited)
    size = len(by_rating)
    left, right = free.left(here - 1), free.right(here + 1)
    while seats < lobby.max_seats and (left >= 0 or right < size):
        left_gap = anchor.rating - ratings[left] if left >= 0 else float("inf")
        right_gap = ratings[right] - anchor.rating if right < size else float("inf")
        if left_gap <= right_gap:
            candidate, gap = by_rating[left], left_gap
            left = free.left(left - 1)
        else:
            candidate, gap = by_rating[right], right_gap
            right = free.right(right + 1)
        if gap > window:
            break
        if gap > lobby.matching.spread(candidate.waited):
            continue
        if seats + candidate.size > lobby.max_seats:
            continue
        chosen.append(candidate)
        seats += candidate.size
    return chosen


def _plan(lobby: Lobby, anchor: _Unit, chosen: list[_Unit]) -> TablePlan | None:
    players = sum(unit.size for unit in chosen)
    if players == lobby.max_seats:
        return _seat(lobby, chosen, lobby.max_seats, lobby.bot_fill.level)
    if players >= lobby.min_seats and anchor.waited >= lobby.short_table_after_seconds:
        return _seat(lobby, chosen, players, lobby.bot_fill.level)
    fill = lobby.bot_fill
    if fill.enabled and anchor.waited >= fill.fill_after_seconds and players >= fill.min_players:
        return _seat(lobby, chosen, max(players, lobby.min_seats), fill.level)
    return None


def _training_table(lobby: Lobby, unit: _Unit) -> TablePlan:
    level = next(
        (ticket.bot_level for ticket in unit.tickets if ticket.bot_level is not None),
        lobby.bot_fill.level,
    )
    return _seat(lobby, [unit], lobby.max_seats, level)


def _seat(lobby: Lobby, chosen: Sequence[_Unit], size: int, level: BotLevel) -> TablePlan:
    if lobby.mode is Mode.TEAMS:
        order = _team_order(chosen)
    else:
        order = [ticket for unit in chosen for ticket in unit.tickets]
    seats: list[SeatPlan] = []
    for seat in range(size):
        ticket = order[seat] if seat < len(order) else None
        if ticket is None:
            seats.append(SeatPlan(seat, None, "", level))
        else:
            seats.append(SeatPlan(seat, ticket.ticket_id, ticket.player_id))
    rated = [ticket.rating for unit in chosen for ticket in unit.tickets]
    return TablePlan(tuple(seats), max(rated) - min(rated))


def _team_order(chosen: Sequence[_Unit]) -> list[Ticket | None]:
    """Seats 0..3 of a team table: team A on 0 and 2, team B on 1 and 3 (F-2).

    Parties of two are whole teams; players alone fill the teams' free places in queue order,
    and the places nobody fills are the bots'.
    """
    teams: list[list[Ticket]] = [[], []]
    for unit in sorted(chosen, key=lambda unit: -unit.size):
        if unit.size == 2:
            team = teams[0] if not teams[0] else teams[1]
            team.extend(unit.tickets)
        else:
            team = teams[0] if len(teams[0]) < 2 else teams[1]
            team.append(unit.tickets[0])
    order: list[Ticket | None] = [None] * 4
    for index, team in enumerate(teams):
        for place, ticket in enumerate(team):
            order[index + 2 * place] = ticket
    return order
