"""The ledger's periodic work: expiring holds, checking invariants, forgetting old rows."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

__all__ = ["every"]

_log = logging.getLogger(__name__)


async def every(
    seconds: float, work: Callable[[], Awaitable[object]], stop: asyncio.Event, *, name: str
) -> None:
    """Run ``work`` now and then every ``seconds`` until ``stop``; a failure is logged and the
    next round runs as planned (nothing here may stop the service)."""
    while not stop.is_set():
        try:
            await work()
        except Exception:
            _log.exception("%s failed; again in %g s", name, seconds)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), seconds)
