"""The ledger side of placement (``masa.ledger.v1``): holding the stakes and releasing them.

Every call carries matchmaking's own token and a request_id derived from what it does, so a
retry (by this instance or one resuming its placement) moves no chip twice. Binding a hold to a
table's game is the table-engine's, and granting chips an operator's: matchmaking may do
neither.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Final

import grpc
import grpc.aio
from google.protobuf.duration_pb2 import Duration
from grpc_status import rpc_status
from masa.common.v1 import error_pb2
from masa.ledger.v1 import ledger_pb2, ledger_pb2_grpc
from masa_platform.auth import ServiceTokens
from masa_platform.errors import error_info, reason_name
from masa_wire.table_config import payout_to_proto

from masa_matchmaking.app.ports import (
    HoldBound,
    HoldRequest,
    InsufficientFunds,
    LedgerRefused,
    Unreachable,
)

__all__ = ["GrpcLedger"]

_NOT_HELD: Final = reason_name(error_pb2.ERROR_REASON_HOLD_NOT_HELD)
_INSUFFICIENT_FUNDS: Final = reason_name(error_pb2.ERROR_REASON_INSUFFICIENT_FUNDS)
# The states the ledger names for a hold a table's game took (masa.ledger.v1 StakeHold.State).
_TAKEN: Final = frozenset({"BOUND", "POSTED"})

# The ledger's answers that a retry will not change.
_REFUSALS: Final = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.ALREADY_EXISTS,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.UNAUTHENTICATED,
    }
)


class _Refusal(Exception):
    def __init__(self, code: grpc.StatusCode, reason: str, message: str, metadata: dict[str, str]):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.metadata = metadata


class GrpcLedger:
    def __init__(
        self,
        channel: grpc.aio.Channel,
        tokens: ServiceTokens,
        *,
        timeout_seconds: float,
    ) -> None:
        self._channel = channel
        self._stub = ledger_pb2_grpc.LedgerServiceStub(channel)
        self._token = tokens
        self._timeout = timeout_seconds

    async def _call(self, method: str, request: object) -> object:
        call = getattr(self._stub, method)(
            request, metadata=self._token.metadata(), timeout=self._timeout
        )
        try:
            return await call
        except grpc.aio.AioRpcError as error:
            if error.code() not in _REFUSALS:
                raise Unreachable(f"the ledger's {method}: {error.code().name}") from None
            info = error_info(await rpc_status.aio.from_call(call))
            reason = info.reason if info is not None else error.code().name
            metadata = dict(info.metadata) if info is not None else {}
            raise _Refusal(error.code(), reason, error.details() or reason, metadata) from None

    async def hold_stakes(
        self, request_id: str, holds: Sequence[HoldRequest], ttl_seconds: float
    ) -> None:
        ttl = Duration()
        ttl.FromNanoseconds(round(ttl_seconds * 1e9))
        request = ledger_pb2.HoldStakesRequest(
            request_id=request_id,
            stakes=[
                ledger_pb2.HoldStakeRequest(
                    request_id=hold.hold_id,
                    player_id=hold.player_id,
                    amount=hold.amount,
                    lobby_id=hold.lobby_id,
                    ticket_id=hold.ticket_id,
                    ttl=ttl,
                    payout=payout_to_proto(hold.payout),
                )
                for hold in holds
            ],
        )
        try:
            await self._call("HoldStakes", request)
        except _Refusal as refusal:
            if refusal.reason == _INSUFFICIENT_FUNDS:
                short = _short_players(refusal.metadata, holds)
                raise InsufficientFunds(short, refusal.message) from None
            raise LedgerRefused(refusal.reason, refusal.message) from None

    async def release_hold(self, hold_id: str, reason: str) -> None:
        request = ledger_pb2.ReleaseHoldRequest(
            request_id=f"release-{hold_id}", hold_id=hold_id, reason=reason
        )
        try:
            await self._call("ReleaseHold", request)
        except _Refusal as refusal:
            if refusal.code is grpc.StatusCode.NOT_FOUND:
                return
            # The ledger's answer for a hold that is not held any more names its state: bound
            # to a table's game, or posted since, means that table was made.
            if refusal.reason == _NOT_HELD and refusal.metadata.get("state") in _TAKEN:
                raise HoldBound(hold_id) from None
            raise LedgerRefused(refusal.reason, refusal.message) from None

    async def close(self) -> None:
        await self._channel.close()


def _short_players(metadata: dict[str, str], holds: Sequence[HoldRequest]) -> list[str]:
    """The players the ledger names short of chips (``short_player_ids``, a JSON list); all of
    the group when it names none, so that nobody is requeued who might be short."""
    try:
        named = set(json.loads(metadata.get("short_player_ids", "[]")))
    except ValueError:
        named = set()
    players = [hold.player_id for hold in holds]
    return [player for player in players if player in named] or players
