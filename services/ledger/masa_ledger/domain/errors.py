"""What the ledger refuses, and why: the shared refusals of ``masa_rules.refusals``, under the
ledger's names.

Each kind has one gRPC status code (``masa_platform.errors``); the reason, a
masa.common.v1 ErrorReason, and the metadata travel in the status's ErrorInfo. A request raises
one before it writes anything, and a transaction whose every request was refused rolls back (see
``masa_ledger.app.unit_of_work``), so a refused request changes nothing.
"""

from __future__ import annotations

from masa_rules import refusals
from masa_rules.refusals import DomainError, Reason

from masa_ledger.domain.model import GameKey

__all__ = [
    "BadInput",
    "Conflict",
    "LedgerError",
    "NotFound",
    "NotYourAccount",
    "Refused",
    "RequestIdReused",
    "Unavailable",
    "game_metadata",
]


class LedgerError(DomainError):
    """Any refusal of the ledger."""


class BadInput(LedgerError, refusals.BadInput):
    """Malformed whatever the state: a zero amount, an id that is not an id (INVALID_ARGUMENT)."""


class Refused(LedgerError, refusals.Refused):
    """Well formed but not allowed now: missing chips, a hold bound already
    (FAILED_PRECONDITION)."""


class NotFound(LedgerError, refusals.NotFound):
    """An unknown hold, account or settlement (NOT_FOUND)."""


class RequestIdReused(LedgerError, refusals.AlreadyExists):
    """An id stored before with different content (ALREADY_EXISTS, REQUEST_ID_REUSED)."""


class NotYourAccount(LedgerError, refusals.NotPermitted):
    """A player naming another player's chips (PERMISSION_DENIED, NOT_YOUR_ACCOUNT)."""

    default_reason = Reason.NOT_YOUR_ACCOUNT


class Unavailable(LedgerError, refusals.Unavailable):
    """A dependency (the database, NATS) cannot be reached now; retry (UNAVAILABLE)."""


class Conflict(Exception):
    """Two transactions collided (a deadlock, a serialization failure, a concurrent insert of the
    same id): the store rolled back, and running the transaction again is safe."""


def game_metadata(key: GameKey, **more: str) -> dict[str, str]:
    """The metadata of an error about one game: its table and number, and ``more``."""
    return {"table_id": key.table_id, "game_no": str(key.game_no), **more}
