"""The web gateway of ``make run`` (issue 24), spoken to as a browser's library speaks to it:
Connect and gRPC-Web, over HTTP/1.1 and HTTP/2, with a development token of ``/dev/token``.

A browser player queues, is seated and plays a training game to its end; the services' own
refusals reach the browser with their ``ErrorInfo`` reason (a rule id for a move, E-4 ...);
nothing but the player's public API is served; a page of another origin is refused; and a
service's per-caller quota applies through the gateway as it does to a native client.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import urllib.error
import urllib.request
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from connectrpc.code import Code
from connectrpc.errors import ConnectError
from connectrpc.protocol import ProtocolType
from greedy_player import _greedy_move
from masa.common.v1 import card_pb2, error_pb2
from masa.ledger.v1 import ledger_pb2
from masa.matchmaking.v1 import matchmaking_pb2 as mm
from masa.table.v1 import action_pb2, table_pb2
from masa_platform.errors import reason_name
from masa_platform.testing import free_port, token
from masa_rules.shuffle import DrawStream
from masa_web_gateway.__main__ import http_server
from masa_web_gateway.bootstrap import bootstrap
from masa_web_gateway.settings import GatewaySettings
from prometheus_client import CollectorRegistry
from web_support import BrowserClient, dev_token, reason_of

pytestmark = pytest.mark.timeout(240)

MM = "/masa.matchmaking.v1.MatchmakingService/"
TABLE = "/masa.table.v1.TableService/"
LEDGER = "/masa.ledger.v1.LedgerService/"


async def _seat(client: BrowserClient, lobby: str) -> str:
    """Queue in ``lobby`` and follow the ticket until it is seated; the table id."""
    return (await _seated_ticket(client, lobby)).table_id


async def _seated_ticket(client: BrowserClient, lobby: str) -> mm.Ticket:
    """Queue in ``lobby`` and follow the ticket until it is seated."""
    created = await client.call(
        MM + "CreateTicket", mm.CreateTicketRequest(request_id=uuid.uuid4().hex, lobby_id=lobby)
    )
    stream = client.stream(
        MM + "WatchTicket", mm.WatchTicketRequest(ticket_id=created.ticket.ticket_id)
    )
    async for update in stream:
        if update.ticket.state == mm.Ticket.STATE_MATCHED:
            seated: mm.Ticket = update.ticket
            return seated
        assert update.ticket.state in (mm.Ticket.STATE_SEARCHING, mm.Ticket.STATE_PLACING)
    raise AssertionError("the ticket stream ended before the ticket was seated")


async def _play_to_the_end(client: BrowserClient, table_id: str) -> Any:
    """Follow the table on WatchTable and play the seat greedily; the GameFinished event."""
    rng = DrawStream(table_id.encode())
    races = {reason_name(error_pb2.ERROR_REASON_SEQUENCE_MISMATCH), "E-3", "F-21"}
    watch = client.stream(TABLE + "WatchTable", table_pb2.WatchTableRequest(table_id=table_id))
    async for message in watch:
        for event in message.update.events if message.WhichOneof("payload") == "update" else ():
            if event.WhichOneof("kind") == "game_finished":
                return event.game_finished
        view = (
            await client.call(TABLE + "GetTable", table_pb2.GetTableRequest(table_id=table_id))
        ).seat_view
        action = _greedy_move(view, rng) if view.table.table.state == 1 else None
        if action is None:
            continue
        request = table_pb2.SubmitActionRequest(
            request_id=uuid.uuid4().hex,
            table_id=table_id,
            expected_sequence=view.table.table.sequence,
            action=action,
        )
        try:
            await client.call(TABLE + "SubmitAction", request)
        except ConnectError as error:
            if reason_of(error) not in races:
                raise
    raise AssertionError("the table stream ended without GameFinished")


async def test_a_browser_player_plays_a_training_game_over_grpc_web(stack: dict[str, str]) -> None:
    """P-1: queue, be seated and play Elevator against bots to the end, over gRPC-Web and
    HTTP/1.1 as a browser does."""
    web = stack["web-gateway"]
    player = f"web-{uuid.uuid4().hex[:8]}"
    async with BrowserClient(web, dev_token(web, player), protocol=ProtocolType.GRPC_WEB) as client:
        table_id = await _seat(client, "training-elevator")
        finished = await asyncio.wait_for(_play_to_the_end(client, table_id), 180)
        assert len(finished.ranking) == 4
        view = (
            await client.call(TABLE + "GetTable", table_pb2.GetTableRequest(table_id=table_id))
        ).seat_view
        assert view.table.table.table_id == table_id
        mine = next(seat for seat in view.table.seats if seat.seat == view.seat)
        assert mine.card_count == len(view.hand)


async def test_refusals_reach_the_browser_with_their_reason(stack: dict[str, str]) -> None:
    """E-4 and platform refusals keep their ErrorInfo through the gateway, over Connect and
    HTTP/2; a bad token is UNAUTHENTICATED; the table stays as it was."""
    web = stack["web-gateway"]
    player = f"web-{uuid.uuid4().hex[:8]}"
    async with BrowserClient(web, dev_token(web, player), http2=True) as client:
        table_id = await _seat(client, "training-elevator")
        before = (
            await client.call(TABLE + "GetTable", table_pb2.GetTableRequest(table_id=table_id))
        ).seat_view
        held = {(card.rank, card.suit) for card in before.hand}
        missing = next(
            card_pb2.Card(rank=card_pb2.Rank.Value(rank), suit=card_pb2.Suit.Value(suit))
            for rank in card_pb2.Rank.keys()[1:]
            for suit in card_pb2.Suit.keys()[1:]
            if (card_pb2.Rank.Value(rank), card_pb2.Suit.Value(suit)) not in held
        )
        request = table_pb2.SubmitActionRequest(
            request_id=uuid.uuid4().hex,
            table_id=table_id,
            expected_sequence=before.table.table.sequence,
            action=action_pb2.Action(play=action_pb2.Play(cards=[missing])),
        )
        with pytest.raises(ConnectError) as refused:
            await client.call(TABLE + "SubmitAction", request)
        assert refused.value.code in (Code.FAILED_PRECONDITION, Code.INVALID_ARGUMENT)
        assert reason_of(refused.value)[:2] in ("E-", "C-")
        with pytest.raises(ConnectError) as missing_table:
            await client.call(
                TABLE + "GetTable", table_pb2.GetTableRequest(table_id="no-such-table")
            )
        assert reason_of(missing_table.value) == reason_name(error_pb2.ERROR_REASON_TABLE_NOT_FOUND)
    async with BrowserClient(web, "forged.token.value") as stranger:
        with pytest.raises(ConnectError) as unauthenticated:
            await stranger.call(MM + "ListLobbies", mm.ListLobbiesRequest())
        assert unauthenticated.value.code is Code.UNAUTHENTICATED
        assert reason_of(unauthenticated.value) == reason_name(
            error_pb2.ERROR_REASON_UNAUTHENTICATED
        )


@contextlib.asynccontextmanager
async def _gateway_of(
    stack: dict[str, str], tables: tuple[str, ...], pattern: str = ""
) -> AsyncIterator[str]:
    """A gateway of this test's own in front of the stack's services, asking ``tables`` (in
    that order) for a table it has not met; its address."""
    settings = GatewaySettings(
        matchmaking_address=stack["matchmaking"],
        ledger_address=stack["ledger"],
        table_addresses=tables,
        table_address_pattern=pattern,
    )
    wired = bootstrap(settings, CollectorRegistry())
    port = free_port()
    server = http_server(wired.app, "127.0.0.1", port)
    serving = asyncio.create_task(server.serve())
    try:
        await _until_listening(port)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()  # type: ignore[no-untyped-call]  # untyped in granian
        await serving
        await wired.upstreams.close()


async def _until_listening(port: int) -> None:
    for _ in range(200):
        with contextlib.suppress(OSError):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"nothing listens on {port}")


async def test_the_gateway_follows_a_table_to_the_node_that_serves_it(
    stack: dict[str, str],
) -> None:
    """A table's first call goes to a node that does not serve it: its TABLE_MOVED is followed
    to the owner, a node of the gateway's own list or one its pattern admits (an autoscaled
    StatefulSet's pods); an owner outside both is never dialled (UNAVAILABLE), whatever the
    answer names."""
    web = stack["web-gateway"]
    player = f"web-{uuid.uuid4().hex[:8]}"
    player_token = dev_token(web, player)
    async with BrowserClient(web, player_token) as client:
        ticket = await _seated_ticket(client, "training-elevator")
    owner = ticket.table_address
    other = next(
        address for address in (stack["table-engine"], stack["table-engine-1"]) if address != owner
    )
    request = table_pb2.GetTableRequest(table_id=ticket.table_id)
    async with _gateway_of(stack, (other, owner)) as own, BrowserClient(own, player_token) as moved:
        view = (await moved.call(TABLE + "GetTable", request)).seat_view
        assert view.table.table.table_id == ticket.table_id
    pattern = re.escape(owner.rsplit(":", 1)[0]) + r":\d+"
    async with (
        _gateway_of(stack, (other,), pattern) as own,
        BrowserClient(own, player_token) as grown,
    ):
        view = (await grown.call(TABLE + "GetTable", request)).seat_view
        assert view.table.table.table_id == ticket.table_id
    async with _gateway_of(stack, (other,)) as own, BrowserClient(own, player_token) as stranded:
        with pytest.raises(ConnectError) as refused:
            await stranded.call(TABLE + "GetTable", request)
        assert refused.value.code is Code.UNAVAILABLE
        assert reason_of(refused.value) == reason_name(error_pb2.ERROR_REASON_UNAVAILABLE)


def _post(web: str, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    request = urllib.request.Request(f"{web}{path}", data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_only_the_players_public_api_is_served(stack: dict[str, str]) -> None:
    """No operator or service method is reachable through the gateway, whatever the token: an
    admin's CreateTable, GrantChips or DrainNode finds nothing there."""
    web = stack["web-gateway"]
    admin = {
        "authorization": f"Bearer {token('operator', 'admin')}",
        "content-type": "application/json",
    }
    for path in (
        "/masa.table.v1.TableService/CreateTable",
        "/masa.ledger.v1.LedgerService/GrantChips",
        "/masa.ledger.v1.LedgerService/SettleGame",
        "/masa.table.v1.TableAdminService/DrainNode",
        "/masa.bot.v1.BotService/Decide",
        "/grpc.health.v1.Health/Check",
    ):
        status, _ = _post(web, path, b"{}", admin)
        assert status == 404, path


def test_a_page_of_another_origin_is_refused(stack: dict[str, str]) -> None:
    """CORS is an allow-list, empty under make run: a call a browser sends from another
    origin is refused before any service sees it, and so is its preflight."""
    web = stack["web-gateway"]
    player = dev_token(web, f"web-{uuid.uuid4().hex[:8]}")
    headers = {"authorization": f"Bearer {player}", "content-type": "application/json"}
    status, body = _post(web, MM + "ListLobbies", b"{}", headers)
    assert status == 200 and json.loads(body)["lobbies"]
    status, _ = _post(web, MM + "ListLobbies", b"{}", {**headers, "origin": "https://evil.example"})
    assert status == 403
    preflight = urllib.request.Request(
        f"{web}{MM}ListLobbies",
        method="OPTIONS",
        headers={"origin": "https://evil.example", "access-control-request-method": "POST"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(preflight, timeout=10)
    assert refused.value.code == 403


def test_dev_tokens_take_player_names_only(stack: dict[str, str]) -> None:
    web = stack["web-gateway"]
    for body in (
        b"not json",
        b'{"player": ""}',
        b'{"player": "a/b"}',
        b'{"player": 7}',
        b"x" * 2048,
    ):
        status, _ = _post(web, "/dev/token", body, {"content-type": "application/json"})
        assert status in (400, 413), body[:20]


async def test_a_services_quota_applies_through_the_gateway(stack: dict[str, str]) -> None:
    """A player's open streams are counted by the service as for a native client
    (MASA_CALLER_STREAMS, 16): the one past the limit is refused with QUOTA_EXCEEDED, through
    the gateway, and the gateway goes on serving the player's other calls."""
    web = stack["web-gateway"]
    player = f"web-{uuid.uuid4().hex[:8]}"
    async with BrowserClient(web, dev_token(web, player)) as client:
        table_id = await _seat(client, "training-elevator")
        request = table_pb2.WatchTableRequest(table_id=table_id, spectate=True)
        streams = [client.stream(TABLE + "WatchTable", request) for _ in range(16)]
        try:
            for stream in streams:
                await anext(stream)
            with pytest.raises(ConnectError) as refused:
                await anext(client.stream(TABLE + "WatchTable", request))
            assert refused.value.code is Code.RESOURCE_EXHAUSTED
            assert reason_of(refused.value) == reason_name(error_pb2.ERROR_REASON_QUOTA_EXCEEDED)
            balance = await client.call(
                LEDGER + "GetBalance", ledger_pb2.GetBalanceRequest(player_id=player)
            )
            assert balance.account.player_id == player
        finally:
            for stream in streams:
                await stream.aclose()  # type: ignore[attr-defined]
