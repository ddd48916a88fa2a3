"""LedgerService over real gRPC, with real NATS and a real database (architecture.md, P-30).

Each refusal is the status code and ErrorInfo reason that error.proto promises; a player reads
only its own chips; SettleGame reads the result from the table log and races VoidGame safely.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import grpc
import grpc.aio
import pytest
from google.protobuf import duration_pb2
from grpc_status import rpc_status
from ledger_support import (
    ADMIN,
    ENGINE,
    MATCHMAKING,
    game_finished,
    ledger_settings,
    operator_connection,
    publish_result,
    running_ledger,
    token_metadata,
)
from masa.common.v1 import chips_pb2, error_pb2
from masa.ledger.v1 import ledger_pb2, ledger_pb2_grpc
from masa_ledger.bootstrap import LedgerService
from masa_platform.errors import error_info, reason_name
from masa_platform.testing import NatsServer

# The payout table a table binds its holds under: the winner takes all, no rake.
WINNER_TAKES_ALL_PROTO = chips_pb2.PayoutRule(place_shares=[10_000])

AYSE = token_metadata("ayse")
MEHMET = token_metadata("mehmet")


@asynccontextmanager
async def _client(service: LedgerService) -> AsyncIterator[ledger_pb2_grpc.LedgerServiceAsyncStub]:
    async with grpc.aio.insecure_channel(service.server.address) as channel:
        yield ledger_pb2_grpc.LedgerServiceStub(channel)


async def _refusal(
    call: grpc.aio.UnaryUnaryCall[Any, Any],
) -> tuple[grpc.StatusCode, str, dict[str, str]]:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call
    info = error_info(await rpc_status.aio.from_call(call))
    assert info is not None
    return refused.value.code(), info.reason, dict(info.metadata)


def _bind_t1(
    request_id: str, stake: int, payout: chips_pb2.PayoutRule | None
) -> ledger_pb2.BindHoldsRequest:
    """A bind of game 1 at table t1 over the holds of ayse and mehmet; ``payout`` None sends
    no terms."""
    request = ledger_pb2.BindHoldsRequest(
        request_id=request_id,
        table_id="t1",
        game_no=1,
        stake=stake,
        hold_ids=["t1-ayse", "t1-mehmet"],
    )
    if payout is not None:
        request.payout.CopyFrom(payout)
    return request


async def _grant(stub: ledger_pb2_grpc.LedgerServiceAsyncStub, player: str, amount: int) -> None:
    await stub.GrantChips(
        ledger_pb2.GrantChipsRequest(
            request_id=f"grant-{player}-{uuid.uuid4().hex[:6]}", player_id=player, amount=amount
        ),
        metadata=ADMIN,
    )


async def test_p30_holds_binds_and_reads_over_grpc(nats_server: NatsServer, database: str) -> None:
    async with (
        running_ledger(ledger_settings(nats_server, database)) as service,
        _client(service) as stub,
    ):
        for player in ("ayse", "mehmet", "ali"):
            await _grant(stub, player, 1000 if player != "ali" else 40)
        stakes = [
            ledger_pb2.HoldStakeRequest(
                request_id=f"t1-{p}",
                player_id=p,
                amount=100,
                lobby_id="salon",
                ticket_id=f"k-{p}",
                ttl=duration_pb2.Duration(seconds=120),
                payout=WINNER_TAKES_ALL_PROTO,
            )
            for p in ("ayse", "mehmet", "ali")
        ]
        # One short player: FAILED_PRECONDITION, INSUFFICIENT_FUNDS, and nothing held for anyone.
        code, reason, metadata = await _refusal(
            stub.HoldStakes(
                ledger_pb2.HoldStakesRequest(request_id="g1", stakes=stakes), metadata=MATCHMAKING
            )
        )
        assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "INSUFFICIENT_FUNDS")
        assert json.loads(metadata["short_player_ids"]) == ["ali"]
        balance = await stub.GetBalance(ledger_pb2.GetBalanceRequest(), metadata=AYSE)
        assert (balance.account.balance, balance.account.held) == (1000, 0)

        placed = await stub.HoldStakes(
            ledger_pb2.HoldStakesRequest(request_id="g2", stakes=stakes[:2]), metadata=MATCHMAKING
        )
        assert [h.state for h in placed.holds] == [ledger_pb2.StakeHold.STATE_HELD] * 2
        assert placed.holds[0].expire_time.seconds - placed.holds[0].create_time.seconds == 120
        # The terms the stakes were placed for are the hold's, as anyone reading it sees.
        assert [h.payout for h in placed.holds] == [WINNER_TAKES_ALL_PROTO] * 2
        # A stake without terms is malformed, and nothing is held (issue 19: the terms are
        # fixed by whoever places the stake, never left for the binder to choose).
        no_terms = ledger_pb2.HoldStakeRequest(request_id="t1-termless", player_id="ali", amount=10)
        code, reason, metadata = await _refusal(stub.HoldStake(no_terms, metadata=MATCHMAKING))
        assert (code, reason, metadata) == (
            grpc.StatusCode.INVALID_ARGUMENT,
            reason_name(error_pb2.ERROR_REASON_BAD_REQUEST),
            {"field": "payout"},
        )
        ali = await stub.GetBalance(ledger_pb2.GetBalanceRequest(player_id="ali"), metadata=ADMIN)
        assert ali.account.held == 0
        # A bind under other terms than the holds were placed for: no rake waived, no re-split.
        code, reason, metadata = await _refusal(
            stub.BindHolds(
                _bind_t1("b-other-terms", 100, chips_pb2.PayoutRule(place_shares=[5_000, 5_000])),
                metadata=ENGINE,
            )
        )
        assert (code, reason, metadata) == (
            grpc.StatusCode.FAILED_PRECONDITION,
            reason_name(error_pb2.ERROR_REASON_TERMS_MISMATCH),
            {"hold_id": "t1-ayse"},
        )
        code, reason, metadata = await _refusal(
            stub.BindHolds(_bind_t1("b0", 90, WINNER_TAKES_ALL_PROTO), metadata=ENGINE)
        )
        assert (code, reason, metadata["hold_id"]) == (
            grpc.StatusCode.FAILED_PRECONDITION,
            "STAKE_MISMATCH",
            "t1-ayse",
        )
        unsure = await _refusal(stub.BindHolds(_bind_t1("b-no-terms", 100, None), metadata=ENGINE))
        # The terms are never a default an old or careless caller falls into.
        assert unsure[:2] == (grpc.StatusCode.INVALID_ARGUMENT, "BAD_REQUEST")
        bound = await stub.BindHolds(_bind_t1("b1", 100, WINNER_TAKES_ALL_PROTO), metadata=ENGINE)
        assert (bound.escrow.account_id, bound.escrow.pending_stakes) == ("escrow:t1:1", 200)
        assert bound.escrow.kind == chips_pb2.ACCOUNT_KIND_ESCROW

        mine = await stub.GetBalance(ledger_pb2.GetBalanceRequest(), metadata=AYSE)
        assert (mine.account.balance, mine.account.held, mine.account.available) == (1000, 100, 900)
        hold = await stub.GetHold(ledger_pb2.GetHoldRequest(hold_id="t1-ayse"), metadata=AYSE)
        assert (hold.hold.state, hold.hold.table_id) == (ledger_pb2.StakeHold.STATE_BOUND, "t1")
        listed = await stub.ListHolds(
            ledger_pb2.ListHoldsRequest(state=ledger_pb2.StakeHold.STATE_BOUND), metadata=AYSE
        )
        assert [h.hold_id for h in listed.holds] == ["t1-ayse"]
        transfers = await stub.ListTransfers(
            ledger_pb2.ListTransfersRequest(kind=chips_pb2.TRANSFER_KIND_GRANT), metadata=AYSE
        )
        assert [t.amount for t in transfers.transfers] == [1000]
        escrow = await stub.GetAccount(
            ledger_pb2.GetAccountRequest(account_id="escrow:t1:1"), metadata=ADMIN
        )
        assert escrow.account.pending_stakes == 200


async def test_p31_reused_request_ids_and_bad_input_are_clear_statuses(
    nats_server: NatsServer, database: str
) -> None:
    async with (
        running_ledger(ledger_settings(nats_server, database)) as service,
        _client(service) as stub,
    ):
        first = ledger_pb2.GrantChipsRequest(request_id="same", player_id="ayse", amount=10)
        granted = await stub.GrantChips(first, metadata=ADMIN)
        assert not granted.replayed
        # The same request again moves nothing and says so, at once (no cached first answer
        # hides it) and after a restart (below).
        again = await stub.GrantChips(first, metadata=ADMIN)
        assert (again.transfer.transfer_id, again.transfer.amount) == ("grant:same", 10)
        assert again.replayed
        other = ledger_pb2.GrantChipsRequest(request_id="same", player_id="ayse", amount=11)
        assert (await _refusal(stub.GrantChips(other, metadata=ADMIN)))[:2] == (
            grpc.StatusCode.ALREADY_EXISTS,
            "REQUEST_ID_REUSED",
        )
        # After a restart nothing is left in memory: the ledger's own ids still tell.
    async with (
        running_ledger(ledger_settings(nats_server, database)) as service,
        _client(service) as stub,
    ):
        assert (await _refusal(stub.GrantChips(other, metadata=ADMIN)))[:2] == (
            grpc.StatusCode.ALREADY_EXISTS,
            "REQUEST_ID_REUSED",
        )
        assert (await stub.GrantChips(first, metadata=ADMIN)).replayed
        for bad in (
            ledger_pb2.GrantChipsRequest(request_id="z", player_id="ayse", amount=0),
            ledger_pb2.GrantChipsRequest(request_id="n", player_id="ayse", amount=-1),
            ledger_pb2.GrantChipsRequest(request_id="o", player_id="ayse", amount=2**62),
            ledger_pb2.GrantChipsRequest(request_id="p", player_id="", amount=1),
        ):
            assert (await _refusal(stub.GrantChips(bad, metadata=ADMIN)))[:2] == (
                grpc.StatusCode.INVALID_ARGUMENT,
                "BAD_REQUEST",
            )
        assert (
            await _refusal(
                stub.GetAccount(
                    ledger_pb2.GetAccountRequest(account_id="player:ghost"), metadata=ADMIN
                )
            )
        )[:2] == (grpc.StatusCode.NOT_FOUND, "ACCOUNT_NOT_FOUND")
        assert (
            await _refusal(
                stub.ReleaseHold(
                    ledger_pb2.ReleaseHoldRequest(request_id="r", hold_id="ghost"),
                    metadata=MATCHMAKING,
                )
            )
        )[:2] == (grpc.StatusCode.NOT_FOUND, "HOLD_NOT_FOUND")
        balance = await stub.GetBalance(ledger_pb2.GetBalanceRequest(), metadata=AYSE)
        assert balance.account.balance == 10


async def test_a_player_reads_only_its_own_chips_and_writes_nothing(
    nats_server: NatsServer, database: str
) -> None:
    async with (
        running_ledger(ledger_settings(nats_server, database)) as service,
        _client(service) as stub,
    ):
        await _grant(stub, "ayse", 100)
        await stub.HoldStake(
            ledger_pb2.HoldStakeRequest(
                request_id="h-a", player_id="ayse", amount=10, payout=WINNER_TAKES_ALL_PROTO
            ),
            metadata=MATCHMAKING,
        )
        for call in (
            stub.GetBalance(ledger_pb2.GetBalanceRequest(player_id="ayse"), metadata=MEHMET),
            stub.ListTransfers(ledger_pb2.ListTransfersRequest(player_id="ayse"), metadata=MEHMET),
            stub.ListHolds(ledger_pb2.ListHoldsRequest(player_id="ayse"), metadata=MEHMET),
            stub.GetHold(ledger_pb2.GetHoldRequest(hold_id="h-a"), metadata=MEHMET),
        ):
            assert (await _refusal(call))[:2] == (
                grpc.StatusCode.PERMISSION_DENIED,
                "NOT_YOUR_ACCOUNT",
            )
        for denied in (
            stub.GrantChips(
                ledger_pb2.GrantChipsRequest(request_id="x", player_id="mehmet", amount=5),
                metadata=MEHMET,
            ),
            stub.GetAccount(
                ledger_pb2.GetAccountRequest(account_id="player:ayse"), metadata=MEHMET
            ),
            stub.ReleaseHold(
                ledger_pb2.ReleaseHoldRequest(request_id="y", hold_id="h-a"), metadata=MEHMET
            ),
        ):
            assert (await _refusal(denied))[0] == grpc.StatusCode.PERMISSION_DENIED
        assert (await _refusal(stub.GetBalance(ledger_pb2.GetBalanceRequest())))[
            0
        ] == grpc.StatusCode.UNAUTHENTICATED
        # An operator reads anyone's.
        other = await stub.GetBalance(
            ledger_pb2.GetBalanceRequest(player_id="ayse"), metadata=ADMIN
        )
        assert other.account.held == 10


async def test_p30_settle_game_reads_the_table_log_and_races_void_game_safely(
    nats_server: NatsServer, database: str
) -> None:
    nc = await operator_connection(nats_server)
    js = nc.jetstream()
    table = f"adm-{uuid.uuid4().hex[:8]}"
    # Its results consumer is stopped below: this ledger settles only by hand.
    settings = ledger_settings(nats_server, database)
    try:
        async with running_ledger(settings) as service, _client(service) as stub:
            for task in service.tasks:
                if task.get_name() == "ledger-results":
                    task.cancel()
            for player in ("ayse", "mehmet"):
                await _grant(stub, player, 500)
            await stub.HoldStakes(
                ledger_pb2.HoldStakesRequest(
                    request_id="g",
                    stakes=[
                        ledger_pb2.HoldStakeRequest(
                            request_id=f"{table}-{p}",
                            player_id=p,
                            amount=50,
                            payout=WINNER_TAKES_ALL_PROTO,
                        )
                        for p in ("ayse", "mehmet")
                    ],
                ),
                metadata=MATCHMAKING,
            )
            await stub.BindHolds(
                ledger_pb2.BindHoldsRequest(
                    request_id="b",
                    table_id=table,
                    game_no=1,
                    stake=50,
                    hold_ids=[f"{table}-ayse", f"{table}-mehmet"],
                    payout=WINNER_TAKES_ALL_PROTO,
                ),
                metadata=ENGINE,
            )
            settle = ledger_pb2.SettleGameRequest(request_id="s1", table_id=table, game_no=1)
            assert (await _refusal(stub.SettleGame(settle, metadata=ADMIN)))[:2] == (
                grpc.StatusCode.FAILED_PRECONDITION,
                "GAME_NOT_FINISHED",
            )
            await publish_result(
                js,
                game_finished(
                    table,
                    50,
                    [(0, "ayse", 2, f"{table}-ayse"), (1, "mehmet", 1, f"{table}-mehmet")],
                ),
            )
            settled = await stub.SettleGame(
                ledger_pb2.SettleGameRequest(request_id="s2", table_id=table, game_no=1),
                metadata=ADMIN,
            )
            assert settled.applied
            assert settled.settlement.state == ledger_pb2.Settlement.STATE_SETTLED
            assert [(p.player_id, p.amount) for p in settled.settlement.payouts] == [
                ("mehmet", 100)
            ]
            voided = await stub.VoidGame(
                ledger_pb2.VoidGameRequest(
                    request_id="v1", table_id=table, game_no=1, reason="late"
                ),
                metadata=ADMIN,
            )
            assert (voided.applied, voided.settlement.state) == (
                False,
                ledger_pb2.Settlement.STATE_SETTLED,
            )
            read = await stub.GetSettlement(
                ledger_pb2.GetSettlementRequest(table_id=table, game_no=1), metadata=AYSE
            )
            assert len(read.settlement.transfers) == 3
            assert (
                await stub.GetBalance(ledger_pb2.GetBalanceRequest(), metadata=MEHMET)
            ).account.balance == 550
    finally:
        await nc.close()


async def test_p30_void_game_of_a_game_the_ledger_never_saw_is_not_found_and_changes_nothing(
    nats_server: NatsServer, database: str
) -> None:
    """An operator's VoidGame of a table id no stake was ever bound to (a typo, a table of
    another deployment) voids nothing and records nothing: the game may still be bound and
    voided for real afterwards."""
    table = f"typo-{uuid.uuid4().hex[:8]}"
    void = ledger_pb2.VoidGameRequest(request_id="v-typo", table_id=table, game_no=1, reason="?")
    async with (
        running_ledger(ledger_settings(nats_server, database)) as service,
        _client(service) as stub,
    ):
        code, reason, metadata = await _refusal(stub.VoidGame(void, metadata=ADMIN))
        assert (code, reason) == (
            grpc.StatusCode.NOT_FOUND,
            error_pb2.ErrorReason.Name(error_pb2.ERROR_REASON_NOT_FOUND).removeprefix(
                "ERROR_REASON_"
            ),
        )
        assert metadata == {"table_id": table, "game_no": "1"}
        code, reason, _ = await _refusal(
            stub.GetAccount(
                ledger_pb2.GetAccountRequest(account_id=f"escrow:{table}:1"), metadata=ADMIN
            )
        )
        assert code == grpc.StatusCode.NOT_FOUND
        code, reason, _ = await _refusal(
            stub.GetSettlement(
                ledger_pb2.GetSettlementRequest(table_id=table, game_no=1), metadata=ADMIN
            )
        )
        assert code == grpc.StatusCode.NOT_FOUND
        # The game is as open as before: its stakes bind, and a void then gives them back.
        await _grant(stub, "ayse", 100)
        await stub.HoldStake(
            ledger_pb2.HoldStakeRequest(
                request_id=f"{table}-ayse",
                player_id="ayse",
                amount=40,
                payout=WINNER_TAKES_ALL_PROTO,
            ),
            metadata=MATCHMAKING,
        )
        await stub.BindHolds(
            ledger_pb2.BindHoldsRequest(
                request_id="b",
                table_id=table,
                game_no=1,
                stake=40,
                hold_ids=[f"{table}-ayse"],
                payout=WINNER_TAKES_ALL_PROTO,
            ),
            metadata=ENGINE,
        )
        voided = await stub.VoidGame(
            ledger_pb2.VoidGameRequest(request_id="v-real", table_id=table, game_no=1),
            metadata=ADMIN,
        )
        assert voided.applied
        assert (voided.settlement.state, list(voided.settlement.hold_ids)) == (
            ledger_pb2.Settlement.STATE_VOIDED,
            [f"{table}-ayse"],
        )
        balance = await stub.GetBalance(ledger_pb2.GetBalanceRequest(), metadata=AYSE)
        assert (balance.account.balance, balance.account.held) == (100, 0)
