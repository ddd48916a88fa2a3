"""``masa.ledger.v1.LedgerService`` over gRPC: protobuf in, use case, protobuf out.

Who may call what (:func:`auth_policy`, docs/security.md): each write is for the one service
or operator that makes it, GetAccount for operators (the interceptor refuses others with
PERMISSION_DENIED); a player reads its own wallet, holds and transfers, and naming another
player's is PERMISSION_DENIED, reason NOT_YOUR_ACCOUNT; GetSettlement is open to players and
operators, like a table's result. A refusal of the ledger keeps its ErrorInfo reason
(masa.common.v1.ErrorReason) and metadata.

A page token of ListTransfers or ListHolds holds the sequence number the next page lists
below, sealed with the ledger's key (masa_platform.page_tokens) to the method, the caller and
every filter of the request; any other token is INVALID_ARGUMENT, reason INVALID_PAGE_TOKEN.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import grpc
from masa.ledger.v1 import ledger_pb2, ledger_pb2_grpc
from masa_platform.auth import AuthPolicy, Role, require_principal
from masa_platform.errors import (
    BadRequest,
)
from masa_platform.page_tokens import Filter, PageTokens
from masa_platform.server import ServiceRegistration

from masa_ledger.adapters.convert import (
    HOLD_STATES,
    TRANSFER_KINDS,
    account_to_proto,
    hold_to_proto,
    rule_from_proto,
    settlement_to_proto,
    transfer_to_proto,
)
from masa_ledger.app.holds import StakeRequest
from masa_ledger.app.ledger import Ledger
from masa_ledger.app.ports import HoldFilter, TransferFilter
from masa_ledger.domain import errors
from masa_ledger.domain.model import GameKey, wallet_id

__all__ = ["SERVICE_NAME", "UNCACHED", "LedgerServicer", "auth_policy", "registration"]

SERVICE_NAME: Final = "masa.ledger.v1.LedgerService"
# Left out of the platform's request_id cache: the ledger keeps a grant's request id for ever
# (its transfer id), and a repeated grant must say that it moved nothing (replayed), which the
# cache's replay of the first answer would hide.
UNCACHED: Final = (f"/{SERVICE_NAME}/GrantChips",)
_KINDS: Final = {value: kind for kind, value in TRANSFER_KINDS.items()}
_STATES: Final = {value: state for state, value in HOLD_STATES.items()}

Request = TypeVar("Request")
Response = TypeVar("Response")
Context = grpc.aio.ServicerContext[Any, Any]


def auth_policy() -> AuthPolicy:
    """Who may call what (docs/security.md): a player reads its own chips; matchmaking holds
    and releases stakes; the table-engine binds them to a game; operators grant, settle and
    void by hand and read any account."""
    own_reads = frozenset({Role.PLAYER, Role.ADMIN})
    staking = frozenset({Role.MATCHMAKING, Role.ADMIN})
    admin = frozenset({Role.ADMIN})
    allowed = {
        "GetBalance": own_reads,
        "ListTransfers": own_reads,
        "GetHold": own_reads,
        "ListHolds": own_reads,
        "GetSettlement": own_reads,
        "GetAccount": admin,
        "HoldStake": staking,
        "HoldStakes": staking,
        "BindHolds": frozenset({Role.TABLE_ENGINE}),
        "ReleaseHold": staking,
        "GrantChips": admin,
        "SettleGame": admin,
        "VoidGame": admin,
    }
    return AuthPolicy(
        allowed={f"/{SERVICE_NAME}/{method}": roles for method, roles in allowed.items()}
    )


def _player(requested: str) -> str:
    """The player a read is about: the caller's own unless named; only an operator may name
    another player."""
    principal = require_principal()
    player_id = requested or principal.subject
    if player_id != principal.subject and not principal.has_any({Role.ADMIN}):
        raise errors.NotYourAccount(
            "a player may read only its own chips", metadata={"player_id": player_id}
        )
    return player_id


@dataclass(frozen=True, slots=True)
class _Below:
    """Where the next page of a newest-first listing starts: below this sequence number."""

    seq: int


class _Pages:
    """The page tokens of one List method, bound to its caller and filters."""

    def __init__(self, tokens: PageTokens, method: str) -> None:
        self._tokens = tokens
        self._listing = f"/{SERVICE_NAME}/{method}"

    def before_seq(self, token: str, filters: Sequence[Filter]) -> int | None:
        below = self._tokens.open(
            token,
            _Below,
            listing=self._listing,
            caller=require_principal().subject,
            filters=filters,
        )
        return None if below is None else below.seq

    def next_token(self, before_seq: int | None, filters: Sequence[Filter]) -> str:
        if before_seq is None:
            return ""
        return self._tokens.seal(
            _Below(before_seq),
            listing=self._listing,
            caller=require_principal().subject,
            filters=filters,
        )


def _stake(request: ledger_pb2.HoldStakeRequest) -> StakeRequest:
    if not request.HasField("payout"):
        # The terms the hold will bind under: never a default an old caller could fall into.
        raise BadRequest(
            "a stake needs payout: the rake and payout table of the game it is for",
            metadata={"field": "payout"},
        )
    ttl = request.ttl.ToTimedelta().total_seconds() if request.HasField("ttl") else None
    return StakeRequest(
        hold_id=request.request_id,
        player_id=request.player_id,
        amount=request.amount,
        lobby_id=request.lobby_id,
        ticket_id=request.ticket_id,
        ttl_seconds=ttl,
        rule=rule_from_proto(request.payout),
    )


class LedgerServicer(ledger_pb2_grpc.LedgerServiceServicer):
    def __init__(self, ledger: Ledger, page_tokens: PageTokens) -> None:
        self._ledger = ledger
        self._transfer_pages = _Pages(page_tokens, "ListTransfers")
        self._hold_pages = _Pages(page_tokens, "ListHolds")

    async def GetBalance(  # noqa: N802 - the generated servicer names the methods
        self, request: ledger_pb2.GetBalanceRequest, context: Context
    ) -> ledger_pb2.GetBalanceResponse:
        account = await self._ledger.wallet(_player(request.player_id))
        return ledger_pb2.GetBalanceResponse(account=account_to_proto(account))

    async def ListTransfers(  # noqa: N802
        self, request: ledger_pb2.ListTransfersRequest, context: Context
    ) -> ledger_pb2.ListTransfersResponse:
        player_id = _player(request.player_id)
        kind = _KINDS.get(request.kind) if request.kind else None
        if request.kind and kind is None:
            raise errors.BadInput(f"unknown transfer kind {request.kind}")
        filters = (player_id, request.kind, request.table_id, request.game_no)
        page = await self._ledger.transfers(
            TransferFilter(
                account_id=wallet_id(player_id),
                kind=kind,
                table_id=request.table_id,
                game_no=request.game_no,
            ),
            size=request.page_size,
            before_seq=self._transfer_pages.before_seq(request.page_token, filters),
        )
        return ledger_pb2.ListTransfersResponse(
            transfers=[transfer_to_proto(t) for t in page.items],
            next_page_token=self._transfer_pages.next_token(page.next_before_seq, filters),
        )

    async def GetHold(  # noqa: N802
        self, request: ledger_pb2.GetHoldRequest, context: Context
    ) -> ledger_pb2.GetHoldResponse:
        hold = await self._ledger.hold(request.hold_id)
        _player(hold.player_id)
        return ledger_pb2.GetHoldResponse(hold=hold_to_proto(hold))

    async def ListHolds(  # noqa: N802
        self, request: ledger_pb2.ListHoldsRequest, context: Context
    ) -> ledger_pb2.ListHoldsResponse:
        player_id = _player(request.player_id)
        state = _STATES.get(request.state) if request.state else None
        if request.state and state is None:
            raise errors.BadInput(f"unknown hold state {request.state}")
        filters = (player_id, request.state, request.table_id, request.game_no)
        page = await self._ledger.holds(
            HoldFilter(
                player_id=player_id, state=state, table_id=request.table_id, game_no=request.game_no
            ),
            size=request.page_size,
            before_seq=self._hold_pages.before_seq(request.page_token, filters),
        )
        return ledger_pb2.ListHoldsResponse(
            holds=[hold_to_proto(h) for h in page.items],
            next_page_token=self._hold_pages.next_token(page.next_before_seq, filters),
        )

    async def GetSettlement(  # noqa: N802
        self, request: ledger_pb2.GetSettlementRequest, context: Context
    ) -> ledger_pb2.GetSettlementResponse:
        settlement = await self._ledger.settlement(
            GameKey(table_id=request.table_id, game_no=request.game_no)
        )
        return ledger_pb2.GetSettlementResponse(settlement=settlement_to_proto(settlement))

    async def GetAccount(  # noqa: N802
        self, request: ledger_pb2.GetAccountRequest, context: Context
    ) -> ledger_pb2.GetAccountResponse:
        account = await self._ledger.account(request.account_id)
        return ledger_pb2.GetAccountResponse(account=account_to_proto(account))

    async def HoldStake(  # noqa: N802
        self, request: ledger_pb2.HoldStakeRequest, context: Context
    ) -> ledger_pb2.HoldStakeResponse:
        (hold,) = await self._ledger.hold_stakes([_stake(request)])
        return ledger_pb2.HoldStakeResponse(hold=hold_to_proto(hold))

    async def HoldStakes(  # noqa: N802
        self, request: ledger_pb2.HoldStakesRequest, context: Context
    ) -> ledger_pb2.HoldStakesResponse:
        holds = await self._ledger.hold_stakes([_stake(stake) for stake in request.stakes])
        return ledger_pb2.HoldStakesResponse(holds=[hold_to_proto(h) for h in holds])

    async def BindHolds(  # noqa: N802
        self, request: ledger_pb2.BindHoldsRequest, context: Context
    ) -> ledger_pb2.BindHoldsResponse:
        if not request.HasField("payout"):
            # The terms the pot is paid by: never a default an old caller could fall into.
            raise BadRequest(
                "BindHolds needs payout: the rake and payout table the holds are bound under"
            )
        escrow, holds = await self._ledger.bind_holds(
            request.table_id,
            request.game_no,
            request.stake,
            list(request.hold_ids),
            rule_from_proto(request.payout),
        )
        return ledger_pb2.BindHoldsResponse(
            escrow=account_to_proto(escrow), holds=[hold_to_proto(h) for h in holds]
        )

    async def ReleaseHold(  # noqa: N802
        self, request: ledger_pb2.ReleaseHoldRequest, context: Context
    ) -> ledger_pb2.ReleaseHoldResponse:
        hold = await self._ledger.release_hold(request.hold_id, request.reason)
        return ledger_pb2.ReleaseHoldResponse(hold=hold_to_proto(hold))

    async def GrantChips(  # noqa: N802
        self, request: ledger_pb2.GrantChipsRequest, context: Context
    ) -> ledger_pb2.GrantChipsResponse:
        transfer, applied = await self._ledger.grant(
            request.request_id, request.player_id, request.amount, request.reason, welcome=True
        )
        return ledger_pb2.GrantChipsResponse(
            transfer=transfer_to_proto(transfer), replayed=not applied
        )

    async def SettleGame(  # noqa: N802
        self, request: ledger_pb2.SettleGameRequest, context: Context
    ) -> ledger_pb2.SettleGameResponse:
        settlement, applied = await self._ledger.settle_from_log(
            GameKey(table_id=request.table_id, game_no=request.game_no)
        )
        return ledger_pb2.SettleGameResponse(
            settlement=settlement_to_proto(settlement), applied=applied
        )

    async def VoidGame(  # noqa: N802
        self, request: ledger_pb2.VoidGameRequest, context: Context
    ) -> ledger_pb2.VoidGameResponse:
        settlement, applied = await self._ledger.void(
            GameKey(table_id=request.table_id, game_no=request.game_no),
            request.reason or "voided by an admin",
        )
        return ledger_pb2.VoidGameResponse(
            settlement=settlement_to_proto(settlement), applied=applied
        )


def registration(servicer: LedgerServicer) -> ServiceRegistration:
    return ServiceRegistration(
        SERVICE_NAME,
        lambda server: ledger_pb2_grpc.add_LedgerServiceServicer_to_server(servicer, server),
    )
