"""A table's JetStream log as readable lines, for ``masa admin log`` (operators only).

The log (``masa.table.v1.<table_id>.log`` in stream ``MASA_TABLES``) holds every accepted input
of a table with the unfiltered events it produced: every hand, the game's seed. Only the
table-engine and the operators' NATS user may read it (:mod:`masa_platform.bus_access`). A
line shows what the log holds, no more: the table sequence, the time, the input (with the
action's cards as logged), the seat by its display name, the request id, and the names of the
events the input produced; seeds are never printed (they are bytes the operator has no use
for, and the hand's result reveals each one anyway).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Final

from google.protobuf.message import Message
from masa.common.v1 import card_pb2
from masa.events.v1 import table_log_pb2
from masa.table.v1 import event_pb2
from masa_platform.bus import read_subject
from masa_wire.cards import face_from_proto
from nats.aio.client import Client

__all__ = [
    "TABLES_STREAM",
    "compact",
    "describe_entry",
    "log_subject",
    "read_table_log",
    "seat_names",
]

TABLES_STREAM: Final = "MASA_TABLES"
_TIMEOUT_SECONDS: Final = 10.0


def log_subject(table_id: str) -> str:
    return f"masa.table.v1.{table_id}.log"


async def read_table_log(
    nc: Client, table_id: str
) -> list[tuple[str, table_log_pb2.TableLogEntry]]:
    """Every entry of the table's log in order, each with the node that wrote it."""
    stored = await read_subject(nc, TABLES_STREAM, log_subject(table_id), timeout=_TIMEOUT_SECONDS)
    return [
        (raw.headers.get("Masa-Node", ""), table_log_pb2.TableLogEntry.FromString(raw.data))
        for raw in stored
    ]


def compact(message: Message) -> str:
    """A message's set fields as ``name=value``, cards by their codes (``7H``, ``XR``), melds
    between brackets: ``cards=7C 7H`` rather than protobuf text."""
    parts: list[str] = []
    for field, value in message.ListFields():
        repeated = field.is_repeated
        values = list(value) if repeated else [value]
        if field.message_type is card_pb2.Card.DESCRIPTOR:
            shown = " ".join(face_from_proto(card).code for card in values)
        elif field.message_type is not None:
            shown = " ".join(f"[{compact(item)}]" for item in values)
        elif field.enum_type is not None:
            shown = " ".join(field.enum_type.values_by_number[item].name for item in values)
        else:
            shown = " ".join(str(item) for item in values)
        parts.append(f"{field.name}={shown}")
    return " ".join(parts)


def seat_names(entries: Iterable[table_log_pb2.TableLogEntry]) -> dict[int, str]:
    """Seat -> display name (or player id), from the table's creation entry."""
    for entry in entries:
        if entry.WhichOneof("input") == "table_created":
            seats = entry.table_created.table.config.seats
            return {seat.seat: seat.display_name or seat.player_id for seat in seats}
    return {}


def describe_entry(
    entry: table_log_pb2.TableLogEntry, names: Mapping[int, str], writer: str = ""
) -> str:
    """``<seq> <time> <input> <seat> <details> [request <id>] -> <events> (node)``."""
    when = datetime.fromtimestamp(entry.occurred_at.ToNanoseconds() / 1e9, UTC)
    kind = entry.WhichOneof("input") or "unknown"
    seat: int | None = None
    details = ""
    request = ""
    if kind == "table_created":
        created = entry.table_created
        config = created.table.config
        details = f"{len(config.seats)} seats, stake {config.stake}" + (
            f", lobby {config.lobby_id}" if config.lobby_id else ""
        )
        request = created.request_id
    elif kind == "hand_started":
        details = f"hand {entry.hand_started.hand_no}"
    elif kind == "action_applied":
        applied = entry.action_applied
        seat = applied.seat
        action = applied.action
        move = action.WhichOneof("kind") or "?"
        body = compact(getattr(action, move))
        source = table_log_pb2.InputSource.Name(applied.source).removeprefix("INPUT_SOURCE_")
        details = f"{move} {body}".rstrip() + f" [{source.lower()}]"
        request = applied.request_id
    elif kind == "timer_fired":
        seat = entry.timer_fired.seat
        details = table_log_pb2.TimerKind.Name(entry.timer_fired.kind).removeprefix("TIMER_KIND_")
        details = details.lower()
    elif kind == "seat_changed":
        seat = entry.seat_changed.seat
        change = table_log_pb2.SeatChange.Name(entry.seat_changed.change)
        details = change.removeprefix("SEAT_CHANGE_").lower()
    elif kind == "table_voided":
        voided = entry.table_voided
        reason = event_pb2.AbandonReason.Name(voided.reason).removeprefix("ABANDON_REASON_")
        details = f"{reason.lower()}: {voided.details}" if voided.details else reason.lower()
    who = f"seat {seat} {names.get(seat, '?')}" if seat is not None else "table"
    events = ", ".join(event.WhichOneof("kind") or "?" for event in entry.events)
    parts = [
        f"{entry.sequence:>5}",
        when.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3],
        f"{kind:<14}",
        who,
        details,
    ]
    if request:
        parts.append(f"request {request}")
    if events:
        parts.append(f"-> {events}")
    if writer:
        parts.append(f"(node {writer})")
    return "  ".join(part for part in parts if part)
