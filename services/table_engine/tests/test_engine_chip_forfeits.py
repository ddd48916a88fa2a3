"""A chip table every player leaves, settled by the real ledger (P-12, P-30).

The issue's game: two players at a 51 chip table; one quits and forfeits, then the other. The
engine finishes the game (GameFinished, both seats ranked and forfeited, never GameAbandoned)
and the real ledger, on SQLite in-process, keeps both stakes: with no seat left to pay, the
pot goes to the house as a forfeit, no hold is voided, and the ledger's invariants
(``masa-ledger check``) hold.
"""

from __future__ import annotations

from pathlib import Path

import grpc
import grpc.aio
from engine_support import (
    ADMIN_TOKEN,
    SERVICE,
    fiftyone_config,
    metadata,
    results,
    running_ledger,
    running_node,
    seat,
    settings,
    table_stub,
    wait_until,
)
from masa.common.v1 import chips_pb2, game_pb2
from masa.ledger.v1 import ledger_pb2, ledger_pb2_grpc
from masa.table.v1 import table_pb2, view_pb2
from masa_ledger.app.check import run_check
from masa_platform.testing import NatsServer

STAKE = 100
# The lobby's terms the stakes are held for and the table is bound under: a 5% rake.
TERMS = chips_pb2.PayoutRule(rake_basis_points=500)
CHIPS = 1_000
PLAYERS = ("ayse", "bora")


async def _staked(ledger: ledger_pb2_grpc.LedgerServiceAsyncStub) -> dict[str, str]:
    """CHIPS for each player and a hold of the stake; hold ids by player."""
    for player in PLAYERS:
        await ledger.GrantChips(
            ledger_pb2.GrantChipsRequest(
                request_id=f"grant-{player}", player_id=player, amount=CHIPS
            ),
            metadata=ADMIN_TOKEN,
        )
    placed = await ledger.HoldStakes(
        ledger_pb2.HoldStakesRequest(
            request_id="stakes",
            stakes=[
                ledger_pb2.HoldStakeRequest(
                    request_id=f"stake-{player}",
                    player_id=player,
                    amount=STAKE,
                    payout=TERMS,
                )
                for player in PLAYERS
            ],
        ),
        metadata=SERVICE,
    )
    return {hold.player_id: hold.hold_id for hold in placed.holds}


async def _events(
    watch: grpc.aio.UnaryStreamCall[table_pb2.WatchTableRequest, table_pb2.WatchTableResponse],
    until: str,
) -> list[str]:
    """The kinds of the events a watch reads, up to and with the first ``until``."""
    kinds: list[str] = []
    while (message := await watch.read()) is not grpc.aio.EOF:
        assert isinstance(message, table_pb2.WatchTableResponse)
        kinds.extend(str(e.WhichOneof("kind")) for e in message.update.events)
        if until in kinds:
            return kinds
    raise AssertionError(f"the watch ended before {until}")


async def test_P12_both_players_of_a_chip_table_leave_and_the_pot_goes_to_the_house(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    async with running_ledger(nats_server, tmp_path, results_fetch_seconds=0.5) as ledger_service:
        engine = settings(
            nats_server,
            "chip-forfeits",
            ledger_address=ledger_service.server.address,
            seat_protection_seconds=1.0,
        )
        async with (
            grpc.aio.insecure_channel(ledger_service.server.address) as channel,
            running_node(engine) as node,
            table_stub(node.address) as stub,
        ):
            ledger = ledger_pb2_grpc.LedgerServiceStub(channel)
            holds = await _staked(ledger)
            config = fiftyone_config("classic", [seat(n, p) for n, p in enumerate(PLAYERS)])
            config.mode = game_pb2.MODE_SINGLES
            config.stake = STAKE
            config.payout.CopyFrom(TERMS)
            for assignment in config.seats:
                assignment.hold_id = holds[assignment.player_id]
            created = await stub.CreateTable(
                table_pb2.CreateTableRequest(request_id="c", table_id="quits", config=config),
                metadata=SERVICE,
            )
            assert created.table.table_id == "quits"
            watches = {
                player: stub.WatchTable(
                    table_pb2.WatchTableRequest(table_id="quits"), metadata=metadata(player)
                )
                for player in PLAYERS
            }
            for watch in watches.values():
                await watch.read()

            # Ayşe quits: her seat is protected a while, then forfeits; Bora's game goes on.
            await stub.LeaveTable(
                table_pb2.LeaveTableRequest(request_id="l1", table_id="quits"),
                metadata=metadata("ayse"),
            )
            assert "seat_forfeited" in await _events(watches["bora"], "seat_forfeited")
            view = (
                await stub.GetTable(
                    table_pb2.GetTableRequest(table_id="quits"), metadata=metadata("bora")
                )
            ).seat_view.table
            assert view.table.state == view_pb2.Table.STATE_PLAYING
            assert view.seats[0].forfeited and not view.seats[1].forfeited

            # Then Bora quits too: the game is finished at once when her seat forfeits.
            await stub.LeaveTable(
                table_pb2.LeaveTableRequest(request_id="l2", table_id="quits"),
                metadata=metadata("bora"),
            )
            kinds = await _events(watches["bora"], "game_finished")
            assert "game_abandoned" not in kinds
            for watch in watches.values():
                watch.cancel()
            final = (
                await stub.GetTable(
                    table_pb2.GetTableRequest(table_id="quits"), metadata=metadata("ayse")
                )
            ).seat_view.table
            assert final.table.state == view_pb2.Table.STATE_FINISHED
            assert [(s.player_id, s.forfeited, s.hold_id) for s in final.ranking] == [
                (p, True, holds[p]) for p in PLAYERS
            ]

            async def settled() -> bool:
                try:
                    await ledger.GetSettlement(
                        ledger_pb2.GetSettlementRequest(table_id="quits", game_no=1),
                        metadata=ADMIN_TOKEN,
                    )
                except grpc.aio.AioRpcError as error:
                    if error.code() != grpc.StatusCode.NOT_FOUND:
                        raise
                    return False
                return True

            await wait_until(settled, timeout=30, what="the ledger to settle the game")
            settlement = (
                await ledger.GetSettlement(
                    ledger_pb2.GetSettlementRequest(table_id="quits", game_no=1),
                    metadata=ADMIN_TOKEN,
                )
            ).settlement
            published = [r.WhichOneof("result") for r in await results(nats_server, "quits")]
            assert "game_finished" in published and "game_abandoned" not in published

            # Finished, not voided: nobody is paid, no stake comes back, the house takes the
            # rake and the forfeited prize.
            pot = len(PLAYERS) * STAKE
            rake = pot * 500 // 10_000
            assert settlement.state == ledger_pb2.Settlement.STATE_SETTLED
            assert (settlement.pot, settlement.rake, list(settlement.payouts)) == (pot, rake, [])
            forfeits = [
                t for t in settlement.transfers if t.kind == chips_pb2.TRANSFER_KIND_FORFEIT
            ]
            assert [t.amount for t in forfeits] == [pot - rake]
            for player in PLAYERS:
                account = (
                    await ledger.GetBalance(
                        ledger_pb2.GetBalanceRequest(player_id=player), metadata=ADMIN_TOKEN
                    )
                ).account
                assert (account.balance, account.held) == (CHIPS - STAKE, 0)
                hold = (
                    await ledger.GetHold(
                        ledger_pb2.GetHoldRequest(hold_id=holds[player]), metadata=ADMIN_TOKEN
                    )
                ).hold
                assert hold.state == ledger_pb2.StakeHold.STATE_POSTED
            house = (
                await ledger.GetAccount(
                    ledger_pb2.GetAccountRequest(account_id="house"), metadata=ADMIN_TOKEN
                )
            ).account
            assert house.balance == pot
        report = await run_check(ledger_service.store)
        assert report.ok, report.to_json()
