"""Memory stays bounded: refused requests leave nothing behind (the issue-9 reproduction: each
refused 120 kB request kept about 2 MB, through tracebacks kept by the request_id cache and
cycles only a full garbage collection frees, which the engine makes rare)."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Iterator
from pathlib import Path

import grpc
import grpc.aio
import pytest
from engine_support import (
    SERVICE,
    EngineProcess,
    create_table,
    elevator_config,
    engine_nats_env,
    fiftyone_config,
    get_view,
    metadata,
    seat,
    serving,
    table_stub,
    wait_until,
)
from masa.common.v1 import card_pb2
from masa.table.v1 import action_pb2, table_pb2
from masa_platform.testing import NatsServer, free_port

REFUSED = 1_000
# RSS may move a little (allocator arenas, caches warming); a leak would be hundreds of MB.
MOST_GROWTH_BYTES = 24 * 1024 * 1024


@pytest.fixture
def engine(nats_server: NatsServer, tmp_path: Path) -> Iterator[EngineProcess]:
    env = {
        **os.environ,
        **engine_nats_env(nats_server),
        "MASA_GRPC_PORT": str(free_port()),
        "MASA_NODE_ID": "memory",
        "MASA_LOG_LEVEL": "ERROR",
    }
    process = EngineProcess(env, tmp_path / "engine.log")
    yield process
    process.stop()


def _big_action() -> action_pb2.Action:
    """About 50 kB: 5,000 cards in one meld (refused: no hand holds that many)."""
    card = card_pb2.PlacedCard(
        card=card_pb2.Card(rank=card_pb2.RANK_SEVEN, suit=card_pb2.SUIT_CLUBS)
    )
    meld = action_pb2.Open().melds.add()
    meld.cards.extend([card] * 5_000)
    return action_pb2.Action(open=action_pb2.Open(melds=[meld]))


async def test_a_thousand_refused_requests_leave_rss_within_a_small_bound(
    engine: EngineProcess,
) -> None:
    address = f"127.0.0.1:{engine.env['MASA_GRPC_PORT']}"
    engine.start()
    # A process of its own: on a loaded machine its imports alone can take many seconds.
    await wait_until(lambda: serving(address), timeout=60, what="the engine to serve")
    async with table_stub(address) as stub:
        table_id = await create_table(
            stub, fiftyone_config("salon", [seat(0, "ayse"), seat(1), seat(2), seat(3)])
        )
        players = ("bora", "cem", "deniz")
        humans = await create_table(
            stub, elevator_config([seat(i, p) for i, p in enumerate(players)])
        )
        view = (await get_view(stub, humans, players[0])).seat_view.table
        waiting = players[(view.turn_seat + 1) % len(players)]
        action = _big_action()
        bad_config = elevator_config([seat(0, "ayse"), seat(1), seat(2)])
        bad_config.seats[0].display_name = "☃" * 15_000

        async def refuse(number: int) -> None:
            # Each with its own request id, so that each refusal is kept for retries.
            kind = number % 3
            call: Awaitable[object]
            if kind == 0:
                call = stub.SubmitAction(
                    table_pb2.SubmitActionRequest(
                        request_id=f"big-{number}", table_id=table_id, action=action
                    ),
                    metadata=metadata("ayse"),
                )
            elif kind == 1:
                call = stub.CreateTable(
                    table_pb2.CreateTableRequest(request_id=f"bad-{number}", config=bad_config),
                    metadata=SERVICE,
                )
            else:
                # A move out of turn (E-3): judged by the engine, refused by the rules.
                call = stub.SubmitAction(
                    table_pb2.SubmitActionRequest(
                        request_id=f"early-{number}",
                        table_id=humans,
                        expected_sequence=view.table.sequence,
                        action=action_pb2.Action(pass_turn=action_pb2.Pass()),
                    ),
                    metadata=metadata(waiting),
                )
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await call
            expected = (
                grpc.StatusCode.FAILED_PRECONDITION
                if kind == 2
                else grpc.StatusCode.INVALID_ARGUMENT
            )
            assert refused.value.code() == expected

        # Warm up first: the first calls allocate what every later call reuses.
        for number in range(200):
            await refuse(number)
        before = engine.rss_bytes()
        for number in range(200, 200 + REFUSED):
            await refuse(number)
        after = engine.rss_bytes()
    growth = after - before
    print(f"RSS before {before / 2**20:.1f} MiB, after {REFUSED} refusals {after / 2**20:.1f} MiB")
    assert growth < MOST_GROWTH_BYTES, f"RSS grew by {growth / 2**20:.1f} MiB"
