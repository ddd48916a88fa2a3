from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import grpc
import grpc.aio
import pytest
from grpc_status import rpc_status
from masa_platform.errors import AnsweredBefore, IllegalMove, Overloaded, TableMoved, error_info
from masa_platform.idempotency import IdempotencyCache
from masa_platform.server import standard_interceptors
from masa_platform.testing import auth_settings, token
from masa_rules import refusals
from platform_support import PLAYERS_POLICY, TEST_SERVICE, Handlers, ServeFactory, unary_unary

AUTH = auth_settings()


def as_player(name: str, request_id: str | None = None) -> tuple[tuple[str, str], ...]:
    metadata = [("authorization", f"Bearer {token(name)}")]
    if request_id is not None:
        metadata.append(("x-request-id", request_id))
    return tuple(metadata)


class Counter:
    """A write handler with a visible effect: each run takes the next number."""

    def __init__(self, delay: float = 0.0) -> None:
        self.runs = 0
        self.delay = delay
        self._numbers = itertools.count(1)

    async def __call__(
        self, request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]
    ) -> bytes:
        self.runs += 1
        await asyncio.sleep(self.delay)
        if request == b"illegal":
            raise IllegalMove("F-30", "too few points")
        return f"{request.decode()}#{next(self._numbers)}".encode()


async def test_a_retry_with_the_same_request_id_returns_the_first_answer(
    serve: ServeFactory,
) -> None:
    counter = Counter()
    handlers: Handlers = {"Write": grpc.unary_unary_rpc_method_handler(counter)}
    async with (
        serve(handlers, interceptors=standard_interceptors(AUTH, policy=PLAYERS_POLICY)) as server,
        grpc.aio.insecure_channel(server.address) as channel,
    ):
        write = unary_unary(channel, "Write")
        first = await write(b"draw", metadata=as_player("ayse", "r1"))
        again = await write(b"draw", metadata=as_player("ayse", "r1"))
        other = await write(b"draw", metadata=as_player("ayse", "r2"))
        no_id = await write(b"draw", metadata=as_player("ayse"))
    assert first == again == b"draw#1"
    assert other == b"draw#2"
    assert no_id == b"draw#3"
    assert counter.runs == 3


async def test_an_uncached_method_runs_every_retry_and_the_others_stay_cached(
    serve: ServeFactory,
) -> None:
    """A method that keeps its request ids itself (the ledger's GrantChips) answers each retry
    on its own, to say that it is one; the cache answers the retries of the other methods."""
    grants, writes = Counter(), Counter()
    handlers: Handlers = {
        "Grant": grpc.unary_unary_rpc_method_handler(grants),
        "Write": grpc.unary_unary_rpc_method_handler(writes),
    }
    interceptors = standard_interceptors(
        AUTH, policy=PLAYERS_POLICY, uncached=[f"/{TEST_SERVICE}/Grant"]
    )
    async with (
        serve(handlers, interceptors=interceptors) as server,
        grpc.aio.insecure_channel(server.address) as channel,
    ):
        grant = unary_unary(channel, "Grant")
        write = unary_unary(channel, "Write")
        assert await grant(b"chips", metadata=as_player("ayse", "r1")) == b"chips#1"
        assert await grant(b"chips", metadata=as_player("ayse", "r1")) == b"chips#2"
        assert await write(b"draw", metadata=as_player("ayse", "r1")) == b"draw#1"
        assert await write(b"draw", metadata=as_player("ayse", "r1")) == b"draw#1"
    assert (grants.runs, writes.runs) == (2, 1)


async def test_concurrent_duplicates_wait_for_the_first_and_run_it_once(
    serve: ServeFactory,
) -> None:
    counter = Counter(delay=0.3)
    handlers: Handlers = {"Write": grpc.unary_unary_rpc_method_handler(counter)}
    async with (
        serve(handlers, interceptors=standard_interceptors(AUTH, policy=PLAYERS_POLICY)) as server,
        grpc.aio.insecure_channel(server.address) as channel,
    ):
        write = unary_unary(channel, "Write")
        replies = await asyncio.gather(
            *(write(b"take", metadata=as_player("ayse", "same")) for _ in range(5))
        )
    assert replies == [b"take#1"] * 5
    assert counter.runs == 1


async def test_the_same_request_id_of_another_player_is_another_request(
    serve: ServeFactory,
) -> None:
    counter = Counter()
    handlers: Handlers = {"Write": grpc.unary_unary_rpc_method_handler(counter)}
    async with (
        serve(handlers, interceptors=standard_interceptors(AUTH, policy=PLAYERS_POLICY)) as server,
        grpc.aio.insecure_channel(server.address) as channel,
    ):
        write = unary_unary(channel, "Write")
        assert await write(b"x", metadata=as_player("ayse", "r1")) == b"x#1"
        assert await write(b"x", metadata=as_player("mehmet", "r1")) == b"x#2"


async def test_a_refusal_is_replayed_and_a_reused_id_is_rejected(serve: ServeFactory) -> None:
    counter = Counter()
    handlers: Handlers = {"Write": grpc.unary_unary_rpc_method_handler(counter)}
    async with (
        serve(handlers, interceptors=standard_interceptors(AUTH, policy=PLAYERS_POLICY)) as server,
        grpc.aio.insecure_channel(server.address) as channel,
    ):
        write = unary_unary(channel, "Write")
        for _ in range(2):
            rpc = write(b"illegal", metadata=as_player("ayse", "r1"))
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await rpc
            assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            info = error_info(await rpc_status.aio.from_call(rpc))
            assert info is not None
            assert info.reason == "F-30"
        rpc = write(b"different", metadata=as_player("ayse", "r1"))
        with pytest.raises(grpc.aio.AioRpcError) as reused:
            await rpc
        assert reused.value.code() == grpc.StatusCode.ALREADY_EXISTS
        info = error_info(await rpc_status.aio.from_call(rpc))
        assert info is not None
        assert info.reason == "REQUEST_ID_REUSED"
    assert counter.runs == 1


@dataclass(frozen=True)
class WriteRequest:
    """Stands in for a generated request message: it has a ``request_id`` field."""

    request_id: str
    body: str

    def SerializeToString(self, deterministic: bool = False) -> bytes:
        return f"{self.request_id}|{self.body}".encode()


def parse_write(data: bytes) -> WriteRequest:
    request_id, _, body = data.decode().partition("|")
    return WriteRequest(request_id, body)


async def test_the_request_id_field_of_the_message_is_used(serve: ServeFactory) -> None:
    runs = 0

    async def write(
        request: WriteRequest, context: grpc.aio.ServicerContext[WriteRequest, bytes]
    ) -> bytes:
        nonlocal runs
        runs += 1
        return f"{request.body}#{runs}".encode()

    handler: grpc.RpcMethodHandler[WriteRequest, bytes]
    handler = grpc.unary_unary_rpc_method_handler(write, request_deserializer=parse_write)
    async with (
        serve(
            {"Write": handler}, interceptors=standard_interceptors(AUTH, policy=PLAYERS_POLICY)
        ) as server,
        grpc.aio.insecure_channel(server.address) as channel,
    ):
        call = unary_unary(channel, "Write")
        assert await call(b"r1|discard", metadata=as_player("ayse")) == b"discard#1"
        assert await call(b"r1|discard", metadata=as_player("ayse")) == b"discard#1"
        assert await call(b"|discard", metadata=as_player("ayse")) == b"discard#2"
    assert runs == 2


async def test_transient_failures_are_forgotten_so_a_retry_runs_again() -> None:
    cache = IdempotencyCache()
    attempts = 0

    async def flaky() -> bytes:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            raise Overloaded("busy")
        return b"ok"

    with pytest.raises(Overloaded):
        await cache.run(("p", "/m", "id"), b"f", flaky)
    assert await cache.run(("p", "/m", "id"), b"f", flaky) == b"ok"
    assert attempts == 2


async def test_a_service_domains_refusal_is_kept_as_its_kind_says_and_an_outage_is_not() -> None:
    """A ledger's or matchmaking's refusal (a masa_rules DomainError) is final like a platform
    one: NOT_FOUND is replayed to a retry; UNAVAILABLE is forgotten, so the retry runs."""
    cache = IdempotencyCache()
    runs = 0

    async def missing() -> bytes:
        nonlocal runs
        runs += 1
        raise refusals.NotFound("no hold 'h1'", reason="HOLD_NOT_FOUND")

    with pytest.raises(refusals.NotFound):
        await cache.run(("p", "/m", "gone"), b"f", missing)
    with pytest.raises(AnsweredBefore) as again:
        await cache.run(("p", "/m", "gone"), b"f", missing)
    assert again.value.status.code == grpc.StatusCode.NOT_FOUND
    assert runs == 1

    async def away() -> bytes:
        nonlocal runs
        runs += 1
        if runs == 2:
            raise refusals.Unavailable("the database does not answer")
        return b"ok"

    with pytest.raises(refusals.Unavailable):
        await cache.run(("p", "/m", "later"), b"f", away)
    assert await cache.run(("p", "/m", "later"), b"f", away) == b"ok"


async def test_table_moved_is_not_replayed_so_a_retry_reaches_the_table_once_it_is_here() -> None:
    """Issue 12: while a table moves, a node may point elsewhere; once it serves the table, a
    retry with the same request id must run, not replay the old pointer."""
    cache = IdempotencyCache()
    here = False

    async def submit() -> bytes:
        if not here:
            raise TableMoved("t1", "127.0.0.1:1")
        return b"applied"

    with pytest.raises(TableMoved):
        await cache.run(("p", "/m", "id"), b"f", submit)
    here = True
    assert await cache.run(("p", "/m", "id"), b"f", submit) == b"applied"
    assert await cache.run(("p", "/m", "id"), b"f", submit) == b"applied"


async def test_entries_expire_after_the_ttl_and_the_cache_is_bounded() -> None:
    now = [0.0]
    cache = IdempotencyCache(max_entries=2, ttl_seconds=10, clock=lambda: now[0])

    async def answer() -> bytes:
        return b"a"

    for request_id in ("1", "2", "3"):
        await cache.run(("p", "/m", request_id), b"f", answer)
    assert len(cache) == 2
    now[0] = 11.0
    assert len(cache) == 0
    assert cache.size_bytes == 0


async def test_the_cache_is_bounded_by_bytes_and_drops_the_oldest_answers_first() -> None:
    cache = IdempotencyCache(max_entries=1_000, max_bytes=100_000)

    def answer(size: int) -> Callable[[], Awaitable[bytes]]:
        async def call() -> bytes:
            return b"x" * size

        return call

    for number in range(50):
        await cache.run(("p", "/m", f"r{number}"), b"f", answer(10_000))
    assert cache.size_bytes <= 100_000
    assert 5 <= len(cache) < 10
    # The newest answer is still replayed; the oldest is gone, so its id runs again.
    assert await cache.run(("p", "/m", "r49"), b"f", answer(1)) == b"x" * 10_000
    assert await cache.run(("p", "/m", "r0"), b"f", answer(1)) == b"x"


async def test_a_refusal_is_kept_as_its_status_not_as_the_exception() -> None:
    """What a retry needs is the status; the exception would keep the call's frames."""
    cache = IdempotencyCache()

    async def refuse() -> bytes:
        raise IllegalMove("F-30", "too few points")

    with pytest.raises(IllegalMove):
        await cache.run(("p", "/m", "r1"), b"f", refuse)
    with pytest.raises(AnsweredBefore) as again:
        await cache.run(("p", "/m", "r1"), b"f", refuse)
    assert again.value.__context__ is None and again.value.__cause__ is None
    assert again.value.status.code == grpc.StatusCode.FAILED_PRECONDITION
    assert again.value.status.details == "too few points"
    assert cache.size_bytes < 1_000


@pytest.mark.parametrize("request_id", ["a b", "x" * 129, "é", "line\r\nbreak", "nul\x00"])
async def test_a_request_id_must_be_short_printable_ascii(
    serve: ServeFactory, request_id: str
) -> None:
    runs = 0

    async def write(
        request: WriteRequest, context: grpc.aio.ServicerContext[WriteRequest, bytes]
    ) -> bytes:
        nonlocal runs
        runs += 1
        return b"ok"

    handler: grpc.RpcMethodHandler[WriteRequest, bytes]
    handler = grpc.unary_unary_rpc_method_handler(write, request_deserializer=parse_write)
    async with (
        serve(
            {"Write": handler}, interceptors=standard_interceptors(AUTH, policy=PLAYERS_POLICY)
        ) as server,
        grpc.aio.insecure_channel(server.address) as channel,
    ):
        call = unary_unary(channel, "Write")
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await call(f"{request_id}|discard".encode(), metadata=as_player("ayse"))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert len(refused.value.details() or "") < 200
    assert runs == 0
