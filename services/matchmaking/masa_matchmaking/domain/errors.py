"""What matchmaking refuses, and why: the shared refusals of ``masa_rules.refusals``, under
matchmaking's names.

Each kind has one gRPC status code (``masa_platform.errors``); the reason, a
masa.common.v1 ErrorReason, and the metadata travel in the status's ErrorInfo. Matchmaking's
metadata also carries the error's message under "message", as a ticket's error does. A refused
request changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

from masa_rules import refusals
from masa_rules.refusals import DomainError, Reason

__all__ = [
    "BadInput",
    "InvalidLobby",
    "MatchmakingError",
    "NotFound",
    "NotYours",
    "Refused",
    "RequestIdReused",
    "Unavailable",
]


class MatchmakingError(DomainError):
    """Any refusal of matchmaking; its metadata holds its message too."""

    def __init__(
        self,
        message: str,
        *,
        reason: Reason | str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message, reason=reason, metadata={"message": message, **(metadata or {})})


class BadInput(MatchmakingError, refusals.BadInput):
    """Malformed whatever the state: an unknown enum, a party too large (INVALID_ARGUMENT)."""


class Refused(MatchmakingError, refusals.Refused):
    """Well formed but not allowed now: a second open ticket, cancelling a matched ticket
    (FAILED_PRECONDITION)."""


class NotFound(MatchmakingError, refusals.NotFound):
    """An unknown lobby or ticket (NOT_FOUND)."""


class NotYours(MatchmakingError, refusals.NotFound):
    """Another player's ticket; answered as NOT_FOUND, so ticket ids reveal nothing."""

    default_reason = Reason.TICKET_NOT_FOUND


class RequestIdReused(MatchmakingError, refusals.AlreadyExists):
    """A request_id used before for another ticket (ALREADY_EXISTS, REQUEST_ID_REUSED)."""


class Unavailable(MatchmakingError, refusals.Unavailable):
    """A dependency (NATS, the ledger, every engine node) cannot be reached now (UNAVAILABLE)."""


class InvalidLobby(ValueError):
    """A lobby definition the rules or the platform refuse; ``rule`` is the rule id when a
    rule refuses it."""

    def __init__(self, message: str, *, rule: str = "P-2") -> None:
        super().__init__(message)
        self.rule = rule
