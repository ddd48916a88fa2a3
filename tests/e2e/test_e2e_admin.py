"""``masa admin`` against the real stack ``make run`` starts (issue 13): nodes with their
tables, a table's log as lines, voiding a staked table at the engine (it stops, and its stakes
go back once, P-30), voiding a table nobody knows (it fails and records nothing, issue 20),
draining a node (its tables move to the other node, it stays up not serving) and resuming it
(it serves again, issue 20), and an idempotent grant that says when it moved nothing (issue
20); bad ids and amounts are refused before anything is sent."""

from __future__ import annotations

import asyncio
import contextlib
import io
import re
import subprocess
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import grpc.aio
import pytest
from e2e_stack import Stack
from e2e_terminal import masa, without_uv
from google.protobuf.duration_pb2 import Duration
from grpc_health.v1 import health_pb2
from masa.common.v1 import chips_pb2, game_pb2
from masa.ledger.v1 import ledger_pb2, ledger_pb2_grpc
from masa_client.accounts import grant
from masa_client.cli import main
from masa_client.client import TableClient
from masa_client.errors import MasaCallError
from masa_client.launcher import RunSettings
from masa_client.matchmaking import LedgerClient
from masa_client.nodes import read_nodes
from masa_client.operator_bus import BusLogin, connect_operator
from masa_platform.bus_access import ADMIN, TABLE_ENGINE
from masa_platform.bus_plan import BusSettings
from masa_platform.keys import ISSUER
from masa_platform.settings import PlatformSettings, ServerSettings
from masa_platform.testing import HealthStub, NatsServer, auth_settings, keyring, token
from masa_rules import elevator
from masa_rules.elevator.policies import greedy_policy
from masa_rules.shuffle import DrawStream
from masa_table_engine.bootstrap import Node, start_node
from masa_table_engine.settings import EngineSettings
from masa_wire import elevator as wire
from prometheus_client import CollectorRegistry

# Each ledger call as the identity that may make it: an operator grants chips and reads any
# account, matchmaking holds stakes, a table-engine binds them to a game.
AS_OPERATOR = (("authorization", f"Bearer {token('operator', 'admin')}"),)
AS_MATCHMAKING = (("authorization", f"Bearer {token('matchmaking', 'matchmaking')}"),)
AS_TABLE_ENGINE = (("authorization", f"Bearer {token('table-engine', 'table-engine')}"),)
STAKE = 100
MOVE_SECONDS = 60.0
# make run's development welcome: a player's first grant comes on top of it.
WELCOME = RunSettings().dev_welcome_chips


def admin(run_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**without_uv(), "MASA_RUN_DIR": str(run_dir)}
    return subprocess.run(
        [masa(), "admin", *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_admin_grant_is_idempotent_on_its_request_id_and_says_so(running_stack: Stack) -> None:
    """The same request id again moves nothing, and the command says that (issue 20), rather
    than "granted" again. A player first seen through the grant was welcomed first (make
    run's development welcome)."""
    player = f"granted-{uuid.uuid4().hex[:8]}"
    request = f"grant-{uuid.uuid4().hex[:8]}"
    first = admin(running_stack.run_dir, "grant", player, "250", "--request-id", request)
    assert first.returncode == 0, first.stderr
    assert first.stdout == (
        f"granted 250 chips to {player} (grant:{request}); request id {request}\n"
        f"{player}: {WELCOME + 250:,} chips (0 held, {WELCOME + 250:,} available)\n"
    )
    again = admin(running_stack.run_dir, "grant", player, "250", "--request-id", request)
    assert again.returncode == 0, again.stderr
    assert again.stdout == (
        f"already granted by request {request}: 250 chips to {player} (grant:{request}); "
        "nothing moved\n"
        f"{player}: {WELCOME + 250:,} chips (0 held, {WELCOME + 250:,} available)\n"
    )


async def test_masa_grant_says_when_its_request_id_granted_before(
    running_stack: Stack,
) -> None:
    """What masa grant prints (masa_client.accounts.grant) with a request id used before."""
    player = f"gifted-{uuid.uuid4().hex[:8]}"
    request = f"gift-{uuid.uuid4().hex[:8]}"
    printed: list[str] = []
    for _ in range(2):
        out = io.StringIO()
        async with LedgerClient(running_stack.addresses["ledger"], token("ops", "admin")) as client:
            await grant(client, player, 500, "a gift", out, request_id=request)
        printed.append(out.getvalue())
    assert printed[0].startswith(f"granted 500 chips to {player} (grant:{request});")
    assert printed[1] == (
        f"already granted by request {request}: 500 chips to {player} (grant:{request}); "
        "nothing moved\n"
        f"{player}: {WELCOME + 500:,} chips (0 held, {WELCOME + 500:,} available)\n"
    )


def test_admin_refuses_bad_ids_and_amounts_before_sending_anything(
    running_stack: Stack, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """In-process (``masa_client.cli.main``): a process per case would cost seconds each."""
    monkeypatch.setenv("MASA_RUN_DIR", str(running_stack.run_dir))
    cases = [
        (("grant", "alice", "lots"), 2, "not a whole number of chips: 'lots'"),
        (("grant", "alice", "0"), 2, "the amount must be 1 to 1,000,000,000,000 chips"),
        (("grant", "alice", "1000000000001"), 2, "the amount must be 1 to"),
        (("grant", "no spaces please", "5"), 2, "not a valid player id"),
        (("void", "../etc"), 2, "not a valid table id: '../etc'"),
        (("void", "t1", "--game", "0"), 2, "not a game number"),
        (("drain", "node/0"), 2, "not a valid node id: 'node/0'"),
        (("drain", "no-such-node"), 1, "no live table-engine node no-such-node (live: table"),
        (("resume", "node/0"), 2, "not a valid node id: 'node/0'"),
        (
            ("resume", "no-such-node"),
            1,
            "masa admin resume: no live table-engine node no-such-node (live: table",
        ),
        (("log", "x" * 65), 2, "not a valid table id"),
        (("drop-everything",), 2, "invalid choice"),
        (("log", "no-such-table"), 1, "table no-such-table has no log"),
    ]
    for args, code, message in cases:
        with pytest.raises(SystemExit) as refused:
            main(["admin", *args])
        err = capsys.readouterr().err
        assert refused.value.code == code, (args, err)
        assert message in err, (args, err)
        assert "Traceback" not in err


async def test_admin_nodes_log_and_void_a_staked_table(running_stack: Stack) -> None:
    """A chip table with three staked players (P-13: no bot sits at it) who each made one
    move: admin nodes shows it under its node, admin log shows its entries with seat names and
    request ids, and admin void stops the table at its node (a TableVoided entry ends the log)
    and gives every stake back (P-30), once."""
    addresses = running_stack.addresses
    run_dir = running_stack.run_dir
    table_id = f"void-{uuid.uuid4().hex[:8]}"
    players = (f"ada-{table_id}", f"ben-{table_id}", f"cem-{table_id}")
    terms = chips_pb2.PayoutRule(rake_basis_points=500)
    holds = await _staked(addresses["ledger"], table_id, players, terms)
    config = game_pb2.TableConfig(
        game=game_pb2.GAME_KIND_ELEVATOR,
        mode=game_pb2.MODE_SINGLES,
        seats=[
            game_pb2.SeatAssignment(
                seat=seat,
                kind=game_pb2.SEAT_KIND_HUMAN,
                player_id=player,
                display_name=player[:3],
                hold_id=holds[player],
            )
            for seat, player in enumerate(players)
        ],
        stake=STAKE,
        turn_time=Duration(seconds=30),
        payout=terms,
    )
    service = TableClient(addresses["table-engine"], token("matchmaking", "matchmaking"))
    async with service:
        table = await service.create_table(
            config, request_id=f"{table_id}-create", table_id=table_id
        )
    clients = [TableClient(table.owner_address, token(p)) for p in players]
    try:
        moved = await asyncio.wait_for(
            asyncio.gather(
                *(_one_move(c, table_id, f"{table_id}-{n}") for n, c in enumerate(clients))
            ),
            MOVE_SECONDS,
        )
        assert moved == [f"{table_id}-{n}" for n in range(len(players))]

        listed = admin(run_dir, "nodes")
        assert listed.returncode == 0, listed.stderr
        owner = re.search(
            rf"^(table-engine-\d) +{re.escape(table.owner_address)} ", listed.stdout, re.M
        )
        assert owner is not None, listed.stdout
        under = listed.stdout.split(owner.group(0), 1)[1].split("\ntable-engine-", 1)[0]
        assert f"  table {table_id}\n" in under + "\n"

        log = admin(run_dir, "log", table_id)
        assert log.returncode == 0, log.stderr
        lines = log.stdout.splitlines()
        assert re.match(
            rf" +1  \S+ \S+  table_created +table  3 seats, stake {STAKE}  "
            rf"request {table_id}-create  -> hand_dealt, turn_started  \(node {owner.group(1)}\)",
            lines[0],
        ), lines[0]
        # Cards read as codes (7H), not as protobuf text.
        assert "RANK_" not in log.stdout
        sequences = [int(line.split()[0]) for line in lines]
        assert sequences == list(range(1, len(lines) + 1))
        for n, name in enumerate(("ada", "ben", "cem")):
            mine = [line for line in lines if f"request {table_id}-{n}" in line]
            assert len(mine) == 1, lines
            assert f"action_applied  seat {n} {name}  " in mine[0]
            assert "[player]" in mine[0]
        assert not any("[bot]" in line for line in lines)

        await _void_and_check(running_stack, table_id, table.owner_address, holds)
    finally:
        for client in clients:
            with contextlib.suppress(MasaCallError):
                await client.leave_table(table_id)
            await client.close()


async def _void_and_check(
    stack: Stack, table_id: str, owner_address: str, holds: dict[str, str]
) -> None:
    """admin void at the table's node: the stakes go back, the table stops; once only."""
    players = list(holds)
    voided = admin(
        stack.run_dir, "void", table_id, "--request-id", f"{table_id}-void", "--reason", "stuck"
    )
    assert voided.returncode == 0, voided.stderr
    assert f"voided table {table_id} at {owner_address}\n" in voided.stdout
    assert f"voided table {table_id} game 1: {len(players)} stakes given back" in voided.stdout
    for player in players:
        assert f"  {player}: {STAKE} chips (voided, hold {holds[player]})" in voided.stdout
    async with grpc.aio.insecure_channel(stack.addresses["ledger"]) as channel:
        ledger = ledger_pb2_grpc.LedgerServiceStub(channel)
        for player in players:
            account = (
                await ledger.GetBalance(
                    ledger_pb2.GetBalanceRequest(player_id=player), metadata=AS_OPERATOR
                )
            ).account
            chips = WELCOME + 1000
            assert (account.balance, account.held, account.available) == (chips, 0, chips)
    # The engine stopped the table: no timer or autopilot moves it, and the log ends with the
    # void.
    await asyncio.sleep(1.0)
    log = admin(stack.run_dir, "log", table_id)
    assert log.returncode == 0, log.stderr
    last = log.stdout.splitlines()[-1]
    assert re.search(r"table_voided +table  voided: stuck  -> game_abandoned", last), last
    assert log.stdout.count("table_voided") == 1
    again = admin(stack.run_dir, "void", table_id)
    assert again.returncode == 0, again.stderr
    assert f"table {table_id} game 1 was voided already; nothing changed" in again.stdout
    assert admin(stack.run_dir, "log", table_id).stdout == log.stdout


async def test_admin_void_falls_back_on_the_ledger_when_no_engine_serves_the_table(
    running_stack: Stack,
) -> None:
    """Stakes bound to a game whose table no node serves (its node gone for good, say): the
    ledger voids them itself, the backstop, and says why the engine did not."""
    table_id = f"ghost-{uuid.uuid4().hex[:8]}"
    players = (f"ada-{table_id}", f"ben-{table_id}")
    terms = chips_pb2.PayoutRule(place_shares=[10_000])
    holds = await _staked(running_stack.addresses["ledger"], table_id, players, terms)
    async with grpc.aio.insecure_channel(running_stack.addresses["ledger"]) as channel:
        await ledger_pb2_grpc.LedgerServiceStub(channel).BindHolds(
            ledger_pb2.BindHoldsRequest(
                request_id=f"{table_id}-bind",
                table_id=table_id,
                game_no=1,
                stake=STAKE,
                hold_ids=list(holds.values()),
                payout=terms,
            ),
            metadata=AS_TABLE_ENGINE,
        )
    voided = admin(running_stack.run_dir, "void", table_id)
    assert voided.returncode == 0, voided.stderr
    assert voided.stdout.startswith(
        f"the engine did not void table {table_id} (no live node serves it); "
        "voiding it in the ledger\n"
        f"voided table {table_id} game 1: 2 stakes given back\n"
    ), voided.stdout
    for player in players:
        assert f"  {player}: {STAKE} chips (voided, hold {holds[player]})" in voided.stdout


async def test_admin_void_of_a_table_nobody_knows_fails_and_voids_nothing(
    running_stack: Stack,
) -> None:
    """Issue 20: no node serves the table and the ledger never bound a stake to it (a mistyped
    id): the command says so and exits 1, and the ledger records nothing for it."""
    table_id = f"nosuchtable-{uuid.uuid4().hex[:8]}"
    voided = admin(running_stack.run_dir, "void", table_id)
    assert voided.returncode == 1, voided.stdout
    assert voided.stdout == (
        f"the engine did not void table {table_id} (no live node serves it); "
        "voiding it in the ledger\n"
    )
    assert voided.stderr == (
        f"masa admin void: the ledger knows no game 1 of table {table_id} (no stake was ever "
        "bound to it), so nothing was voided; check the table id (masa admin nodes lists the "
        "tables the nodes serve)\n"
    )
    async with grpc.aio.insecure_channel(running_stack.addresses["ledger"]) as channel:
        ledger = ledger_pb2_grpc.LedgerServiceStub(channel)
        for call in (
            ledger.GetSettlement(
                ledger_pb2.GetSettlementRequest(table_id=table_id, game_no=1),
                metadata=AS_OPERATOR,
            ),
            ledger.GetAccount(
                ledger_pb2.GetAccountRequest(account_id=f"escrow:{table_id}:1"),
                metadata=AS_OPERATOR,
            ),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as missing:
                await call
            assert missing.value.code() is grpc.StatusCode.NOT_FOUND
    # Nothing was recorded: the same command fails the same way again.
    assert admin(running_stack.run_dir, "void", table_id).returncode == 1


async def test_admin_drain_moves_a_nodes_tables_and_leaves_it_up_not_serving(
    tmp_path: Path,
) -> None:
    """Two engine nodes of their own on a real NATS (a drained node stays drained until it
    stops, which would starve the shared stack's other tests of a node), and ``masa admin
    drain`` run as an operator runs it, a process of its own logging into NATS as ``admin``."""
    # Leases and node records of 3 s, so that a dead node's tables move within seconds.
    fast = BusSettings(table_lease_ttl_seconds=3.0, engine_node_ttl_seconds=3.0)
    with NatsServer(tmp_path / "nats", secure=True, bus=fast) as server:
        # No run folder: the operator signs with the issuer key these nodes trust, and logs
        # into NATS as the operators' user.
        env = {
            **without_uv(),
            "MASA_RUN_DIR": str(tmp_path / "no-run"),
            "MASA_JWT_ISSUER_KEY_FILE": str(keyring().private(ISSUER)),
            "MASA_NATS_USER": ADMIN,
            "MASA_NATS_PASSWORD": server.password(ADMIN),
        }
        async with AsyncExitStack() as nodes:
            leaving = await nodes.enter_async_context(_engine(server, "engine-a"))
            staying = await nodes.enter_async_context(_engine(server, "engine-b"))
            await _drain_the_first(server.url, env, leaving, staying)
            await _resume_the_first(server.url, env, leaving)


@asynccontextmanager
async def _engine(server: NatsServer, node_id: str) -> AsyncIterator[Node]:
    platform = PlatformSettings(
        service_name="table-engine",
        auth=auth_settings("table-engine"),
        nats_url=server.url,
        nats_user=TABLE_ENGINE,
        nats_password=server.password(TABLE_ENGINE),
        server=ServerSettings(grpc_port=0, grace_seconds=0.2),
    )
    settings = EngineSettings(
        result_signing_key_file=keyring().results_key,
        log_mac_key_file=keyring().log_mac,
        platform=platform,
        node_id=node_id,
        takeover_scan_seconds=0.2,
    )
    node = await start_node(settings, CollectorRegistry())
    try:
        yield node
    finally:
        await node.stop(0.2)


async def _masa_admin(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    """The command in a process of its own, while this loop keeps the nodes serving."""
    process = await asyncio.create_subprocess_exec(
        masa(),
        "admin",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    return process.returncode or 0, out.decode(), err.decode()


def _training(prefix: str) -> game_pb2.TableConfig:
    """A training table of three players ``<prefix>-0`` to ``-2`` with 10-minute turns."""
    return game_pb2.TableConfig(
        game=game_pb2.GAME_KIND_ELEVATOR,
        mode=game_pb2.MODE_TRAINING,
        seats=[
            game_pb2.SeatAssignment(
                seat=seat,
                kind=game_pb2.SEAT_KIND_HUMAN,
                player_id=f"{prefix}-{seat}",
                display_name="p",
            )
            for seat in range(3)
        ],
        turn_time=Duration(seconds=600),
    )


async def _drain_the_first(
    nats_url: str, env: dict[str, str], leaving: Node, staying: Node
) -> None:
    players = [f"drained-{n}" for n in range(3)]
    config = _training("drained")
    service = TableClient(leaving.address, token("matchmaking", "matchmaking"))
    async with service:
        tables = [(await service.create_table(config)).table_id for _ in range(3)]

    code, out, err = await _masa_admin(env, "drain", "engine-c", "--nats", nats_url)
    assert code == 1
    assert "no live table-engine node engine-c (live: engine-a, engine-b)" in err
    code, out, err = await _masa_admin(env, "drain", "engine-a", "--nats", nats_url)
    assert code == 0, err
    assert f"draining engine-a at {leaving.address} (3 tables) ..." in out
    assert "drained engine-a: handed 3 tables over to the other nodes" in out

    deadline = asyncio.get_running_loop().time() + 15.0
    while sorted(staying.tables.served) != sorted(tables):
        assert asyncio.get_running_loop().time() < deadline, staying.tables.served
        await asyncio.sleep(0.1)
    bus = await connect_operator(BusLogin(nats_url, ADMIN, env["MASA_NATS_PASSWORD"]))
    try:
        deadline = asyncio.get_running_loop().time() + 10.0
        while True:
            nodes = {n.node_id: n for n in await read_nodes(bus, with_tables=True)}
            if sorted(nodes["engine-b"].table_ids) == sorted(tables):
                break
            assert asyncio.get_running_loop().time() < deadline, nodes
            await asyncio.sleep(0.2)
        assert nodes["engine-a"].draining
        assert nodes["engine-a"].table_ids == ()
    finally:
        await bus.close()

    # The node is up, not serving, makes no table, and sends players to the other node.
    async with grpc.aio.insecure_channel(leaving.address) as channel:
        health = HealthStub(channel)
        answer = await health.Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert answer.status == health_pb2.HealthCheckResponse.NOT_SERVING
    service = TableClient(leaving.address, token("matchmaking", "matchmaking"))
    async with service:
        with pytest.raises(MasaCallError) as refused:
            await service.create_table(config)
    assert refused.value.reason == "NODE_DRAINING"
    player = TableClient(leaving.address, token(players[0]))
    async with player:
        view = await player.get_table(tables[0])
    assert view.seat_view.table.table.owner_address == staying.address
    code, out, err = await _masa_admin(env, "drain", "engine-a", "--nats", nats_url)
    assert code == 0, err
    assert "handed 0 tables over" in out


async def _resume_the_first(nats_url: str, env: dict[str, str], leaving: Node) -> None:
    """Issue 20: the operator returns the drained node to service; it serves and makes tables
    again, and the registry lists it as live."""
    code, out, err = await _masa_admin(env, "resume", "engine-c", "--nats", nats_url)
    assert code == 1
    assert "masa admin resume: no live table-engine node engine-c (live: engine-a, engine-b)" in err
    code, out, err = await _masa_admin(env, "resume", "engine-a", "--nats", nats_url)
    assert code == 0, err
    assert out == (
        f"resumed engine-a at {leaving.address}: it makes new tables and takes tables over "
        "again, and answers health SERVING\n"
    )
    async with grpc.aio.insecure_channel(leaving.address) as channel:
        health = HealthStub(channel)
        answer = await health.Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING
    service = TableClient(leaving.address, token("matchmaking", "matchmaking"))
    async with service:
        made = await service.create_table(_training("resumed"))
    assert made.owner_address == leaving.address
    bus = await connect_operator(BusLogin(nats_url, ADMIN, env["MASA_NATS_PASSWORD"]))
    try:
        nodes = {n.node_id: n for n in await read_nodes(bus)}
    finally:
        await bus.close()
    assert not nodes["engine-a"].draining
    code, out, err = await _masa_admin(env, "resume", "engine-a", "--nats", nats_url)
    assert code == 0, err
    assert out == f"engine-a at {leaving.address} is not drained; nothing changed\n"


async def _staked(
    ledger_address: str, table_id: str, players: tuple[str, ...], terms: chips_pb2.PayoutRule
) -> dict[str, str]:
    """1000 chips for each player and a hold of the stake for a game of these terms; hold ids
    by player."""
    async with grpc.aio.insecure_channel(ledger_address) as channel:
        ledger = ledger_pb2_grpc.LedgerServiceStub(channel)
        for player in players:
            await ledger.GrantChips(
                ledger_pb2.GrantChipsRequest(
                    request_id=f"{table_id}-{player}", player_id=player, amount=1000
                ),
                metadata=AS_OPERATOR,
            )
        placed = await ledger.HoldStakes(
            ledger_pb2.HoldStakesRequest(
                request_id=f"{table_id}-stakes",
                stakes=[
                    ledger_pb2.HoldStakeRequest(
                        request_id=f"{table_id}-{p}-stake",
                        player_id=p,
                        amount=STAKE,
                        payout=terms,
                    )
                    for p in players
                ],
            ),
            metadata=AS_MATCHMAKING,
        )
    return {hold.player_id: hold.hold_id for hold in placed.holds}


async def _one_move(client: TableClient, table_id: str, request_id: str) -> str:
    """Play the seat's first possible move (greedy) with ``request_id``; the id once taken."""
    rng = DrawStream(request_id.encode())
    async for _ in client.watch(table_id):
        view = (await client.get_table(table_id)).seat_view
        state = wire.state_from_seat_view(view)
        if not elevator.legal_actions(state, view.seat):
            continue
        action = wire.action_to_proto(greedy_policy(state, view.seat, rng))
        try:
            await client.submit_action(
                table_id, action, view.table.table.sequence, request_id=request_id
            )
        except MasaCallError as error:
            if error.reason not in ("SEQUENCE_MISMATCH", "E-3"):
                raise
            continue
        return request_id
    raise AssertionError(f"the watch of {table_id} ended before a move")
