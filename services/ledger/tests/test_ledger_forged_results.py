"""Money follows authenticated facts only (issue 19, P-30): the ledger pays a result only when
a table-engine signed it for the table whose subject it is on, and by the terms the stakes were
bound under, never by the result's.

The issue's attack: a forged GameFinished for a live chip table (built from what a spectator
sees), with the rake forced to 0 and the pot to the forger's pick, was settled. Each way of
forging is tried here against the real ledger and a real nats-server: the result is set aside
in the dead-letter stream, counted, moves no chip and does not touch the inbox, so the real
result, when it comes, is paid as it should be.
"""

from __future__ import annotations

import uuid

import grpc
import grpc.aio
import pytest
from grpc_status import rpc_status
from ledger_support import (
    ADMIN,
    eventually,
    game_finished,
    ledger_settings,
    operator_connection,
    publish_result,
    running_ledger,
)
from masa.common.v1 import chips_pb2, error_pb2
from masa.ledger.v1 import ledger_pb2, ledger_pb2_grpc
from masa_ledger.app.holds import StakeRequest
from masa_ledger.app.ledger import Ledger
from masa_ledger.domain.model import GameKey
from masa_platform.bus import publish
from masa_platform.bus_access import (
    DEAD_LETTER_STREAM,
    LEDGER,
    LEDGER_RESULTS_CONSUMER,
    TABLES_STREAM,
)
from masa_platform.direct import messages_after
from masa_platform.errors import error_info, reason_name
from masa_platform.signing import RESULT_SIGNATURE
from masa_platform.testing import NatsServer, signed_result
from masa_rules.table_config import PayoutRule
from nats.js.api import ConsumerInfo
from prometheus_client import CollectorRegistry

RESULT_UNVERIFIED = reason_name(error_pb2.ERROR_REASON_RESULT_UNVERIFIED)
TERMS = PayoutRule(rake_basis_points=1000)


async def _stake(ledger: Ledger, table_id: str) -> list[str]:
    for player in ("ayse", "mehmet", "mallory"):
        await ledger.grant(f"g-{table_id}-{player}", player, 1000, "welcome")
    holds = await ledger.hold_stakes(
        [
            StakeRequest(hold_id=f"{table_id}-{p}", player_id=p, amount=200, lobby_id="salon")
            for p in ("ayse", "mehmet")
        ]
    )
    await ledger.bind_holds(table_id, 1, 200, [h.hold_id for h in holds], TERMS)
    return [h.hold_id for h in holds]


async def test_p30_forged_moved_and_reranked_results_move_no_chip_and_the_real_one_pays(
    nats_server: NatsServer, database: str
) -> None:
    nc = await operator_connection(nats_server)
    js = nc.jetstream()
    table, other = f"live-{uuid.uuid4().hex[:6]}", f"else-{uuid.uuid4().hex[:6]}"
    try:
        registry = CollectorRegistry()
        async with running_ledger(ledger_settings(nats_server, database), registry) as service:
            ledger = service.ledger
            holds = await _stake(ledger, table)
            await _stake(ledger, other)
            # What a spectator sees is enough to build a GameFinished; the forger picks the
            # winner and claims no rake.
            honest = game_finished(
                table, 200, [(0, "ayse", 1, holds[0]), (1, "mehmet", 2, holds[1])]
            )
            forged = game_finished(
                table,
                200,
                [(0, "ayse", 2, holds[0]), (1, "mehmet", 1, holds[1])],
                rule=chips_pb2.PayoutRule(rake_basis_points=0),
            )
            subject = f"masa.table.v1.{table}.result"
            honest_bytes = honest.SerializeToString()
            forged_bytes = forged.SerializeToString()
            attempts = [
                # Unsigned.
                (subject, forged_bytes, {}),
                # Signed by a key no engine holds: a made-up signature header. A key unknown
                # here may be a rotation's that has not arrived yet: it is retried, never paid.
                (subject, forged_bytes, {RESULT_SIGNATURE: "results-000000000000.AAAA"}),
                # The honest signature on the re-ranked payload.
                (subject, forged_bytes, signed_result(subject, honest_bytes)),
            ]
            for number, (on, payload, headers) in enumerate(attempts):
                await publish(js, on, payload, msg_id=f"forged-{number}", headers=headers)
            # An honest result of this table, replayed on another table's subject.
            elsewhere = f"masa.table.v1.{other}.result"
            await publish(
                js,
                elsewhere,
                honest_bytes,
                msg_id="moved",
                headers=signed_result(subject, honest_bytes),
            )

            async def set_aside() -> bool:
                letters = await messages_after(
                    nc, DEAD_LETTER_STREAM, f"masa.deadletter.v1.{LEDGER}.{LEDGER_RESULTS_CONSUMER}"
                )
                return len(letters) >= 3

            await eventually(set_aside, what="three forgeries set aside")
            letters = await messages_after(
                nc, DEAD_LETTER_STREAM, f"masa.deadletter.v1.{LEDGER}.{LEDGER_RESULTS_CONSUMER}"
            )
            assert {letter.headers["Masa-Dead-Letter-Reason"] for letter in letters} == {
                "unverified"
            }
            # No chip moved, and the event id the forgeries carried is not in the inbox.
            assert await service.store.settlement(GameKey(table_id=table, game_no=1)) is None
            assert await service.store.settlement(GameKey(table_id=other, game_no=1)) is None
            for player in ("ayse", "mehmet"):
                wallet = await ledger.wallet(player)
                assert (wallet.balance, wallet.held) == (2000, 400)
            counted = registry.get_sample_value(
                "masa_bus_set_aside_total",
                {"consumer": LEDGER_RESULTS_CONSUMER, "reason": "unverified"},
            )
            assert counted == 3

            async def retried() -> bool:
                info: ConsumerInfo = await js.consumer_info(TABLES_STREAM, LEDGER_RESULTS_CONSUMER)
                return (info.num_redelivered or 0) >= 1

            await eventually(retried, what="the result by an unknown key retried")

            # The real result, signed by the engine, pays by the bound terms (10% rake).
            await publish_result(js, honest)

            async def settled() -> bool:
                return (
                    await service.store.settlement(GameKey(table_id=table, game_no=1)) is not None
                )

            await eventually(settled, what="the real result settled")
            settlement = await ledger.settlement(GameKey(table_id=table, game_no=1))
            assert (settlement.pot, settlement.rake) == (400, 40)
            assert [(p.player_id, p.amount) for p in settlement.payouts] == [("ayse", 360)]
            report = await service.store.check()
            assert not any(report.counts.values()), report.examples
    finally:
        await nc.close()


async def test_p30_settling_by_hand_refuses_an_unsigned_result(
    nats_server: NatsServer, database: str
) -> None:
    nc = await operator_connection(nats_server)
    js = nc.jetstream()
    table = f"hand-{uuid.uuid4().hex[:6]}"
    try:
        async with running_ledger(ledger_settings(nats_server, database)) as service:
            for task in service.tasks:
                if task.get_name() == "ledger-results":
                    task.cancel()
            holds = await _stake(service.ledger, table)
            forged = game_finished(
                table, 200, [(0, "ayse", 2, holds[0]), (1, "mehmet", 1, holds[1])]
            )
            await publish(
                js,
                f"masa.table.v1.{table}.result",
                forged.SerializeToString(),
                msg_id="unsigned",
            )
            async with grpc.aio.insecure_channel(service.server.address) as channel:
                stub = ledger_pb2_grpc.LedgerServiceStub(channel)
                call = stub.SettleGame(
                    ledger_pb2.SettleGameRequest(request_id="by-hand", table_id=table, game_no=1),
                    metadata=ADMIN,
                )
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await call
                info = error_info(await rpc_status.aio.from_call(call))
                assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
                assert info is not None
                assert info.reason == RESULT_UNVERIFIED
            assert await service.store.settlement(GameKey(table_id=table, game_no=1)) is None
    finally:
        await nc.close()


async def test_p30_a_signed_result_the_ledger_cannot_settle_is_set_aside_once_and_the_next_pays(
    nats_server: NatsServer, database: str
) -> None:
    """Issue 19's hot loop, on the ledger's consumer: a result message that can never be
    settled (bytes that are no TableResult; a GameFinished with no ranking, which the ledger
    refuses) is set aside after its first delivery, with its reason, counted, never
    redelivered; the real result behind it is paid. Signed as an engine signs, so that it is
    the reading that refuses them, not the signature."""
    nc = await operator_connection(nats_server)
    js = nc.jetstream()
    table = f"bad-{uuid.uuid4().hex[:6]}"
    try:
        registry = CollectorRegistry()
        async with running_ledger(ledger_settings(nats_server, database), registry) as service:
            ledger = service.ledger
            holds = await _stake(ledger, table)
            subject = f"masa.table.v1.{table}.result"
            unreadable = [
                b"\xff\x00 not a protobuf message at all",
                game_finished(table, 200, []).SerializeToString(),
            ]
            for number, payload in enumerate(unreadable):
                await publish(
                    js,
                    subject,
                    payload,
                    msg_id=f"unreadable-{number}",
                    headers=signed_result(subject, payload),
                )
            dead_letters = f"masa.deadletter.v1.{LEDGER}.{LEDGER_RESULTS_CONSUMER}"

            def counted(reason: str) -> float | None:
                return registry.get_sample_value(
                    "masa_bus_set_aside_total",
                    {"consumer": LEDGER_RESULTS_CONSUMER, "reason": reason},
                )

            async def set_aside() -> bool:
                # Counted once the message is terminated, just after its dead letter.
                letters = await messages_after(nc, DEAD_LETTER_STREAM, dead_letters)
                return len(letters) >= 2 and counted("undecodable") == counted("refused") == 1

            await eventually(set_aside, what="both results set aside and counted")
            letters = await messages_after(nc, DEAD_LETTER_STREAM, dead_letters)
            # The consumer handles messages concurrently: in whichever order.
            assert sorted(
                (letter.headers["Masa-Dead-Letter-Reason"], letter.data) for letter in letters
            ) == sorted(zip(("undecodable", "refused"), unreadable, strict=True))

            await publish_result(
                js,
                game_finished(table, 200, [(0, "ayse", 1, holds[0]), (1, "mehmet", 2, holds[1])]),
            )

            async def settled() -> bool:
                return (
                    await service.store.settlement(GameKey(table_id=table, game_no=1)) is not None
                )

            await eventually(settled, what="the real result settled")

            async def all_acknowledged() -> bool:
                info: ConsumerInfo = await js.consumer_info(TABLES_STREAM, LEDGER_RESULTS_CONSUMER)
                return info.num_ack_pending == 0

            # The settlement is acknowledged just after it is committed.
            await eventually(all_acknowledged, what="every result acknowledged")
            info = await js.consumer_info(TABLES_STREAM, LEDGER_RESULTS_CONSUMER)
            # Terminated, not nak'ed: neither came round again.
            assert (info.num_redelivered or 0) == 0
            settlement = await ledger.settlement(GameKey(table_id=table, game_no=1))
            assert (settlement.pot, settlement.rake) == (400, 40)
            assert len(await messages_after(nc, DEAD_LETTER_STREAM, dead_letters)) == 2
    finally:
        await nc.close()
