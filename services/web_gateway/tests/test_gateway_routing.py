"""Where the gateway sends a table's call (issue 24): the owner a TABLE_MOVED names when it is
one of the gateway's nodes, the next node after UNAVAILABLE, and never an address of an
answer's choosing; and its health, against real gRPC health servers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import grpc.aio
import pytest
from connectrpc.code import Code
from connectrpc.errors import ConnectError
from google.rpc import error_details_pb2
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from masa.common.v1 import error_pb2
from masa_platform.errors import TableMoved, Unavailable, reason_name, to_status
from masa_platform.testing import free_port
from masa_web_gateway.health import Health
from masa_web_gateway.metrics import GatewayMetrics
from masa_web_gateway.upstreams import Upstreams, _Search
from prometheus_client import CollectorRegistry

NODES = ("10.0.0.1:50051", "10.0.0.2:50051")


def _reason(error: ConnectError) -> str:
    (detail,) = error.details
    return error_details_pb2.ErrorInfo.FromString(detail.message_bytes).reason


def _failed(error: Exception) -> grpc.aio.AioRpcError:
    """The error a service's call ends with, as grpc.aio hands it to the gateway."""
    status = to_status(error)
    return grpc.aio.AioRpcError(
        status.code,
        grpc.aio.Metadata(),
        grpc.aio.Metadata(*status.trailing_metadata),
        status.details,
    )


@pytest.fixture
async def upstreams() -> AsyncIterator[Upstreams]:
    # Channels connect lazily: nothing here dials these addresses.
    made = Upstreams(
        matchmaking="10.0.0.9:50054",
        ledger="10.0.0.8:50053",
        tables=NODES,
        tls=None,
        max_message_bytes=1 << 20,
        table_pattern=r"engine-[0-9]{1,3}\.masa:50051",
    )
    yield made
    await made.close()


async def test_a_move_is_followed_to_a_node_of_the_list_once(upstreams: Upstreams) -> None:
    search = _Search(tried={NODES[0]})
    assert upstreams._next("t1", _failed(TableMoved("t1", NODES[1])), search) == NODES[1]
    search.tried.add(NODES[1])
    # Back to a node asked already: the table is moving; the browser retries, and is never
    # told TABLE_MOVED or an internal address.
    with pytest.raises(ConnectError) as moving:
        upstreams._next("t1", _failed(TableMoved("t1", NODES[0])), search)
    assert moving.value.code is Code.UNAVAILABLE
    assert _reason(moving.value) == reason_name(error_pb2.ERROR_REASON_UNAVAILABLE)
    assert NODES[0] not in moving.value.message


async def test_unavailable_asks_the_next_node_then_answers_unavailable(
    upstreams: Upstreams,
) -> None:
    search = _Search(tried={NODES[0]})
    down = _failed(Unavailable("node restarting"))
    assert upstreams._next("t1", down, search) == NODES[1]
    search.tried.add(NODES[1])
    # The second node points back to the first, which did not answer: the first UNAVAILABLE
    # is the answer, which the browser retries.
    with pytest.raises(ConnectError) as refused:
        upstreams._next("t1", _failed(TableMoved("t1", NODES[0])), search)
    assert refused.value.code is Code.UNAVAILABLE
    assert refused.value.message == "node restarting"


async def test_an_address_outside_the_list_and_the_pattern_is_never_dialled(
    upstreams: Upstreams,
) -> None:
    before = dict(upstreams.channels)
    for elsewhere in (
        "169.254.169.254:80",
        "evil.example:50051",
        "engine-1.masa:22",
        "10.0.0.9:50054",
    ):
        with pytest.raises(ConnectError) as refused:
            upstreams._next("t1", _failed(TableMoved("t1", elsewhere)), _Search(tried={NODES[0]}))
        assert refused.value.code is Code.UNAVAILABLE
    assert dict(upstreams.channels) == before


async def test_the_pattern_admits_new_nodes_up_to_a_bound(upstreams: Upstreams) -> None:
    # 256 table nodes at most, the two of the list included.
    room = 256 - len(NODES)
    admitted = [f"engine-{index}.masa:50051" for index in range(room + 4)]
    for address in admitted[:room]:
        moved = _failed(TableMoved("t1", address))
        assert upstreams._next("t1", moved, _Search(tried={NODES[0]})) == address
    for address in admitted[room:]:
        with pytest.raises(ConnectError) as refused:
            upstreams._next("t1", _failed(TableMoved("t1", address)), _Search(tried={NODES[0]}))
        assert refused.value.code is Code.UNAVAILABLE
    assert len(upstreams.channels) == 2 + 256


async def test_other_refusals_pass_through_unchanged(upstreams: Upstreams) -> None:
    refused = grpc.aio.AioRpcError(
        grpc.StatusCode.PERMISSION_DENIED, grpc.aio.Metadata(), grpc.aio.Metadata(), "not yours"
    )
    with pytest.raises(ConnectError) as answer:
        upstreams._next("t1", refused, _Search(tried={NODES[0]}))
    assert answer.value.code is Code.PERMISSION_DENIED


async def _health_server(serving: bool) -> tuple[grpc.aio.Server, str, health.aio.HealthServicer]:
    server = grpc.aio.server()
    servicer = health.aio.HealthServicer()
    status = (
        health_pb2.HealthCheckResponse.SERVING
        if serving
        else health_pb2.HealthCheckResponse.NOT_SERVING
    )
    await servicer.set("", status)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    address = f"127.0.0.1:{free_port()}"
    server.add_insecure_port(address)
    await server.start()
    return server, address, servicer


def _verdict(checked: Health) -> bool:
    return checked.serving


async def test_health_follows_what_the_services_say() -> None:
    """SERVING while matchmaking, the ledger and one engine node say SERVING; NOT_SERVING while
    a required one does not; a node admitted later never breaks the checks."""
    matchmaking, mm_address, _ = await _health_server(True)
    ledger, ledger_address, _ = await _health_server(True)
    engine, engine_address, _ = await _health_server(True)
    drained, drained_address, drained_health = await _health_server(False)
    channels = {
        address: grpc.aio.insecure_channel(address)
        for address in (mm_address, ledger_address, engine_address, drained_address)
    }
    try:
        checked = Health(
            channels,
            required=(mm_address, ledger_address),
            tables=(engine_address, drained_address),
            metrics=GatewayMetrics(CollectorRegistry()),
        )
        verdicts = [_verdict(checked)]
        await checked.check_once(timeout=5)
        verdicts.append(_verdict(checked))
        channels["engine-7.masa:50051"] = grpc.aio.insecure_channel("127.0.0.1:1")
        await engine.stop(None)
        await checked.check_once(timeout=2)
        verdicts.append(_verdict(checked))
        await drained_health.set("", health_pb2.HealthCheckResponse.SERVING)
        await checked.check_once(timeout=2)
        verdicts.append(_verdict(checked))
        await ledger.stop(None)
        await checked.check_once(timeout=2)
        verdicts.append(_verdict(checked))
        checked.stopping = True
        verdicts.append(_verdict(checked))
        # Unchecked yet; all serving; no engine serving; one engine back; the ledger down;
        # stopping.
        assert verdicts == [False, True, False, True, False, False]
    finally:
        for channel in channels.values():
            await channel.close()
        await asyncio.gather(
            *(server.stop(None) for server in (matchmaking, ledger, engine, drained))
        )
