"""Per-caller quotas on the real matchmaking service (real NATS, real gRPC on a free port).

The finding reproduced here: one player token opened 10,000 WatchTicket streams in 5 s, and
matchmaking then refused health and every other player's call with RESOURCE_EXHAUSTED. Now the
token's streams past MASA_CALLER_STREAMS, and its calls past MASA_CALLER_RATE, are refused with
QUOTA_EXCEEDED, and everyone else is served."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import grpc.aio
import pytest
from grpc_health.v1 import health_pb2
from grpc_status import rpc_status
from instances import provision_lease_ttl
from masa.common.v1 import error_pb2
from masa.matchmaking.v1 import matchmaking_pb2 as mm
from masa.matchmaking.v1 import matchmaking_pb2_grpc
from masa_matchmaking.bootstrap import MatchmakingService, Overrides, start_matchmaking
from masa_matchmaking.settings import MatchmakingSettings
from masa_platform.bus_access import MATCHMAKING
from masa_platform.errors import error_info
from masa_platform.quotas import CALLER_RATE, CALLER_STREAMS
from masa_platform.settings import PlatformSettings, QuotaSettings, ServerSettings
from masa_platform.testing import HealthStub, NatsServer, auth_settings, keyring, next_message
from masa_platform.testing import token as mint
from matchmaking_support import LOBBIES_TOML, FakeEngines, FakeLedger, FakeNodes
from prometheus_client import CollectorRegistry

QUOTA_EXCEEDED = error_pb2.ErrorReason.Name(error_pb2.ERROR_REASON_QUOTA_EXCEEDED).removeprefix(
    "ERROR_REASON_"
)
SERVING = health_pb2.HealthCheckResponse.SERVING
# Small limits, so that the attack is over in a moment.
QUOTAS = QuotaSettings(
    max_caller_rpcs=40, caller_streams=4, caller_rate=20.0, caller_burst=20, callers_tracked=100
)
Stub = matchmaking_pb2_grpc.MatchmakingServiceStub


def token(player: str) -> tuple[tuple[str, str]]:
    return (("authorization", f"Bearer {mint(player)}"),)


@dataclass
class Running:
    service: MatchmakingService
    registry: CollectorRegistry

    def refusals(self, quota: str) -> float:
        value = self.registry.get_sample_value("masa_quota_refusals_total", {"quota": quota})
        return value or 0.0


@pytest.fixture
async def running(nats_server: NatsServer, tmp_path: Path) -> AsyncIterator[Running]:
    lobbies = tmp_path / "lobbies.toml"
    lobbies.write_text(LOBBIES_TOML)
    provision_lease_ttl(nats_server, 1.5)
    settings = MatchmakingSettings(
        platform=PlatformSettings(
            service_name="matchmaking",
            auth=auth_settings("matchmaking"),
            nats_url=nats_server.url,
            nats_user=MATCHMAKING,
            nats_password=nats_server.password(MATCHMAKING),
            server=ServerSettings(quotas=QUOTAS),
        ),
        instance_id=f"quotas-{uuid.uuid4().hex[:6]}",
        lobbies_file=lobbies,
        ledger_address="unused:1",
        result_keys_file=keyring().results_jwks,
        round_seconds=0.2,
    )
    ledger = FakeLedger(welcome=1_000)
    registry = CollectorRegistry()
    service = await start_matchmaking(
        settings,
        registry,
        overrides=Overrides(ledger=ledger, engines=FakeEngines(ledger), nodes=FakeNodes()),
    )
    yield Running(service, registry)
    await service.stop(0)


async def refusal(call: grpc.aio.Call) -> tuple[grpc.StatusCode, str, dict[str, str]]:
    info = error_info(await rpc_status.aio.from_call(call))
    assert info is not None
    return await call.code(), info.reason, dict(info.metadata)


async def opened(
    call: grpc.aio.UnaryStreamCall[mm.WatchTicketRequest, mm.WatchTicketResponse],
) -> bool:
    try:
        first = await next_message(call, mm.WatchTicketResponse)
        return first.ticket.state == mm.Ticket.STATE_SEARCHING
    except grpc.aio.AioRpcError:
        return False


async def health(channel: grpc.aio.Channel) -> int:
    reply = await HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
    return int(reply.status)


async def test_one_token_opening_watch_streams_past_its_cap_leaves_everyone_else_served(
    running: Running,
) -> None:
    async with grpc.aio.insecure_channel(running.service.address) as channel:
        stub = Stub(channel)
        mallory = token("mallory")
        ticket = (
            await stub.CreateTicket(
                mm.CreateTicketRequest(request_id="m1", lobby_id="salon"), metadata=mallory
            )
        ).ticket
        request = mm.WatchTicketRequest(ticket_id=ticket.ticket_id)
        # Opened in waves within the token's rate, so that only the stream cap refuses them.
        flood: list[grpc.aio.UnaryStreamCall[mm.WatchTicketRequest, mm.WatchTicketResponse]] = []
        results: list[bool] = []
        for _ in range(6):
            wave = [stub.WatchTicket(request, metadata=mallory) for _ in range(10)]
            results += await asyncio.gather(*(opened(call) for call in wave))
            flood += wave
            await asyncio.sleep(10 / QUOTAS.caller_rate)
        assert sum(results) == QUOTAS.caller_streams
        code, reason, info = await refusal(flood[results.index(False)])
        assert (code, reason) == (grpc.StatusCode.RESOURCE_EXHAUSTED, QUOTA_EXCEEDED)
        assert info == {"quota": CALLER_STREAMS, "limit": str(QUOTAS.caller_streams)}
        assert running.refusals(CALLER_STREAMS) == len(flood) - QUOTAS.caller_streams

        # Health and another player are served as if nothing happened.
        assert await health(channel) == SERVING
        ayse = token("ayse")
        mine = await stub.CreateTicket(
            mm.CreateTicketRequest(request_id="a1", lobby_id="elevator"), metadata=ayse
        )
        assert await opened(
            stub.WatchTicket(mm.WatchTicketRequest(ticket_id=mine.ticket.ticket_id), metadata=ayse)
        )
        for call in flood:
            call.cancel()


async def test_a_burst_past_the_callers_rate_is_refused_and_served_again_after(
    running: Running,
) -> None:
    async with grpc.aio.insecure_channel(running.service.address) as channel:
        stub = Stub(channel)
        mallory, bora = token("mallory-rate"), token("bora")
        request = mm.GetLobbyRequest(lobby_id="salon")
        calls = [stub.GetLobby(request, metadata=mallory) for _ in range(60)]
        answers = await asyncio.gather(*calls, return_exceptions=True)
        served = [answer for answer in answers if isinstance(answer, mm.GetLobbyResponse)]
        assert QUOTAS.caller_burst <= len(served) < 30
        refused = calls[
            next(n for n, a in enumerate(answers) if not isinstance(a, mm.GetLobbyResponse))
        ]
        code, reason, info = await refusal(refused)
        assert (code, reason) == (grpc.StatusCode.RESOURCE_EXHAUSTED, QUOTA_EXCEEDED)
        assert info["quota"] == CALLER_RATE and info["limit"] == "20"
        retry_after = float(info["retry_after_seconds"])
        assert 0 < retry_after <= 1 / QUOTAS.caller_rate
        assert running.refusals(CALLER_RATE) == 60 - len(served)

        assert (await stub.GetLobby(request, metadata=bora)).lobby.lobby_id == "salon"
        assert await health(channel) == SERVING
        await asyncio.sleep(retry_after + 0.05)
        assert (await stub.GetLobby(request, metadata=mallory)).lobby.lobby_id == "salon"
