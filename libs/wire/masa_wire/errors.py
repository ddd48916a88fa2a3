"""The one error of the wire layer: a message that does not describe a valid domain object."""

from __future__ import annotations

__all__ = ["WireError"]


class WireError(ValueError):
    """Malformed protobuf input, such as a card with no rank or an empty action.

    It is deliberately not a ``RuleViolation``: a message that cannot even be read is a bad
    request (``INVALID_ARGUMENT``), not a move the rules forbid (``FAILED_PRECONDITION``).
    ``reason`` is the rule id that rejects the input (``C-1`` for a card), ``BAD_REQUEST`` for
    a value that names nothing (an unknown mode or bot level), or ``INVALID_ARGUMENT``.
    """

    def __init__(self, message: str, reason: str = "INVALID_ARGUMENT") -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason
