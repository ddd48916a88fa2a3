"""``request_id`` de-duplication of write RPCs (AIP-155): a retry returns the first answer.

The request id comes from the request's ``request_id`` field (every masa write request has one)
or from the ``x-request-id`` metadata. Answers are kept per (caller, method, request id) in a
bounded in-process cache with a TTL. A duplicate that arrives while the first call still runs
waits for it and gets the same answer, so the handler runs once.

Final answers are kept: responses and deterministic refusals (bad request, illegal move, not
found...). Transient failures (overload, internal errors, cancellation) are forgotten, so a retry
runs the handler again; so is ``TABLE_MOVED``, which says where a table is now, not what the
request is worth: a node that pointed elsewhere while a table moved may serve it a moment later,
and must then run the retry rather than replay its old pointer.

Only what a retry needs is kept: the response as its serialized bytes, a refusal as its status
(code, message, ``ErrorInfo``), and a digest of the request. Never the exception itself: its
traceback holds every frame of the call, the request among them, and frames that refer back
to the exception make a cycle that only the garbage collector's rare full passes free. The
cache is bounded by entries, by bytes and by age; a service whose writes are recorded
durably (the table log records each action's request id) answers older retries from there.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Any, Final

import grpc
import grpc.aio
from masa_rules.errors import RuleViolation
from masa_rules.refusals import DomainError

from masa_platform.auth import current_principal
from masa_platform.errors import (
    STATUS_CODES,
    AnsweredBefore,
    BadRequest,
    MasaError,
    RequestIdReused,
    TableMoved,
    preview,
    to_status,
)
from masa_platform.handlers import Context, WrappingInterceptor

__all__ = ["IdempotencyCache", "IdempotencyInterceptor", "request_id_of"]

REQUEST_ID_METADATA = "x-request-id"
MAX_REQUEST_ID_LENGTH = 128
# Printable ASCII without spaces: what uuids, ulids and the like are made of.
REQUEST_ID_PATTERN: Final = re.compile(r"[!-~]{1,128}")
# What an entry costs besides its answer: the key, the digest, the bookkeeping.
_ENTRY_OVERHEAD_BYTES: Final = 400

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

Key = tuple[str, str, str]


@dataclass(frozen=True, slots=True)
class _Outcome:
    """A first answer as a retry gets it: the response bytes, or the refusal's status."""

    response: bytes = b""
    refusal: grpc.Status | None = None

    @property
    def size(self) -> int:
        if self.refusal is None:
            return len(self.response)
        metadata = sum(len(k) + len(v) for k, v in self.refusal.trailing_metadata or ())
        return len(self.refusal.details or "") + metadata


@dataclass(slots=True)
class _Entry:
    fingerprint: bytes
    expires_at: float
    # Resolves to the outcome, or to None when the first call failed transiently.
    done: asyncio.Future[_Outcome | None]
    size: int = _ENTRY_OVERHEAD_BYTES


class IdempotencyCache:
    """The first outcome of each key, for ``ttl_seconds``, within ``max_entries`` and
    ``max_bytes`` (the oldest go first)."""

    def __init__(
        self,
        *,
        max_entries: int = 20_000,
        max_bytes: int = 8 * 1024 * 1024,
        ttl_seconds: float = 120.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_entries <= 0 or max_bytes <= 0 or ttl_seconds <= 0:
            raise ValueError("max_entries, max_bytes and ttl_seconds must be positive")
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._ttl = ttl_seconds
        self._clock = clock
        # Insertion order is expiry order, because every entry lives for the same TTL.
        self._entries: OrderedDict[Key, _Entry] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        self._expire()
        return len(self._entries)

    @property
    def size_bytes(self) -> int:
        """What the kept answers cost, overhead included."""
        return self._bytes

    async def run(
        self, key: Key, fingerprint: bytes, call: Callable[[], Awaitable[bytes]]
    ) -> bytes:
        """Run ``call`` once per key; repeats get its response bytes or its refusal (raised
        as :class:`AnsweredBefore`)."""
        while True:
            self._expire()
            existing = self._entries.get(key)
            if existing is None:
                break
            if existing.fingerprint != fingerprint:
                raise RequestIdReused(
                    f"request_id {preview(key[2])} was already used for another request"
                )
            # Shielded: a cancelled duplicate must not cancel the first call's outcome.
            outcome = await asyncio.shield(existing.done)
            if outcome is not None:
                if outcome.refusal is not None:
                    raise AnsweredBefore(outcome.refusal)
                return outcome.response
        entry = _Entry(
            fingerprint, self._clock() + self._ttl, asyncio.get_running_loop().create_future()
        )
        self._entries[key] = entry
        self._bytes += entry.size
        self._evict()
        try:
            response = await call()
        except BaseException as error:
            if _is_final(error):
                self._settle(key, entry, _Outcome(refusal=to_status(error)))
            else:
                self._forget(key, entry)
                entry.done.set_result(None)
            raise
        self._settle(key, entry, _Outcome(response=response))
        return response

    def _settle(self, key: Key, entry: _Entry, outcome: _Outcome) -> None:
        entry.done.set_result(outcome)
        if self._entries.get(key) is entry:
            self._bytes += outcome.size
            entry.size += outcome.size
            self._evict()

    def _forget(self, key: Key, entry: _Entry) -> None:
        if self._entries.get(key) is entry:
            del self._entries[key]
            self._bytes -= entry.size

    def _evict(self) -> None:
        while self._entries and (
            len(self._entries) > self._max_entries or self._bytes > self._max_bytes
        ):
            _, oldest = self._entries.popitem(last=False)
            self._bytes -= oldest.size

    def _expire(self) -> None:
        now = self._clock()
        while self._entries:
            key, entry = next(iter(self._entries.items()))
            if entry.expires_at > now:
                return
            del self._entries[key]
            self._bytes -= entry.size


def request_id_of(request: Any, context: Context) -> str:
    """The request's ``request_id`` field, else the ``x-request-id`` metadata, else ``""``."""
    field = getattr(request, "request_id", None)
    request_id = field if isinstance(field, str) else ""
    if not request_id:
        for key, value in context.invocation_metadata() or ():
            if key.lower() == REQUEST_ID_METADATA:
                request_id = value.decode() if isinstance(value, bytes) else value
                break
    if request_id and not REQUEST_ID_PATTERN.fullmatch(request_id):
        raise BadRequest(
            f"request_id must be 1 to {MAX_REQUEST_ID_LENGTH} printable ASCII characters "
            f"without spaces, not {preview(request_id)}"
        )
    return request_id


class IdempotencyInterceptor(WrappingInterceptor):
    """De-duplicates unary calls that carry a request id; install it inside auth and errors.

    ``uncached`` names methods (``/package.Service/Method``) left to their handler: ones that
    keep their request ids durably themselves and say in their answer whether a call repeated
    an earlier one (the ledger's ``GrantChips``), which a replayed first answer would hide.
    """

    def __init__(
        self, cache: IdempotencyCache | None = None, *, uncached: Collection[str] = ()
    ) -> None:
        self._cache = cache or IdempotencyCache()
        self._uncached = frozenset(uncached)
        super().__init__()

    def _applies(self, method: str, handler: grpc.RpcMethodHandler[Any, Any]) -> bool:
        # Only a single answer can be replayed; streams are reads and carry no request id.
        streaming = handler.request_streaming or handler.response_streaming
        return not streaming and method not in self._uncached

    def _wrap(
        self, method: str, handler: grpc.RpcMethodHandler[Any, Any]
    ) -> grpc.RpcMethodHandler[Any, Any]:
        behavior: Any = handler.unary_unary
        cache = self._cache
        serialize = handler.response_serializer or _as_bytes

        async def serialized(request: Any, context: Context) -> bytes:
            response = serialize(await behavior(request, context))
            if not isinstance(response, bytes):
                raise TypeError(f"{method}: the response serializer returned no bytes")
            return response

        async def deduplicated(request: Any, context: Context) -> Any:
            request_id = request_id_of(request, context)
            if not request_id:
                return await behavior(request, context)
            principal = current_principal()
            caller = principal.subject if principal is not None else ""
            # The answer is kept (and sent) as the bytes the serializer made of it.
            return await cache.run(
                (caller, method, request_id),
                _fingerprint(request),
                lambda: serialized(request, context),
            )

        def send(response: Any) -> bytes:
            return response if isinstance(response, bytes) else _as_bytes(serialize(response))

        return grpc.unary_unary_rpc_method_handler(
            deduplicated,
            request_deserializer=handler.request_deserializer,
            response_serializer=send,
        )


def _fingerprint(request: Any) -> bytes:
    if isinstance(request, bytes):
        payload = request
    elif hasattr(request, "SerializeToString"):
        payload = request.SerializeToString(deterministic=True)
    else:
        payload = repr(request).encode()
    return hashlib.sha256(payload).digest()


def _as_bytes(response: Any) -> bytes:
    if not isinstance(response, bytes):
        raise TypeError(f"a response must be serialized to bytes, not {type(response).__name__}")
    return response


def _is_final(error: BaseException) -> bool:
    if isinstance(error, TableMoved):
        return False
    if isinstance(error, MasaError):
        return error.code in _FINAL_CODES
    if isinstance(error, DomainError):
        # A service domain's refusal is final as its status code is (a ledger's or
        # matchmaking's NOT_FOUND, FAILED_PRECONDITION...), an UNAVAILABLE one is not.
        return STATUS_CODES[error.kind] in _FINAL_CODES
    return isinstance(error, RuleViolation)
