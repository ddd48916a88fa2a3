"""The shared ack inbox (masa_platform.acks): a publish is answered with JetStream's own ack,
a repeated message id is told apart, refusals keep JetStream's codes, and every way of not
getting an answer raises the owner's ``unavailable`` error, never a NATS one."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from masa_platform.acks import (
    AckedPublisher,
    AckRefused,
    AckUnavailable,
    publish_headers,
)
from masa_platform.bus import connect
from masa_platform.testing import NatsServer
from nats.js import api


class NotThere(Exception):
    """A service's own "not reachable" error."""


async def test_an_ack_tells_a_repeated_message_id_and_a_stale_expected_sequence(
    nats_server: NatsServer,
) -> None:
    nc = await connect(nats_server.url, name="acks-test")
    stream = f"ACKS_{uuid.uuid4().hex[:8]}"
    subject, other = f"acks.{stream}.one", f"acks.{stream}.two"
    await nc.jetstream().add_stream(api.StreamConfig(name=stream, subjects=[subject, other]))
    publisher = await AckedPublisher.started(nc)
    try:
        first = await publisher.publish(subject, b"a", publish_headers(msg_id="m1"))
        again = await publisher.publish(subject, b"a", publish_headers(msg_id="m1"))
        assert (first.duplicate, again.duplicate) == (False, True)
        assert again.seq == first.seq
        with pytest.raises(AckRefused) as stale:
            await publisher.publish(
                subject, b"b", publish_headers(expected_last_subject_sequence=0)
            )
        assert stale.value.wrong_sequence
        # The fence is per subject: another subject of the stream does not move it.
        await publisher.publish(other, b"x", publish_headers(expected_last_subject_sequence=0))
        second = await publisher.publish(
            subject, b"b", publish_headers(expected_last_subject_sequence=first.seq)
        )
        with pytest.raises(AckRefused) as zombie:
            await publisher.publish(
                subject, b"zombie", publish_headers(expected_last_subject_sequence=first.seq)
            )
        assert zombie.value.wrong_sequence
        assert second.seq == first.seq + 2
        stored = await publisher.last_message(stream, subject)
        assert stored is not None and (stored.seq, stored.data) == (second.seq, b"b")
        with pytest.raises(AckUnavailable, match="no stream"):
            await publisher.publish("acks.nobody", b"x")
        assert publisher.pending == 0
    finally:
        await publisher.close()
        await nc.drain()


async def test_answers_awaited_at_once_are_bounded_and_a_silent_one_raises_the_owners_error(
    nats_server: NatsServer,
) -> None:
    nc = await connect(nats_server.url, name="acks-test")
    publisher = AckedPublisher(nc, unavailable=NotThere, timeout_seconds=0.5, max_pending=10)
    with pytest.raises(NotThere, match="not started"):
        await publisher.publish("acks.early", b"x")
    await publisher.start()
    # A responder that takes every message and never answers.
    await nc.subscribe("acks.silent.>")
    try:
        outcomes = await asyncio.gather(
            *(publisher.publish(f"acks.silent.{i}", b"x") for i in range(11)),
            return_exceptions=True,
        )
        refused = [o for o in outcomes if isinstance(o, NotThere) and "retry" in str(o)]
        late = [o for o in outcomes if isinstance(o, NotThere) and "in time" in str(o)]
        assert (len(refused), len(late)) == (1, 10)
        assert publisher.pending == 0
    finally:
        await publisher.close()
    # Closed is as not started: refused at once, not left waiting for an answer for ever.
    try:
        with pytest.raises(NotThere, match="not started"):
            await asyncio.wait_for(publisher.publish("acks.late", b"x"), 5)
    finally:
        await nc.drain()
