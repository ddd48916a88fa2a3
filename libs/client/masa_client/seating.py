"""From a lobby to a seat, in the terminal: the lobby menu, and a ticket watched until seated.

``masa play`` shows the lobbies (or takes ``--lobby``), queues the player through matchmaking
and, once seated, hands the table to :class:`~masa_client.session.PlaySession`. Each lobby
shows how long its last seated players waited and whether it would seat the player now. While
the ticket searches in a chip lobby, where bots never fill a table (P-13), it says how many
more players the lobby needs, again whenever that changes, and how long players waited there
lately. A search that is interrupted cancels its ticket, so the player is never seated at a
table they have left. A ticket left open (by another terminal, say) is cancelled with ``masa
cancel`` or ``cancel`` in the menu (:func:`cancel_open`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Final

from google.protobuf.duration_pb2 import Duration
from masa.common.v1 import error_pb2, game_pb2
from masa.matchmaking.v1 import matchmaking_pb2 as mm
from masa_platform.errors import reason_name
from masa_rules.table_config import BotLevel
from masa_wire import WireError
from masa_wire.table_config import bot_level_from_proto, bot_level_to_proto, mode_from_proto

from masa_client.errors import MasaCallError
from masa_client.matchmaking import CLOSED_STATES, MatchmakingClient
from masa_client.render import count, game_title
from masa_client.session import Console, Keyboard

__all__ = [
    "CANCEL_HINT",
    "NoSeat",
    "cancel_open",
    "cancel_search",
    "choose_lobby",
    "describe_lobby",
    "find_seat",
    "lobby_table",
    "open_tickets",
    "unseated",
    "waiting_line",
]

_STATES: Final = {
    mm.Ticket.STATE_SEARCHING: "searching",
    mm.Ticket.STATE_PLACING: "a table is being made",
    mm.Ticket.STATE_MATCHED: "seated",
    mm.Ticket.STATE_CANCELLED: "cancelled",
    mm.Ticket.STATE_EXPIRED: "expired",
    mm.Ticket.STATE_FAILED: "failed",
}
_CANCEL_SECONDS: Final = 5.0
# Reasons of matchmaking's refusals, as masa.common.v1.ErrorReason names them.
_TICKET_OPEN: Final = reason_name(error_pb2.ERROR_REASON_TICKET_OPEN)
_TICKET_PLACING: Final = reason_name(error_pb2.ERROR_REASON_TICKET_PLACING)
# How a player cancels an open ticket.
CANCEL_HINT: Final = "cancel it with `masa cancel` (or 'cancel' in the lobby menu of masa play)"


class NoSeat(Exception):
    """The ticket ended without a seat (cancelled, expired or failed); the message says why."""


def describe_lobby(lobby: mm.Lobby) -> str:
    kind = game_title(
        game_pb2.TableConfig(game=lobby.game, game_name=lobby.game_name, preset=lobby.preset)
    )
    seats = (
        str(lobby.max_seats)
        if lobby.min_seats == lobby.max_seats
        else f"{lobby.min_seats}-{lobby.max_seats}"
    )
    stake = f"{lobby.stake} chips" if lobby.stake else "no chips"
    try:
        mode = mode_from_proto(lobby.mode).value
    except WireError:
        mode = "?"
    return f"{kind}, {mode}, {seats} seats, {stake}{_levels(lobby)}"


def _levels(lobby: mm.Lobby) -> str:
    """A training lobby's bot levels (what --level may ask for), and a hard autopilot: the
    levels a player would not otherwise know of."""
    try:
        offered = [bot_level_from_proto(level).value for level in lobby.bot_levels]
        autopilot = bot_level_from_proto(lobby.autopilot_level)
    except WireError:
        return ""
    parts = []
    if lobby.mode == game_pb2.MODE_TRAINING and offered:
        parts.append(f"bots {'/'.join(offered)}")
    if autopilot is BotLevel.HARD:
        parts.append("autopilot hard")
    return "".join(f", {part}" for part in parts)


def lobby_table(lobbies: Sequence[mm.Lobby]) -> list[str]:
    """The lobbies as numbered lines: id, what it is, how busy, how long players waited there
    lately, and whether it would seat a player now."""
    width = max((len(lobby.lobby_id) for lobby in lobbies), default=0)
    return [
        f"{index:>2}. {lobby.lobby_id:<{width}}  {describe_lobby(lobby)}"
        f"  [{lobby.queue_length} waiting, {lobby.tables_in_play} playing"
        f"{_waited(lobby.recent_waits, ', waits ')}]"
        f"{'  seats you now' if lobby.seats_now else ''}"
        f"  {lobby.display_name}"
        for index, lobby in enumerate(lobbies, start=1)
    ]


def _span(duration: Duration) -> str:
    seconds = duration.ToNanoseconds() / 1e9
    if seconds < 90:
        return f"{round(seconds)} s"
    return f"{round(seconds / 60)} min"


def _waited(waits: mm.SeatWaits, lead: str) -> str:
    """``lead`` and the median and 90th percentile of the lobby's recent waits; "" before
    anyone was seated there."""
    if not waits.placements:
        return ""
    return f"{lead}{_span(waits.median)} (9 in 10 within {_span(waits.p90)})"


def waiting_line(needed: int, waits: mm.SeatWaits) -> str:
    """What a searching ticket waits for, from the players its lobby still needs (P-13), and
    how long the lobby's last seated players waited."""
    lately = _waited(waits, "; players seated here lately waited ")
    if needed:
        return (
            f"waiting for {count(needed, 'more player')}: bots never sit at a chip table "
            f"(P-13){lately}"
        )
    return f"enough players are searching: a table is being matched{lately}"


async def choose_lobby(
    lobbies: Sequence[mm.Lobby],
    keyboard: Keyboard,
    console: Console,
    matchmaking: MatchmakingClient,
    *,
    level: BotLevel = BotLevel.NORMAL,
) -> mm.Lobby | None:
    """A lobby picked by number or id from the menu; None when the player quits. A ticket the
    player has open is named, and ``cancel`` cancels it. A training lobby whose bots do not
    play at ``level`` (the player's ``--level``) is not taken: the menu says why (P-2)."""
    console.say("lobbies:")
    for line in lobby_table(lobbies):
        console.say(f"  {line}")
    known = ", ".join(lobby.lobby_id for lobby in lobbies)
    opened = await open_tickets(matchmaking)
    for ticket in opened:
        console.say(
            f"you have an open ticket in {ticket.lobby_id} ({_STATES.get(ticket.state, '?')}): "
            "type 'cancel' to cancel it"
        )
    while True:
        if opened:
            console.say(
                "pick a lobby by number or id ('cancel' to cancel your open ticket, "
                "'quit' to leave):"
            )
        else:
            console.say("pick a lobby by number or id ('quit' to leave):")
        console.prompt()
        typed = await keyboard.line()
        console.typed()
        if typed is None or typed.strip() in ("quit", "q"):
            return None
        choice = typed.strip()
        if choice == "cancel":
            for line in await cancel_open(matchmaking):
                console.say(line)
            opened = await open_tickets(matchmaking)
            continue
        picked = _picked(choice, lobbies)
        if picked is None:
            console.say(f"no lobby {choice!r}: pick 1 to {len(lobbies)} or one of {known}")
            continue
        refusal = _not_now(picked, opened, level)
        if refusal is None:
            return picked
        console.say(refusal)


def _not_now(lobby: mm.Lobby, opened: Sequence[mm.Ticket], level: BotLevel) -> str | None:
    """Why the player cannot search in ``lobby`` now, or None: a ticket open elsewhere, or a
    training lobby whose bots do not play at the player's level."""
    if opened:
        return f"you already have an open ticket in {opened[0].lobby_id}: {CANCEL_HINT}"
    training = lobby.mode == game_pb2.MODE_TRAINING and lobby.bot_levels
    if training and bot_level_to_proto(level) not in lobby.bot_levels:
        return (
            f"{lobby.lobby_id}'s bots do not play at {level.value} (P-2): pick another "
            "lobby, or start masa play with another --level"
        )
    return None


def _picked(choice: str, lobbies: Sequence[mm.Lobby]) -> mm.Lobby | None:
    """The lobby ``choice`` names by its number in the menu or its id."""
    if choice.isdigit() and 1 <= int(choice) <= len(lobbies):
        return lobbies[int(choice) - 1]
    return next((lobby for lobby in lobbies if lobby.lobby_id == choice), None)


async def open_tickets(matchmaking: MatchmakingClient) -> list[mm.Ticket]:
    """The caller's tickets still searching or being seated."""
    return [t for t in await matchmaking.list_tickets() if t.state not in CLOSED_STATES]


async def cancel_open(matchmaking: MatchmakingClient, ticket_id: str = "") -> list[str]:
    """Cancel the player's open tickets (or only ``ticket_id``); a line for each, saying what
    became of it."""
    if ticket_id:
        tickets = [await matchmaking.get_ticket(ticket_id)]
    else:
        tickets = await open_tickets(matchmaking)
        if not tickets:
            return ["you have no open ticket to cancel"]
    said = []
    for ticket in tickets:
        try:
            cancelled = await matchmaking.cancel_ticket(ticket.ticket_id)
        except MasaCallError as error:
            if error.reason == _TICKET_PLACING:
                said.append(
                    f"your ticket {ticket.ticket_id} in {ticket.lobby_id} is being seated and "
                    "cannot be cancelled now: you will be seated within seconds"
                )
                continue
            state = _STATES.get(ticket.state, "closed")
            said.append(f"ticket {ticket.ticket_id} in {ticket.lobby_id} is {state}: {error}")
            continue
        said.append(
            f"ticket {cancelled.ticket_id} in {cancelled.lobby_id}: "
            f"{_STATES.get(cancelled.state, '?')}"
        )
    return said


async def find_seat(
    matchmaking: MatchmakingClient,
    lobby: mm.Lobby,
    console: Console,
    *,
    bot_level: game_pb2.BotLevel.ValueType = game_pb2.BOT_LEVEL_UNSPECIFIED,
    party_size: int = 1,
    party_code: str = "",
) -> mm.Ticket:
    """Queue for ``lobby`` and wait until seated; the MATCHED ticket.

    Raises :class:`NoSeat` when the ticket ends otherwise, or when the player has a ticket open
    already (saying how to cancel it). Cancelled meanwhile (Ctrl-C), it cancels the ticket
    before it goes.
    """
    level = bot_level if lobby.mode == game_pb2.MODE_TRAINING else game_pb2.BOT_LEVEL_UNSPECIFIED
    try:
        ticket = await matchmaking.create_ticket(
            lobby.lobby_id, bot_level=level, party_size=party_size, party_code=party_code
        )
    except MasaCallError as error:
        if error.reason != _TICKET_OPEN:
            raise
        where = error.metadata.get("lobby_id", "another lobby")
        raise NoSeat(f"you already have an open ticket in {where}: {CANCEL_HINT}") from None
    if ticket.party_code and not party_code:
        console.say(
            f"your party code is {ticket.party_code}: your partner joins with "
            f"masa play --lobby {lobby.lobby_id} --party {party_size} --code {ticket.party_code}"
        )
    console.say(f"looking for a table in {lobby.lobby_id} ({describe_lobby(lobby)}) ...")
    try:
        seen: int | None = None
        needed = 0
        async for current in matchmaking.watch_ticket(ticket.ticket_id):
            ticket = current
            if current.state not in (seen, mm.Ticket.STATE_SEARCHING):
                console.say(f"  {_STATES.get(current.state, '?')}")
            searching = current.state == mm.Ticket.STATE_SEARCHING
            if searching and current.players_needed != needed:
                needed = current.players_needed
                console.say(f"  {waiting_line(needed, lobby.recent_waits)}")
            seen = current.state
    except asyncio.CancelledError:
        await cancel_search(matchmaking, ticket)
        raise
    if ticket.state != mm.Ticket.STATE_MATCHED:
        raise unseated(ticket)
    console.say(f"seated at table {ticket.table_id}, seat {ticket.seat}, on {ticket.table_address}")
    return ticket


def unseated(ticket: mm.Ticket) -> NoSeat:
    """Why a ticket closed without a seat (cancelled, expired or failed)."""
    why = ticket.error.metadata.get("message") or ticket.error.reason
    return NoSeat(f"no seat: the ticket {_STATES.get(ticket.state, '?')} ({why})")


async def cancel_search(matchmaking: MatchmakingClient, ticket: mm.Ticket) -> None:
    """Cancel a ticket whose search was interrupted, even while the caller is being cancelled;
    a ticket closed meanwhile, or a server that does not answer in time, is left as it is."""
    with contextlib.suppress(MasaCallError, TimeoutError):
        await asyncio.wait_for(
            asyncio.shield(matchmaking.cancel_ticket(ticket.ticket_id)), _CANCEL_SECONDS
        )
