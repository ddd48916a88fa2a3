"""Two table-engine nodes on one NATS: a table asked of the node that does not own it answers
TABLE_MOVED with the owner's address (architecture.md), and the SDK follows it there."""

from __future__ import annotations

import grpc
import grpc.aio
import pytest
from engine_support import (
    create_table,
    elevator_config,
    metadata,
    running_node,
    seat,
    settings,
    table_stub,
)
from masa.table.v1 import table_pb2
from masa_client.client import TableClient
from masa_platform.errors import rpc_error_info
from masa_platform.testing import NatsServer
from masa_platform.testing import token as mint


async def test_the_node_without_the_table_points_to_its_owner_and_the_sdk_follows(
    nats_server: NatsServer,
) -> None:
    async with (
        running_node(settings(nats_server, "owner")) as owner,
        running_node(settings(nats_server, "other")) as other,
    ):
        async with table_stub(owner.address) as stub:
            table_id = await create_table(
                stub, elevator_config([seat(0, "ayse"), seat(1, "bora"), seat(2, "cem")])
            )
        async with table_stub(other.address) as stub:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.GetTable(
                    table_pb2.GetTableRequest(table_id=table_id), metadata=metadata("ayse")
                )
            assert refused.value.code() is grpc.StatusCode.FAILED_PRECONDITION
            info = rpc_error_info(refused.value)
            assert info is not None
            assert info.reason == "TABLE_MOVED"
            assert info.metadata["owner_address"] == owner.address
            with pytest.raises(grpc.aio.AioRpcError) as unknown:
                await stub.GetTable(
                    table_pb2.GetTableRequest(table_id="no-such-table"), metadata=metadata("ayse")
                )
            assert unknown.value.code() is grpc.StatusCode.NOT_FOUND

        async with TableClient(other.address, mint("ayse")) as client:
            answer = await client.get_table(table_id)
        assert answer.seat_view.table.table.table_id == table_id
        assert len(answer.seat_view.hand) == 7
