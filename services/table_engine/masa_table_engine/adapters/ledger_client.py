"""The ledger's ``BindHolds`` for the stakes of a chip table (``masa.ledger.v1``)."""

from __future__ import annotations

from collections.abc import Sequence

import grpc
import grpc.aio
from grpc_status import rpc_status
from masa.ledger.v1 import ledger_pb2, ledger_pb2_grpc
from masa_platform.auth import ServiceTokens
from masa_platform.errors import error_info
from masa_rules.table_config import PayoutRule
from masa_wire.table_config import payout_to_proto

from masa_table_engine.app.stakes import StakesRefused, StakesUnavailable

__all__ = ["GrpcStakeBinder"]

# The ledger's answers that will not change on a retry: the create is refused with them.
_REFUSALS = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.ALREADY_EXISTS,
    }
)


class GrpcStakeBinder:
    def __init__(
        self,
        channel: grpc.aio.Channel,
        tokens: ServiceTokens,
        *,
        timeout_seconds: float,
    ) -> None:
        self._stub = ledger_pb2_grpc.LedgerServiceStub(channel)
        self._tokens = tokens
        self._timeout = timeout_seconds

    async def bind(
        self,
        table_id: str,
        game_no: int,
        stake: int,
        hold_ids: Sequence[str],
        payout: PayoutRule,
    ) -> None:
        call = self._stub.BindHolds(
            ledger_pb2.BindHoldsRequest(
                request_id=f"bind:{table_id}:{game_no}",
                table_id=table_id,
                game_no=game_no,
                stake=stake,
                hold_ids=list(hold_ids),
                payout=payout_to_proto(payout),
            ),
            metadata=self._tokens.metadata(),
            timeout=self._timeout,
        )
        try:
            await call
        except grpc.aio.AioRpcError as error:
            if error.code() not in _REFUSALS:
                raise StakesUnavailable(
                    f"the ledger did not bind the stakes: {error.code().name}"
                ) from None
            info = error_info(await rpc_status.aio.from_call(call))
            reason = info.reason if info is not None else error.code().name
            metadata = dict(info.metadata) if info is not None else {}
            raise StakesRefused(error.details() or reason, reason, metadata) from None
