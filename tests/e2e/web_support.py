"""Clients that speak to the web gateway as a browser's library does: Connect or gRPC-Web over
HTTP/1.1 or HTTP/2 (connectrpc's client), with a development token from ``/dev/token``.

(Kept out of conftest.py so that tests import it by a unique name.)
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any, Self

from connectrpc.client import ConnectClient
from connectrpc.compat import google_protobuf_binary_codec
from connectrpc.errors import ConnectError
from connectrpc.protocol import ProtocolType
from google.rpc import error_details_pb2
from masa_web_gateway.api import Route, routes
from pyqwest import Client, HTTPTransport, HTTPVersion

__all__ = ["BrowserClient", "dev_token", "reason_of"]

_ROUTES = {route.path: route for route in routes()}


def reason_of(error: ConnectError) -> str:
    """The ``ErrorInfo`` reason a Connect error carries, or ""."""
    for detail in error.details:
        if detail.type_name == "google.rpc.ErrorInfo":
            return error_details_pb2.ErrorInfo.FromString(detail.message_bytes).reason
    return ""


def dev_token(web: str, player: str) -> str:
    """A development player token from the gateway, as the web client asks for one."""
    request = urllib.request.Request(
        f"{web}/dev/token",
        data=json.dumps({"player": player}).encode(),
        headers={"content-type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        token: str = json.loads(answer.read())["token"]
    return token


class BrowserClient:
    """The exposed methods over one protocol and HTTP version, as ``token``'s player."""

    def __init__(
        self,
        web: str,
        token: str,
        *,
        protocol: ProtocolType = ProtocolType.CONNECT,
        http2: bool = False,
    ) -> None:
        version = HTTPVersion.HTTP2 if http2 else HTTPVersion.HTTP1
        self._http = Client(HTTPTransport(http_version=version))
        self._client = ConnectClient(
            web,
            codec=google_protobuf_binary_codec(),
            protocol=protocol,
            send_compression=None,
            http_client=self._http,
        )
        self.headers = {"authorization": f"Bearer {token}"} if token else {}

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self._client.close()

    async def call(self, path: str, request: Any) -> Any:
        route = _route(path)
        return await self._client.execute_unary(
            request=request, method=route.info, headers=self.headers, timeout_ms=20_000
        )

    def stream(self, path: str, request: Any) -> AsyncIterator[Any]:
        route = _route(path)
        return self._client.execute_server_stream(
            request=request, method=route.info, headers=self.headers
        )


def _route(path: str) -> Route:
    return _ROUTES[path]
