"""Ticket to seat (issue 11): p99 ≤ 1.5 s with 1,000 players waiting across lobbies.

Prints one JSON document. The whole stack runs as ``make run`` starts it (the launcher on free
ports, temporary run folder): nats-server, the bot, the ledger on SQLite, one table-engine
node and matchmaking, each its own process; this process is the load generator. The time of a
ticket is from the CreateTicket call to the MATCHED state on its WatchTicket stream: it
counts the round, the claim, the ledger's HoldStakes, the engine's CreateTable (which binds the
holds in the ledger before it starts the table) and the seating.

- ``waiting``: 1,000 players search across five chip lobbies and stay there: each is the first
  member of a party of two whose partner never comes, so the rounds carry them all the time.
- ``arrivals``: meanwhile players arrive in fours, one group every ``ARRIVAL_SECONDS`` in turn
  into the lobbies, ``GROUPS`` groups in all; every one of them is seated at a chip table. Their
  times make the distribution reported.
- ``burst``: then 400 more arrive at once (100 tables), which measures how fast placement
  drains a queue (the tail is the queue, not a round).

Baseline: the same two calls placement makes (HoldStakes, and CreateTable, which binds), made
here directly for ``GROUPS`` tables one after another: the ratio of the matchmaking p50 to it says
what matching adds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
from google.protobuf.duration_pb2 import Duration
from launched_stack import launched_stack
from masa.common.v1 import chips_pb2, game_pb2
from masa.ledger.v1 import ledger_pb2, ledger_pb2_grpc
from masa.matchmaking.v1 import matchmaking_pb2 as mm
from masa.matchmaking.v1 import matchmaking_pb2_grpc
from masa.table.v1 import table_pb2, table_pb2_grpc
from masa_platform.testing import token as mint

ADMIN = (("authorization", f"Bearer {mint('bench', 'admin')}"),)
WAITING = 1_000
GROUPS = 60
ARRIVAL_SECONDS = 0.25
BURST = 400
TARGET_P99_SECONDS = 1.5
LOBBY_IDS = ("l1", "l2", "l3", "l4", "l5")
LOBBIES = "\n".join(
    f"""
[[lobby]]
id = "{lobby}"
name = "Bench {lobby}"
game = "elevator"
mode = "singles"
seats = 4
stake = 10
turn_seconds = 600
ticket_ttl_seconds = 3600
"""
    for lobby in LOBBY_IDS
)


@contextlib.contextmanager
def stack(workdir: Path) -> Iterator[dict[str, str]]:
    lobbies = workdir / "lobbies.toml"
    lobbies.write_text(LOBBIES)
    env = {"MASA_LOBBIES_FILE": str(lobbies), "MASA_DEV_WELCOME_CHIPS": "0"}
    with launched_stack(workdir, env) as state:
        yield {name: entry["grpc"] for name, entry in state["services"].items() if entry["grpc"]}


def token(player: str) -> tuple[tuple[str, str]]:
    return (("authorization", f"Bearer {mint(player)}"),)


def summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)

    def at(share: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(share * len(ordered)))], 3)

    return {"count": len(ordered), "p50": at(0.5), "p90": at(0.9), "p99": at(0.99), "max": at(1.0)}


async def seat_time(stub: Any, player: str, lobby: str) -> float:
    """From CreateTicket's answer to MATCHED, in seconds."""
    who = token(player)
    ticket = (
        await stub.CreateTicket(
            mm.CreateTicketRequest(request_id="b", lobby_id=lobby), metadata=who
        )
    ).ticket
    started = time.perf_counter()
    async for message in stub.WatchTicket(
        mm.WatchTicketRequest(ticket_id=ticket.ticket_id), metadata=who
    ):
        if message.ticket.state == mm.Ticket.STATE_MATCHED:
            return time.perf_counter() - started
        if message.ticket.state in (mm.Ticket.STATE_FAILED, mm.Ticket.STATE_EXPIRED):
            raise RuntimeError(f"{player}: {message.ticket}")
    raise RuntimeError(f"{player}: the watch ended unseated")


async def grant(ledger: Any, players: list[str]) -> None:
    for start in range(0, len(players), 100):
        await asyncio.gather(
            *(
                ledger.GrantChips(
                    ledger_pb2.GrantChipsRequest(request_id=f"g-{p}", player_id=p, amount=1_000),
                    metadata=ADMIN,
                )
                for p in players[start : start + 100]
            )
        )


async def baseline(ledger: Any, engine_address: str, run: str) -> list[float]:
    """HoldStakes and CreateTable (which binds the holds) for ``GROUPS`` tables, directly."""
    times: list[float] = []
    async with grpc.aio.insecure_channel(engine_address) as channel:
        engine = table_pb2_grpc.TableServiceStub(channel)
        for group in range(GROUPS):
            players = [f"{run}-base{group}-{i}" for i in range(4)]
            await grant(ledger, players)
            table_id = f"base{run}{group}"
            started = time.perf_counter()
            await ledger.HoldStakes(
                ledger_pb2.HoldStakesRequest(
                    request_id=f"{table_id}-holds",
                    stakes=[
                        ledger_pb2.HoldStakeRequest(
                            request_id=f"{table_id}-s{seat}",
                            player_id=p,
                            amount=10,
                            payout=chips_pb2.PayoutRule(),
                        )
                        for seat, p in enumerate(players)
                    ],
                ),
                metadata=ADMIN,
            )
            config = game_pb2.TableConfig(
                game=game_pb2.GAME_KIND_ELEVATOR,
                mode=game_pb2.MODE_SINGLES,
                stake=10,
                turn_time=Duration(seconds=600),
                seats=[
                    game_pb2.SeatAssignment(
                        seat=seat,
                        kind=game_pb2.SEAT_KIND_HUMAN,
                        player_id=p,
                        hold_id=f"{table_id}-s{seat}",
                    )
                    for seat, p in enumerate(players)
                ],
            )
            # The engine binds the holds itself before it answers.
            await engine.CreateTable(
                table_pb2.CreateTableRequest(request_id=table_id, table_id=table_id, config=config),
                metadata=ADMIN,
            )
            times.append(time.perf_counter() - started)
    return times


async def run(addresses: dict[str, str]) -> dict[str, Any]:
    run_id = uuid.uuid4().hex[:6]
    async with (
        grpc.aio.insecure_channel(addresses["ledger"]) as ledger_channel,
        grpc.aio.insecure_channel(addresses["matchmaking"]) as mm_channel,
    ):
        ledger = ledger_pb2_grpc.LedgerServiceStub(ledger_channel)
        stub = matchmaking_pb2_grpc.MatchmakingServiceStub(mm_channel)
        base = await baseline(ledger, addresses["table-engine"], run_id)

        waiting = [f"{run_id}-wait{i}" for i in range(WAITING)]
        for start in range(0, WAITING, 100):
            await asyncio.gather(
                *(
                    stub.CreateTicket(
                        mm.CreateTicketRequest(
                            request_id="w",
                            lobby_id=LOBBY_IDS[i % len(LOBBY_IDS)],
                            party_size=2,
                        ),
                        metadata=token(p),
                    )
                    for i, p in enumerate(waiting[start : start + 100], start=start)
                )
            )
        queued = 0
        for lobby in LOBBY_IDS:
            answer = await stub.GetLobby(mm.GetLobbyRequest(lobby_id=lobby), metadata=ADMIN)
            queued += answer.lobby.queue_length

        arrivals: list[asyncio.Task[float]] = []
        groups = [[f"{run_id}-a{g}-{i}" for i in range(4)] for g in range(GROUPS)]
        await grant(ledger, [p for group in groups for p in group])
        for index, group in enumerate(groups):
            lobby = LOBBY_IDS[index % len(LOBBY_IDS)]
            arrivals += [asyncio.create_task(seat_time(stub, p, lobby)) for p in group]
            await asyncio.sleep(ARRIVAL_SECONDS)
        arrival_times = await asyncio.gather(*arrivals)

        burst_players = [f"{run_id}-b{i}" for i in range(BURST)]
        await grant(ledger, burst_players)
        burst_times = await asyncio.gather(
            *(
                seat_time(stub, p, LOBBY_IDS[(i // 4) % len(LOBBY_IDS)])
                for i, p in enumerate(burst_players)
            )
        )
    steady = summary(list(arrival_times))
    direct = summary(base)
    return {
        "benchmark": "matchmaking_ticket_to_seated",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "players_waiting": queued,
        "target_p99_seconds": TARGET_P99_SECONDS,
        "arrivals": {"groups_of_4": GROUPS, "every_seconds": ARRIVAL_SECONDS, **steady},
        "burst": {"players": BURST, **summary(list(burst_times))},
        "baseline_direct_hold_create_bind": direct,
        "ratio_p50_to_direct_p50": round(steady["p50"] / direct["p50"], 2),
        "meets_target": steady["p99"] <= TARGET_P99_SECONDS and queued >= WAITING,
    }


def main() -> None:
    with (
        tempfile.TemporaryDirectory(prefix="masa-bench-seated-") as workdir,
        stack(Path(workdir)) as addresses,
    ):
        result = asyncio.run(run(addresses))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
