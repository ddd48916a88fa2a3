"""The gateway's HTTP face: one ASGI application that routes a request to the calls (Connect,
gRPC-Web, gRPC), the web client's files, ``/dev/token`` or ``/healthz``, under one CORS policy.

CORS is an allow-list: a page of the gateway's own origin calls freely, a page of a listed
origin is allowed by the preflight and the answer's headers, and a call a browser sends from
any other origin is refused before it reaches a service (403), so that a page elsewhere cannot
spend a player's quota with the player's cookies or token.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any, Final

from masa_web_gateway.dev_tokens import MAX_BODY_BYTES, DevTokens, TokenRefused
from masa_web_gateway.health import Health
from masa_web_gateway.metrics import GatewayMetrics
from masa_web_gateway.rpc import RpcApplication
from masa_web_gateway.static import StaticFiles

__all__ = ["Gateway"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_RPC_PREFIX: Final = "/masa."
# What a browser may send and read across origins (Connect and gRPC-Web headers).
_ALLOW_HEADERS: Final = (
    "authorization, content-type, connect-protocol-version, connect-timeout-ms, "
    "connect-accept-encoding, connect-content-encoding, grpc-timeout, x-grpc-web, "
    "x-user-agent, traceparent, tracestate"
)
_EXPOSE_HEADERS: Final = "grpc-status, grpc-message, grpc-status-details-bin, content-encoding"
# The page may load its own files and call its own origin, and nothing else.
_PAGE_HEADERS: Final = (
    (
        b"content-security-policy",
        b"default-src 'self'; img-src 'self' data:; "
        b"frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
)


class Gateway:
    def __init__(
        self,
        rpc: RpcApplication,
        *,
        health: Health,
        metrics: GatewayMetrics,
        static: StaticFiles | None,
        tokens: DevTokens | None,
        cors_origins: Iterable[str],
    ) -> None:
        self._rpc = rpc
        self._health = health
        self._metrics = metrics
        self._static = static
        self._tokens = tokens
        self._origins = frozenset(cors_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
        elif scope["type"] == "http":
            await self._http(scope, receive, send)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        origin = _header(scope, b"origin")
        cross = origin is not None and not _same_origin(scope, origin)
        allowed = not cross or origin in self._origins
        path: str = scope["path"]
        if scope["method"] == "OPTIONS":
            await self._preflight(send, origin if cross else None, allowed=allowed)
            return
        if path.startswith(_RPC_PREFIX):
            if not allowed:
                await self._plain(send, "cors", 403, b"origin not allowed\n")
                return
            await self._rpc(scope, receive, _with_cors(send, origin) if cross else send)
            return
        if path == "/healthz":
            code = 200 if self._health.serving else 503
            await self._answer(send, "health", code, self._health.report(), b"application/json")
            return
        if path == "/dev/token":
            await self._token(scope, receive, send, allowed=allowed)
            return
        await self._file(scope, send)

    async def _preflight(self, send: Send, origin: str | None, *, allowed: bool) -> None:
        if origin is None or not allowed:
            await self._plain(send, "cors", 403, b"origin not allowed\n")
            return
        headers = [
            (b"access-control-allow-origin", origin.encode()),
            (b"access-control-allow-methods", b"POST, GET"),
            (b"access-control-allow-headers", _ALLOW_HEADERS.encode()),
            (b"access-control-max-age", b"7200"),
            (b"vary", b"origin"),
        ]
        self._metrics.http.labels("cors", "204").inc()
        await send({"type": "http.response.start", "status": 204, "headers": headers})
        await send({"type": "http.response.body", "body": b""})

    async def _token(self, scope: Scope, receive: Receive, send: Send, *, allowed: bool) -> None:
        if self._tokens is None:
            await self._plain(send, "token", 404, b"no development tokens here\n")
            return
        if scope["method"] != "POST" or not allowed:
            await self._plain(send, "token", 405 if allowed else 403, b"POST from this page\n")
            return
        body = await _read_body(receive, MAX_BODY_BYTES)
        if body is None:
            await self._plain(send, "token", 413, b"the body is larger than 1 KiB\n")
            return
        try:
            answer = self._tokens.mint(body)
        except TokenRefused as refused:
            await self._plain(send, "token", refused.status, refused.message.encode() + b"\n")
            return
        await self._answer(send, "token", 200, answer, b"application/json")

    async def _file(self, scope: Scope, send: Send) -> None:
        asset = self._static.find(scope["path"]) if self._static is not None else None
        if asset is None or scope["method"] not in ("GET", "HEAD"):
            await self._plain(send, "static", 404, b"not found\n")
            return
        headers = [
            (b"content-type", asset.content_type.encode()),
            (b"etag", asset.etag.encode()),
            (b"cache-control", b"no-cache"),
            (b"vary", b"accept-encoding"),
            *_PAGE_HEADERS,
        ]
        if _header(scope, b"if-none-match") == asset.etag:
            self._metrics.http.labels("static", "304").inc()
            await send({"type": "http.response.start", "status": 304, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return
        body = asset.body
        if asset.gzipped is not None and "gzip" in (_header(scope, b"accept-encoding") or ""):
            body = asset.gzipped
            headers.append((b"content-encoding", b"gzip"))
        headers.append((b"content-length", str(len(body)).encode()))
        self._metrics.http.labels("static", "200").inc()
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send(
            {"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body}
        )

    async def _plain(self, send: Send, kind: str, status: int, body: bytes) -> None:
        await self._answer(send, kind, status, body, b"text/plain; charset=utf-8")

    async def _answer(
        self, send: Send, kind: str, status: int, body: bytes, content_type: bytes
    ) -> None:
        self._metrics.http.labels(kind, str(status)).inc()
        headers = [
            (b"content-type", content_type),
            (b"content-length", str(len(body)).encode()),
            (b"cache-control", b"no-store"),
            (b"x-content-type-options", b"nosniff"),
        ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _with_cors(send: Send, origin: str | None) -> Send:
    """``send`` adding the CORS headers of an allowed origin to the response's start."""
    assert origin is not None
    extra = [
        (b"access-control-allow-origin", origin.encode()),
        (b"access-control-expose-headers", _EXPOSE_HEADERS.encode()),
        (b"vary", b"origin"),
    ]

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), *extra]}
        await send(message)

    return sending


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            text: str = value.decode("latin-1")
            return text
    return None


def _same_origin(scope: Scope, origin: str) -> bool:
    """Whether a browser sent the request from the gateway's own page: it says so itself
    (``Sec-Fetch-Site``, which no script can set), or the origin is this server's. Behind a
    proxy that ends TLS the scheme seen here is http while the page's is https, so the
    browser's own word is what holds there."""
    if _header(scope, b"sec-fetch-site") == "same-origin":
        return True
    host = _header(scope, b"host") or ""
    return origin == f"{scope.get('scheme', 'http')}://{host}"


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The request body, or None once it passes ``limit`` bytes (the rest is not read)."""
    body = b""
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return body
        chunk: bytes = message.get("body", b"")
        body += chunk
        if len(body) > limit:
            return None
        if not message.get("more_body", False):
            return body


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
