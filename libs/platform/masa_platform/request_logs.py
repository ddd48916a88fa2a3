"""Every log line written while serving an RPC carries the call's identity (issue 13).

:class:`LogContextInterceptor` binds, for the length of each call with a single request, the
method (``rpc``) and whichever of ``request_id``, ``table_id``, ``game_no``, ``seat``,
``ticket_id`` and ``lobby_id`` the request carries, so that one filter on a table id or a
request id follows a table's story across services. A unary call binds them lazily
(:func:`masa_platform.logs.bind_lazily`): they are read from the request only if the call
logs a line.
Ids are fine in logs: it is metrics that must never carry them.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from typing import Any, Final

import grpc

from masa_platform.handlers import Context, WrappingInterceptor, split_method
from masa_platform.logs import bind_lazily, bound_context, unbind

__all__ = ["LOGGED_FIELDS", "LogContextInterceptor", "request_fields"]

# Request fields worth a log field of the same name, when the request has them and sets them.
LOGGED_FIELDS: Final = ("request_id", "table_id", "game_no", "seat", "ticket_id", "lobby_id")


def request_fields(request: Any) -> dict[str, Any]:
    """The :data:`LOGGED_FIELDS` the request message sets (an unset proto3 field is skipped)."""
    found: dict[str, Any] = {}
    descriptor = getattr(request, "DESCRIPTOR", None)
    if descriptor is None:
        return found
    for name in LOGGED_FIELDS:
        field = descriptor.fields_by_name.get(name)
        if field is None:
            continue
        if field.has_presence and not request.HasField(name):
            continue
        value = getattr(request, name)
        if value or field.has_presence:
            found[name] = value
    return found


class LogContextInterceptor(WrappingInterceptor):
    """Binds the call's identity to the log context (see the module docstring)."""

    def _applies(self, method: str, handler: grpc.RpcMethodHandler[Any, Any]) -> bool:
        # A client stream's requests arrive one by one; its calls log the method only, which
        # the metrics already count, so they are left alone.
        return not handler.request_streaming

    def _wrap(
        self, method: str, handler: grpc.RpcMethodHandler[Any, Any]
    ) -> grpc.RpcMethodHandler[Any, Any]:
        rpc = split_method(method)[1]
        serializers: dict[str, Any] = {
            "request_deserializer": handler.request_deserializer,
            "response_serializer": handler.response_serializer,
        }
        # The stubs type behaviours for the sync server; these are grpc.aio's coroutines.
        unary: Any = handler.unary_unary
        streamed: Any = handler.unary_stream
        if not handler.response_streaming:

            async def unary_response(request: Any, context: Context) -> Any:
                token = bind_lazily(lambda: {"rpc": rpc, **request_fields(request)})
                try:
                    return await unary(request, context)
                finally:
                    unbind(token)

            return grpc.unary_unary_rpc_method_handler(unary_response, **serializers)
        if inspect.isasyncgenfunction(streamed):

            async def yielded(request: Any, context: Context) -> AsyncIterator[Any]:
                fields = {"rpc": rpc, **request_fields(request)}
                responses = streamed(request, context)
                try:
                    while True:
                        # Bound around each step and never across a yield: a stream cancelled
                        # while a response is on its way leaves this generator suspended at the
                        # yield, and the event loop closes it later from a task of its own,
                        # whose context cannot reset a value bound in the call's context.
                        with bound_context(**fields):
                            try:
                                response = await anext(responses)
                            except StopAsyncIteration:
                                return
                        yield response
                finally:
                    # The handler's own clean-up logs with the call's identity too.
                    with bound_context(**fields):
                        await responses.aclose()

            return grpc.unary_stream_rpc_method_handler(yielded, **serializers)

        async def written(request: Any, context: Context) -> None:
            with bound_context(rpc=rpc, **request_fields(request)):
                await streamed(request, context)

        return grpc.unary_stream_rpc_method_handler(written, **serializers)
