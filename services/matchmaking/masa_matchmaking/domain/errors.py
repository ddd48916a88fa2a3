"""What matchmaking refuses, and why: each error names its masa.common.v1 ErrorReason.

The adapters map each class to a gRPC status code; the reason and the metadata travel in the
status's ErrorInfo. A refused request changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "BadInput",
    "InvalidLobby",
    "MatchmakingError",
    "NotFound",
    "NotYours",
    "Refused",
    "Unavailable",
]


class MatchmakingError(Exception):
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


class BadInput(MatchmakingError):
    """Malformed whatever the state: an unknown enum, a party too large (INVALID_ARGUMENT)."""

    reason = "BAD_REQUEST"


class Refused(MatchmakingError):
    """Well formed but not allowed now: a second open ticket, cancelling a matched ticket
    (FAILED_PRECONDITION)."""


class NotFound(MatchmakingError):
    """An unknown lobby or ticket (NOT_FOUND)."""

    reason = "NOT_FOUND"


class NotYours(MatchmakingError):
    """Another player's ticket; answered as NOT_FOUND, so ticket ids reveal nothing."""

    reason = "TICKET_NOT_FOUND"


class Unavailable(MatchmakingError):
    """A dependency (NATS, the ledger, every engine node) cannot be reached now (UNAVAILABLE)."""

    reason = "UNAVAILABLE"


class InvalidLobby(ValueError):
    """A lobby definition the rules or the platform refuse; ``rule`` is the rule id when a
    rule refuses it."""

    def __init__(self, message: str, *, rule: str = "P-2") -> None:
        super().__init__(message)
        self.rule = rule
