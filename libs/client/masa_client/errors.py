"""What a failed call means to a client: the status code plus masa's ``ErrorInfo`` reason.

Servers attach a ``google.rpc.ErrorInfo`` (domain ``masa.dev``) to every error: the reason is the
rule id of a rejected move (``E-4``, ``F-30`` ...) or a platform reason such as
``TABLE_MOVED``, ``SEQUENCE_MISMATCH`` or ``UNAUTHENTICATED``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import grpc
import grpc.aio
from masa_platform.errors import rpc_error_info

__all__ = ["OVERLOADED", "TABLE_MOVED", "MasaCallError", "from_rpc_error"]

TABLE_MOVED = "TABLE_MOVED"
OVERLOADED = "OVERLOADED"


# Not frozen: raising sets __traceback__ (and contextlib sets it again on the way out of an
# async with), which a frozen dataclass refuses. eq=False keeps exceptions hashable by identity.
@dataclass(eq=False)
class MasaCallError(Exception):
    """A call that failed for good (after any retries and redirects the client makes)."""

    code: grpc.StatusCode
    message: str
    # The ErrorInfo reason: a rule id for an illegal move, else a platform reason; "" if none.
    reason: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        reason = f" [{self.reason}]" if self.reason else ""
        return f"{self.code.name}{reason}: {self.message}"

    @property
    def rule(self) -> str:
        """The rule id the error names (``F-30``), or ``""`` for a platform reason."""
        return self.reason if self.reason[:2] in ("C-", "E-", "F-", "P-") else ""

    @property
    def is_illegal_move(self) -> bool:
        """A move the rules forbid now (a malformed one is INVALID_ARGUMENT, also with a rule)."""
        return self.code is grpc.StatusCode.FAILED_PRECONDITION and bool(self.rule)


def from_rpc_error(error: grpc.aio.AioRpcError) -> MasaCallError:
    """The code, message and ErrorInfo of ``error``."""
    info = rpc_error_info(error)
    return MasaCallError(
        code=error.code(),
        message=error.details() or "",
        reason=info.reason if info is not None else "",
        metadata=dict(info.metadata) if info is not None else {},
    )
