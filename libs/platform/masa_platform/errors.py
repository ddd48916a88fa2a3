"""Domain errors and their gRPC status, with a ``google.rpc.ErrorInfo`` a client can read back.

Handlers raise a :class:`MasaError`, a service domain's ``masa_rules.refusals.DomainError``
(its kind has one status code, :data:`STATUS_CODES`) or a ``masa_rules`` ``RuleViolation``; the
:class:`ErrorInterceptor` turns it into a status whose details hold an ``ErrorInfo`` with
domain ``masa.dev`` and a reason: the rule id for an illegal move, or a platform reason
such as ``TABLE_MOVED``. Clients read it with ``grpc_status.rpc_status.from_call`` or
:func:`error_info`. Anything else a handler raises becomes ``INTERNAL`` without its text, and is
logged. A request whose bytes are not the method's protobuf message is ``INVALID_ARGUMENT``
(gRPC itself would answer ``UNKNOWN``).

Once mapped, an error's traceback (and those of the errors it chains to) is dropped: it holds
every frame of the call with the request in it, and would keep them alive as long as the
error lives, or, through a cycle, until a rare full pass of the garbage collector.
Messages quote client input through :func:`preview`, never whole.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar, Final

import grpc
import grpc.aio
from google.protobuf import any_pb2
from google.protobuf.message import DecodeError
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status
from masa.common.v1 import error_pb2
from masa_rules.errors import RuleViolation
from masa_rules.refusals import DomainError, Kind

from masa_platform.handlers import Context, WrappingInterceptor, wrap_handler

__all__ = [
    "DOMAIN",
    "STATUS_CODES",
    "AnsweredBefore",
    "BadRequest",
    "ErrorInterceptor",
    "IllegalMove",
    "InvalidPageToken",
    "MasaError",
    "NotFound",
    "NotYourSeat",
    "Overloaded",
    "PermissionDenied",
    "PreconditionFailed",
    "Refusal",
    "RequestIdReused",
    "TableMoved",
    "TokenExpired",
    "Unauthenticated",
    "Unavailable",
    "error_info",
    "finish_with",
    "preview",
    "reason_name",
    "refusal",
    "rpc_error_info",
    "to_status",
]

DOMAIN = "masa.dev"
# How much of a client's value an error message quotes.
PREVIEW_CHARACTERS: Final = 24

_log = logging.getLogger(__name__)

STATUS_CODES: Final[Mapping[Kind, grpc.StatusCode]] = {
    Kind.BAD_INPUT: grpc.StatusCode.INVALID_ARGUMENT,
    Kind.REFUSED: grpc.StatusCode.FAILED_PRECONDITION,
    Kind.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    Kind.ALREADY_EXISTS: grpc.StatusCode.ALREADY_EXISTS,
    Kind.NOT_PERMITTED: grpc.StatusCode.PERMISSION_DENIED,
    Kind.UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
}
"""The status code of each kind of refusal: the one mapping, for domain errors and for the
platform's own errors of those kinds."""


class MasaError(Exception):
    """An error with a gRPC code, an ``ErrorInfo`` reason and metadata (strings only)."""

    code: ClassVar[grpc.StatusCode] = grpc.StatusCode.INTERNAL
    default_reason: ClassVar[str] = "INTERNAL"

    def __init__(
        self, message: str, *, reason: str | None = None, metadata: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason or self.default_reason
        self.metadata: dict[str, str] = dict(metadata or {})


class BadRequest(MasaError):
    """The request is malformed whatever the state: a missing field, an unknown card."""

    code = STATUS_CODES[Kind.BAD_INPUT]
    default_reason = "BAD_REQUEST"


class InvalidPageToken(BadRequest):
    """A ``page_token`` the service did not make for this listing, its filters and its caller
    (AIP-158); :mod:`masa_platform.page_tokens` raises it for every token it refuses."""

    default_reason = "INVALID_PAGE_TOKEN"


class RequestIdReused(MasaError):
    """A ``request_id`` sent again with a different request: the retry is not a retry."""

    code = STATUS_CODES[Kind.ALREADY_EXISTS]
    default_reason = "REQUEST_ID_REUSED"


class PreconditionFailed(MasaError):
    """The request is well formed but not allowed in the current state."""

    code = STATUS_CODES[Kind.REFUSED]
    default_reason = "FAILED_PRECONDITION"


class IllegalMove(PreconditionFailed):
    """A move the rules forbid now; the reason is the rule id."""

    def __init__(
        self, rule: str, message: str, *, metadata: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(message, reason=rule, metadata=metadata)
        self.rule = rule


class TableMoved(PreconditionFailed):
    """The table is owned by another node; the client should dial ``owner_address``."""

    default_reason = "TABLE_MOVED"

    def __init__(self, table_id: str, owner_address: str) -> None:
        super().__init__(
            f"table {table_id} is served by {owner_address}",
            metadata={"table_id": table_id, "owner_address": owner_address},
        )
        self.owner_address = owner_address


class Unauthenticated(MasaError):
    """A missing, malformed, forged or expired token."""

    code = grpc.StatusCode.UNAUTHENTICATED
    default_reason = "UNAUTHENTICATED"


class TokenExpired(Unauthenticated):
    """The token expired: at the call, or while a stream it opened was open."""

    default_reason = "TOKEN_EXPIRED"


class PermissionDenied(MasaError):
    """An authenticated caller without the role the method needs."""

    code = STATUS_CODES[Kind.NOT_PERMITTED]
    default_reason = "PERMISSION_DENIED"


class NotYourSeat(PermissionDenied):
    """A player acting for a seat that is not theirs."""

    default_reason = "NOT_YOUR_SEAT"


class NotFound(MasaError):
    """The named table, lobby, ticket or account does not exist."""

    code = STATUS_CODES[Kind.NOT_FOUND]
    default_reason = "NOT_FOUND"


class Overloaded(MasaError):
    """The server sheds load; the client should back off and retry."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED
    default_reason = "OVERLOADED"


class Unavailable(MasaError):
    """A dependency (a database, NATS) cannot be reached now; retry with the same request."""

    code = STATUS_CODES[Kind.UNAVAILABLE]
    default_reason = "UNAVAILABLE"


class AnsweredBefore(Exception):
    """A refusal replayed for a retried request: the status it was first answered with."""

    def __init__(self, status: grpc.Status) -> None:
        super().__init__(status.details)
        self.status = status


def reason_name(reason: error_pb2.ErrorReason.ValueType) -> str:
    """An ErrorReason as ErrorInfo carries it: its name without the prefix (TERMS_MISMATCH for
    ERROR_REASON_TERMS_MISMATCH), so that code compares reasons by the enum, never by a
    string of its own."""
    return error_pb2.ErrorReason.Name(reason).removeprefix("ERROR_REASON_")


def preview(value: str) -> str:
    """``value`` quoted for an error message: whole if short, else its first characters and
    its length, so that a megabyte of input is never echoed back."""
    if len(value) <= PREVIEW_CHARACTERS:
        return repr(value)
    return f"{value[:PREVIEW_CHARACTERS]!r}... ({len(value)} characters)"


@dataclass(frozen=True, slots=True)
class Refusal:
    """What an error tells the caller: its code, message, reason and metadata."""

    code: grpc.StatusCode
    message: str
    reason: str
    metadata: Mapping[str, str]

    @property
    def code_number(self) -> int:
        """The code as google.rpc.Code numbers it."""
        number: int = self.code.value[0]
        return number


def refusal(error: BaseException) -> Refusal:
    """The refusal ``error`` stands for; internals of unexpected errors are not disclosed. A
    stream that answers each message (``SubmitActions``) sends it inside a message."""
    if isinstance(error, MasaError):
        return Refusal(error.code, error.message, error.reason, error.metadata)
    if isinstance(error, DomainError):
        return Refusal(STATUS_CODES[error.kind], error.message, error.reason.value, error.metadata)
    if isinstance(error, RuleViolation):
        return Refusal(grpc.StatusCode.FAILED_PRECONDITION, error.message, error.rule, {})
    return Refusal(grpc.StatusCode.INTERNAL, "internal error", "INTERNAL", {})


def to_status(error: BaseException) -> grpc.Status:
    """The gRPC status for ``error``; internals of unexpected errors are not disclosed."""
    if isinstance(error, AnsweredBefore):
        return error.status
    refused = refusal(error)
    return _status(refused.code, refused.message, refused.reason, refused.metadata)


def finish_with(context: Context, error: BaseException) -> None:
    """Make the status of ``error`` the call's status; the handler then returns normally.

    Not ``context.abort``: gRPC keeps the ``AbortError`` it raises in the call's state, and
    its traceback holds the frames that hold the context, which holds that state: a cycle
    with the whole request in it that only a full pass of the garbage collector frees.
    """
    status = to_status(error)
    context.set_code(status.code)
    context.set_details(status.details)
    context.set_trailing_metadata(status.trailing_metadata)


def error_info(status: status_pb2.Status | None) -> error_details_pb2.ErrorInfo | None:
    """The ``ErrorInfo`` among a ``google.rpc.Status``'s details, if there is one."""
    if status is None:
        return None
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            return info
    return None


def rpc_error_info(error: grpc.aio.AioRpcError) -> error_details_pb2.ErrorInfo | None:
    """The ``ErrorInfo`` a failed call carried in its trailers (``grpc-status-details-bin``),
    if there is one: what a client reads to tell one refusal from another."""
    for key, value in error.trailing_metadata() or ():
        if key == _STATUS_DETAILS_KEY and isinstance(value, bytes):
            try:
                return error_info(status_pb2.Status.FromString(value))
            except DecodeError:
                return None
    return None


_STATUS_DETAILS_KEY: Final = "grpc-status-details-bin"


class ErrorInterceptor(WrappingInterceptor):
    """Maps what a handler raises to a status with ``ErrorInfo``; logs unexpected errors."""

    def _wrap(
        self, method: str, handler: grpc.RpcMethodHandler[Any, Any]
    ) -> grpc.RpcMethodHandler[Any, Any]:
        @contextmanager
        def mapped(context: Context) -> Iterator[None]:
            try:
                yield
            except grpc.aio.AbortError:
                raise
            except (MasaError, DomainError, RuleViolation, AnsweredBefore) as error:
                _drop_tracebacks(error)
                finish_with(context, error)
            except Exception as error:
                _log.exception("unexpected error in %s", method, extra={"grpc_method": method})
                _drop_tracebacks(error)
                finish_with(context, error)

        return wrap_handler(_refusing_undecodable(handler), mapped)


def _drop_tracebacks(error: BaseException) -> None:
    """Free the frames ``error`` and the errors it chains to hold (see the module doc)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        current.__traceback__ = None
        current = current.__cause__ or current.__context__


class _Undecodable:
    """What a request that is not a valid message decodes to; the handler refuses it."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _refusing_undecodable(
    handler: grpc.RpcMethodHandler[Any, Any],
) -> grpc.RpcMethodHandler[Any, Any]:
    """``handler``, with undecodable request bytes refused as a bad request.

    gRPC answers ``UNKNOWN`` when the deserializer raises, before any interceptor sees the
    call; decoding leniently and refusing in the handler makes it ``INVALID_ARGUMENT``.
    """
    decode = handler.request_deserializer
    if decode is None:
        return handler

    def lenient(data: bytes) -> Any:
        try:
            return decode(data)
        except DecodeError as error:
            return _Undecodable(str(error)[:100])

    serializers: dict[str, Any] = {
        "request_deserializer": lenient,
        "response_serializer": handler.response_serializer,
    }
    if handler.request_streaming:
        return _checked_requests(handler, serializers)
    if not handler.response_streaming:
        unary: Any = handler.unary_unary

        async def checked_unary(request: Any, context: Context) -> Any:
            _check_decoded(request)
            return await unary(request, context)

        return grpc.unary_unary_rpc_method_handler(checked_unary, **serializers)
    return _checked_stream(handler.unary_stream, serializers)


def _checked_requests(
    handler: grpc.RpcMethodHandler[Any, Any], serializers: dict[str, Any]
) -> grpc.RpcMethodHandler[Any, Any]:
    """A client-streaming handler whose request stream ends the call as a bad request at the
    first message that does not decode (the messages before it are served)."""

    async def decoded(requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for request in requests:
            _check_decoded(request)
            yield request

    streamed: Any = handler.stream_stream
    if handler.response_streaming and inspect.isasyncgenfunction(streamed):

        async def checked_yielded(requests: AsyncIterator[Any], context: Context) -> Any:
            async for response in streamed(decoded(requests), context):
                yield response

        return grpc.stream_stream_rpc_method_handler(checked_yielded, **serializers)
    if handler.response_streaming:

        async def checked_written(requests: AsyncIterator[Any], context: Context) -> None:
            await streamed(decoded(requests), context)

        return grpc.stream_stream_rpc_method_handler(checked_written, **serializers)
    unary: Any = handler.stream_unary

    async def checked_unary(requests: AsyncIterator[Any], context: Context) -> Any:
        return await unary(decoded(requests), context)

    return grpc.stream_unary_rpc_method_handler(checked_unary, **serializers)


def _check_decoded(request: Any) -> None:
    if isinstance(request, _Undecodable):
        raise BadRequest(f"the request is not a valid message for this method: {request.reason}")


def _checked_stream(streamed: Any, serializers: dict[str, Any]) -> grpc.RpcMethodHandler[Any, Any]:
    """A server-streaming handler that refuses an undecodable request before ``streamed``."""
    if inspect.isasyncgenfunction(streamed):

        async def checked_yielded(request: Any, context: Context) -> AsyncIterator[Any]:
            _check_decoded(request)
            async for response in streamed(request, context):
                yield response

        return grpc.unary_stream_rpc_method_handler(checked_yielded, **serializers)

    async def checked_written(request: Any, context: Context) -> None:
        _check_decoded(request)
        await streamed(request, context)

    return grpc.unary_stream_rpc_method_handler(checked_written, **serializers)


def _status(
    code: grpc.StatusCode, message: str, reason: str, metadata: Mapping[str, str]
) -> grpc.Status:
    info = error_details_pb2.ErrorInfo(reason=reason, domain=DOMAIN, metadata=dict(metadata))
    detail = any_pb2.Any()
    detail.Pack(info)
    code_number: int = code.value[0]
    return rpc_status.to_status(
        status_pb2.Status(code=code_number, message=message, details=[detail])
    )
