"""CreateTable with a client-assigned id (AIP-133), retried creates, and chip tables (P-30)."""

from __future__ import annotations

import asyncio

import grpc
import grpc.aio
import pytest
from engine_support import (
    SERVICE,
    elevator_config,
    game_finished,
    log_entries,
    running_node,
    seat,
    settings,
    table_stub,
    wait_until,
)
from grpc_status import rpc_status
from masa.common.v1 import chips_pb2, game_pb2
from masa.table.v1 import table_pb2
from masa_platform.errors import error_info
from masa_platform.testing import NatsServer


async def _refusal(
    call: grpc.aio.UnaryUnaryCall[table_pb2.CreateTableRequest, table_pb2.CreateTableResponse],
) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call
    info = error_info(await rpc_status.aio.from_call(call))
    assert info is not None
    return refused.value.code(), info.reason


def _chip_config(**changes: object) -> game_pb2.TableConfig:
    config = elevator_config([seat(0, "ayse"), seat(1, "bora"), seat(2, "cem")])
    config.mode = game_pb2.MODE_SINGLES
    config.stake = 100
    for assignment in config.seats:
        assignment.hold_id = f"hold-{assignment.player_id}"
    for name, value in changes.items():
        if isinstance(value, chips_pb2.PayoutRule):
            config.payout.CopyFrom(value)
        else:
            setattr(config, name, value)
    return config


async def test_a_retried_create_makes_no_second_table_even_after_a_restart(
    nats_server: NatsServer,
) -> None:
    node_settings = settings(nats_server, "create-retry")
    config = elevator_config([seat(0, "ayse"), seat(1), seat(2)])
    request = table_pb2.CreateTableRequest(
        request_id="create-1", table_id="lobby-7-t1", config=config
    )
    async with running_node(node_settings) as node, table_stub(node.address) as stub:
        first = await stub.CreateTable(request, metadata=SERVICE)
        assert first.table.table_id == "lobby-7-t1"
        again = await stub.CreateTable(request, metadata=SERVICE)
        assert again.table == first.table
        other = table_pb2.CreateTableRequest(
            request_id="create-2", table_id="lobby-7-t1", config=config
        )
        assert await _refusal(stub.CreateTable(other, metadata=SERVICE)) == (
            grpc.StatusCode.ALREADY_EXISTS,
            "TABLE_EXISTS",
        )
        for n, bad in enumerate(("has.dot", "x" * 65, "a b", "ü")):
            wrong = table_pb2.CreateTableRequest(request_id=f"bad-{n}", table_id=bad, config=config)
            code, _ = await _refusal(stub.CreateTable(wrong, metadata=SERVICE))
            assert code == grpc.StatusCode.INVALID_ARGUMENT
    # A new process of the same node knows the table from its snapshot.
    async with running_node(node_settings) as node, table_stub(node.address) as stub:
        retried = await stub.CreateTable(request, metadata=SERVICE)
        assert retried.table.table_id == "lobby-7-t1"
        assert retried.table.create_time == first.table.create_time
    created = [
        e
        for e in await log_entries(nats_server, "lobby-7-t1")
        if e.WhichOneof("input") == "table_created"
    ]
    assert [e.table_created.request_id for e in created] == ["create-1"]


async def test_racing_creates_of_one_table_id_make_one_table(nats_server: NatsServer) -> None:
    """A retry sent while its original is still being served (a client that timed out) gets
    the original's table; the log holds one creation."""
    config = elevator_config([seat(0, "ayse"), seat(1), seat(2)])
    request = table_pb2.CreateTableRequest(request_id="race-1", table_id="race-t1", config=config)
    async with (
        running_node(settings(nats_server, "create-race")) as node,
        table_stub(node.address) as stub,
    ):
        answers = await asyncio.gather(
            *(stub.CreateTable(request, metadata=SERVICE) for _ in range(4))
        )
    assert len({answer.table.SerializeToString() for answer in answers}) == 1
    created = [
        e
        for e in await log_entries(nats_server, "race-t1")
        if e.WhichOneof("input") == "table_created"
    ]
    assert [e.table_created.request_id for e in created] == ["race-1"]


async def test_a_node_at_capacity_refuses_a_new_table_but_answers_a_retry(
    nats_server: NatsServer,
) -> None:
    """MASA_MAX_TABLES is enforced: RESOURCE_EXHAUSTED with NODE_AT_CAPACITY, nothing
    written; a retry of a table the node runs still gets its table."""
    config = elevator_config([seat(0, "ayse"), seat(1), seat(2)])
    async with (
        running_node(settings(nats_server, "create-full", max_tables=2)) as node,
        table_stub(node.address) as stub,
    ):
        first = table_pb2.CreateTableRequest(request_id="full-1", table_id="full-t1", config=config)
        await stub.CreateTable(first, metadata=SERVICE)
        await stub.CreateTable(
            table_pb2.CreateTableRequest(request_id="full-2", table_id="full-t2", config=config),
            metadata=SERVICE,
        )
        third = table_pb2.CreateTableRequest(request_id="full-3", table_id="full-t3", config=config)
        assert await _refusal(stub.CreateTable(third, metadata=SERVICE)) == (
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "NODE_AT_CAPACITY",
        )
        unnamed = table_pb2.CreateTableRequest(request_id="full-4", config=config)
        code, _ = await _refusal(stub.CreateTable(unnamed, metadata=SERVICE))
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
        again = await stub.CreateTable(first, metadata=SERVICE)
        assert again.table.table_id == "full-t1"
    assert await log_entries(nats_server, "full-t3") == []


@pytest.mark.parametrize(
    ("changes", "rule"),
    [
        ({"mode": game_pb2.MODE_TRAINING}, "P-1"),
        ({"payout": chips_pb2.PayoutRule(rake_basis_points=10_001)}, "P-30"),
        ({"payout": chips_pb2.PayoutRule(place_shares=[5000, 4000])}, "P-30"),
        ({"payout": chips_pb2.PayoutRule(place_shares=[3000, 7000])}, "P-30"),
        ({"payout": chips_pb2.PayoutRule(place_shares=[4000, 3000, 2000, 1000])}, "P-30"),
        ({"stake": -1}, "P-30"),
    ],
    ids=[
        "training",
        "rake",
        "short-shares",
        "growing-shares",
        "more-places-than-seats",
        "negative",
    ],
)
async def test_p30_a_chip_table_the_rules_refuse_is_a_bad_request(
    nats_server: NatsServer, changes: dict[str, object], rule: str
) -> None:
    async with (
        running_node(settings(nats_server, f"chips-{rule}")) as node,
        table_stub(node.address) as stub,
    ):
        request = table_pb2.CreateTableRequest(request_id="c", config=_chip_config(**changes))
        assert await _refusal(stub.CreateTable(request, metadata=SERVICE)) == (
            grpc.StatusCode.INVALID_ARGUMENT,
            rule,
        )


async def test_p30_every_human_seat_of_a_chip_table_carries_its_own_hold(
    nats_server: NatsServer,
) -> None:
    async with (
        running_node(settings(nats_server, "holds")) as node,
        table_stub(node.address) as stub,
    ):
        missing = _chip_config()
        missing.seats[1].hold_id = ""
        shared = _chip_config()
        shared.seats[1].hold_id = "hold-ayse"
        free = elevator_config([seat(0, "ayse"), seat(1), seat(2)])
        free.seats[0].hold_id = "hold-ayse"
        bot = elevator_config([seat(0, "ayse"), seat(1), seat(2)])
        bot.seats[2].hold_id = "hold-bot"
        for n, config in enumerate((missing, shared, free, bot)):
            request = table_pb2.CreateTableRequest(request_id=f"c{n}", config=config)
            assert await _refusal(stub.CreateTable(request, metadata=SERVICE)) == (
                grpc.StatusCode.INVALID_ARGUMENT,
                "P-30",
            )


async def test_P13_a_chip_table_with_a_bot_seat_is_refused_and_not_created(
    nats_server: NatsServer,
) -> None:
    """Bots never take a seat at a chip table: refused before the ledger is asked or the log
    written, whatever the bot's level (P-13)."""
    async with (
        running_node(settings(nats_server, "chips-bots")) as node,
        table_stub(node.address) as stub,
    ):
        config = _chip_config()
        config.seats[2].CopyFrom(seat(2))
        request = table_pb2.CreateTableRequest(request_id="b", table_id="bots-1", config=config)
        assert await _refusal(stub.CreateTable(request, metadata=SERVICE)) == (
            grpc.StatusCode.INVALID_ARGUMENT,
            "P-13",
        )
        assert await log_entries(nats_server, "bots-1") == []


async def test_p30_without_a_ledger_a_chip_table_is_unavailable_and_not_created(
    nats_server: NatsServer,
) -> None:
    async with (
        running_node(settings(nats_server, "no-ledger")) as node,
        table_stub(node.address) as stub,
    ):
        request = table_pb2.CreateTableRequest(
            request_id="c", table_id="chips-1", config=_chip_config()
        )
        assert await _refusal(stub.CreateTable(request, metadata=SERVICE)) == (
            grpc.StatusCode.UNAVAILABLE,
            "UNAVAILABLE",
        )
        assert await log_entries(nats_server, "chips-1") == []


async def test_p30_the_payout_rule_is_copied_into_game_finished(nats_server: NatsServer) -> None:
    rule = chips_pb2.PayoutRule(rake_basis_points=250, place_shares=[7000, 3000])
    config = elevator_config([seat(0), seat(1), seat(2)])
    config.payout.CopyFrom(rule)
    async with (
        running_node(settings(nats_server, "payout")) as node,
        table_stub(node.address) as stub,
    ):
        created = await stub.CreateTable(
            table_pb2.CreateTableRequest(request_id="p", config=config), metadata=SERVICE
        )
        assert created.table.config.payout == rule
        table_id = created.table.table_id

        async def finished() -> bool:
            return await game_finished(nats_server, table_id) is not None

        await wait_until(finished, timeout=60, what="the bots' game to finish")
    result = await game_finished(nats_server, table_id)
    assert result is not None
    assert result.payout == rule
