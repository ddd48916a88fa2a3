"""The limits of the table API: what a client may send, checked before anything is converted.

Every id and string has a pattern and a length, every list a bound, every option the range
the rules allow. A request outside them is ``INVALID_ARGUMENT`` and quotes the client's value
only through :func:`~masa_platform.errors.preview`. Together with the API's small
received-message limit (``MASA_MAX_REQUEST_BYTES``), no request can make the node do more
than a move's worth of work, or write anything it could not read back.

| field | limit |
|---|---|
| ``table_id`` | ``[A-Za-z0-9_-]{1,64}`` (a NATS subject token, a KV key, part of ledger ids; the caller may choose it, AIP-133) |
| ``node_id`` (DrainNode) | ``[A-Za-z0-9_-]{1,64}``, as ``MASA_NODE_ID`` |
| a void's ``reason`` (VoidTable) | up to 256 characters, no control or format characters |
| ``player_id`` | ``[A-Za-z0-9_.:@+-]{1,128}`` |
| ``lobby_id``, ``hold_id`` | ``[A-Za-z0-9_.:-]{1,128}``, or empty |
| ``display_name`` | up to 32 characters, no control or format characters |
| seats | 1 to 6 (each game checks its own count) |
| ``turn_time`` | 0.1 s to 1 h |
| ``stake`` | 0 to 10^12 chips |
| cards in an action | the seat's hand plus one (the card a take brings) |
| melds in an action | half of that (a pair is the smallest meld) |

The bounds of the seats, the turn time and the stake are the table model's
(``masa_rules.table_config``), which refuses them again, with the rule id, when the table is
created.

The game options (``hands_per_game``, thresholds, ``decks`` ...), the chips and the payout
rule are checked by the rules library in one place
(:func:`masa_rules.table_config.check_table_config`), when the pure ``accept`` of the table's
creation runs, which is before anything is written.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any, Final

from masa.common.v1 import game_pb2
from masa.table.v1 import action_pb2
from masa_platform.errors import BadRequest, preview
from masa_rules.table_config import MAX_SEATS, MAX_STAKE, MAX_TURN_SECONDS, MIN_TURN_SECONDS

__all__ = [
    "MAX_DISPLAY_NAME",
    "TABLE_ID",
    "check_action",
    "check_config",
    "check_node_id",
    "check_table_id",
    "check_void_reason",
]

TABLE_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
PLAYER_ID: Final = re.compile(r"[A-Za-z0-9_.:@+-]{1,128}")
REFERENCE_ID: Final = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
MAX_DISPLAY_NAME: Final = 32
# What a TableVoided entry keeps of an operator's reason.
MAX_VOID_REASON: Final = 256


def check_table_id(table_id: str) -> str:
    if not table_id:
        raise BadRequest("table_id is required")
    if not TABLE_ID.fullmatch(table_id):
        raise BadRequest(f"table_id must match {TABLE_ID.pattern}, not {preview(table_id)}")
    return table_id


def check_node_id(node_id: str) -> str:
    if not TABLE_ID.fullmatch(node_id):
        raise BadRequest(f"node_id must match {TABLE_ID.pattern}, not {preview(node_id)}")
    return node_id


def check_void_reason(reason: str) -> str:
    if len(reason) > MAX_VOID_REASON or any(
        unicodedata.category(character).startswith("C") for character in reason
    ):
        raise BadRequest(
            f"reason must be up to {MAX_VOID_REASON} characters without control or format "
            "characters"
        )
    return reason


def check_config(config: game_pb2.TableConfig) -> None:
    """A lobby's table configuration, within every limit (the rules judge the rest)."""
    if not 1 <= len(config.seats) <= MAX_SEATS:
        raise BadRequest(f"config.seats must list 1 to {MAX_SEATS} seats")
    for seat in config.seats:
        where = f"seat {seat.seat}" if seat.seat < MAX_SEATS else "a seat"
        if seat.player_id and not PLAYER_ID.fullmatch(seat.player_id):
            raise BadRequest(
                f"{where}: player_id must match {PLAYER_ID.pattern}, not {preview(seat.player_id)}"
            )
        _check_reference(f"{where}: hold_id", seat.hold_id)
        _check_display_name(where, seat.display_name)
    _check_reference("config.lobby_id", config.lobby_id)
    if not 0 <= config.stake <= MAX_STAKE:
        raise BadRequest(f"config.stake must be 0 to {MAX_STAKE} chips", reason="P-30")
    if config.HasField("turn_time"):
        turn = config.turn_time
        if not (
            0 <= turn.nanos < 1_000_000_000
            and MIN_TURN_SECONDS <= turn.seconds + turn.nanos / 1e9 <= MAX_TURN_SECONDS
        ):
            raise BadRequest(
                f"config.turn_time must be {MIN_TURN_SECONDS} s to {MAX_TURN_SECONDS:.0f} s",
                reason="P-10",
            )


def check_action(message: action_pb2.Action, hand_size: int) -> None:
    """An action names at most the seat's hand and one card more, in at most half as many
    melds; counted on the message, before a single card is converted."""
    kind = message.WhichOneof("kind")
    if kind is None:
        return
    inner: Any = getattr(message, kind)
    fields = inner.DESCRIPTOR.fields_by_name
    most_cards = hand_size + 1
    cards = 0
    if "melds" in fields:
        melds = inner.melds
        if len(melds) > most_cards // 2:
            raise BadRequest(
                f"an action lays down at most {most_cards // 2} melds now, not {len(melds)}"
            )
        cards += sum(len(meld.cards) for meld in melds)
    if "cards" in fields:
        cards += len(inner.cards)
    if cards > most_cards:
        raise BadRequest(
            f"an action names at most {most_cards} cards now (the hand and one more), not {cards}"
        )


def _check_reference(field: str, value: str) -> None:
    if value and not REFERENCE_ID.fullmatch(value):
        raise BadRequest(f"{field} must match {REFERENCE_ID.pattern}, not {preview(value)}")


def _check_display_name(where: str, name: str) -> None:
    if len(name) > MAX_DISPLAY_NAME:
        raise BadRequest(
            f"{where}: display_name has {len(name)} characters; at most {MAX_DISPLAY_NAME}"
        )
    if any(unicodedata.category(character).startswith("C") for character in name):
        raise BadRequest(f"{where}: display_name holds control or format characters")
