"""Structured JSON logging: one JSON object per line with ``ts``, ``level``, ``logger``, ``msg``.

Extra fields come from ``logger.info("...", extra={"table": "t1"})`` and from context bound with
:func:`bound_context`, which follows the asyncio task (it is a ``ContextVar``), so every line
logged while serving one RPC can carry the same fields without passing them around.
:func:`bind_lazily` binds fields that are worked out only if a line is written: most calls
write none, and working out an RPC's fields on every call cost as much as a small RPC's own
work (issue 22).
"""

from __future__ import annotations

import json
import logging
import socket
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar, Token
from datetime import UTC, datetime
from typing import IO, Any

__all__ = ["JsonFormatter", "bind_lazily", "bound_context", "configure_logging", "unbind"]


class _Lazy:
    """Fields bound by :func:`bind_lazily`: the enclosing ones and ``make()``'s, made once,
    when a line first asks for them."""

    __slots__ = ("_made", "_make", "_outer")

    def __init__(self, outer: _Bound, make: Callable[[], Mapping[str, Any]]) -> None:
        self._outer = outer
        self._make = make
        self._made: Mapping[str, Any] | None = None

    def fields(self) -> Mapping[str, Any]:
        if self._made is None:
            self._made = {**_fields(self._outer), **self._make()}
        return self._made


_Bound = Mapping[str, Any] | _Lazy | None
_context: ContextVar[_Bound] = ContextVar("masa_log_context", default=None)


def _fields(bound: _Bound) -> Mapping[str, Any]:
    if bound is None:
        return {}
    if isinstance(bound, _Lazy):
        return bound.fields()
    return bound


# Attributes every LogRecord has; anything else on a record came from ``extra=``.
_RECORD_ATTRIBUTES = frozenset(
    vars(logging.LogRecord("", logging.INFO, "", 0, "", None, None)).keys()
) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    """Formats a record as one line of JSON; values JSON cannot encode are written with str()."""

    def __init__(self, static_fields: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        self._static = dict(static_fields or {})

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update(self._static)
        entry.update(_fields(_context.get()))
        for key, value in vars(record).items():
            if key not in _RECORD_ATTRIBUTES and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


def configure_logging(
    level: str | int = "INFO",
    *,
    service: str | None = None,
    node: str | None = None,
    stream: IO[str] | None = None,
) -> logging.Handler:
    """Send every log record of the process to ``stream`` (stderr) as JSON lines.

    Every line carries ``service`` and ``node`` (the table-engine's node id; the host's name,
    which is the pod's in Kubernetes, by default). Replaces the root logger's handlers, so
    calling it twice does not duplicate lines. Returns the installed handler.
    """
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    static = {"node": node or socket.gethostname()}
    if service:
        static = {"service": service, **static}
    handler.setFormatter(JsonFormatter(static))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
    return handler


@contextmanager
def bound_context(**fields: Any) -> Iterator[None]:
    """Add ``fields`` to every line logged inside the ``with`` block (in this task)."""
    token = _context.set({**_fields(_context.get()), **fields})
    try:
        yield
    finally:
        _context.reset(token)


def bind_lazily(make: Callable[[], Mapping[str, Any]]) -> Token[_Bound]:
    """Add ``make()``'s fields to every line logged (in this task) until :func:`unbind`,
    calling it only when a line is written. ``make`` must give the same fields whenever it is
    called: it reads what the bound work does not change (an RPC's request)."""
    return _context.set(_Lazy(_context.get(), make))


def unbind(token: Token[_Bound]) -> None:
    """End what :func:`bind_lazily` bound."""
    _context.reset(token)
