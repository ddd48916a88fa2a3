"""Hostile input at the edge (architecture.md, P-2): every id, string, list and option is checked
against a documented limit before anything is converted or written; a refusal is
INVALID_ARGUMENT (or RESOURCE_EXHAUSTED past the request size), quotes no more than a short
prefix, and leaves no log entry, no lease and no index entry behind."""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable

import grpc
import grpc.aio
import pytest
from engine_support import (
    bus_client,
    create_table,
    elevator_config,
    fiftyone_config,
    get_view,
    metadata,
    running_node,
    seat,
    settings,
    table_stub,
)
from google.protobuf import duration_pb2
from masa.common.v1 import card_pb2, game_pb2, meld_pb2
from masa.table.v1 import action_pb2, table_pb2, table_pb2_grpc
from masa_platform.bus import KvBucket
from masa_platform.settings import SettingsError, load_settings
from masa_platform.testing import NatsServer
from masa_rules.table_config import DEFAULT_TURN_SECONDS, MAX_TURN_SECONDS, MIN_TURN_SECONDS
from masa_table_engine.adapters.jetstream import INDEX_BUCKET, LEASE_BUCKET, STREAM
from masa_table_engine.settings import EngineSettings

PLAYERS = ("ayse", "bora", "cem")
# What an error message may take at most: a short prefix of the input, never the input.
SHORT = 300


def _config(**changes: object) -> game_pb2.TableConfig:
    config = elevator_config([seat(i, p) for i, p in enumerate(PLAYERS)])
    for name, value in changes.items():
        setattr(config, name, value)
    return config


def _hostile_configs() -> dict[str, game_pb2.TableConfig]:
    long_name = elevator_config([seat(0, "ayse"), seat(1), seat(2)])
    long_name.seats[0].display_name = "☃" * 33
    control = elevator_config([seat(0, "ayse"), seat(1), seat(2)])
    control.seats[0].display_name = "ayse\u202e"
    player = elevator_config([seat(0, "ayse"), seat(1), seat(2)])
    player.seats[0].player_id = "a b"
    hold = elevator_config([seat(0, "ayse"), seat(1), seat(2)])
    hold.seats[0].hold_id = "h" * 200
    too_long_turn = _config()
    too_long_turn.turn_time.CopyFrom(duration_pb2.Duration(seconds=315_576_000_000))
    negative_turn = _config()
    negative_turn.turn_time.CopyFrom(duration_pb2.Duration(seconds=-5))
    endless = fiftyone_config("classic", [seat(s) for s in range(4)], hands=2_147_483_647)
    decks = _config()
    decks.options.elevator.decks = 7
    seven = elevator_config([seat(s) for s in range(7)])
    return {
        "display_name": long_name,
        "control_characters": control,
        "player_id": player,
        "hold_id": hold,
        "lobby_id": _config(lobby_id="lobby\r\nx"),
        "stake": _config(stake=10**15),
        "turn_time": too_long_turn,
        "negative_turn_time": negative_turn,
        "hands_per_game": endless,
        "decks": decks,
        "seats": seven,
    }


async def _written(nats: NatsServer) -> tuple[int, set[str], set[str]]:
    """What creations leave on the bus: log subjects, leases and index entries."""
    client = await bus_client(nats)
    try:
        js = client.jetstream()
        info = await js.stream_info(STREAM, subjects_filter="masa.table.v1.*.log")
        leases = await (await KvBucket.open(client, LEASE_BUCKET)).keys()
        index = await (await KvBucket.open(client, INDEX_BUCKET)).keys()
        return len(info.state.subjects or {}), set(leases), set(index)
    finally:
        await client.close()


async def test_create_table_refuses_every_field_beyond_its_limit_and_writes_nothing(
    nats_server: NatsServer,
) -> None:
    async with running_node(settings(nats_server, "limits-create")) as node:
        before = await _written(nats_server)
        async with table_stub(node.address) as stub:
            for name, config in _hostile_configs().items():
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await create_table(stub, config)
                assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, name
                assert len(refused.value.details() or "") < SHORT, name
        assert await _written(nats_server) == before


@pytest.mark.parametrize(
    ("field", "size"),
    [("display_name", 1_200_000), ("lobby_id", 3_000_000), ("hold_id", 500_000)],
)
async def test_a_create_table_request_over_the_size_limit_is_refused_before_decoding(
    nats_server: NatsServer, field: str, size: int
) -> None:
    config = elevator_config([seat(0, "ayse"), seat(1), seat(2)])
    if field == "lobby_id":
        config.lobby_id = "x" * size
    else:
        setattr(config.seats[0], field, "x" * size)
    async with running_node(settings(nats_server, "limits-size")) as node:
        before = await _written(nats_server)
        async with table_stub(node.address) as stub:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await create_table(stub, config)
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert await _written(nats_server) == before


HOSTILE_IDS = [">", "*", "a b", ".", "tablé", "a\x00b", "a\r\nb", "x" * 65, "x" * 60_000]


@pytest.mark.parametrize("table_id", HOSTILE_IDS, ids=lambda v: repr(v[:8]))
async def test_hostile_table_ids_are_invalid_argument_and_never_echoed_whole(
    nats_server: NatsServer, table_id: str
) -> None:
    async with (
        running_node(settings(nats_server, "limits-ids")) as node,
        table_stub(node.address) as stub,
    ):
        player = metadata("ayse")
        calls: list[Awaitable[object]] = [
            stub.GetTable(table_pb2.GetTableRequest(table_id=table_id), metadata=player),
            stub.SubmitAction(
                table_pb2.SubmitActionRequest(
                    request_id="r1",
                    table_id=table_id,
                    action=action_pb2.Action(pass_turn=action_pb2.Pass()),
                ),
                metadata=player,
            ),
            stub.ResumeControl(
                table_pb2.ResumeControlRequest(request_id="r2", table_id=table_id),
                metadata=player,
            ),
        ]
        for call in calls:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await call
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert len(refused.value.details() or "") < SHORT
        watch = stub.WatchTable(table_pb2.WatchTableRequest(table_id=table_id), metadata=player)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await watch.read()
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_a_one_megabyte_table_id_is_refused_before_it_is_decoded(
    nats_server: NatsServer,
) -> None:
    async with (
        running_node(settings(nats_server, "limits-big-id")) as node,
        table_stub(node.address) as stub,
    ):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.GetTable(
                table_pb2.GetTableRequest(table_id="x" * 1_000_000), metadata=metadata("ayse")
            )
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


async def test_malformed_protobuf_bytes_are_invalid_argument(nats_server: NatsServer) -> None:
    async with (
        running_node(settings(nats_server, "limits-bytes")) as node,
        grpc.aio.insecure_channel(node.address) as channel,
    ):
        submit: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes]
        submit = channel.unary_unary("/masa.table.v1.TableService/SubmitAction")
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await submit(b"\x0a\xff\xff\xff\x0fnot a message", metadata=metadata("ayse"))
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def _meld_of(cards: int) -> action_pb2.Action:
    card = card_pb2.PlacedCard(
        card=card_pb2.Card(rank=card_pb2.RANK_SEVEN, suit=card_pb2.SUIT_HEARTS)
    )
    return action_pb2.Action(
        open=action_pb2.Open(melds=[meld_pb2.ProposedMeld(cards=[card] * cards)])
    )


async def _submit(
    stub: table_pb2_grpc.TableServiceAsyncStub, table_id: str, action: action_pb2.Action
) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stub.SubmitAction(
            table_pb2.SubmitActionRequest(
                request_id=uuid.uuid4().hex, table_id=table_id, action=action
            ),
            metadata=metadata("ayse"),
        )
    return refused.value


async def test_an_action_naming_more_cards_than_the_hand_is_refused_before_conversion(
    nats_server: NatsServer,
) -> None:
    """F-10: no 51 action names more than the seat's hand (and the card a take brings)."""
    config = fiftyone_config("salon", [seat(0, "ayse"), seat(1), seat(2), seat(3)])
    async with (
        running_node(settings(nats_server, "limits-cards")) as node,
        table_stub(node.address) as stub,
    ):
        table_id = await create_table(stub, config)
        before = (await get_view(stub, table_id, "ayse")).seat_view.table.table.sequence
        # 500,000 cards in one meld (the 3-4 MB action): gRPC refuses it undecoded.
        huge = await _submit(stub, table_id, _meld_of(500_000))
        assert huge.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        # Within the size limit, 5,000 cards: counted and refused before any is converted.
        started = time.perf_counter()
        many = await _submit(stub, table_id, _meld_of(5_000))
        assert time.perf_counter() - started < 1.0
        assert many.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "at most" in (many.details() or "")
        melds = action_pb2.Action(
            lay_down=action_pb2.LayDown(melds=[meld_pb2.ProposedMeld()] * 2_000)
        )
        assert (await _submit(stub, table_id, melds)).code() == grpc.StatusCode.INVALID_ARGUMENT
        after = (await get_view(stub, table_id, "ayse")).seat_view.table.table.sequence
        assert after == before


async def test_a_create_that_fails_after_the_lease_leaves_no_lease_and_no_index(
    nats_server: NatsServer,
) -> None:
    """A configuration the rules refuse (P-2: Elevator seats 3 to 6; here two) is refused by
    the pure accept before the lease is taken or anything is written."""
    async with running_node(settings(nats_server, "limits-rules")) as node:
        before = await _written(nats_server)
        async with table_stub(node.address) as stub:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await create_table(stub, elevator_config([seat(0, "ayse"), seat(1)]))
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert await _written(nats_server) == before
            # The node is fine and creates the next table.
            await create_table(stub, elevator_config([seat(0, "ayse"), seat(1), seat(2)]))
        assert (await _written(nats_server))[0] == before[0] + 1


def test_p10_the_default_turn_time_setting_keeps_a_table_turn_times_bounds() -> None:
    """MASA_TURN_SECONDS is the turn time of a table whose lobby sets none, so it is bound as a
    table's own (masa_rules.table_config): a node never makes tables its own check refuses."""
    assert load_settings(EngineSettings, {}).turn_seconds == DEFAULT_TURN_SECONDS
    for good in (str(MIN_TURN_SECONDS), str(MAX_TURN_SECONDS)):
        load_settings(EngineSettings, {"MASA_TURN_SECONDS": good})
    for bad in ("0", "0.05", "3601", "-1"):
        with pytest.raises(SettingsError, match="MASA_TURN_SECONDS"):
            load_settings(EngineSettings, {"MASA_TURN_SECONDS": bad})
