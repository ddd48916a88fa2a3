"""What the ledger refuses, and why: each error names its masa.common.v1 ErrorReason.

The adapters map each class to a gRPC status code; the reason and the metadata travel in the
status's ErrorInfo. A request raises one before it writes anything, and a transaction whose
every request was refused rolls back (see ``masa_ledger.app.unit_of_work``), so a refused
request changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

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


class LedgerError(Exception):
    """A refusal with an ErrorInfo reason and string metadata."""

    reason: str = "FAILED_PRECONDITION"

    def __init__(
        self, message: str, *, reason: str | None = None, metadata: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        if reason is not None:
            self.reason = reason
        self.metadata: dict[str, str] = dict(metadata or {})


class BadInput(LedgerError):
    """Malformed whatever the state: a zero amount, an id that is not an id (INVALID_ARGUMENT)."""

    reason = "BAD_REQUEST"


class Refused(LedgerError):
    """Well formed but not allowed now: missing chips, a hold bound already
    (FAILED_PRECONDITION)."""


class NotFound(LedgerError):
    """An unknown hold, account or settlement (NOT_FOUND)."""

    reason = "NOT_FOUND"


class RequestIdReused(LedgerError):
    """An id stored before with different content (ALREADY_EXISTS, REQUEST_ID_REUSED)."""

    reason = "REQUEST_ID_REUSED"


class NotYourAccount(LedgerError):
    """A player naming another player's chips (PERMISSION_DENIED, NOT_YOUR_ACCOUNT)."""

    reason = "NOT_YOUR_ACCOUNT"


class Unavailable(LedgerError):
    """A dependency (the database, NATS) cannot be reached now; retry (UNAVAILABLE)."""

    reason = "UNAVAILABLE"


class Conflict(Exception):
    """Two transactions collided (a deadlock, a serialization failure, a concurrent insert of the
    same id): the store rolled back, and running the transaction again is safe."""


def game_metadata(key: GameKey, **more: str) -> dict[str, str]:
    """The metadata of an error about one game: its table and number, and ``more``."""
    return {"table_id": key.table_id, "game_no": str(key.game_no), **more}
