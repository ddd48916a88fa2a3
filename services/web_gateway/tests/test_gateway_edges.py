"""The gateway's own edges, without a service behind it: settings, the CORS allow-list, the
web client's files, development tokens, health, and how a service's status becomes the
Connect error a browser reads (issue 24)."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
from collections.abc import MutableMapping, Sequence
from pathlib import Path
from typing import Any

import grpc
import pytest
from connectrpc.code import Code
from google.rpc import error_details_pb2
from masa.common.v1 import error_pb2
from masa_platform.auth import Role, TokenVerifier
from masa_platform.errors import IllegalMove, TableMoved, reason_name, to_status
from masa_platform.settings import SettingsError, load_settings
from masa_platform.testing import auth_settings, free_port, keyring
from masa_web_gateway.bootstrap import bootstrap
from masa_web_gateway.errors import connect_error
from masa_web_gateway.settings import GatewaySettings
from masa_web_gateway.static import load_assets
from masa_web_gateway.web import Gateway
from prometheus_client import CollectorRegistry

PAGE = "http://127.0.0.1:8080"


@pytest.fixture
def web_root(tmp_path: Path) -> Path:
    root = tmp_path / "dist"
    root.mkdir()
    (root / "index.html").write_text("<!doctype html><title>masa</title>")
    (root / "app.js").write_text("console.log('masa');" * 50)
    (root / "app.js.gz").write_bytes(gzip.compress((root / "app.js").read_bytes()))
    return root


def _gateway(web_root: Path | None, **env: str) -> Gateway:
    # Nothing listens on these ports: the tests here never reach a service.
    dead = [f"127.0.0.1:{free_port()}" for _ in range(3)]
    settings = load_settings(
        GatewaySettings,
        {
            "MASA_MATCHMAKING_ADDRESS": dead[0],
            "MASA_LEDGER_ADDRESS": dead[1],
            "MASA_TABLE_ADDRESSES": dead[2],
            "MASA_DEV_ISSUER_KEY_FILE": str(keyring().private("issuer")),
            **({"MASA_WEB_ROOT": str(web_root)} if web_root else {}),
            **env,
        },
    )
    return bootstrap(settings, CollectorRegistry()).app


class _Answer:
    def __init__(self) -> None:
        self.status = 0
        self.headers: dict[str, str] = {}
        self.body = b""


async def _request(
    app: Gateway,
    method: str,
    path: str,
    *,
    headers: Sequence[tuple[str, str]] = (),
    body: bytes = b"",
) -> _Answer:
    scope: dict[str, Any] = {
        "type": "http",
        "method": method,
        "path": path,
        "scheme": "http",
        "root_path": "",
        "query_string": b"",
        "headers": [
            (b"host", b"127.0.0.1:8080"),
            *((name.encode(), value.encode()) for name, value in headers),
        ],
        "extensions": {},
    }
    chunks = [{"type": "http.request", "body": body, "more_body": False}]
    answer = _Answer()

    async def receive() -> dict[str, Any]:
        if chunks:
            return chunks.pop(0)
        # The browser stays connected until the answer is complete.
        await asyncio.get_running_loop().create_future()
        raise AssertionError("unreachable")

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer.status = message["status"]
            answer.headers = {k.decode(): v.decode() for k, v in message["headers"]}
        elif message["type"] == "http.response.body":
            answer.body += message.get("body", b"")

    await app(scope, receive, send)
    return answer


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("MASA_CORS_ORIGINS", "evil.example"),
        ("MASA_CORS_ORIGINS", "https://a.example/path"),
        ("MASA_TABLE_ADDRESSES", "no-port"),
        ("MASA_TABLE_ADDRESSES", ""),
        ("MASA_MAX_REQUEST_BYTES", "10"),
        ("MASA_HTTP_PORT", "70000"),
        ("MASA_DEV_TOKEN_RATE", "0"),
    ],
)
def test_bad_settings_are_refused_by_name(variable: str, value: str) -> None:
    with pytest.raises(SettingsError):
        load_settings(GatewaySettings, {variable: value})


def test_a_services_status_keeps_its_code_and_error_info() -> None:
    """The browser reads the same code and ErrorInfo a native client does: a rule id for a
    move (E-4), a platform reason with its metadata for the rest."""
    for error, code in (
        (IllegalMove("E-4", "not higher"), Code.FAILED_PRECONDITION),
        (TableMoved("t1", "10.0.0.2:50051"), Code.FAILED_PRECONDITION),
    ):
        status = to_status(error)
        translated = connect_error(status.code, status.details, status.trailing_metadata)
        assert translated.code is code
        assert translated.message == status.details
        (detail,) = translated.details
        assert detail.type_name == "google.rpc.ErrorInfo"
        info = error_details_pb2.ErrorInfo.FromString(detail.message_bytes)
        assert info.reason == error.reason
        assert dict(info.metadata) == error.metadata
    every = {
        connect_error(status, "", ()).code for status in grpc.StatusCode if status.name != "OK"
    }
    assert Code.CANCELED in every and Code.UNKNOWN in every and len(every) == 16


async def test_the_client_files_are_served_with_their_gzip_twin(web_root: Path) -> None:
    app = _gateway(web_root)
    page = await _request(app, "GET", "/")
    assert page.status == 200 and page.body.startswith(b"<!doctype html>")
    assert "default-src 'self'" in page.headers["content-security-policy"]
    plain = await _request(app, "GET", "/app.js")
    zipped = await _request(app, "GET", "/app.js", headers=[("accept-encoding", "gzip, br")])
    assert zipped.headers["content-encoding"] == "gzip"
    assert gzip.decompress(zipped.body) == plain.body
    again = await _request(
        app, "GET", "/app.js", headers=[("if-none-match", plain.headers["etag"])]
    )
    assert again.status == 304 and not again.body
    for path in ("/../../etc/passwd", "/app.js.gz/..", "/missing.js", "/%2e%2e/x"):
        assert (await _request(app, "GET", path)).status == 404
    assert (await _request(app, "POST", "/app.js")).status == 404


def test_a_folder_without_a_built_client_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"index\.html"):
        load_assets(tmp_path)


async def test_cors_allows_the_listed_origins_only() -> None:
    app = _gateway(None, MASA_CORS_ORIGINS="https://play.example")
    ask = [("origin", "https://play.example"), ("access-control-request-method", "POST")]
    path = "/masa.matchmaking.v1.MatchmakingService/ListLobbies"
    preflight = await _request(app, "OPTIONS", path, headers=ask)
    assert preflight.status == 204
    assert preflight.headers["access-control-allow-origin"] == "https://play.example"
    assert "authorization" in preflight.headers["access-control-allow-headers"]
    other = [("origin", "https://evil.example"), ("access-control-request-method", "POST")]
    assert (await _request(app, "OPTIONS", path, headers=other)).status == 403
    refused = await _request(
        app,
        "POST",
        path,
        headers=[("origin", "https://evil.example"), ("content-type", "application/json")],
        body=b"{}",
    )
    assert refused.status == 403
    # The listed origin's call goes on to the service (none listens here: unavailable), and
    # its answer carries the CORS headers the page needs to read it.
    allowed = await _request(
        app,
        "POST",
        path,
        headers=[
            ("origin", "https://play.example"),
            ("content-type", "application/json"),
            ("authorization", "Bearer header.claims.signature"),
        ],
        body=b"{}",
    )
    assert allowed.headers["access-control-allow-origin"] == "https://play.example"
    assert "grpc-status-details-bin" in allowed.headers["access-control-expose-headers"]
    assert json.loads(allowed.body)["code"] == "unavailable"


async def test_dev_tokens_are_player_tokens_the_services_accept() -> None:
    app = _gateway(None)
    minted = await _request(app, "POST", "/dev/token", body=b'{"player": "ayse.k-1"}')
    assert minted.status == 200
    answer = json.loads(minted.body)
    principal = TokenVerifier(auth_settings()).verify(answer["token"])
    assert principal.subject == "ayse.k-1"
    assert principal.roles == frozenset({Role.PLAYER})
    assert answer["player_id"] == "ayse.k-1"
    for body in (b'{"player": "admin role please/.."}', b"[]", b"\xff"):
        assert (await _request(app, "POST", "/dev/token", body=body)).status == 400
    assert (await _request(app, "POST", "/dev/token", body=b"x" * 4096)).status == 413
    assert (await _request(app, "GET", "/dev/token")).status == 405


async def test_dev_tokens_are_rationed() -> None:
    app = _gateway(None, MASA_DEV_TOKEN_RATE="1")
    statuses = [
        (await _request(app, "POST", "/dev/token", body=b'{"player": "p"}')).status
        for _ in range(4)
    ]
    assert statuses[:2] == [200, 200]
    assert 429 in statuses[2:]


async def test_a_deployment_gateway_mints_no_token() -> None:
    app = _gateway(None, MASA_DEV_ISSUER_KEY_FILE="")
    assert (await _request(app, "POST", "/dev/token", body=b'{"player": "p"}')).status == 404


async def test_health_says_not_serving_while_its_services_do_not() -> None:
    app = _gateway(None)
    health = await _request(app, "GET", "/healthz")
    assert health.status == 503
    assert json.loads(health.body)["status"] == "NOT_SERVING"


async def test_a_request_larger_than_the_limit_is_refused_unread() -> None:
    app = _gateway(None, MASA_MAX_REQUEST_BYTES="1024")
    path = "/masa.table.v1.TableService/GetTable"
    answer = await _request(
        app,
        "POST",
        path,
        headers=[("content-type", "application/proto")],
        body=b"\n" + b"\x80" * 4096,
    )
    assert answer.status != 200
    assert json.loads(answer.body)["code"] == "resource_exhausted"


@pytest.mark.parametrize(
    "authorization",
    [None, "Basic dXNlcjpwdw==", "Bearer ", "Bearer not-a-jwt", "Bearer " + "a.b." + "c" * 5000],
)
async def test_a_call_no_service_could_authenticate_is_refused_at_the_edge(
    authorization: str | None,
) -> None:
    """No service listens behind this gateway: a call that reached one would be UNAVAILABLE.
    A missing or malformed token is UNAUTHENTICATED here, as a service would answer it, at no
    service's cost."""
    app = _gateway(None)
    headers = [("content-type", "application/json")]
    if authorization is not None:
        headers.append(("authorization", authorization))
    path = "/masa.ledger.v1.LedgerService/GetBalance"
    answer = await _request(app, "POST", path, headers=headers, body=b"{}")
    refused = json.loads(answer.body)
    assert refused["code"] == "unauthenticated"
    (detail,) = refused["details"]
    info = error_details_pb2.ErrorInfo.FromString(base64.b64decode(detail["value"] + "=="))
    assert info.reason == reason_name(error_pb2.ERROR_REASON_UNAUTHENTICATED)


async def test_the_gateways_own_page_behind_a_tls_proxy_is_not_cross_origin() -> None:
    """Behind an ingress that ends TLS the gateway sees http while the page is https: the
    browser's Sec-Fetch-Site says the call is the page's own, and it goes on to the service
    (none here: unavailable), where the same origin without that word would be refused."""
    app = _gateway(None)
    path = "/masa.matchmaking.v1.MatchmakingService/ListLobbies"
    call = [
        ("origin", "https://127.0.0.1:8080"),
        ("content-type", "application/json"),
        ("authorization", "Bearer header.claims.signature"),
    ]
    own = await _request(
        app, "POST", path, headers=[*call, ("sec-fetch-site", "same-origin")], body=b"{}"
    )
    assert json.loads(own.body)["code"] == "unavailable"
    assert "access-control-allow-origin" not in own.headers
    elsewhere = await _request(
        app, "POST", path, headers=[*call, ("sec-fetch-site", "cross-site")], body=b"{}"
    )
    assert elsewhere.status == 403
