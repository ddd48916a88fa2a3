"""Crash recovery (architecture.md): kill -9 the engine process mid-hand, start it again, and the
game finishes with every accepted entry kept; watchers resume from their last sequence."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from engine_support import (
    EngineProcess,
    create_table,
    elevator_config,
    engine_nats_env,
    fiftyone_config,
    game_finished,
    log_entries,
    metadata,
    seat,
    serving,
    table_stub,
    wait_until,
)
from engine_support import (
    get_view as get,
)
from masa.common.v1 import game_pb2
from masa.table.v1 import table_pb2
from masa_platform.testing import NatsServer, free_port
from masa_rules.elevator import legal_actions
from masa_wire.elevator import action_to_proto, state_from_seat_view


@pytest.fixture
def engine(nats_server: NatsServer, tmp_path: Path) -> Iterator[EngineProcess]:
    port = free_port()
    env = {
        **os.environ,
        **engine_nats_env(nats_server),
        "MASA_GRPC_PORT": str(port),
        "MASA_NODE_ID": "crashy",
        "MASA_BOT_DELAY_SECONDS": "0.03",
        "MASA_SNAPSHOT_EVERY": "7",
        "MASA_LOG_LEVEL": "WARNING",
    }
    process = EngineProcess(env, tmp_path / "engine.log")
    yield process
    process.stop()


def _crash_table(game: str) -> game_pb2.TableConfig:
    seats = [seat(0, "ayse"), seat(1), seat(2), seat(3)]
    if game == "elevator":
        return elevator_config(seats, turn_seconds=0.2)
    return fiftyone_config("salon", seats, turn_seconds=0.2)


@pytest.mark.parametrize("game", ["elevator", "fiftyone"])
async def test_kill_9_mid_hand_then_restart_resumes_and_finishes_with_nothing_lost(
    nats_server: NatsServer, engine: EngineProcess, game: str
) -> None:
    address = f"127.0.0.1:{engine.env['MASA_GRPC_PORT']}"
    engine.start()
    # A process of its own: on a loaded machine its imports alone can take many seconds.
    await wait_until(lambda: serving(address), timeout=60, what="the engine to serve")
    async with table_stub(address) as stub:
        table_id = await create_table(stub, _crash_table(game))
        seen: dict[int, table_pb2.WatchTableResponse] = {}
        watch = stub.WatchTable(
            table_pb2.WatchTableRequest(table_id=table_id), metadata=metadata("ayse")
        )
        async for message in watch:
            if message.WhichOneof("payload") == "update":
                seen[message.update.sequence] = message
                if message.update.sequence >= 12:
                    break
        watch.cancel()
    engine.kill()
    before = await log_entries(nats_server, table_id)
    assert len(before) >= 12
    assert await game_finished(nats_server, table_id) is None

    engine.start()
    await wait_until(lambda: serving(address), what="the restarted engine to serve")
    async with table_stub(address) as stub:
        last = max(seen)
        resumed = stub.WatchTable(
            table_pb2.WatchTableRequest(table_id=table_id, after_sequence=last),
            metadata=metadata("ayse"),
        )
        sequences = []
        async for message in resumed:
            sequences.append(message.update.sequence)
        # Every update after the last one seen arrives, in order, up to the end of the game.
        assert sequences == list(range(last + 1, last + 1 + len(sequences)))

    # Watchers hear of the last entry as soon as it is in the log; the result is published
    # right after it, so on a loaded machine it may come a moment later.
    async def published() -> bool:
        return await game_finished(nats_server, table_id) is not None

    await wait_until(published, what="GameFinished on the result subject")
    after = await log_entries(nats_server, table_id)
    assert [e.sequence for e in after] == list(range(1, len(after) + 1))
    # Every entry accepted before the crash is still there, unchanged.
    assert after[: len(before)] == before
    assert sequences[-1] == after[-1].sequence


async def test_a_clean_restart_resumes_tables_from_their_snapshot(
    nats_server: NatsServer, engine: EngineProcess
) -> None:
    address = f"127.0.0.1:{engine.env['MASA_GRPC_PORT']}"
    engine.env["MASA_NODE_ID"] = "graceful"
    engine.start()
    # A process of its own: on a loaded machine its imports alone can take many seconds.
    await wait_until(lambda: serving(address), timeout=60, what="the engine to serve")
    async with table_stub(address) as stub:
        table_id = await create_table(
            stub,
            elevator_config([seat(0, "ayse"), seat(1, "bora"), seat(2, "cem")], turn_seconds=30),
        )
        view = (await get(stub, table_id, "ayse")).seat_view
        turn = view.table.turn_seat
        player = ["ayse", "bora", "cem"][turn]
        mine = (await get(stub, table_id, player)).seat_view
        move = table_pb2.SubmitActionRequest(
            request_id="before-restart",
            table_id=table_id,
            expected_sequence=mine.table.table.sequence,
            action=action_to_proto(legal_actions(state_from_seat_view(mine), turn)[0]),
        )
        first = await stub.SubmitAction(move, metadata=metadata(player))
        played = (await get(stub, table_id, player)).seat_view
    engine.stop()
    engine.start()
    await wait_until(lambda: serving(address), what="the restarted engine to serve")
    async with table_stub(address) as stub:
        # A retry after the restart gets the first answer and has no second effect.
        retried = await stub.SubmitAction(move, metadata=metadata(player))
        again = (await get(stub, table_id, player)).seat_view
    assert retried.update.sequence == first.update.sequence
    assert list(again.hand) == list(played.hand)
    assert again.table.table.sequence == played.table.table.sequence
    entries = await log_entries(nats_server, table_id)
    actions = [e for e in entries if e.WhichOneof("input") == "action_applied"]
    assert [e.action_applied.request_id for e in actions] == ["before-restart"]
