"""A chip table end to end (P-30, P-31), on the real stack that ``make run`` starts.

Three players with chips are staked in the ledger, and a table is created for them with the
holds (the engine binds them to the game's escrow before the table starts); no bot sits at a
chip table (P-13). Every seat is played through the SDK to the end; the engine publishes
GameFinished, the ledger pays the best-placed player the pot less the rake, and
``masa-ledger check`` passes on the database.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import grpc
import grpc.aio
import pytest
from google.protobuf.duration_pb2 import Duration
from masa.common.v1 import chips_pb2, game_pb2
from masa.ledger.v1 import ledger_pb2, ledger_pb2_grpc
from masa.table.v1 import event_pb2
from masa_client.client import TableClient
from masa_client.errors import MasaCallError
from masa_platform.testing import token
from masa_rules.elevator import legal_actions
from masa_rules.elevator.policies import greedy_policy
from masa_rules.shuffle import DrawStream
from masa_wire import elevator as wire

# Each ledger call as the identity that may make it: an operator grants chips and reads any
# account, matchmaking holds stakes and reads its holds back.
AS_OPERATOR = (("authorization", f"Bearer {token('operator', 'admin')}"),)
AS_MATCHMAKING = (("authorization", f"Bearer {token('matchmaking', 'matchmaking')}"),)


def _as(player: str) -> tuple[tuple[str, str]]:
    """A player's own metadata: each reads its own hold."""
    return (("authorization", f"Bearer {token(player)}"),)


GAME_SECONDS = 90.0
STAKE = 100
# The terms the stakes are held for and the table is bound under (P-30): a 5% rake.
TERMS = chips_pb2.PayoutRule(rake_basis_points=500)
PLAYERS = ("alice", "bob", "cem")


def _config(holds: dict[str, str]) -> game_pb2.TableConfig:
    seats = [
        game_pb2.SeatAssignment(
            seat=seat,
            kind=game_pb2.SEAT_KIND_HUMAN,
            player_id=player,
            display_name=player,
            hold_id=holds[player],
        )
        for seat, player in enumerate(PLAYERS)
    ]
    return game_pb2.TableConfig(
        game=game_pb2.GAME_KIND_ELEVATOR,
        mode=game_pb2.MODE_SINGLES,
        seats=seats,
        stake=STAKE,
        turn_time=Duration(seconds=30),
        payout=TERMS,
    )


async def test_p30_a_staked_table_played_through_the_sdk_is_paid_by_the_ledger(
    stack: dict[str, str],
) -> None:
    table_id = f"chips-{uuid.uuid4().hex[:8]}"
    async with grpc.aio.insecure_channel(stack["ledger"]) as channel:
        ledger = ledger_pb2_grpc.LedgerServiceStub(channel)
        for player in PLAYERS:
            await ledger.GrantChips(
                ledger_pb2.GrantChipsRequest(
                    request_id=f"{table_id}-{player}", player_id=player, amount=1000
                ),
                metadata=AS_OPERATOR,
            )
        before = {p: await _balance(ledger, p) for p in PLAYERS}
        placed = await ledger.HoldStakes(
            ledger_pb2.HoldStakesRequest(
                request_id=f"{table_id}-stakes",
                stakes=[
                    ledger_pb2.HoldStakeRequest(
                        request_id=f"{table_id}-{p}-stake", player_id=p, amount=STAKE, payout=TERMS
                    )
                    for p in PLAYERS
                ],
            ),
            metadata=AS_MATCHMAKING,
        )
        holds = {hold.player_id: hold.hold_id for hold in placed.holds}

        service = TableClient(stack["table-engine"], token("matchmaking", "matchmaking"))
        async with service:
            table = await service.create_table(
                _config(holds), request_id=f"{table_id}-create", table_id=table_id
            )
            # The same create again makes no second table; another request for the id is refused.
            again = await service.create_table(
                _config(holds), request_id=f"{table_id}-create", table_id=table_id
            )
            assert again.table_id == table.table_id == table_id
            with pytest.raises(MasaCallError) as taken:
                await service.create_table(_config(holds), request_id="another", table_id=table_id)
            assert taken.value.reason == "TABLE_EXISTS"
        for player in PLAYERS:
            hold = await ledger.GetHold(
                ledger_pb2.GetHoldRequest(hold_id=holds[player]), metadata=_as(player)
            )
            assert (hold.hold.state, hold.hold.table_id) == (
                ledger_pb2.StakeHold.STATE_BOUND,
                table_id,
            )

        clients = [TableClient(table.owner_address, token(player)) for player in PLAYERS]
        for client in clients:
            await client.__aenter__()
        try:
            finals = await asyncio.wait_for(
                asyncio.gather(*(_play_out(client, table_id) for client in clients)), GAME_SECONDS
            )
        finally:
            for client in clients:
                await client.__aexit__(None, None, None)
        ranking = finals[0].game_finished.ranking
        best = min(s.place for s in ranking)
        winners = sorted(s.player_id for s in ranking if s.place == best)

        settlement = await _settled(ledger, table_id)
        assert settlement.state == ledger_pb2.Settlement.STATE_SETTLED
        pot = len(PLAYERS) * STAKE
        rake = pot * 500 // 10_000
        assert (settlement.pot, settlement.rake) == (pot, rake)
        after = {p: await _balance(ledger, p) for p in PLAYERS}
        # The best-placed takes the pot less 5%; tied, they share it.
        paid = {p.player_id: p.amount for p in settlement.payouts}
        assert sorted(paid) == winners and sum(paid.values()) == pot - rake
        for player in PLAYERS:
            assert after[player] == before[player] - STAKE + paid.get(player, 0)
        assert sum(after.values()) == sum(before.values()) - rake
    report = _check(Path(stack["run_dir"]) / "ledger.sqlite3")
    assert report["ok"], report


async def _balance(ledger: ledger_pb2_grpc.LedgerServiceAsyncStub, player: str) -> int:
    answer = await ledger.GetBalance(
        ledger_pb2.GetBalanceRequest(player_id=player), metadata=AS_OPERATOR
    )
    return answer.account.balance


async def _settled(
    ledger: ledger_pb2_grpc.LedgerServiceAsyncStub, table_id: str
) -> ledger_pb2.Settlement:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            answer = await ledger.GetSettlement(
                ledger_pb2.GetSettlementRequest(table_id=table_id, game_no=1),
                metadata=AS_OPERATOR,
            )
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.NOT_FOUND:
                raise
            await asyncio.sleep(0.1)
            continue
        return answer.settlement
    raise AssertionError("the ledger never settled the game")


async def _play_out(client: TableClient, table_id: str) -> event_pb2.TableEvent:
    rng = DrawStream(b"e2e-chips")
    async for message in client.watch(table_id):
        if message.WhichOneof("payload") == "update":
            for event in message.update.events:
                if event.WhichOneof("kind") == "game_finished":
                    return event
        view = (await client.get_table(table_id)).seat_view
        state = wire.state_from_seat_view(view)
        actions = legal_actions(state, view.seat)
        if not actions:
            continue
        try:
            await client.submit_action(
                table_id,
                wire.action_to_proto(greedy_policy(state, view.seat, rng)),
                view.table.table.sequence,
            )
        except MasaCallError as error:
            # The other seat or a timer moved first; the next update brings a fresh view.
            if error.reason not in ("SEQUENCE_MISMATCH", "E-3"):
                raise
    raise AssertionError("the watch ended without GameFinished")


def _check(database: Path) -> dict[str, object]:
    answer = subprocess.run(
        [sys.executable, "-m", "masa_ledger", "check", "--database-url", f"sqlite:///{database}"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert answer.returncode == 0, answer.stderr
    report: dict[str, object] = json.loads(answer.stdout)
    return report


async def test_p30_a_table_whose_stakes_the_ledger_refuses_never_starts(
    stack: dict[str, str],
) -> None:
    table_id = f"refused-{uuid.uuid4().hex[:8]}"
    async with grpc.aio.insecure_channel(stack["ledger"]) as channel:
        ledger = ledger_pb2_grpc.LedgerServiceStub(channel)
        holds: dict[str, str] = {}
        for player in PLAYERS:
            await ledger.GrantChips(
                ledger_pb2.GrantChipsRequest(
                    request_id=f"{table_id}-{player}", player_id=player, amount=500
                ),
                metadata=AS_OPERATOR,
            )
            placed = await ledger.HoldStake(
                # Bob's hold is 10 chips short of the table's stake.
                ledger_pb2.HoldStakeRequest(
                    request_id=f"{table_id}-{player}-stake",
                    player_id=player,
                    amount=STAKE - 10 if player == "bob" else STAKE,
                    payout=TERMS,
                ),
                metadata=AS_MATCHMAKING,
            )
            holds[player] = placed.hold.hold_id
        async with TableClient(
            stack["table-engine"], token("matchmaking", "matchmaking")
        ) as service:
            with pytest.raises(MasaCallError) as refused:
                await service.create_table(
                    _config(holds), request_id=f"{table_id}-create", table_id=table_id
                )
            assert refused.value.reason == "STAKE_MISMATCH"
        # Matchmaking creates tables and reads none; an operator finds no such table.
        async with TableClient(stack["table-engine"], token("operator", "admin")) as operator:
            with pytest.raises(MasaCallError) as missing:
                await operator.get_table(table_id)
            assert missing.value.reason == "TABLE_NOT_FOUND"
        for player in PLAYERS:
            hold = await ledger.GetHold(
                ledger_pb2.GetHoldRequest(hold_id=holds[player]), metadata=_as(player)
            )
            assert hold.hold.state == ledger_pb2.StakeHold.STATE_HELD
