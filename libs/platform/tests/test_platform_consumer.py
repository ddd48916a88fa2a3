"""The durable consumer: messages handled, retried with back-off, or set aside; never a hot loop.

The issue-19 finding this guards: one undecodable result message made matchmaking nak at once,
for ever (62% of a core, 1,667 ERROR lines a second) until someone purged it by hand.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from masa_platform import tracing
from masa_platform.bus import connect, publish
from masa_platform.bus_access import DEAD_LETTER_STREAM
from masa_platform.consumer import Backoff, DurableConsumer, Poison, SetAside
from masa_platform.direct import messages_after
from masa_platform.metrics import ConsumerMetrics
from masa_platform.testing import NatsServer
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext, api
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

USER = "tests"


@pytest.fixture
async def nc(nats_server: NatsServer) -> AsyncIterator[Client]:
    client = await connect(nats_server.url, name="consumer-test")
    yield client
    await client.drain()


async def results_stream(js: JetStreamContext, *, max_deliver: int = -1) -> tuple[str, str, str]:
    """A fresh stream and its durable consumer, made as the provisioning step would; returns
    (stream, subject prefix, durable)."""
    name = f"RESULTS_{uuid.uuid4().hex[:8]}"
    prefix = name.lower()
    await js.add_stream(api.StreamConfig(name=name, subjects=[f"{prefix}.>"], allow_direct=True))
    durable = f"d{uuid.uuid4().hex[:8]}"
    await js.add_consumer(
        name,
        config=api.ConsumerConfig(
            durable_name=durable,
            ack_policy=api.AckPolicy.EXPLICIT,
            ack_wait=30,
            max_deliver=max_deliver,
            filter_subject=f"{prefix}.>",
        ),
    )
    return name, prefix, durable


async def run_until(
    consumer: DurableConsumer, done: Callable[[], bool], seconds: float, *, then: float = 0.0
) -> None:
    """Run ``consumer`` until ``done`` holds (failing after ``seconds``), ``then`` seconds
    more, and stop it."""
    stop = asyncio.Event()
    task = asyncio.create_task(consumer.run(stop))
    try:
        async with asyncio.timeout(seconds):
            while not done():
                await asyncio.sleep(0.02)
        await asyncio.sleep(then)
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


def durable_consumer(
    js: JetStreamContext,
    handle: Callable[[Msg], Awaitable[None]],
    stream: str,
    durable: str,
    registry: CollectorRegistry,
    backoff: Backoff | None = None,
) -> DurableConsumer:
    return DurableConsumer(
        js,
        handle,
        user=USER,
        stream=stream,
        durable=durable,
        metrics=ConsumerMetrics(registry),
        backoff=backoff or Backoff(first_seconds=0.1, max_seconds=0.4),
        fetch_seconds=0.2,
    )


async def dead_letters(nc: Client, durable: str) -> list[object]:
    stored = await messages_after(nc, DEAD_LETTER_STREAM, f"masa.deadletter.v1.{USER}.{durable}")
    return list(stored)


async def test_handled_messages_are_acked_and_a_failure_comes_back_after_its_delay(
    nc: Client,
) -> None:
    js = nc.jetstream()
    stream, prefix, durable = await results_stream(js)
    for n in range(3):
        await publish(js, f"{prefix}.t{n}", f"r{n}".encode(), msg_id=f"r{n}")
    seen: list[bytes] = []
    failed_at: list[float] = []
    loop = asyncio.get_running_loop()

    async def handle(message: Msg) -> None:
        if message.data == b"r1" and not failed_at:
            failed_at.append(loop.time())
            raise RuntimeError("database busy")
        if message.data == b"r1":
            failed_at.append(loop.time())
        seen.append(message.data)

    registry = CollectorRegistry()
    consumer = durable_consumer(
        js, handle, stream, durable, registry, Backoff(first_seconds=0.5, max_seconds=1.0)
    )
    await run_until(consumer, lambda: len(seen) == 3, 10)
    assert sorted(seen) == [b"r0", b"r1", b"r2"]
    # The failed message came back after its delay, not at once.
    assert failed_at[1] - failed_at[0] >= 0.45
    info = await js.consumer_info(stream, durable)
    assert info.num_ack_pending == 0
    assert info.num_pending == 0
    sample = registry.get_sample_value
    assert sample("masa_bus_messages_total", {"consumer": durable, "outcome": "handled"}) == 3
    assert sample("masa_bus_messages_total", {"consumer": durable, "outcome": "failed"}) == 1
    assert sample("masa_bus_consumer_pending", {"consumer": durable}) == 0


async def test_a_poison_message_is_set_aside_once_with_where_it_came_from(
    nc: Client, caplog: pytest.LogCaptureFixture
) -> None:
    js = nc.jetstream()
    stream, prefix, durable = await results_stream(js)
    await publish(js, f"{prefix}.t1", b"\xff not a result", msg_id="bad-1")
    await publish(js, f"{prefix}.t2", b"good", msg_id="good-1")
    calls: list[bytes] = []

    async def handle(message: Msg) -> None:
        calls.append(message.data)
        if message.data != b"good":
            raise Poison(SetAside.UNDECODABLE, "not a TableResult")

    registry = CollectorRegistry()
    consumer = durable_consumer(js, handle, stream, durable, registry)
    with caplog.at_level(logging.WARNING):
        # A second more: long enough for a redelivery loop to show, had there been one.
        await run_until(consumer, lambda: len(calls) >= 2, 10, then=1.0)
    assert calls.count(b"\xff not a result") == 1
    (letter,) = await messages_after(nc, DEAD_LETTER_STREAM, f"masa.deadletter.v1.{USER}.{durable}")
    assert letter.data == b"\xff not a result"
    assert letter.headers["Masa-Dead-Letter-Stream"] == stream
    assert letter.headers["Masa-Dead-Letter-Subject"] == f"{prefix}.t1"
    assert letter.headers["Masa-Dead-Letter-Reason"] == "undecodable"
    assert int(letter.headers["Masa-Dead-Letter-Sequence"]) == 1
    info = await js.consumer_info(stream, durable)
    assert (info.num_ack_pending, info.num_pending) == (0, 0)
    labels = {"consumer": durable, "reason": "undecodable"}
    assert registry.get_sample_value("masa_bus_set_aside_total", labels) == 1
    assert sum(1 for record in caplog.records if record.levelno >= logging.ERROR) == 1


async def test_a_message_that_always_fails_backs_off_then_is_set_aside_at_max_deliver(
    nc: Client,
) -> None:
    js = nc.jetstream()
    stream, prefix, durable = await results_stream(js, max_deliver=4)
    await publish(js, f"{prefix}.t1", b"r1", msg_id="r1")
    tries: list[float] = []
    loop = asyncio.get_running_loop()

    async def handle(message: Msg) -> None:
        tries.append(loop.time())
        raise RuntimeError("the database is down")

    registry = CollectorRegistry()
    consumer = durable_consumer(
        js, handle, stream, durable, registry, Backoff(first_seconds=0.2, max_seconds=0.8)
    )
    letters: list[object] = []

    def done() -> bool:
        return bool(letters)

    async def watch() -> None:
        while not letters:
            letters.extend(await dead_letters(nc, durable))
            await asyncio.sleep(0.1)

    watcher = asyncio.create_task(watch())
    await run_until(consumer, done, 15)
    await watcher
    # Four deliveries, each later than the one before by the doubling delay: 0.2, 0.4, 0.8.
    assert len(tries) == 4
    gaps = [later - earlier for earlier, later in itertools.pairwise(tries)]
    assert gaps[0] >= 0.15
    assert gaps[1] >= 0.35
    assert gaps[2] >= 0.7
    labels = {"consumer": durable, "reason": "max_deliveries"}
    assert registry.get_sample_value("masa_bus_set_aside_total", labels) == 1


async def test_a_message_whose_dead_letter_cannot_be_stored_comes_back(tmp_path: Path) -> None:
    # A bus without the dead-letter stream: the letter cannot be stored, so the message must
    # not be dropped either.
    with NatsServer(tmp_path / "nats", bus=None) as server:
        client = await connect(server.url, name="no-dead-letters")
        try:
            js = client.jetstream()
            stream, prefix, durable = await results_stream(js)
            await publish(js, f"{prefix}.t1", b"bad", msg_id="bad")
            calls = 0

            async def handle(message: Msg) -> None:
                nonlocal calls
                calls += 1
                raise Poison(SetAside.UNDECODABLE, "not readable")

            consumer = durable_consumer(js, handle, stream, durable, CollectorRegistry())
            await run_until(consumer, lambda: calls >= 2, 15)
            info = await js.consumer_info(stream, durable)
            assert info.num_pending + info.num_ack_pending + info.num_redelivered >= 1
        finally:
            await client.close()


async def test_a_consumer_waits_for_its_provisioning_and_binds_once_it_exists(
    nc: Client, caplog: pytest.LogCaptureFixture
) -> None:
    js = nc.jetstream()
    name = f"LATE_{uuid.uuid4().hex[:8]}"
    prefix = name.lower()
    await js.add_stream(api.StreamConfig(name=name, subjects=[f"{prefix}.>"]))
    seen: list[bytes] = []

    async def handle(message: Msg) -> None:
        seen.append(message.data)

    consumer = durable_consumer(js, handle, name, "late", CollectorRegistry())
    stop = asyncio.Event()
    with caplog.at_level(logging.ERROR):
        task = asyncio.create_task(consumer.run(stop))
        await asyncio.sleep(2.5)
        # Not made by the service: it only waits, saying so once.
        with pytest.raises(Exception, match="not found"):
            await js.consumer_info(name, "late")
        said = [r for r in caplog.records if "masa-bus provision" in r.getMessage()]
        assert len(said) == 1
        await js.add_consumer(
            name, config=api.ConsumerConfig(durable_name="late", filter_subject=f"{prefix}.>")
        )
        await publish(js, f"{prefix}.t1", b"hello", msg_id="hello")
        async with asyncio.timeout(10):
            while not seen:
                await asyncio.sleep(0.05)
    stop.set()
    await asyncio.wait_for(task, 10)
    assert seen == [b"hello"]


async def test_a_consumed_message_continues_the_trace_of_its_publish(nc: Client) -> None:
    js = nc.jetstream()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider)
    try:
        stream, prefix, durable = await results_stream(js)
        with provider.get_tracer("test").start_as_current_span("settle game") as publisher:
            await publish(js, f"{prefix}.t1", b"r1", msg_id="traced-r1")
        handled: list[bytes] = []

        async def handle(message: Msg) -> None:
            handled.append(message.data)

        consumer = durable_consumer(js, handle, stream, durable, CollectorRegistry())
        await run_until(consumer, lambda: bool(handled), 10)
    finally:
        tracing.install(None)
    spans = [span for span in exporter.get_finished_spans() if span.name == f"consume {durable}"]
    (consumed,) = spans
    assert consumed.context.trace_id == publisher.get_span_context().trace_id
    assert consumed.parent is not None
    assert consumed.parent.span_id == publisher.get_span_context().span_id


def _inboxes(nc: Client) -> set[str]:
    """The subjects this connection listens on (its pull consumers' inboxes among them)."""
    return {sub.subject for sub in nc._subs.values()}


async def test_messages_another_consumer_pushes_into_the_inbox_are_dropped_unanswered(
    nc: Client,
) -> None:
    """Issue 19 review: a push consumer's deliver subject is not checked against permissions,
    so a user allowed to make any consumer could aim one at another service's fetch inbox.
    What arrives there from anything but the durable itself is neither handled, acked nor set
    aside (its copy would fill the dead letters), and the consumer goes on with its own."""
    js = nc.jetstream()
    stream, prefix, durable = await results_stream(js)
    other, other_prefix, _ = await results_stream(js)
    handled: list[bytes] = []

    async def handle(message: Msg) -> None:
        handled.append(message.data)

    before = _inboxes(nc)
    registry = CollectorRegistry()
    consumer = durable_consumer(js, handle, stream, durable, registry)
    stop = asyncio.Event()
    task = asyncio.create_task(consumer.run(stop))
    try:
        async with asyncio.timeout(10):
            while not (_inboxes(nc) - before):
                await asyncio.sleep(0.02)
        (inbox,) = _inboxes(nc) - before
        for n in range(20):
            await publish(js, f"{other_prefix}.t{n}", f"forged{n}".encode(), msg_id=f"f{n}")
        await js.add_consumer(
            other,
            config=api.ConsumerConfig(
                deliver_subject=inbox.removesuffix(".*").removesuffix(".>"),
                ack_policy=api.AckPolicy.EXPLICIT,
            ),
        )
        await nc.publish(inbox.removesuffix(".*"), b"plain publish, no reply")
        await publish(js, f"{prefix}.t1", b"real", msg_id="real-1")
        async with asyncio.timeout(10):
            while (
                not handled
                or (
                    registry.get_sample_value(
                        "masa_bus_messages_total", {"consumer": durable, "outcome": "foreign"}
                    )
                    or 0
                )
                < 1
            ):
                await asyncio.sleep(0.02)
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
    assert handled == [b"real"]
    assert await dead_letters(nc, durable) == []
    info = await js.consumer_info(stream, durable)
    assert (info.num_ack_pending, info.num_pending) == (0, 0)


async def test_two_consumers_setting_aside_one_message_each_keep_their_dead_letter(
    nc: Client,
) -> None:
    """The ledger and matchmaking both read every result: a result both set aside is one dead
    letter each, not one dropped as the other's duplicate."""
    js = nc.jetstream()
    stream, prefix, first = await results_stream(js)
    second = f"d{uuid.uuid4().hex[:8]}"
    await js.add_consumer(
        stream,
        config=api.ConsumerConfig(
            durable_name=second, ack_policy=api.AckPolicy.EXPLICIT, filter_subject=f"{prefix}.>"
        ),
    )
    await publish(js, f"{prefix}.t1", b"\xff", msg_id="bad")

    async def poison(message: Msg) -> None:
        raise Poison(SetAside.UNDECODABLE, "not a TableResult")

    for durable in (first, second):
        consumer = durable_consumer(js, poison, stream, durable, CollectorRegistry())
        stop = asyncio.Event()
        task = asyncio.create_task(consumer.run(stop))
        try:
            async with asyncio.timeout(10):
                while not await dead_letters(nc, durable):
                    await asyncio.sleep(0.05)
        finally:
            stop.set()
            await asyncio.wait_for(task, 10)
    assert len(await dead_letters(nc, first)) == 1
    assert len(await dead_letters(nc, second)) == 1
