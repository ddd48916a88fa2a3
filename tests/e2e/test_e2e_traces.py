"""One ticket's trace spans matchmaking, the ledger and the table-engine (issue 13).

The three services run in this process over a real nats-server and real gRPC on free ports,
tracing into an in-memory exporter. Two players queue for a two-seat chip lobby; the table
placed for them belongs to the trace of the first ticket: its CreateTicket call, the matching
round's placement, the ledger's HoldStakes, the engine's CreateTable and the engine's own
BindHolds call to the ledger. Costs about 3 s (three services started and stopped)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path

import grpc.aio
import pytest
from masa.matchmaking.v1 import matchmaking_pb2, matchmaking_pb2_grpc
from masa_ledger.bootstrap import start_ledger
from masa_ledger.settings import LedgerSettings
from masa_matchmaking.bootstrap import start_matchmaking
from masa_matchmaking.settings import MatchmakingSettings
from masa_platform import tracing
from masa_platform.bus_access import LEDGER, MATCHMAKING, TABLE_ENGINE
from masa_platform.settings import PlatformSettings, ServerSettings
from masa_platform.testing import NatsServer, auth_settings, keyring, token
from masa_table_engine.bootstrap import start_node
from masa_table_engine.settings import EngineSettings
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

LOBBIES = """
[[lobby]]
id = "duel"
name = "Remi 51 for two"
game = "fiftyone"
preset = "remi"
seats = 2
stake = 10
"""
PLAYERS = ("ayse", "bora")
WAIT_SECONDS = 30.0


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider)
    try:
        yield exporter
    finally:
        tracing.install(None)
        provider.shutdown()


def platform(nats: NatsServer, service: str) -> PlatformSettings:
    return PlatformSettings(
        service_name=service,
        auth=auth_settings(service),
        nats_url=nats.url,
        nats_user=service,
        nats_password=nats.password(service),
        server=ServerSettings(grace_seconds=0.2),
    )


@pytest.fixture
async def matchmaking_address(tmp_path: Path, spans: InMemorySpanExporter) -> AsyncIterator[str]:
    lobbies = tmp_path / "lobbies.toml"
    lobbies.write_text(LOBBIES)
    with NatsServer(tmp_path / "nats", secure=True) as nats:
        ledger = await start_ledger(
            LedgerSettings(
                platform=platform(nats, LEDGER),
                database_url=f"sqlite:///{tmp_path / 'ledger.sqlite3'}",
                dev_welcome_chips=100,
                result_keys_file=keyring().results_jwks,
            ),
            registry=CollectorRegistry(),
        )
        engine = await start_node(
            EngineSettings(
                result_signing_key_file=keyring().results_key,
                log_mac_key_file=keyring().log_mac,
                platform=platform(nats, TABLE_ENGINE),
                node_id="table-engine-0",
                ledger_address=ledger.server.address,
            ),
            registry=CollectorRegistry(),
        )
        matchmaking = await start_matchmaking(
            replace(
                MatchmakingSettings(
                    platform=platform(nats, MATCHMAKING), result_keys_file=keyring().results_jwks
                ),
                lobbies_file=lobbies,
                ledger_address=ledger.server.address,
                round_seconds=0.2,
            ),
            registry=CollectorRegistry(),
        )
        try:
            yield matchmaking.address
        finally:
            await matchmaking.stop(0.2)
            await engine.stop(0.2)
            await ledger.stop(0.2)


async def test_one_tickets_trace_spans_matchmaking_the_ledger_and_the_engine(
    matchmaking_address: str, spans: InMemorySpanExporter
) -> None:
    async with grpc.aio.insecure_channel(matchmaking_address) as channel:
        stub = matchmaking_pb2_grpc.MatchmakingServiceStub(channel)
        tickets = []
        for player in PLAYERS:
            authorization = (("authorization", f"Bearer {token(player)}"),)
            created = await stub.CreateTicket(
                matchmaking_pb2.CreateTicketRequest(request_id=f"q-{player}", lobby_id="duel"),
                metadata=authorization,
            )
            tickets.append((created.ticket.ticket_id, authorization))
        first_id, first_authorization = tickets[0]
        async with asyncio.timeout(WAIT_SECONDS):
            while True:
                answer = await stub.GetTicket(
                    matchmaking_pb2.GetTicketRequest(ticket_id=first_id),
                    metadata=first_authorization,
                )
                if answer.ticket.table_id and names_in_trace(spans.get_finished_spans()):
                    break
                await asyncio.sleep(0.1)
    names = names_in_trace(spans.get_finished_spans())
    assert "/masa.matchmaking.v1.MatchmakingService/CreateTicket" in names
    assert "place table" in names
    assert "/masa.ledger.v1.LedgerService/HoldStakes" in names
    assert "/masa.table.v1.TableService/CreateTable" in names
    assert "/masa.ledger.v1.LedgerService/BindHolds" in names


def names_in_trace(finished: tuple[ReadableSpan, ...]) -> set[str]:
    """The span names of the trace that holds the first CreateTicket call, once the
    placement's span has ended in it, after the engine's CreateTable (before that: empty)."""
    creates = [span for span in finished if span.name.endswith("/CreateTicket")]
    if not creates:
        return set()
    trace_id = min(creates, key=lambda span: span.start_time or 0).context.trace_id
    names = {span.name for span in finished if span.context.trace_id == trace_id}
    return names if "place table" in names else set()
