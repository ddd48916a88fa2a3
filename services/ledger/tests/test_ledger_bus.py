"""The ledger settles from the table-engine's results on a real nats-server (P-30, P-31).

GameFinished and GameAbandoned come through the durable pull consumer; the outbox relay puts
GameSettled on MASA_LEDGER; repeats of one result, also concurrent ones and ones read by two
ledgers at once, settle the game once.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from ledger_support import (
    eventually,
    execute,
    game_finished,
    ledger_events,
    ledger_settings,
    operator_connection,
    publish_result,
    running_ledger,
)
from masa.common.v1 import chips_pb2
from masa.events.v1 import result_pb2
from masa_ledger.app.holds import StakeRequest
from masa_ledger.app.ledger import Ledger
from masa_ledger.app.settlement import WINNER_TAKES_ALL
from masa_ledger.bootstrap import start_ledger
from masa_ledger.domain.model import GameKey, HoldState, SettlementState
from masa_platform.testing import NatsServer
from masa_rules.table_config import PayoutRule
from nats.js import JetStreamContext
from nats.js.api import ConsumerInfo
from prometheus_client import CollectorRegistry


async def _staked_game(
    ledger: Ledger,
    table_id: str,
    players: list[str],
    stake: int,
    terms: PayoutRule = WINNER_TAKES_ALL,
) -> list[str]:
    for player in players:
        await ledger.grant(f"grant-{table_id}-{player}", player, 1000, "welcome")
    holds = await ledger.hold_stakes(
        [
            StakeRequest(hold_id=f"{table_id}-{p}", player_id=p, amount=stake, lobby_id="lobby")
            for p in players
        ]
    )
    await ledger.bind_holds(table_id, 1, stake, [h.hold_id for h in holds], terms)
    return [h.hold_id for h in holds]


async def test_game_finished_on_the_bus_is_paid_once_and_announced_p30(
    nats_server: NatsServer, database: str, tmp_path: Path
) -> None:
    nc = await operator_connection(nats_server)
    js = nc.jetstream()
    try:
        async with running_ledger(ledger_settings(nats_server, database)) as service:
            ledger = service.ledger
            # The nats-server lives for the module: every test's tables are its own.
            table = f"bus-{uuid.uuid4().hex[:8]}"
            holds = await _staked_game(
                ledger, table, ["ayse", "mehmet"], 100, PayoutRule(rake_basis_points=500)
            )
            # The result claims no rake: the ledger pays by the terms the stakes were bound
            # under, never by what a result says.
            finished = game_finished(
                table,
                100,
                [(0, "ayse", 2, holds[0]), (1, "mehmet", 1, holds[1])],
                rule=chips_pb2.PayoutRule(rake_basis_points=0),
            )
            # The same result five times, under five message ids so that JetStream's own
            # de-duplication does not hide the repeats from the ledger.
            for copy in range(5):
                await publish_result(js, finished, msg_id=f"{table}-copy-{copy}")

            async def settled() -> bool:
                return (
                    await service.store.settlement(GameKey(table_id=table, game_no=1))
                ) is not None

            await eventually(settled, what="the settlement")
            settlement = await ledger.settlement(GameKey(table_id=table, game_no=1))
            assert settlement.state is SettlementState.SETTLED
            assert (settlement.pot, settlement.rake) == (200, 10)
            assert [(p.player_id, p.amount) for p in settlement.payouts] == [("mehmet", 190)]
            assert (await ledger.wallet("mehmet")).balance == 1090
            assert (await ledger.wallet("ayse")).balance == 900
            assert (await ledger.hold(holds[0])).state is HoldState.POSTED

            async def announced() -> bool:
                events = await ledger_events(js, f"masa.ledger.v1.game.{table}.>")
                return any(e.HasField("game_settled") for e in events)

            await eventually(announced, what="GameSettled on MASA_LEDGER")
            # The repeats were consumed (acknowledged) and changed nothing.
            await eventually(lambda: _consumer_done(js), what="every result copy acknowledged")
            events = await ledger_events(js, f"masa.ledger.v1.game.{table}.>")
            settled_events = [e for e in events if e.HasField("game_settled")]
            assert len(settled_events) == 1
            assert settled_events[0].game_settled.payouts[0].amount == 190
            report = await service.store.check()
            assert not any(report.counts.values()), report.examples
    finally:
        await nc.close()


async def _consumer_done(js: JetStreamContext) -> bool:
    info: ConsumerInfo = await js.consumer_info("MASA_TABLES", "ledger-settlement")
    return info.num_pending == 0 and info.num_ack_pending == 0


async def test_two_ledgers_reading_the_same_results_settle_each_game_once_p31(
    nats_server: NatsServer, database: str
) -> None:
    nc = await operator_connection(nats_server)
    js = nc.jetstream()
    try:
        settings = ledger_settings(nats_server, database)
        async with running_ledger(settings) as first, running_ledger(settings) as second:
            run = uuid.uuid4().hex[:8]
            tables = [f"pair-{run}-{i}" for i in range(6)]
            for table_id in tables:
                holds = await _staked_game(first.ledger, table_id, ["a", "b", "c"], 10)
                finished = game_finished(
                    table_id, 10, [(i, p, i + 1, holds[i]) for i, p in enumerate("abc")]
                )
                await asyncio.gather(
                    *(publish_result(js, finished, msg_id=f"{table_id}-{n}") for n in range(5))
                )

            async def all_settled() -> bool:
                found = [
                    await first.store.settlement(GameKey(table_id=t, game_no=1)) for t in tables
                ]
                return all(found)

            await eventually(all_settled, what="six settlements")
            for table_id in tables:
                settlement = await second.ledger.settlement(GameKey(table_id=table_id, game_no=1))
                assert [p.amount for p in settlement.payouts] == [30]
            # Each of a, b and c was granted 1000 six times, staked 10 six times and won
            # every game as player a: a gained 20 per game, b and c lost 10.
            assert (await first.ledger.wallet("a")).balance == 6000 + 6 * 20
            assert (await first.ledger.wallet("b")).balance == 6000 - 6 * 10
            report = await first.store.check()
            assert not any(report.counts.values()), report.examples
    finally:
        await nc.close()


async def test_game_abandoned_voids_the_game_and_its_holds_p30(
    nats_server: NatsServer, database: str
) -> None:
    nc = await operator_connection(nats_server)
    js = nc.jetstream()
    try:
        async with running_ledger(ledger_settings(nats_server, database)) as service:
            ledger = service.ledger
            table = f"lost-{uuid.uuid4().hex[:8]}"
            holds = await _staked_game(ledger, table, ["ayse", "mehmet"], 50)
            abandoned = result_pb2.TableResult(
                game_abandoned=result_pb2.GameAbandoned(
                    event_id=f"{table}:1:abandoned", table_id=table, game_no=1, reason="state lost"
                )
            )
            await publish_result(js, abandoned)

            async def voided() -> bool:
                return (
                    await service.store.settlement(GameKey(table_id=table, game_no=1))
                ) is not None

            await eventually(voided, what="the voiding")
            settlement = await ledger.settlement(GameKey(table_id=table, game_no=1))
            assert settlement.state is SettlementState.VOIDED
            assert settlement.reason == "state lost"
            for hold_id in holds:
                assert (await ledger.hold(hold_id)).state is HoldState.VOIDED
            for player in ("ayse", "mehmet"):
                wallet = await ledger.wallet(player)
                assert (wallet.balance, wallet.held) == (1000, 0)
            # A GameFinished arriving after the voiding changes nothing.
            late = game_finished(table, 50, [(0, "ayse", 1, holds[0]), (1, "mehmet", 2, holds[1])])
            await publish_result(js, late)
            await eventually(lambda: _consumer_done(js), what="the late result acknowledged")
            assert (await ledger.wallet("ayse")).balance == 1000
    finally:
        await nc.close()


async def test_the_service_checks_its_invariants_periodically_and_exports_them(
    nats_server: NatsServer, database: str
) -> None:
    registry = CollectorRegistry()
    settings = ledger_settings(
        nats_server, database, check_interval_seconds=0.2, hold_ttl_seconds=0.5
    )
    service = await start_ledger(settings, registry=registry)
    try:
        ledger = service.ledger
        await ledger.grant(f"g-{uuid.uuid4().hex[:6]}", "ayse", 100, "")
        await ledger.hold_stakes(
            [StakeRequest(hold_id=f"h-{uuid.uuid4().hex[:6]}", player_id="ayse", amount=10)]
        )

        def sample(name: str, **labels: str) -> float | None:
            return registry.get_sample_value(name, labels)

        async def expired() -> bool:
            return (sample("masa_ledger_holds_expired_total") or 0) >= 1

        await eventually(expired, what="the hold to expire")
        assert sample("masa_ledger_transfers_total", kind="grant", result="ok") == 1
        assert sample("masa_ledger_transfers_total", kind="hold", result="ok") == 1

        async def checked_clean() -> bool:
            return sample("masa_ledger_invariant_violations", check="balances_sum_to_zero") == 0

        await eventually(checked_clean, what="a clean periodic check")
        # Five chips from nowhere: the next check says so.
        await execute(
            service.store,
            "UPDATE accounts SET balance = balance + 5 WHERE account_id = 'player:ayse'",
        )

        async def violated() -> bool:
            return (
                sample("masa_ledger_invariant_violations", check="balances_sum_to_zero") or 0
            ) >= 1

        await eventually(violated, what="the check to report the violation")
        assert sample("masa_ledger_outbox_lag_seconds") is not None
        assert (sample("masa_ledger_last_check_timestamp_seconds") or 0) > 0
    finally:
        await service.stop(0.2)
