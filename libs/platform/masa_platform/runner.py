"""The event loop every masa process runs on: uvloop by default, asyncio's own on request.

The services spend most of their CPU in the event loop's machinery (callbacks, futures, timers,
socket writes) around grpc.aio and nats-py rather than in their own code, and uvloop does that
machinery in C: a bare grpc.aio echo costs about 12% less CPU per call on it on the issue-14
machine. ``MASA_EVENT_LOOP=asyncio`` falls back to the standard loop, e.g. to profile with
tools that do not see into uvloop.

uvloop's clock (``loop.time()``) moves in whole milliseconds, and its timers round to them:
code that must measure or pace finer than that reads ``time.monotonic()``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping
from types import MappingProxyType
from typing import Any, Final, TypeVar

import uvloop

__all__ = ["EVENT_LOOPS", "run"]

T = TypeVar("T")

EVENT_LOOPS: Final[Mapping[str, Callable[[], asyncio.AbstractEventLoop] | None]] = MappingProxyType(
    {"uvloop": uvloop.new_event_loop, "asyncio": None}
)


def run(main: Coroutine[Any, Any, T], *, event_loop: str = "uvloop") -> T:
    """``asyncio.run(main)`` on the named loop, one of :data:`EVENT_LOOPS`."""
    if event_loop not in EVENT_LOOPS:
        main.close()
        raise ValueError(f"event loop {event_loop!r} is not one of {', '.join(EVENT_LOOPS)}")
    with asyncio.Runner(loop_factory=EVENT_LOOPS[event_loop]) as runner:
        return runner.run(main)
