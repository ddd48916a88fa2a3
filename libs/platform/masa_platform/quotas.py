"""Per-caller quotas, so that one token can never make a server refuse everyone.

:class:`QuotaInterceptor` runs right after auth (``standard_interceptors``) and holds every
caller, by its token's subject, to:

- ``caller_streams``: streams (server-streaming, client-streaming and bidi) open at once;
- ``caller_rate``: a token bucket refilled at ``MASA_CALLER_RATE`` a second up to
  ``MASA_CALLER_BURST``. Each unary call and each stream opened takes a token; so does each
  message a caller sends inside a client or bidi stream (``SubmitActions``' moves), since a
  move over a stream costs the server what a ``SubmitAction`` call does. A call that finds
  the bucket empty is refused; a stream's message is *throttled* instead: it is read only
  once a token is due, so HTTP/2 flow control holds the sender back and the stream, whose
  earlier moves were answered, is not torn down.

and every authenticated call, whoever makes it, to ``server_calls``: ``MASA_MAX_CALLER_RPCS``
calls in flight on the server at once (players are refused there; service identities and
admins get :data:`~masa_platform.settings.SERVICE_RPC_ROOM` more, so that an operator can
drain a node that players filled). Health and reflection need no token and are never counted
with the callers; their streams have a server-wide cap of their own
(:data:`~masa_platform.settings.PUBLIC_STREAMS`), and gRPC's own ``maximum_concurrent_rpcs``
stays above all of it with room for health checks (``ServerSettings.grpc_concurrent_rpcs``),
so health never meets a limit that callers can fill.

A refusal is ``RESOURCE_EXHAUSTED`` with reason ``QUOTA_EXCEEDED`` and metadata ``quota``
(the name) and ``limit``; ``caller_rate`` adds ``burst`` and ``retry_after_seconds``. It is
decided before the handler runs, on state the caller already has: a refused call allocates
nothing that outlives it, and is counted in ``masa_quota_refusals_total{quota}``. Handlers
raise :class:`QuotaExceeded` for quotas of their own (the table-engine's spectators per
table), counted the same way. One warning is logged when a caller starts being refused, not
one per refusal, so refusals cannot flood the logs.

Service identities and admins are not players: :func:`held_to_quotas` exempts them from the
per-caller quotas. The state per caller is small and bounded: at most ``MASA_CALLERS_TRACKED``
callers, of which those with a call in flight (at most ``MASA_MAX_CALLER_RPCS``) are always
kept; an idle caller whose bucket has refilled is the same as an unknown one and is dropped,
and when the map is full the idle caller unused the longest goes first.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, ClassVar, Final

import grpc
from prometheus_client import CollectorRegistry

from masa_platform.auth import AuthPolicy, Principal, Role, current_principal
from masa_platform.errors import MasaError
from masa_platform.handlers import Context, WrappingInterceptor, wrap_handler
from masa_platform.metrics import QuotaMetrics
from masa_platform.settings import PUBLIC_STREAMS, SERVICE_RPC_ROOM, QuotaSettings

__all__ = [
    "CALLER_RATE",
    "CALLER_STREAMS",
    "PLATFORM_QUOTAS",
    "PUBLIC_STREAMS_QUOTA",
    "SERVER_CALLS",
    "CallerQuotas",
    "QuotaExceeded",
    "QuotaInterceptor",
    "caller_quotas",
    "held_to_quotas",
]

_log = logging.getLogger(__name__)

# The quotas' names, as the refusal's metadata and the metric's label give them.
CALLER_STREAMS: Final = "caller_streams"
CALLER_RATE: Final = "caller_rate"
SERVER_CALLS: Final = "server_calls"
PUBLIC_STREAMS_QUOTA: Final = "public_streams"
PLATFORM_QUOTAS: Final = (CALLER_STREAMS, CALLER_RATE, SERVER_CALLS, PUBLIC_STREAMS_QUOTA)
# Idle callers looked at for dropping on each admission: enough to keep pace with arrivals.
_PRUNED_PER_CALL: Final = 2


class QuotaExceeded(MasaError):
    """A call over a quota; ``quota`` names it (the metric's label, the metadata's value)."""

    code: ClassVar[grpc.StatusCode] = grpc.StatusCode.RESOURCE_EXHAUSTED
    default_reason: ClassVar[str] = "QUOTA_EXCEEDED"

    def __init__(
        self, quota: str, limit: str, message: str, *, extra: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(message, metadata={"quota": quota, "limit": limit, **(extra or {})})
        self.quota = quota


def held_to_quotas(principal: Principal) -> bool:
    """Whether the caller is held to a player's quotas: any role other than ``player``
    (a service identity, an admin) exempts it. The one place to change when roles give way
    to per-service identities."""
    return all(role is Role.PLAYER for role in principal.roles)


class _Caller:
    """One caller's state: its token bucket as of ``stamp``, and what it has in flight."""

    __slots__ = ("calls", "refused", "stamp", "streams", "subject", "tokens")

    def __init__(self, subject: str, tokens: float, stamp: float) -> None:
        self.subject = subject
        self.tokens = tokens
        self.stamp = stamp
        self.calls = 0
        self.streams = 0
        # Refused since its last admitted call: its next refusal logs nothing.
        self.refused = False


class CallerQuotas:
    """Every caller's quotas on one server (see the module doc); shared by its interceptor."""

    def __init__(
        self,
        settings: QuotaSettings,
        metrics: QuotaMetrics | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._metrics = metrics
        self._clock = clock
        self._rate = settings.caller_rate
        self._burst = float(settings.caller_burst)
        # Callers with nothing in flight, the one idle longest first; and those with calls.
        self._idle: dict[str, _Caller] = {}
        self._busy: dict[str, _Caller] = {}
        # Calls of authenticated callers in flight (players, services and admins), and
        # health and reflection streams open.
        self.calls = 0
        self.public_streams = 0
        self._full = False

    @property
    def tracked(self) -> int:
        """Callers whose state is kept now."""
        return len(self._idle) + len(self._busy)

    def admit(self, principal: Principal, streaming: bool) -> _Caller | None:
        """Count a call of ``principal`` or raise :class:`QuotaExceeded`; the caller's state
        to :meth:`release` it with (None for a caller not held to quotas)."""
        settings = self._settings
        if not held_to_quotas(principal):
            if self.calls >= settings.max_caller_rpcs + SERVICE_RPC_ROOM:
                raise self._server_full(settings.max_caller_rpcs + SERVICE_RPC_ROOM)
            self.calls += 1
            return None
        if self.calls >= settings.max_caller_rpcs:
            raise self._server_full(settings.max_caller_rpcs)
        self._full = False
        now = self._clock()
        caller = self._find(principal.subject, now)
        tokens = min(self._burst, caller.tokens + (now - caller.stamp) * self._rate)
        caller.stamp = now
        if tokens < 1.0:
            caller.tokens = tokens
            # Rounded up to the millisecond: a hint of 0.000 would ask for a retry refused again.
            retry_after = math.ceil((1.0 - tokens) / self._rate * 1e3) / 1e3
            raise self._refuse(
                caller,
                CALLER_RATE,
                f"{self._rate:g}",
                f"more than {self._rate:g} calls a second (bursts of {settings.caller_burst})",
                extra={
                    "burst": str(settings.caller_burst),
                    "retry_after_seconds": f"{retry_after:.3f}",
                },
            )
        caller.tokens = tokens - 1.0
        if streaming and caller.streams >= settings.caller_streams:
            raise self._refuse(
                caller,
                CALLER_STREAMS,
                str(settings.caller_streams),
                f"{caller.streams} streams open already, the most one caller may hold",
            )
        if not caller.calls:
            del self._idle[caller.subject]
            self._busy[caller.subject] = caller
        caller.calls += 1
        caller.streams += streaming
        caller.refused = False
        self.calls += 1
        return caller

    def release(self, caller: _Caller | None, streaming: bool) -> None:
        """The call :meth:`admit` counted has ended."""
        self.calls -= 1
        if caller is None:
            return
        caller.calls -= 1
        caller.streams -= streaming
        if not caller.calls:
            del self._busy[caller.subject]
            self._idle[caller.subject] = caller

    def take(self, caller: _Caller) -> float:
        """A token for one message of a stream: 0.0 when taken, else the seconds until one
        is due (nothing is taken then)."""
        now = self._clock()
        tokens = min(self._burst, caller.tokens + (now - caller.stamp) * self._rate)
        caller.stamp = now
        if tokens >= 1.0:
            caller.tokens = tokens - 1.0
            return 0.0
        caller.tokens = tokens
        return (1.0 - tokens) / self._rate

    def admit_public(self) -> None:
        """Count a health or reflection stream, or raise :class:`QuotaExceeded`."""
        if self.public_streams >= PUBLIC_STREAMS:
            if self._metrics is not None:
                self._metrics.refused(PUBLIC_STREAMS_QUOTA)
            raise QuotaExceeded(
                PUBLIC_STREAMS_QUOTA,
                str(PUBLIC_STREAMS),
                f"{PUBLIC_STREAMS} health and reflection streams are open already",
            )
        self.public_streams += 1

    def release_public(self) -> None:
        self.public_streams -= 1

    def refused(self, quota: str) -> None:
        """Count a refusal a handler made (a quota of the service's own)."""
        if self._metrics is not None:
            self._metrics.refused(quota)

    def _find(self, subject: str, now: float) -> _Caller:
        caller = self._busy.get(subject) or self._idle.get(subject)
        if caller is not None:
            return caller
        self._prune(now)
        if self.tracked >= self._settings.callers_tracked:
            # Callers with calls in flight are at most max_caller_rpcs, fewer than the
            # callers tracked (settings), so an idle one is there to drop.
            del self._idle[next(iter(self._idle))]
        caller = self._idle[subject] = _Caller(subject, self._burst, now)
        return caller

    def _prune(self, now: float) -> None:
        """Drop idle callers whose bucket is full again: they are as good as unknown."""
        for _ in range(_PRUNED_PER_CALL):
            oldest = next(iter(self._idle.values()), None)
            if oldest is None or oldest.tokens + (now - oldest.stamp) * self._rate < self._burst:
                return
            del self._idle[oldest.subject]

    def _refuse(
        self,
        caller: _Caller,
        quota: str,
        limit: str,
        message: str,
        *,
        extra: Mapping[str, str] | None = None,
    ) -> QuotaExceeded:
        if caller.calls == 0:
            # The most recently refused idle caller is the last to be dropped.
            self._idle[caller.subject] = self._idle.pop(caller.subject)
        if not caller.refused:
            caller.refused = True
            _log.warning(
                "caller over its %s quota: refused until it slows down",
                quota,
                extra={"player_id": caller.subject, "quota": quota, "limit": limit},
            )
        if self._metrics is not None:
            self._metrics.refused(quota)
        return QuotaExceeded(quota, limit, message, extra=extra)

    def _server_full(self, limit: int) -> QuotaExceeded:
        if not self._full:
            self._full = True
            _log.warning(
                "the server holds %d calls of callers, its most: refusing players",
                self.calls,
                extra={"quota": SERVER_CALLS, "limit": limit},
            )
        if self._metrics is not None:
            self._metrics.refused(SERVER_CALLS)
        return QuotaExceeded(
            SERVER_CALLS, str(limit), "the server runs as many calls as it takes; retry later"
        )


def caller_quotas(
    settings: QuotaSettings, registry: CollectorRegistry, *, own_quotas: Iterable[str] = ()
) -> CallerQuotas:
    """A service's quotas, their refusals counted in ``registry`` (``own_quotas``: the names
    of those its handlers enforce, whose series then exist from the start)."""
    return CallerQuotas(settings, QuotaMetrics(registry, quotas=(*PLATFORM_QUOTAS, *own_quotas)))


# The caller of the call being served, for its stream's messages (one task per call, as for
# the principal in masa_platform.auth).
_current: ContextVar[_Caller | None] = ContextVar("masa_quota_caller", default=None)


class QuotaInterceptor(WrappingInterceptor):
    """Holds each call to the quotas of :class:`CallerQuotas`; install it after auth."""

    def __init__(self, quotas: CallerQuotas, policy: AuthPolicy | None = None) -> None:
        self._quotas = quotas
        self._policy = policy or AuthPolicy()
        super().__init__()

    def _applies(self, method: str, handler: grpc.RpcMethodHandler[Any, Any]) -> bool:
        # Public unary calls (health checks) are left alone: nothing a caller holds.
        streaming = handler.request_streaming or handler.response_streaming
        return streaming or not self._policy.is_public(method)

    def _wrap(
        self, method: str, handler: grpc.RpcMethodHandler[Any, Any]
    ) -> grpc.RpcMethodHandler[Any, Any]:
        quotas = self._quotas
        if self._policy.is_public(method):

            @contextmanager
            def public_stream(context: Context) -> Iterator[None]:
                quotas.admit_public()
                try:
                    yield
                finally:
                    quotas.release_public()

            return wrap_handler(handler, public_stream)

        streaming = handler.request_streaming or handler.response_streaming

        @contextmanager
        def admitted(context: Context) -> Iterator[None]:
            principal = current_principal()
            if principal is None:
                # Auth runs first and sets the caller of every non-public method.
                yield
                return
            caller = quotas.admit(principal, streaming)
            _current.set(caller)
            try:
                yield
            except QuotaExceeded as refused:
                quotas.refused(refused.quota)
                raise
            finally:
                quotas.release(caller, streaming)

        if handler.request_streaming:
            handler = _throttled(handler, quotas)
        return wrap_handler(handler, admitted)


def _pacer(quotas: CallerQuotas) -> Callable[[AsyncIterator[Any]], AsyncIterator[Any]]:
    """Request streams passed on at the pace of their caller's bucket."""

    async def paced(requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
        caller = _current.get()
        async for request in requests:
            if caller is not None:
                wait = quotas.take(caller)
                while wait:
                    await asyncio.sleep(wait)
                    wait = quotas.take(caller)
            yield request

    return paced


def _throttled(
    handler: grpc.RpcMethodHandler[Any, Any], quotas: CallerQuotas
) -> grpc.RpcMethodHandler[Any, Any]:
    """``handler``, each message of its request stream read only once the caller's bucket
    has a token for it."""
    paced = _pacer(quotas)
    serializers: dict[str, Any] = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if not handler.response_streaming:
        unary: Any = handler.stream_unary

        async def paced_unary(requests: AsyncIterator[Any], context: Context) -> Any:
            return await unary(paced(requests), context)

        return grpc.stream_unary_rpc_method_handler(paced_unary, **serializers)
    streamed: Any = handler.stream_stream
    if inspect.isasyncgenfunction(streamed):

        async def paced_yielded(requests: AsyncIterator[Any], context: Context) -> Any:
            async for response in streamed(paced(requests), context):
                yield response

        return grpc.stream_stream_rpc_method_handler(paced_yielded, **serializers)

    async def paced_written(requests: AsyncIterator[Any], context: Context) -> None:
        await streamed(paced(requests), context)

    return grpc.stream_stream_rpc_method_handler(paced_written, **serializers)
