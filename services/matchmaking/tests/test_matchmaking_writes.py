"""Ticket writes through the shared ack inbox (masa_platform.acks): a ticket is answered only once
JetStream stored it, and a request id answers with its ticket after a crash and restart (P-1,
P-2). The inbox's own behaviour (stale revisions, bounds, late answers) is tested in
libs/platform/tests/test_platform_acks.py."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from instances import start_instance
from masa_matchmaking.app.tickets import NewTicket
from masa_matchmaking.domain.errors import Refused
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
