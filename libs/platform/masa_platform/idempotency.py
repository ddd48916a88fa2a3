"""``request_id`` de-duplication of write RPCs (AIP-155): a retry returns the first answer.

The request id comes from the request's ``request_id`` field (every masa write request has one)
or from the ``x-request-id`` metadata. Answers are kept per (caller, method, request id) in a
bounded in-process cache with a TTL. A duplicate that arrives while the first call still runs
waits for it and gets the same answer, so the handler runs once.

Final answers are kept: responses and deterministic refusals (bad request, illegal move, not
found...). Transient failures (overload, internal errors, cancellation) are forgotten, so a retry
runs the handler again.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
import grpc.aio
from masa_rules.errors import RuleViolation

from masa_platform.auth import current_principal
from masa_platform.errors import BadRequest, MasaError, RequestIdReused
from masa_platform.handlers import Context, WrappingInterceptor

__all__ = ["IdempotencyCache", "IdempotencyInterceptor", "request_id_of"]

REQUEST_ID_METADATA = "x-request-id"
MAX_REQUEST_ID_LENGTH = 128

# Codes that say the same request will always get the same answer from this state.
_FINAL_CODES = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.ALREADY_EXISTS,
        grpc.StatusCode.OUT_OF_RANGE,
    }
)

T = TypeVar("T")
Key = tuple[str, str, str]


@dataclass(frozen=True, slots=True)
class _Outcome:
    value: Any = None
    error: BaseException | None = None


@dataclass(slots=True)
class _Entry:
    fingerprint: bytes
    expires_at: float
    # Resolves to the outcome, or to None when the first call failed transiently.
    done: asyncio.Future[_Outcome | None]


class IdempotencyCache:
    """The first outcome of each key, for ``ttl_seconds``, at most ``max_entries`` of them."""

    def __init__(
        self,
        *,
        max_entries: int = 100_000,
        ttl_seconds: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_entries <= 0 or ttl_seconds <= 0:
            raise ValueError("max_entries and ttl_seconds must be positive")
        self._max_entries = max_entries
        self._ttl = ttl_seconds
        self._clock = clock
        # Insertion order is expiry order, because every entry lives for the same TTL.
        self._entries: OrderedDict[Key, _Entry] = OrderedDict()

    def __len__(self) -> int:
        self._expire()
        return len(self._entries)

    async def run(self, key: Key, fingerprint: bytes, call: Callable[[], Awaitable[T]]) -> T:
        """Run ``call`` once per key; repeats get its outcome (value or raised error)."""
        while True:
            self._expire()
            existing = self._entries.get(key)
            if existing is None:
                break
            if existing.fingerprint != fingerprint:
                raise RequestIdReused(f"request_id {key[2]!r} was already used for another request")
            # Shielded: a cancelled duplicate must not cancel the first call's outcome.
            outcome = await asyncio.shield(existing.done)
            if outcome is not None:
                if outcome.error is not None:
                    raise outcome.error.with_traceback(None)
                result: T = outcome.value
                return result
        entry = _Entry(
            fingerprint, self._clock() + self._ttl, asyncio.get_running_loop().create_future()
        )
        self._entries[key] = entry
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)
        try:
            value = await call()
        except BaseException as error:
            if _is_final(error):
                entry.done.set_result(_Outcome(error=error))
            else:
                if self._entries.get(key) is entry:
                    del self._entries[key]
                entry.done.set_result(None)
            raise
        entry.done.set_result(_Outcome(value=value))
        return value

    def _expire(self) -> None:
        now = self._clock()
        while self._entries:
            key, entry = next(iter(self._entries.items()))
            if entry.expires_at > now:
                return
            del self._entries[key]


def request_id_of(request: Any, context: Context) -> str:
    """The request's ``request_id`` field, else the ``x-request-id`` metadata, else ``""``."""
    field = getattr(request, "request_id", None)
    request_id = field if isinstance(field, str) else ""
    if not request_id:
        for key, value in context.invocation_metadata() or ():
            if key.lower() == REQUEST_ID_METADATA:
                request_id = value.decode() if isinstance(value, bytes) else value
                break
    if len(request_id) > MAX_REQUEST_ID_LENGTH:
        raise BadRequest(f"request_id is longer than {MAX_REQUEST_ID_LENGTH} characters")
    return request_id


class IdempotencyInterceptor(WrappingInterceptor):
    """De-duplicates unary calls that carry a request id; install it inside auth and errors."""

    def __init__(self, cache: IdempotencyCache | None = None) -> None:
        self._cache = cache or IdempotencyCache()
        super().__init__()

    def _applies(self, method: str, handler: grpc.RpcMethodHandler[Any, Any]) -> bool:
        # Only a single answer can be replayed; streams are reads and carry no request id.
        return not (handler.request_streaming or handler.response_streaming)

    def _wrap(
        self, method: str, handler: grpc.RpcMethodHandler[Any, Any]
    ) -> grpc.RpcMethodHandler[Any, Any]:
        behavior: Any = handler.unary_unary
        cache = self._cache

        async def deduplicated(request: Any, context: Context) -> Any:
            request_id = request_id_of(request, context)
            if not request_id:
                return await behavior(request, context)
            principal = current_principal()
            caller = principal.subject if principal is not None else ""
            return await cache.run(
                (caller, method, request_id),
                _fingerprint(request),
                lambda: behavior(request, context),
            )

        return grpc.unary_unary_rpc_method_handler(
            deduplicated,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


def _fingerprint(request: Any) -> bytes:
    if isinstance(request, bytes):
        payload = request
    elif hasattr(request, "SerializeToString"):
        payload = request.SerializeToString(deterministic=True)
    else:
        payload = repr(request).encode()
    return hashlib.sha256(payload).digest()


def _is_final(error: BaseException) -> bool:
    if isinstance(error, MasaError):
        return error.code in _FINAL_CODES
    return isinstance(error, RuleViolation)
