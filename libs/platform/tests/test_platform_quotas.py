"""Per-caller quotas (masa_platform.quotas) on a real grpc.aio server: one token can hold only
its own streams and send only at its own rate, every caller together only what the server
takes, and health is never refused whatever callers do."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import grpc
import grpc.aio
import pytest
from grpc_health.v1 import health_pb2
from grpc_status import rpc_status
from masa.common.v1 import error_pb2
from masa_platform.auth import AuthPolicy, Principal, Role
from masa_platform.errors import error_info
from masa_platform.metrics import QuotaMetrics
from masa_platform.quotas import (
    CALLER_RATE,
    CALLER_STREAMS,
    PLATFORM_QUOTAS,
    PUBLIC_STREAMS_QUOTA,
    SERVER_CALLS,
    CallerQuotas,
    QuotaExceeded,
    held_to_quotas,
)
from masa_platform.server import create_server, generic_service, standard_interceptors
from masa_platform.settings import (
    PUBLIC_CALL_ROOM,
    PUBLIC_STREAMS,
    SERVICE_RPC_ROOM,
    QuotaSettings,
    ServerSettings,
    SettingsError,
    load_settings,
)
from masa_platform.testing import HealthStub, auth_settings, next_message, token
from platform_support import TEST_SERVICE, Handlers, stream_stream, unary_stream, unary_unary
from prometheus_client import CollectorRegistry

AUTH = auth_settings()
# Every identity may call the test service: the quotas, not the policy, are what is tried.
POLICY = AuthPolicy(allowed={TEST_SERVICE: frozenset(Role)})
QUOTA_EXCEEDED = error_pb2.ErrorReason.Name(error_pb2.ERROR_REASON_QUOTA_EXCEEDED).removeprefix(
    "ERROR_REASON_"
)
SERVING = health_pb2.HealthCheckResponse.SERVING
Context = grpc.aio.ServicerContext[bytes, bytes]


def bearer(subject: str, *roles: Role) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token(subject, *roles)}"),)


async def echo(request: bytes, context: Context) -> bytes:
    return request


async def hold(request: bytes, context: Context) -> AsyncIterator[bytes]:
    """A watch stream: one message, then open until the caller goes."""
    yield b"open"
    await asyncio.Event().wait()


async def chat(requests: AsyncIterator[bytes], context: Context) -> AsyncIterator[bytes]:
    async for request in requests:
        yield request


HANDLERS: Handlers = {
    "Echo": grpc.unary_unary_rpc_method_handler(echo),
    "Hold": grpc.unary_stream_rpc_method_handler(hold),
    "Chat": grpc.stream_stream_rpc_method_handler(chat),
}


class Served:
    """A started server with the standard interceptors and the given quotas."""

    def __init__(self, quotas: QuotaSettings, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.quotas = CallerQuotas(quotas, QuotaMetrics(self.registry, quotas=PLATFORM_QUOTAS))
        self.server = create_server(
            ServerSettings(grace_seconds=0.2, quotas=quotas),
            [generic_service(TEST_SERVICE, HANDLERS)],
            interceptors=standard_interceptors(AUTH, policy=POLICY, quotas=self.quotas),
        )
        self.channel: grpc.aio.Channel | None = None

    async def __aenter__(self) -> Served:
        await self.server.start()
        self.channel = grpc.aio.insecure_channel(self.server.address)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.channel is not None
        await self.channel.close()
        await self.server.stop(0)

    def hold(self, who: tuple[tuple[str, str], ...]) -> grpc.aio.UnaryStreamCall[bytes, bytes]:
        assert self.channel is not None
        return unary_stream(self.channel, "Hold")(b"", metadata=who)

    async def echo(self, who: tuple[tuple[str, str], ...]) -> bytes:
        assert self.channel is not None
        reply: bytes = await unary_unary(self.channel, "Echo")(b"hi", metadata=who)
        return reply

    async def health(self) -> int:
        assert self.channel is not None
        reply = await HealthStub(self.channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        return int(reply.status)

    def refusals(self, quota: str) -> float:
        value = self.registry.get_sample_value("masa_quota_refusals_total", {"quota": quota})
        return value or 0.0


async def refusal(call: grpc.aio.Call) -> tuple[grpc.StatusCode, str, dict[str, str]]:
    """The code, ErrorInfo reason and metadata a refused call ended with."""
    info = error_info(await rpc_status.aio.from_call(call))
    assert info is not None
    return await call.code(), info.reason, dict(info.metadata)


async def opened(call: grpc.aio.UnaryStreamCall[bytes, bytes]) -> bool:
    """Whether the stream opened (its first message came), or was refused."""
    try:
        return await call.read() == b"open"
    except grpc.aio.AioRpcError:
        return False


async def test_one_token_cannot_hold_more_streams_than_its_cap_and_others_still_get_in() -> None:
    """The finding: one player's streams past MASA_CALLER_STREAMS are refused with
    QUOTA_EXCEEDED while another player, a service and health are served as before."""
    settings = QuotaSettings(max_caller_rpcs=50, caller_streams=4, callers_tracked=100)
    async with Served(settings) as served:
        mallory, ayse = bearer("mallory"), bearer("ayse")
        streams = [served.hold(mallory) for _ in range(30)]
        results = await asyncio.gather(*(opened(call) for call in streams))
        assert sum(results) == 4
        refused = [call for call, ok in zip(streams, results, strict=True) if not ok]
        code, reason, metadata = await refusal(refused[0])
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert reason == QUOTA_EXCEEDED
        assert metadata == {"quota": CALLER_STREAMS, "limit": "4"}
        assert served.refusals(CALLER_STREAMS) == 26
        # Everyone else is served: another player's stream and call, a service, health.
        assert await opened(served.hold(ayse))
        assert await served.echo(ayse) == b"hi"
        assert await served.echo(bearer("matchmaking", Role.MATCHMAKING)) == b"hi"
        assert await served.health() == SERVING
        # A stream closed frees its place.
        streams[results.index(True)].cancel()
        await asyncio.sleep(0.2)
        assert await opened(served.hold(mallory))


async def test_services_and_admins_are_not_held_to_a_callers_quotas() -> None:
    settings = QuotaSettings(max_caller_rpcs=50, caller_streams=2, callers_tracked=100)
    async with Served(settings) as served:
        for who in (bearer("table-engine", Role.TABLE_ENGINE), bearer("ops", Role.ADMIN)):
            assert all(await asyncio.gather(*(opened(served.hold(who)) for _ in range(6))))
    assert held_to_quotas(Principal("ayse", frozenset({Role.PLAYER})))
    assert held_to_quotas(Principal("nobody", frozenset()))
    assert not held_to_quotas(Principal("ops", frozenset({Role.PLAYER, Role.ADMIN})))


async def test_callers_together_never_reach_the_limit_that_health_answers_under() -> None:
    """MASA_MAX_CALLER_RPCS is enforced by the interceptor for callers; gRPC's own limit sits
    above it with room for services, health streams and health checks, so health is SERVING
    with the server full of players, and a service still gets in."""
    settings = QuotaSettings(max_caller_rpcs=6, caller_streams=3, callers_tracked=100)
    server = ServerSettings(quotas=settings)
    assert server.grpc_concurrent_rpcs == 6 + SERVICE_RPC_ROOM + PUBLIC_STREAMS + PUBLIC_CALL_ROOM
    async with Served(settings) as served:
        players = [bearer(f"player-{n}") for n in range(3)]
        calls = [served.hold(who) for who in players for _ in range(3)]
        results = await asyncio.gather(*(opened(call) for call in calls))
        assert sum(results) == 6
        code, reason, metadata = await refusal(calls[results.index(False)])
        assert (code, reason) == (grpc.StatusCode.RESOURCE_EXHAUSTED, QUOTA_EXCEEDED)
        assert metadata == {"quota": SERVER_CALLS, "limit": "6"}
        assert await served.health() == SERVING
        assert await opened(served.hold(bearer("ops", Role.ADMIN)))
        with pytest.raises(grpc.aio.AioRpcError) as full:
            await served.echo(bearer("late-player"))
        assert full.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


async def test_health_and_reflection_streams_have_a_cap_of_their_own() -> None:
    """Health needs no token: its Watch streams are capped apart from the callers', and a
    health check still answers with every one of them open."""
    async with Served(QuotaSettings()) as served:
        assert served.channel is not None
        stub = HealthStub(served.channel)
        watches = [stub.Watch(health_pb2.HealthCheckRequest()) for _ in range(PUBLIC_STREAMS)]
        replies = [await next_message(watch, health_pb2.HealthCheckResponse) for watch in watches]
        assert all(reply.status == SERVING for reply in replies)
        extra = stub.Watch(health_pb2.HealthCheckRequest())
        with pytest.raises(grpc.aio.AioRpcError):
            await extra.read()
        code, reason, metadata = await refusal(extra)
        assert (code, reason) == (grpc.StatusCode.RESOURCE_EXHAUSTED, QUOTA_EXCEEDED)
        assert metadata == {"quota": PUBLIC_STREAMS_QUOTA, "limit": str(PUBLIC_STREAMS)}
        assert await served.health() == SERVING
        assert await served.echo(bearer("ayse")) == b"hi"
        for watch in watches:
            watch.cancel()


async def test_a_burst_past_the_rate_is_refused_with_a_retry_hint_and_served_after() -> None:
    # A token a second: the burst is spent long before one comes back, however loaded the
    # machine that runs the test.
    settings = QuotaSettings(caller_rate=1.0, caller_burst=5)
    async with Served(settings) as served:
        ayse = bearer("ayse")
        assert [await served.echo(ayse) for _ in range(5)] == [b"hi"] * 5
        assert served.channel is not None
        rpc = unary_unary(served.channel, "Echo")(b"hi", metadata=ayse)
        with pytest.raises(grpc.aio.AioRpcError):
            await rpc
        code, reason, metadata = await refusal(rpc)
        assert (code, reason) == (grpc.StatusCode.RESOURCE_EXHAUSTED, QUOTA_EXCEEDED)
        assert metadata["quota"] == CALLER_RATE
        assert (metadata["limit"], metadata["burst"]) == ("1", "5")
        retry_after = float(metadata["retry_after_seconds"])
        assert 0 < retry_after <= 1.0
        # Others are not slowed by ayse's burst; ayse is served once the hint has passed.
        assert await served.echo(bearer("bora")) == b"hi"
        await asyncio.sleep(retry_after + 0.01)
        assert await served.echo(ayse) == b"hi"
        assert served.refusals(CALLER_RATE) == 1


async def test_messages_inside_a_bidi_stream_are_paced_not_refused() -> None:
    """A move over SubmitActions costs what a SubmitAction call does: each message takes a
    token; past the burst the stream is read at the rate, and every message is answered."""
    settings = QuotaSettings(caller_rate=50.0, caller_burst=10)
    async with Served(settings) as served:
        assert served.channel is not None
        call = stream_stream(served.channel, "Chat")(metadata=bearer("ayse"))
        started = time.monotonic()
        for n in range(30):
            await call.write(b"%d" % n)
            assert await call.read() == b"%d" % n
        elapsed = time.monotonic() - started
        await call.done_writing()
        assert await call.code() == grpc.StatusCode.OK
        # 1 token opened the stream and 9 of the burst took 9 messages: 21 more at 50/s.
        assert elapsed >= 21 / 50 * 0.9
        assert served.refusals(CALLER_RATE) == 0


async def test_many_distinct_callers_keep_the_servers_state_within_its_cap() -> None:
    settings = QuotaSettings(max_caller_rpcs=50, caller_streams=2, callers_tracked=100)
    async with Served(settings) as served:
        tokens = [bearer(f"passer-{n}") for n in range(300)]
        for wave in range(0, 300, 50):
            answers = await asyncio.gather(*(served.echo(who) for who in tokens[wave : wave + 50]))
            assert answers == [b"hi"] * 50
            assert served.quotas.tracked <= 100
        assert served.quotas.calls == 0


def test_the_state_per_caller_stays_bounded_with_many_distinct_callers() -> None:
    """Callers with nothing in flight are dropped once their bucket refilled, or the longest
    idle first when the map is full; callers with calls in flight are always kept."""
    now = [0.0]
    settings = QuotaSettings(
        max_caller_rpcs=90, caller_streams=2, caller_rate=10.0, caller_burst=5, callers_tracked=100
    )
    quotas = CallerQuotas(settings, clock=lambda: now[0])
    busy = [quotas.admit(Principal(f"streamer-{n}", frozenset()), True) for n in range(40)]
    for n in range(10_000):
        caller = quotas.admit(Principal(f"caller-{n}", frozenset()), False)
        quotas.release(caller, False)
        assert quotas.tracked <= 100
    # Every streamer kept its state: a second stream is its last.
    for n in range(40):
        busy.append(quotas.admit(Principal(f"streamer-{n}", frozenset()), True))
        with pytest.raises(QuotaExceeded):
            quotas.admit(Principal(f"streamer-{n}", frozenset()), True)
    assert quotas.calls == 80
    # Refusals add nothing to the map.
    tracked = quotas.tracked
    for _ in range(1_000):
        with pytest.raises(QuotaExceeded):
            quotas.admit(Principal("streamer-0", frozenset()), True)
    assert quotas.tracked == tracked
    # Once idle and refilled, callers are dropped as others arrive.
    for caller in busy:
        quotas.release(caller, True)
    for n in range(200):
        # A caller's spent token is back within 0.1 s at 10 a second.
        now[0] += 0.2
        caller = quotas.admit(Principal(f"late-{n}", frozenset()), False)
        quotas.release(caller, False)
    assert quotas.tracked <= 2


def test_a_callers_stream_cap_must_stay_below_the_servers_limit() -> None:
    with pytest.raises(SettingsError, match="MASA_CALLER_STREAMS"):
        load_settings(ServerSettings, {"MASA_MAX_CALLER_RPCS": "16", "MASA_CALLER_STREAMS": "16"})
    with pytest.raises(SettingsError, match="MASA_MAX_CONCURRENT_RPCS"):
        load_settings(ServerSettings, {"MASA_MAX_CONCURRENT_RPCS": "10000"})
    with pytest.raises(SettingsError, match="MASA_CALLERS_TRACKED"):
        load_settings(ServerSettings, {"MASA_CALLERS_TRACKED": "10000"})
    with pytest.raises(SettingsError, match="MASA_CALLER_RATE"):
        load_settings(ServerSettings, {"MASA_CALLER_RATE": "0"})
    loaded = load_settings(
        ServerSettings,
        {
            "MASA_MAX_CALLER_RPCS": "500",
            "MASA_CALLER_STREAMS": "8",
            "MASA_CALLER_RATE": "12.5",
            "MASA_CALLER_BURST": "30",
            "MASA_CALLERS_TRACKED": "1000",
            "MASA_MAX_CONCURRENT_RPCS": "2000",
        },
    )
    assert loaded.quotas == QuotaSettings(500, 8, 12.5, 30, 1000)
    assert loaded.grpc_concurrent_rpcs == 2000
