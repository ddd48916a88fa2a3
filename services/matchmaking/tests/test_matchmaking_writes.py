"""Ticket writes through the shared ack inbox (adapters/acks.py): a ticket is answered only once
JetStream stored it, a request id answers with its ticket after a crash and restart, a stale
revision is refused, and the answers awaited at once are bounded (P-1, P-2)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import nats
import pytest
from instances import start_instance
from masa_matchmaking.adapters.kv_store import TICKET_BUCKET, player_key
from masa_matchmaking.app.ports import Unreachable
from masa_matchmaking.app.tickets import NewTicket
from masa_matchmaking.domain.errors import Refused
from masa_platform.acks import (
    EXPECTED_LAST_SUBJECT_SEQUENCE,
    AckedPublisher,
    AckRefused,
)
from masa_platform.bus import KvBucket
from masa_platform.testing import NatsServer
from matchmaking_support import FakeEngines, FakeEvents, FakeLedger


async def test_p2_an_acknowledged_ticket_survives_a_crash_and_its_request_id_answers_after(
    nats_server: NatsServer,
) -> None:
    ledger = FakeLedger()
    player = f"crash-{uuid.uuid4().hex[:8]}"
    first = await start_instance(
        nats_server,
        name="before",
        ledger=ledger,
        engines=FakeEngines(ledger),
        events=FakeEvents(),
        run=False,
    )
    tickets = await asyncio.gather(
        *(first.desk.create(f"{player}-{i}", NewTicket(f"req-{i}", "salon")) for i in range(50))
    )
    # The process dies at once after the answers: no drain, no flush of anything pending.
    await first.close(crash=True)

    second = await start_instance(
        nats_server,
        name="after",
        ledger=ledger,
        engines=FakeEngines(ledger),
        events=FakeEvents(),
        run=False,
    )
    try:
        for i, ticket in enumerate(tickets):
            record, revision = await second.store.read(f"{player}-{i}")
            assert revision > 0
            assert record.tickets == (ticket,)
            # The retry of the same request gets the same ticket; another one is refused.
            again = await second.desk.create(f"{player}-{i}", NewTicket(f"req-{i}", "salon"))
            assert again == ticket
        with pytest.raises(Refused) as refused:
            await second.desk.create(f"{player}-0", NewTicket("another", "salon"))
        assert refused.value.reason == "TICKET_OPEN"
    finally:
        await second.close()


async def test_p1_the_ack_inbox_refuses_a_stale_revision_and_reads_what_it_stored(
    tmp_path: Path,
) -> None:
    with NatsServer(tmp_path) as server:
        nc = await nats.connect(server.url)
        publisher = await AckedPublisher.started(nc, unavailable=Unreachable)
        try:
            await KvBucket.ensure(nc.jetstream(), TICKET_BUCKET, ttl_seconds=60)
            subject = f"$KV.{TICKET_BUCKET}.{player_key('someone')}"
            stream = f"KV_{TICKET_BUCKET}"
            assert await publisher.last_message(stream, subject) is None
            first = await publisher.publish(subject, b"one", {EXPECTED_LAST_SUBJECT_SEQUENCE: "0"})
            with pytest.raises(AckRefused) as stale:
                await publisher.publish(subject, b"two", {EXPECTED_LAST_SUBJECT_SEQUENCE: "0"})
            assert stale.value.wrong_sequence
            second = await publisher.publish(
                subject, b"two", {EXPECTED_LAST_SUBJECT_SEQUENCE: str(first.seq)}
            )
            assert not first.duplicate and not second.duplicate
            stored = await publisher.last_message(stream, subject)
            assert stored is not None
            assert (stored.seq, stored.data) == (second.seq, b"two")
            with pytest.raises(Unreachable, match="no stream"):
                await publisher.publish("nobody.listens", b"x")
            assert publisher.pending == 0
        finally:
            await publisher.close()
            await nc.close()


async def test_p1_answers_awaited_at_once_are_bounded_and_a_silent_one_times_out(
    tmp_path: Path,
) -> None:
    with NatsServer(tmp_path) as server:
        nc = await nats.connect(server.url)
        # A responder that takes every message and never answers.
        await nc.subscribe("silent.>")
        publisher = AckedPublisher(nc, unavailable=Unreachable, timeout_seconds=0.5, max_pending=10)
        await publisher.start()
        try:
            outcomes = await asyncio.gather(
                *(publisher.publish(f"silent.{i}", b"x") for i in range(11)),
                return_exceptions=True,
            )
            refused = [o for o in outcomes if isinstance(o, Unreachable) and "retry" in str(o)]
            late = [o for o in outcomes if isinstance(o, Unreachable) and "in time" in str(o)]
            assert (len(refused), len(late)) == (1, 10)
            assert publisher.pending == 0
        finally:
            await publisher.close()
            await nc.close()
