"""Rewrapping of RPC method handlers, so a server interceptor can run code around every call.

``grpc.aio`` interceptors only see the handler, not the call; to act on the call they return a
new handler whose behaviour wraps the old one. The behaviour comes in two shapes for streamed
responses (an async generator that yields, or a coroutine that calls ``context.write``, as the
health service's ``Watch`` does), and the wrapper keeps the shape it was given.
"""

from __future__ import annotations

import inspect
from abc import abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import grpc
import grpc.aio

__all__ = [
    "Around",
    "InterceptorChain",
    "WrappedHandlers",
    "WrappingInterceptor",
    "rpc_type",
    "split_method",
    "wrap_handler",
]

Context = grpc.aio.ServicerContext[Any, Any]
# What an interceptor runs around a call. Synchronous: nothing an interceptor does around a
# call waits (checks, counters, mapping errors), and a plain context manager costs a fraction
# of an asynchronous one on every call.
Around = Callable[[Context], AbstractContextManager[None]]


class WrappedHandlers:
    """The handler an interceptor built for each method, reused while the one beneath is the same.

    ``grpc.aio`` asks every interceptor for a handler on every call, and wrapping anew each time
    costs as much as a small RPC's own work. A wrapper depends only on the method and on the
    handler beneath it (whatever belongs to one call lives in its context), so it is built once
    and rebuilt only if the handler beneath changes. Unknown methods have no handler and are
    never kept, so the number kept is bounded by the methods the server registers.
    """

    def __init__(self) -> None:
        self._built: dict[
            str, tuple[grpc.RpcMethodHandler[Any, Any], grpc.RpcMethodHandler[Any, Any]]
        ] = {}

    def get(
        self,
        method: str,
        handler: grpc.RpcMethodHandler[Any, Any],
        build: Callable[[], grpc.RpcMethodHandler[Any, Any]],
    ) -> grpc.RpcMethodHandler[Any, Any]:
        found = self._built.get(method)
        if found is not None and found[0] is handler:
            return found[1]
        wrapped = build()
        self._built[method] = (handler, wrapped)
        return wrapped


class WrappingInterceptor(grpc.aio.ServerInterceptor):
    """A server interceptor that wraps each method's handler once (:class:`WrappedHandlers`).

    Subclasses say which handlers they apply to and how they wrap one.
    """

    def __init__(self) -> None:
        self._wrapped = WrappedHandlers()

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]
        ],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or not self._applies(method, handler):
            return handler
        return self._wrapped.get(method, handler, lambda: self._wrap(method, handler))

    def wrapped(
        self, method: str, handler: grpc.RpcMethodHandler[Any, Any]
    ) -> grpc.RpcMethodHandler[Any, Any]:
        """``handler`` as this interceptor serves it (itself when it does not apply)."""
        return self._wrap(method, handler) if self._applies(method, handler) else handler

    def _applies(self, method: str, handler: grpc.RpcMethodHandler[Any, Any]) -> bool:
        """Whether this interceptor has anything to do around ``method``."""
        del method, handler
        return True

    @abstractmethod
    def _wrap(
        self, method: str, handler: grpc.RpcMethodHandler[Any, Any]
    ) -> grpc.RpcMethodHandler[Any, Any]:
        """The handler that runs this interceptor's code around ``handler``."""


class InterceptorChain(grpc.aio.ServerInterceptor):
    """Wrapping interceptors installed as one, outermost first.

    ``grpc.aio`` awaits every installed interceptor's ``intercept_service`` on every call, each
    a coroutine of its own; the chain is one, and it wraps each method's handler with every
    layer once (:class:`WrappedHandlers`). Each call runs the same layers in the same order
    as with the interceptors installed one by one.
    """

    def __init__(self, layers: Sequence[WrappingInterceptor]) -> None:
        self._layers = tuple(layers)
        self._wrapped = WrappedHandlers()

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]
        ],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method
        return self._wrapped.get(method, handler, lambda: self._build(method, handler))

    def _build(
        self, method: str, handler: grpc.RpcMethodHandler[Any, Any]
    ) -> grpc.RpcMethodHandler[Any, Any]:
        for layer in reversed(self._layers):
            handler = layer.wrapped(method, handler)
        return handler


def rpc_type(handler: grpc.RpcMethodHandler[Any, Any]) -> str:
    """The go-grpc-prometheus ``grpc_type`` of a handler."""
    if handler.request_streaming and handler.response_streaming:
        return "bidi_stream"
    if handler.request_streaming:
        return "client_stream"
    if handler.response_streaming:
        return "server_stream"
    return "unary"


def split_method(method: str) -> tuple[str, str]:
    """``/pkg.Service/Method`` -> (``pkg.Service``, ``Method``)."""
    service, _, name = method.lstrip("/").rpartition("/")
    return service, name


def wrap_handler(
    handler: grpc.RpcMethodHandler[Any, Any],
    around: Around,
    *,
    on_received: Callable[[], None] | None = None,
    on_sent: Callable[[], None] | None = None,
) -> grpc.RpcMethodHandler[Any, Any]:
    """A handler that runs the call inside ``around(context)``.

    ``on_received``/``on_sent`` are called per request and per response message (responses a
    coroutine writes through ``context.write`` are invisible to a wrapper and not counted).
    """
    received = on_received or _nothing
    sent = on_sent or _nothing
    serializers: dict[str, Any] = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }

    def requests_of(first: Any) -> Any:
        if not handler.request_streaming:
            received()
            return first
        return _counted(first, received)

    behavior = _behavior(handler)
    if not handler.response_streaming:

        async def unary_response(request: Any, context: Context) -> Any:
            with around(context):
                response = await behavior(requests_of(request), context)
                # A refusal is a status set on the context (masa_platform.errors); no message
                # goes out then.
                if context.code() in (None, grpc.StatusCode.OK):
                    sent()
                return response

        wrapped: Any = unary_response
    elif inspect.isasyncgenfunction(behavior):

        async def yielded_responses(request: Any, context: Context) -> AsyncIterator[Any]:
            with around(context):
                async for response in behavior(requests_of(request), context):
                    sent()
                    yield response

        wrapped = yielded_responses
    else:

        async def written_responses(request: Any, context: Context) -> None:
            with around(context):
                await behavior(requests_of(request), context)

        wrapped = written_responses
    return _method_handler(handler, wrapped, serializers)


def _behavior(handler: grpc.RpcMethodHandler[Any, Any]) -> Any:
    """The one of the handler's four callables that its streaming flags say is set."""
    if handler.request_streaming and handler.response_streaming:
        return handler.stream_stream
    if handler.request_streaming:
        return handler.stream_unary
    if handler.response_streaming:
        return handler.unary_stream
    return handler.unary_unary


def _method_handler(
    like: grpc.RpcMethodHandler[Any, Any], behavior: Any, serializers: dict[str, Any]
) -> grpc.RpcMethodHandler[Any, Any]:
    """A handler of the same streaming kind as ``like`` that runs ``behavior``."""
    if like.request_streaming and like.response_streaming:
        return grpc.stream_stream_rpc_method_handler(behavior, **serializers)
    if like.request_streaming:
        return grpc.stream_unary_rpc_method_handler(behavior, **serializers)
    if like.response_streaming:
        return grpc.unary_stream_rpc_method_handler(behavior, **serializers)
    return grpc.unary_unary_rpc_method_handler(behavior, **serializers)


async def _counted(
    requests: AsyncIterator[Any], received: Callable[[], None]
) -> AsyncIterator[Any]:
    async for request in requests:
        received()
        yield request


def _nothing() -> None:
    return None
