"""The one base of the refusals a service's domain raises, pure so every domain may import it.

A :class:`DomainError` has a :class:`Kind` (bad input, refused now, not found, already exists,
not permitted, unavailable), a :class:`Reason` (a ``masa.common.v1.ErrorReason`` name) and
string metadata. ``masa_platform.errors`` maps each kind to one gRPC status code, and the
reason and metadata travel in the status's ``ErrorInfo``. :class:`Reason` mirrors the proto
enum name for name (``libs/platform/tests/test_platform_errors.py`` holds them equal), because
a domain imports no protobuf.

>>> error = Refused("no chips", reason=Reason.INSUFFICIENT_FUNDS, metadata={"required": "5"})
>>> error.kind.name, error.reason.value, error.metadata
('REFUSED', 'INSUFFICIENT_FUNDS', {'required': '5'})
>>> BadInput("a zero amount").reason
<Reason.BAD_REQUEST: 'BAD_REQUEST'>
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import ClassVar

__all__ = [
    "AlreadyExists",
    "BadInput",
    "DomainError",
    "Kind",
    "NotFound",
    "NotPermitted",
    "Reason",
    "Refused",
    "Unavailable",
]


class Kind(enum.Enum):
    """What sort of refusal an error is; each kind is one gRPC status code."""

    BAD_INPUT = enum.auto()
    """Malformed whatever the state (INVALID_ARGUMENT)."""
    REFUSED = enum.auto()
    """Well formed, but not allowed now (FAILED_PRECONDITION)."""
    NOT_FOUND = enum.auto()
    """An unknown id (NOT_FOUND)."""
    ALREADY_EXISTS = enum.auto()
    """An id used before for something else (ALREADY_EXISTS)."""
    NOT_PERMITTED = enum.auto()
    """The caller may not do it (PERMISSION_DENIED)."""
    UNAVAILABLE = enum.auto()
    """A dependency cannot be reached now; retry (UNAVAILABLE)."""


class Reason(enum.StrEnum):
    """``masa.common.v1.ErrorReason`` without its ``ERROR_REASON_`` prefix, as ErrorInfo
    carries it."""

    BAD_REQUEST = "BAD_REQUEST"
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    REQUEST_ID_REUSED = "REQUEST_ID_REUSED"
    FAILED_PRECONDITION = "FAILED_PRECONDITION"
    TABLE_MOVED = "TABLE_MOVED"
    SEQUENCE_MISMATCH = "SEQUENCE_MISMATCH"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    NOT_YOUR_SEAT = "NOT_YOUR_SEAT"
    NOT_YOUR_ACCOUNT = "NOT_YOUR_ACCOUNT"
    NOT_FOUND = "NOT_FOUND"
    TABLE_NOT_FOUND = "TABLE_NOT_FOUND"
    TICKET_NOT_FOUND = "TICKET_NOT_FOUND"
    LOBBY_NOT_FOUND = "LOBBY_NOT_FOUND"
    HOLD_NOT_FOUND = "HOLD_NOT_FOUND"
    ACCOUNT_NOT_FOUND = "ACCOUNT_NOT_FOUND"
    SETTLEMENT_NOT_FOUND = "SETTLEMENT_NOT_FOUND"
    OVERLOADED = "OVERLOADED"
    INSUFFICIENT_FUNDS = "INSUFFICIENT_FUNDS"
    HOLD_NOT_HELD = "HOLD_NOT_HELD"
    HOLD_ALREADY_BOUND = "HOLD_ALREADY_BOUND"
    STAKE_MISMATCH = "STAKE_MISMATCH"
    ESCROW_MISMATCH = "ESCROW_MISMATCH"
    GAME_NOT_FINISHED = "GAME_NOT_FINISHED"
    RESULT_MISMATCH = "RESULT_MISMATCH"
    BALANCE_LIMIT = "BALANCE_LIMIT"
    NOTHING_TO_DECIDE = "NOTHING_TO_DECIDE"
    UNAVAILABLE = "UNAVAILABLE"
    INTERNAL = "INTERNAL"
    GAME_CLOSED = "GAME_CLOSED"
    TABLE_UNAVAILABLE = "TABLE_UNAVAILABLE"
    TABLE_EXISTS = "TABLE_EXISTS"
    TICKET_OPEN = "TICKET_OPEN"
    TICKET_PLACING = "TICKET_PLACING"
    TICKET_CLOSED = "TICKET_CLOSED"
    TICKET_EXPIRED = "TICKET_EXPIRED"
    PARTY_NOT_FOUND = "PARTY_NOT_FOUND"
    PARTY_MISMATCH = "PARTY_MISMATCH"
    PARTY_FULL = "PARTY_FULL"
    NO_ENGINE = "NO_ENGINE"
    ENGINE_UNAVAILABLE = "ENGINE_UNAVAILABLE"
    LEDGER_UNAVAILABLE = "LEDGER_UNAVAILABLE"
    PLACEMENT_ABANDONED = "PLACEMENT_ABANDONED"
    NODE_AT_CAPACITY = "NODE_AT_CAPACITY"
    NODE_DRAINING = "NODE_DRAINING"
    NODE_MISMATCH = "NODE_MISMATCH"
    TOKEN_EXPIRED = "TOKEN_EXPIRED"
    QUOTA_EXCEEDED = "QUOTA_EXCEEDED"
    INVALID_PAGE_TOKEN = "INVALID_PAGE_TOKEN"
    RESULT_UNVERIFIED = "RESULT_UNVERIFIED"
    TERMS_MISMATCH = "TERMS_MISMATCH"


class DomainError(Exception):
    """A refusal: its kind, its reason and string metadata. ``reason`` may be given by name
    (``"HOLD_NOT_HELD"``); a name that is not a :class:`Reason` is a ``ValueError`` at once."""

    kind: ClassVar[Kind] = Kind.REFUSED
    default_reason: ClassVar[Reason] = Reason.FAILED_PRECONDITION

    def __init__(
        self,
        message: str,
        *,
        reason: Reason | str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.reason = self.default_reason if reason is None else Reason(reason)
        self.metadata: dict[str, str] = dict(metadata or {})


class BadInput(DomainError):
    """Malformed whatever the state: a zero amount, an unknown enum value."""

    kind = Kind.BAD_INPUT
    default_reason = Reason.BAD_REQUEST


class Refused(DomainError):
    """Well formed but not allowed now: missing chips, a second open ticket."""


class NotFound(DomainError):
    """An unknown id."""

    kind = Kind.NOT_FOUND
    default_reason = Reason.NOT_FOUND


class AlreadyExists(DomainError):
    """An id stored before with different content."""

    kind = Kind.ALREADY_EXISTS
    default_reason = Reason.REQUEST_ID_REUSED


class NotPermitted(DomainError):
    """A caller acting on what is not theirs."""

    kind = Kind.NOT_PERMITTED
    default_reason = Reason.PERMISSION_DENIED


class Unavailable(DomainError):
    """A dependency (a database, NATS, another service) cannot be reached now."""

    kind = Kind.UNAVAILABLE
    default_reason = Reason.UNAVAILABLE
