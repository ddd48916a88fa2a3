"""The whole loop on the real stack, every service its own process (P-1, P-2, P-30, P-31).

``make run``'s launcher starts NATS, the bot, the ledger (SQLite), the table-engine and
matchmaking, with a lobby file of short games (one hand of 51). Players with chips queue
through matchmaking: 8 in a 4-seat salon lobby, 3 in an Elevator lobby, a party of two
partners with two others in a teams lobby, and one in training. SDK clients play every seat
by the greedy policy. Every game finishes, the ledger pays the winners, the chips sum to what
they were, ``masa-ledger check`` passes, and the ratings move.

Then the cases that must leave no hold behind: a cancelled ticket, an expired ticket, a player
without enough chips, and an engine node that refuses CreateTable.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import grpc.aio
import nats
import pytest
from e2e_stack import launch_stack
from google.protobuf.duration_pb2 import Duration
from greedy_player import play_seat
from masa.common.v1 import game_pb2
from masa.events.v1 import engine_pb2
from masa.ledger.v1 import ledger_pb2, ledger_pb2_grpc
from masa.matchmaking.v1 import matchmaking_pb2 as mm
from masa.matchmaking.v1 import matchmaking_pb2_grpc
from masa.table.v1 import event_pb2, table_pb2, table_pb2_grpc
from masa_client.client import TableClient
from masa_platform.bus_access import ADMIN as ADMIN_USER
from masa_platform.testing import token

ADMIN = (("authorization", f"Bearer {token('e2e-admin', 'admin')}"),)
GAMES_SECONDS = 240.0
CHIPS = 1_000
LOBBIES = """
[defaults]
turn_seconds = 30
matching = { base_spread = 5.0, spread_per_second = 1.0, open_after_seconds = 5 }

[[lobby]]
id = "salon"
name = "Salon, one hand"
game = "fiftyone"
preset = "salon"
seats = 4
hands_per_game = 1
stake = 100
rake_basis_points = 500

[[lobby]]
id = "teams"
name = "Salon teams, one hand"
game = "fiftyone"
preset = "salon"
mode = "teams"
seats = 4
hands_per_game = 1
stake = 100

[[lobby]]
id = "elevator"
name = "Elevator"
game = "elevator"
min_seats = 3
max_seats = 6
short_table_after_seconds = 2
stake = 20

[[lobby]]
id = "training"
name = "Training Elevator"
game = "elevator"
mode = "training"
seats = 4
"""


@pytest.fixture(scope="module")
def loop_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    base = tmp_path_factory.mktemp("loop")
    lobbies = base / "lobbies.toml"
    lobbies.write_text(LOBBIES)
    with launch_stack(
        base, {"MASA_LOBBIES_FILE": str(lobbies), "MASA_DEV_WELCOME_CHIPS": "0"}
    ) as started:
        yield {**started.addresses, "run_dir": str(started.run_dir)}


def _player(name: str) -> tuple[tuple[str, str]]:
    return (("authorization", f"Bearer {token(name)}"),)


async def _queue_and_play(
    stub: matchmaking_pb2_grpc.MatchmakingServiceAsyncStub,
    player: str,
    request: mm.CreateTicketRequest,
) -> tuple[mm.Ticket, game_pb2.Standing | None, event_pb2.GameFinished]:
    """Queue, wait to be seated, play the seat to the end; the matched ticket and the result."""
    who = _player(player)
    ticket = (await stub.CreateTicket(request, metadata=who)).ticket
    matched = await _final(stub, player, ticket.ticket_id)
    assert matched.state == mm.Ticket.STATE_MATCHED, (player, matched)
    async with TableClient(matched.table_address, token(player)) as client:
        finished = await play_seat(client, matched.table_id, salt=player)
    return matched, next(s for s in finished.ranking if s.player_id == player), finished


async def _final(
    stub: matchmaking_pb2_grpc.MatchmakingServiceAsyncStub, player: str, ticket_id: str
) -> mm.Ticket:
    last = mm.Ticket()
    async for message in stub.WatchTicket(
        mm.WatchTicketRequest(ticket_id=ticket_id), metadata=_player(player)
    ):
        last = message.ticket
    return last


async def _balance(ledger: ledger_pb2_grpc.LedgerServiceAsyncStub, player: str) -> int:
    answer = await ledger.GetBalance(ledger_pb2.GetBalanceRequest(player_id=player), metadata=ADMIN)
    return answer.account.balance


async def _house(ledger: ledger_pb2_grpc.LedgerServiceAsyncStub) -> int:
    try:
        answer = await ledger.GetAccount(
            ledger_pb2.GetAccountRequest(account_id="house"), metadata=ADMIN
        )
    except grpc.aio.AioRpcError as error:
        if error.code() != grpc.StatusCode.NOT_FOUND:
            raise
        return 0
    return answer.account.balance


async def _held(ledger: ledger_pb2_grpc.LedgerServiceAsyncStub, player: str) -> list[str]:
    answer = await ledger.ListHolds(
        ledger_pb2.ListHoldsRequest(player_id=player, state=ledger_pb2.StakeHold.STATE_HELD),
        metadata=ADMIN,
    )
    return [hold.hold_id for hold in answer.holds]


async def _settled(
    ledger: ledger_pb2_grpc.LedgerServiceAsyncStub, table_id: str
) -> ledger_pb2.Settlement:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            answer = await ledger.GetSettlement(
                ledger_pb2.GetSettlementRequest(table_id=table_id, game_no=1), metadata=ADMIN
            )
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.NOT_FOUND:
                raise
            await asyncio.sleep(0.2)
            continue
        return answer.settlement
    raise AssertionError(f"the ledger never settled {table_id}")


def _check(run_dir: str) -> dict[str, object]:
    database = Path(run_dir) / "ledger.sqlite3"
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


async def test_p30_players_queue_play_and_are_paid_through_matchmaking(
    loop_stack: dict[str, str],
) -> None:
    run = uuid.uuid4().hex[:5]
    salon = [f"{run}-salon{i}" for i in range(8)]
    elevator = [f"{run}-elev{i}" for i in range(3)]
    partners = [f"{run}-partner{i}" for i in range(2)]
    others = [f"{run}-other{i}" for i in range(2)]
    trainee = f"{run}-trainee"
    staked = [*salon, *elevator, *partners, *others]
    async with (
        grpc.aio.insecure_channel(loop_stack["ledger"]) as ledger_channel,
        grpc.aio.insecure_channel(loop_stack["matchmaking"]) as mm_channel,
    ):
        ledger = ledger_pb2_grpc.LedgerServiceStub(ledger_channel)
        stub = matchmaking_pb2_grpc.MatchmakingServiceStub(mm_channel)
        for player in staked:
            await ledger.GrantChips(
                ledger_pb2.GrantChipsRequest(
                    request_id=f"grant-{player}", player_id=player, amount=CHIPS
                ),
                metadata=ADMIN,
            )
        before = sum([await _balance(ledger, p) for p in staked]) + await _house(ledger)
        ratings_before = {
            p: (
                await stub.GetRating(
                    mm.GetRatingRequest(player_id=p, game=game_pb2.GAME_KIND_FIFTYONE),
                    metadata=_player(p),
                )
            ).rating
            for p in salon
        }

        # The party: the first partner starts it, the second joins with its code.
        first = (
            await stub.CreateTicket(
                mm.CreateTicketRequest(request_id="party", lobby_id="teams", party_size=2),
                metadata=_player(partners[0]),
            )
        ).ticket
        assert len(first.party_code) == 8
        plays = [
            _queue_and_play(stub, p, mm.CreateTicketRequest(request_id="go", lobby_id="salon"))
            for p in salon
        ]
        plays += [
            _queue_and_play(stub, p, mm.CreateTicketRequest(request_id="go", lobby_id="elevator"))
            for p in elevator
        ]
        plays += [
            _queue_and_play(
                stub,
                partners[1],
                mm.CreateTicketRequest(
                    request_id="party", lobby_id="teams", party_size=2, party_code=first.party_code
                ),
            ),
            _queue_and_play(
                stub,
                partners[0],
                mm.CreateTicketRequest(request_id="party", lobby_id="teams", party_size=2),
            ),
        ]
        plays += [
            _queue_and_play(stub, p, mm.CreateTicketRequest(request_id="go", lobby_id="teams"))
            for p in others
        ]
        plays.append(
            _queue_and_play(
                stub,
                trainee,
                mm.CreateTicketRequest(
                    request_id="go", lobby_id="training", bot_level=game_pb2.BOT_LEVEL_EASY
                ),
            )
        )
        results = await asyncio.wait_for(asyncio.gather(*plays), GAMES_SECONDS)
        by_player = {ticket.player_id: (ticket, finished) for ticket, _, finished in results}

        salon_tables = {by_player[p][0].table_id for p in salon}
        assert len(salon_tables) == 2
        assert len({by_player[p][0].table_id for p in elevator}) == 1
        team_table = {by_player[p][0].table_id for p in [*partners, *others]}
        assert len(team_table) == 1
        seats = {p: by_player[p][0].seat for p in [*partners, *others]}
        assert abs(seats[partners[0]] - seats[partners[1]]) == 2  # partners opposite (F-2)
        training = by_player[trainee][1]
        assert sum(1 for s in training.ranking if s.player_id) == 1

        # The ledger paid every chip table; the chips sum to what they were (P-31).
        for table_id in {by_player[p][0].table_id for p in staked}:
            settlement = await _settled(ledger, table_id)
            assert settlement.state == ledger_pb2.Settlement.STATE_SETTLED
            assert settlement.payouts
        after = sum([await _balance(ledger, p) for p in staked]) + await _house(ledger)
        assert after == before
        assert await _balance(ledger, trainee) == 0
        for player in staked:
            assert not await _held(ledger, player)

        # The ratings moved for every rated player (bots and training are not rated).
        deadline = time.monotonic() + 60
        pending = set(salon)
        while pending and time.monotonic() < deadline:
            for player in list(pending):
                rating = (
                    await stub.GetRating(
                        mm.GetRatingRequest(player_id=player, game=game_pb2.GAME_KIND_FIFTYONE),
                        metadata=_player(player),
                    )
                ).rating
                if rating.games == 1:
                    assert rating.mu != ratings_before[player].mu
                    pending.discard(player)
            await asyncio.sleep(0.2)
        assert not pending, f"ratings never moved for {pending}"
    report = _check(loop_stack["run_dir"])
    assert report["ok"], report


class _RefusingEngine(table_pb2_grpc.TableServiceServicer):
    """An engine node that refuses every table."""

    def __init__(self) -> None:
        self.calls = 0

    async def CreateTable(
        self,
        request: table_pb2.CreateTableRequest,
        context: grpc.aio.ServicerContext[
            table_pb2.CreateTableRequest, table_pb2.CreateTableResponse
        ],
    ) -> table_pb2.CreateTableResponse:
        self.calls += 1
        await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "this node refuses tables")


async def test_p30_no_hold_is_left_by_a_cancelled_or_expired_ticket_a_short_player_or_a_refusing_engine(  # noqa: PLR0915 - four ways a hold ends, each checked in turn
    loop_stack: dict[str, str],
) -> None:
    run = uuid.uuid4().hex[:5]
    async with (
        grpc.aio.insecure_channel(loop_stack["ledger"]) as ledger_channel,
        grpc.aio.insecure_channel(loop_stack["matchmaking"]) as mm_channel,
    ):
        ledger = ledger_pb2_grpc.LedgerServiceStub(ledger_channel)
        stub = matchmaking_pb2_grpc.MatchmakingServiceStub(mm_channel)

        async def grant(player: str, amount: int) -> None:
            await ledger.GrantChips(
                ledger_pb2.GrantChipsRequest(
                    request_id=f"g-{player}", player_id=player, amount=amount
                ),
                metadata=ADMIN,
            )

        # Cancelled.
        canceller = f"{run}-cancel"
        await grant(canceller, CHIPS)
        ticket = (
            await stub.CreateTicket(
                mm.CreateTicketRequest(request_id="c", lobby_id="salon"),
                metadata=_player(canceller),
            )
        ).ticket
        cancelled = await stub.CancelTicket(
            mm.CancelTicketRequest(request_id="c", ticket_id=ticket.ticket_id),
            metadata=_player(canceller),
        )
        assert cancelled.ticket.state == mm.Ticket.STATE_CANCELLED
        # Expired.
        waiter = f"{run}-expire"
        await grant(waiter, CHIPS)
        ticket = (
            await stub.CreateTicket(
                mm.CreateTicketRequest(request_id="e", lobby_id="salon", ttl=Duration(seconds=1)),
                metadata=_player(waiter),
            )
        ).ticket
        expired = await _final(stub, waiter, ticket.ticket_id)
        assert expired.state == mm.Ticket.STATE_EXPIRED and expired.error.reason == "TICKET_EXPIRED"
        # Short of chips: the three others go back to the queue, and nobody keeps a hold.
        table = [f"{run}-short{i}" for i in range(4)]
        for index, player in enumerate(table):
            await grant(player, 10 if index == 3 else CHIPS)
        tickets = {
            p: (
                await stub.CreateTicket(
                    mm.CreateTicketRequest(request_id="s", lobby_id="salon"), metadata=_player(p)
                )
            ).ticket
            for p in table
        }
        short = await _final(stub, table[3], tickets[table[3]].ticket_id)
        assert short.state == mm.Ticket.STATE_FAILED and short.error.reason == "INSUFFICIENT_FUNDS"
        for player in table[:3]:
            again = (
                await stub.GetTicket(
                    mm.GetTicketRequest(ticket_id=tickets[player].ticket_id),
                    metadata=_player(player),
                )
            ).ticket
            # Back at the front, and not counted against them: another player could not pay.
            assert again.state == mm.Ticket.STATE_SEARCHING and again.requeues == 0
            await stub.CancelTicket(
                mm.CancelTicketRequest(request_id="x", ticket_id=again.ticket_id),
                metadata=_player(player),
            )
        for player in [canceller, waiter, *table]:
            assert not await _held(ledger, player)
            assert await _balance(ledger, player) == (10 if player == table[3] else CHIPS)

        # An engine node that refuses every table: each placement releases its holds and
        # requeues, until the tickets fail with the engine's reason.
        # The generated servicer answers UNIMPLEMENTED for every method the fake leaves out;
        # only mypy-protobuf's stub declares them abstract.
        refusing = _RefusingEngine()  # type: ignore[abstract]
        server = grpc.aio.server()
        table_pb2_grpc.add_TableServiceServicer_to_server(refusing, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        # The registry is the engines'; an operator (the admin NATS user) writes this record.
        admin_password = (Path(loop_stack["run_dir"]) / "nats" / "admin-password").read_text()
        nc = await nats.connect(
            loop_stack["nats"], user=ADMIN_USER, password=admin_password.strip()
        )
        registry = await nc.jetstream().key_value("masa_engine_nodes")
        record = engine_pb2.EngineNode(
            node_id="aaa-refusing",
            address=f"127.0.0.1:{port}",
            games=[game_pb2.GAME_KIND_FIFTYONE],
            capacity=100,
        )
        try:
            await registry.put("aaa-refusing", record.SerializeToString())
            # Matchmaking reads the registry at most every 0.5 s (KvEngineNodes): a table placed
            # sooner would go to the node it knew, not to this one.
            await asyncio.sleep(1.0)
            refused = [f"{run}-refused{i}" for i in range(4)]
            for player in refused:
                await grant(player, CHIPS)
            tickets = {
                p: (
                    await stub.CreateTicket(
                        mm.CreateTicketRequest(request_id="r", lobby_id="salon"),
                        metadata=_player(p),
                    )
                ).ticket
                for p in refused
            }
            finals = [await _final(stub, p, tickets[p].ticket_id) for p in refused]
            assert {t.state for t in finals} == {mm.Ticket.STATE_FAILED}
            assert {t.error.reason for t in finals} == {"FAILED_PRECONDITION"}
            assert refusing.calls >= 3
            for player in refused:
                assert not await _held(ledger, player)
                assert await _balance(ledger, player) == CHIPS
        finally:
            await registry.delete("aaa-refusing")
            await nc.close()
            await server.stop(0)
