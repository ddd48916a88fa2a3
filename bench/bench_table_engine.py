"""Table-engine speed (issue 5): SubmitAction latency and actions/s of one engine process.

Prints one JSON document. The set-up is the real one: a nats-server with JetStream (temporary
store) and one ``python -m masa_table_engine`` process, each on free ports; this process is
the load generator. It keeps ``TABLES`` Elevator tables running at once, every seat a human
seat played from here through ``SubmitAction`` (with its player's token, a request id and the
expected sequence), moves chosen by the engines' greedy policy. Every accepted action is
appended to JetStream by the engine before it answers. A finished table is replaced by a new
one, so table creation is part of the load.

The client holds every seat of a table, so it keeps each table's state itself: it reads each
seat's view once per game (hands included) and applies every accepted action with the
engine's own rules, taking the secret stock cards from the answers (the drawer sees them) and
the cards of a Kopile from that seat's view. So the engine serves one call per action, as it
would for clients that follow their tables on watch streams.

Phases, each measured over a fixed window after a warm-up:

- ``paced``: every table acts on a fixed schedule, offering a total rate of half the target,
  three quarters and the target. The latency target applies at the target rate: a saturated
  closed loop only measures its own queue (200 callers waiting in line). A table whose
  answers come later than its schedule falls behind it, so a rate the engine cannot keep
  shows as fewer accepted actions than offered.
- ``saturated``: every table acts as soon as its last action was answered: the most one
  engine process sustains, to which the throughput target applies.
- ``saturated_with_a_read``: the same with a ``GetTable`` of the actor's view before every
  move.
- ``paced_mixed``: the target rate again, with one table in four playing 51 (four seats, the
  presets in turn, one hand). 51 moves start from the actor's view (``GetTable``), rebuilt
  with ``masa_wire.fiftyone`` and played by the engines' greedy 51 policy.

A bare ``grpc.aio`` echo server (its own process, no interceptors) is measured with the same
client concurrency and unary calls, so the engine's figures can be compared with gRPC's own
cost on this machine. Every process started here is stopped on the way out, errors included.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import Any

import grpc
import grpc.aio
import masa_wire.elevator
from google.protobuf import duration_pb2
from grpc_health.v1 import health_pb2
from masa.common.v1 import game_pb2
from masa.table.v1 import action_pb2, event_pb2, table_pb2, table_pb2_grpc, view_pb2
from masa_platform.auth import mint_token
from masa_platform.settings import AuthSettings
from masa_platform.testing import NatsServer, free_port
from masa_rules import fiftyone
from masa_rules.elevator import Action, Kopile, State, apply, legal_actions
from masa_rules.elevator.policies import greedy_policy
from masa_rules.fiftyone.policies import greedy_policy as fiftyone_greedy
from masa_rules.shuffle import DrawStream
from masa_wire import fiftyone as fiftyone_wire
from masa_wire.cards import card_from_proto, cards_from_proto
from masa_wire.elevator import action_to_proto, state_from_seat_view

TABLES = 200
TARGET_ACTIONS_PER_SECOND = 1_000
PACED_ACTIONS_PER_SECOND = (500, 750, TARGET_ACTIONS_PER_SECOND)
WARMUP_SECONDS = float(os.environ.get("BENCH_WARMUP", "8"))
WINDOW_SECONDS = float(os.environ.get("BENCH_WINDOW", "20"))
ECHO_SECONDS = 10.0
# Elevator seats 3 to 6 players; the tables cycle through every size.
SEAT_COUNTS = (3, 4, 5, 6)
TARGET_P99_MS = 20.0
# Long enough that no timer fires during the run: the load is the clients' actions only.
TURN_SECONDS = 600
CALL_TIMEOUT_SECONDS = 10.0
READY_TIMEOUT_SECONDS = 30.0

GAME_ELEVATOR = "elevator"
GAME_FIFTYONE = "fiftyone"
# In the mixed phase one table in this many plays 51, each preset in turn.
FIFTYONE_EVERY = 4
FIFTYONE_PRESETS = (game_pb2.PRESET_CLASSIC, game_pb2.PRESET_SALON, game_pb2.PRESET_REMI)

AUTH = AuthSettings()
ECHO_METHOD = "/bench.Echo/Echo"


@dataclass(slots=True)
class Phase:
    """What the clients saw over one measured window."""

    submit_seconds: dict[str, list[float]] = field(
        default_factory=lambda: {GAME_ELEVATOR: [], GAME_FIFTYONE: []}
    )
    get_seconds: list[float] = field(default_factory=list)
    accepted: int = 0
    tables_created: int = 0
    games_finished: int = 0
    # Times the client's copy of a table disagreed with the engine and was read again.
    resyncs: int = 0
    errors: Counter[str] = field(default_factory=Counter)


class Recorder:
    """Counts only what completes inside [start, end); the rest is warm-up or wind-down."""

    def __init__(self) -> None:
        self.start = float("inf")
        self.end = float("inf")
        self.phase = Phase()

    def measuring(self, now: float) -> bool:
        return self.start <= now < self.end


class Players:
    """Development tokens, minted once per player name and reused across tables."""

    def __init__(self) -> None:
        self._tokens: dict[str, tuple[tuple[str, str], ...]] = {}
        self.service = self._metadata("bench-lobby", "service")

    def of(self, player: str) -> tuple[tuple[str, str], ...]:
        metadata = self._tokens.get(player)
        if metadata is None:
            metadata = self._tokens[player] = self._metadata(player, "player")
        return metadata

    @staticmethod
    def _metadata(subject: str, role: str) -> tuple[tuple[str, str], ...]:
        token = mint_token(AUTH, subject, (role,), ttl_seconds=3600)
        return (("authorization", f"Bearer {token}"),)


def table_config(
    slot: int, game_no: int, *, fiftyone: bool
) -> tuple[game_pb2.TableConfig, list[str]]:
    seats = 4 if fiftyone else SEAT_COUNTS[(slot + game_no) % len(SEAT_COUNTS)]
    players = [f"bench-{slot}-{seat}" for seat in range(seats)]
    turn_time = duration_pb2.Duration()
    turn_time.FromSeconds(TURN_SECONDS)
    config = game_pb2.TableConfig(
        game=game_pb2.GAME_KIND_ELEVATOR,
        mode=game_pb2.MODE_TRAINING,
        turn_time=turn_time,
        seats=[
            game_pb2.SeatAssignment(
                seat=seat, kind=game_pb2.SEAT_KIND_HUMAN, player_id=player, display_name=player
            )
            for seat, player in enumerate(players)
        ],
    )
    if fiftyone:
        config.game = game_pb2.GAME_KIND_FIFTYONE
        config.preset = FIFTYONE_PRESETS[(slot + game_no) % len(FIFTYONE_PRESETS)]
        config.options.fiftyone.hands_per_game = 1
    return config, players


# state_from_seat_view deals a template game for the fields a view never carries, on every
# call; the template depends only on the rules, the seat count and the hand number, and states
# are immutable, so the load generator keeps one per kind. This keeps the generator (which
# shares the machine with the engine) from spending more CPU per move than the engine does.
masa_wire.elevator.new_game = functools.cache(masa_wire.elevator.new_game)  # type: ignore[attr-defined]


def choose(state: State, seat: int, salt: bytes) -> Action | None:
    """The engines' greedy policy, deterministic in ``salt``; None if ``seat`` has no move."""
    actions = legal_actions(state, seat)
    return greedy_policy(state, seat, DrawStream(salt)) if actions else None


class Driver:
    """Plays the tables of one slot, one after another, every seat as its human player.

    With ``reads`` each move starts from the actor's view (``GetTable``), as a client without
    a watch stream would. Without, only ``SubmitAction`` reaches the engine per move: this
    client holds every seat, so it can keep the whole state itself. At the start it reads
    every seat's view (hands included); then it applies each accepted action with the
    engine's own rules. The stock's order is secret, so a drawn card is taken from the
    answer (the drawer sees it), and a Kopile's cards, which only the Kopile seat sees, from
    that seat's view. Should the copy ever disagree with the engine it is read again.
    """

    def __init__(
        self,
        slot: int,
        stub: table_pb2_grpc.TableServiceAsyncStub,
        *,
        players: Players,
        recorder: Recorder,
        interval: float,
        reads: bool,
        fiftyone: bool = False,
    ) -> None:
        self.slot = slot
        # A 51 table's moves always start from the actor's view: the client keeps no copy.
        self.fiftyone = fiftyone
        self.stub = stub
        self.players = players
        self.recorder = recorder
        self.interval = interval
        self.reads = reads
        self.table_id = ""
        self.names: list[str] = []
        self.state: State | None = None
        self.sequence = 0
        # Every move gets a request id of its own; one the engine refused is not sent again
        # under the same id, which the engine would answer from its de-duplication cache.
        self.moves = 0

    async def run(self, stop: asyncio.Event) -> None:
        """Play until ``stop``, one move every ``interval`` seconds (0: as fast as answered)."""
        loop = asyncio.get_running_loop()
        # Spread the tables' schedules evenly, so the offered load is smooth.
        next_at = loop.time() + self.interval * self.slot / TABLES
        game_no = 0
        while not stop.is_set():
            await self.create(game_no)
            game_no += 1
            actor = await self.sync()
            while actor is not None and not stop.is_set():
                if self.interval:
                    delay = next_at - loop.time()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    # A table that fell behind catches up by one interval at most.
                    next_at = max(next_at + self.interval, loop.time() - self.interval)
                actor = await self.act(actor)

    async def create(self, game_no: int) -> None:
        config, self.names = table_config(self.slot, game_no, fiftyone=self.fiftyone)
        created = await self.stub.CreateTable(
            table_pb2.CreateTableRequest(config=config),
            metadata=self.players.service,
            timeout=CALL_TIMEOUT_SECONDS,
        )
        self.table_id = created.table.table_id
        if self.recorder.measuring(time.perf_counter()):
            self.recorder.phase.tables_created += 1

    async def view(self, seat: int) -> view_pb2.SeatView:
        response = await self.stub.GetTable(
            table_pb2.GetTableRequest(table_id=self.table_id),
            metadata=self.players.of(self.names[seat]),
            timeout=CALL_TIMEOUT_SECONDS,
        )
        return response.seat_view

    async def sync(self) -> int | None:
        """Rebuild the state from every seat's view; returns the seat on turn (None: over)."""
        if self.reads or self.fiftyone:
            table = (await self.view(0)).table
            self.sequence = table.table.sequence
            return int(table.turn_seat) if table.HasField("turn_seat") else None
        views = [await self.view(seat) for seat in range(len(self.names))]
        table = views[0].table
        self.sequence = table.table.sequence
        if not table.HasField("turn_seat"):
            return None
        public = state_from_seat_view(views[0])
        # Only the stock's size matters until a card is drawn, and a drawn card is replaced
        # by the real one before the draw is applied.
        stock = (public.pile[0],) * table.elevator.stock_count
        hands = tuple(cards_from_proto(view.hand) for view in views)
        self.state = replace(public, hands=hands, stock=stock)
        return int(table.turn_seat)

    async def act(self, seat: int) -> int | None:  # noqa: C901, PLR0911, PLR0912 - one timed move: read, choose, submit, follow; each early exit resyncs
        """One move of ``seat``, on turn now; returns the next seat on turn, None at the end."""
        phase = self.recorder.phase
        started = time.perf_counter()
        state = self.state
        fiftyone_state: fiftyone.State | None = None
        if self.reads or self.fiftyone:
            view = await self.view(seat)
            table = view.table
            if not table.HasField("turn_seat") or table.turn_seat != seat:
                return await self.sync()
            self.sequence = table.table.sequence
            if self.fiftyone:
                fiftyone_state = fiftyone_wire.state_from_seat_view(view)
            else:
                state = state_from_seat_view(view)
        read = time.perf_counter()
        # The policies' randomness is seeded by the table and the move, so runs repeat.
        salt = f"{self.table_id}/{self.sequence}/{self.moves}"
        action: Action | None = None
        if fiftyone_state is not None:
            move = fiftyone_greedy(fiftyone_state, seat, DrawStream(salt.encode()))
            message = fiftyone_wire.action_to_proto(move)
        else:
            if state is not None:
                action = choose(state, seat, salt.encode())
            if state is None or action is None:
                # The client's copy has drifted from the table; read it again.
                if self.recorder.measuring(time.perf_counter()):
                    phase.resyncs += 1
                return await self.sync()
            message = action_to_proto(action)
        update = await self.submit(seat, message, read_seconds=read - started)
        if update is None:
            return await self.sync()
        if self.fiftyone:
            update = await self.answer_queries(update)
            if update is None:
                return await self.sync()
        if any(event.HasField("game_finished") for event in update.events):
            return None
        following = next(
            (int(e.turn_started.seat) for e in update.events if e.HasField("turn_started")), None
        )
        if self.reads or state is None or action is None:
            return following if following is not None else await self.sync()
        return await self.follow(state, action, update, following)

    async def submit(
        self, seat: int, message: action_pb2.Action, *, read_seconds: float | None
    ) -> event_pb2.TableUpdate | None:
        """Submit ``seat``'s move and count it; None when the engine refused it."""
        phase = self.recorder.phase
        self.moves += 1
        sent = time.perf_counter()
        try:
            answer = await self.stub.SubmitAction(
                table_pb2.SubmitActionRequest(
                    request_id=f"{self.table_id}/{self.sequence}/{self.moves}",
                    table_id=self.table_id,
                    expected_sequence=self.sequence,
                    action=message,
                ),
                metadata=self.players.of(self.names[seat]),
                timeout=CALL_TIMEOUT_SECONDS,
            )
        except grpc.aio.AioRpcError as error:
            # A refused move means the client's copy has drifted: count it, and read it again.
            if self.recorder.measuring(time.perf_counter()):
                phase.errors[error.code().name] += 1
                phase.resyncs += 1
            return None
        done = time.perf_counter()
        update = answer.update
        if self.recorder.measuring(done):
            if read_seconds is not None and (self.reads or self.fiftyone):
                phase.get_seconds.append(read_seconds)
            phase.submit_seconds[GAME_FIFTYONE if self.fiftyone else GAME_ELEVATOR].append(
                done - sent
            )
            phase.accepted += 1
            phase.games_finished += sum(1 for e in update.events if e.HasField("game_finished"))
        self.sequence = update.sequence
        return update

    async def answer_queries(self, update: event_pb2.TableUpdate) -> event_pb2.TableUpdate | None:
        """F-80: a 51 move that starts a query waits for the asked seats, which all give (as
        the greedy policy does) until the query ends; returns the last update."""
        asked = [
            seat
            for event in update.events
            if event.HasField("query_started")
            for seat in event.query_started.asked_seats
        ]
        for seat in asked:
            give = action_pb2.Action(
                answer_query=action_pb2.AnswerQuery(answer=action_pb2.QUERY_ANSWER_GIVE)
            )
            answered = await self.submit(seat, give, read_seconds=None)
            if answered is None:
                return None
            update = answered
            if any(event.HasField("query_ended") for event in update.events):
                break
        return update

    async def follow(
        self, state: State, action: Action, update: event_pb2.TableUpdate, following: int | None
    ) -> int | None:
        """Apply the accepted ``action`` to the copy of the state; returns the seat on turn."""
        for event in update.events:
            if event.HasField("passed") and event.passed.HasField("drawn"):
                drawn = card_from_proto(event.passed.drawn)
                state = replace(state, stock=(drawn, *state.stock[1:]))
        state, happened = apply(state, action)
        for rule_event in happened:
            if isinstance(rule_event, Kopile) and rule_event.drew:
                seat = rule_event.seat
                hand = cards_from_proto((await self.view(seat)).hand)
                hands = (*state.hands[:seat], hand, *state.hands[seat + 1 :])
                state = replace(state, hands=hands)
        self.state = state
        if following is None or following != state.turn:
            if self.recorder.measuring(time.perf_counter()):
                self.recorder.phase.resyncs += 1
            return await self.sync()
        return following


async def measure_engine(
    address: str,
    metrics_url: str,
    pid: int,
    nats_pid: int,
    *,
    interval: float,
    reads: bool,
    fiftyone_every: int = 0,
) -> dict[str, Any]:
    """One phase: warm up, then count and time what completes within the window."""
    recorder = Recorder()
    stop = asyncio.Event()
    players = Players()
    async with grpc.aio.insecure_channel(address) as channel:
        stub = table_pb2_grpc.TableServiceStub(channel)
        drivers = [
            Driver(
                slot,
                stub,
                players=players,
                recorder=recorder,
                interval=interval,
                reads=reads,
                fiftyone=bool(fiftyone_every) and slot % fiftyone_every == fiftyone_every - 1,
            )
            for slot in range(TABLES)
        ]
        tasks = [asyncio.create_task(driver.run(stop)) for driver in drivers]
        try:
            await asyncio.sleep(WARMUP_SECONDS)
            before = engine_counters(metrics_url, pid, nats_pid)
            own_cpu = time.process_time()
            recorder.start = time.perf_counter()
            recorder.end = recorder.start + WINDOW_SECONDS
            await asyncio.sleep(WINDOW_SECONDS)
            after = engine_counters(metrics_url, pid, nats_pid)
            own_cpu = time.process_time() - own_cpu
            for task in tasks:
                if task.done() and task.exception() is not None:
                    raise RuntimeError("a table driver failed") from task.exception()
        finally:
            stop.set()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    phase = recorder.phase
    engine_accepted = after["accepted"] - before["accepted"]
    cpu = after["cpu_seconds"] - before["cpu_seconds"]
    nats_cpu = after["nats_cpu_seconds"] - before["nats_cpu_seconds"]
    return {
        "engine_calls_per_action": (
            "GetTable + SubmitAction"
            if reads
            else "SubmitAction; GetTable + SubmitAction for 51 moves"
            if fiftyone_every
            else "SubmitAction"
        ),
        "offered_actions_per_second": round(TABLES / interval) if interval else None,
        "window_seconds": WINDOW_SECONDS,
        "accepted_actions": phase.accepted,
        "actions_per_second": round(phase.accepted / WINDOW_SECONDS, 1),
        "engine_accepted_actions_per_second": round(engine_accepted / WINDOW_SECONDS, 1),
        "engine_cpu_percent": round(100 * cpu / WINDOW_SECONDS, 1),
        "engine_cpu_ms_per_action": round(1000 * cpu / engine_accepted, 3)
        if engine_accepted
        else None,
        "nats_server_cpu_percent": round(100 * nats_cpu / WINDOW_SECONDS, 1),
        "load_generator_cpu_percent": round(100 * own_cpu / WINDOW_SECONDS, 1),
        "submit_action_ms": percentiles([s for g in phase.submit_seconds.values() for s in g]),
        **(
            {
                "submit_action_ms_by_game": {
                    game: percentiles(seconds) for game, seconds in phase.submit_seconds.items()
                }
            }
            if fiftyone_every
            else {}
        ),
        **({"get_table_ms": percentiles(phase.get_seconds)} if reads else {}),
        "tables_created": phase.tables_created,
        "games_finished": phase.games_finished,
        "client_resyncs": phase.resyncs,
        "errors": dict(phase.errors),
    }


def engine_counters(metrics_url: str, pid: int, nats_pid: int) -> dict[str, float]:
    """Accepted actions by the engine's own count, and its CPU time so far."""
    with urllib.request.urlopen(metrics_url, timeout=5) as answer:
        text = answer.read().decode()
    accepted = sum(
        float(match.group(1))
        for match in re.finditer(
            r'^masa_table_actions_total\{[^}]*result="accepted"[^}]*\} (\S+)$', text, re.M
        )
    )
    return {
        "accepted": accepted,
        "cpu_seconds": cpu_seconds(pid),
        "nats_cpu_seconds": cpu_seconds(nats_pid),
    }


def pid_of(marker: str) -> int:
    """The process whose command line holds ``marker`` (the nats-server of our temp store)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if marker.encode() in (entry / "cmdline").read_bytes():
                    return int(entry.name)
    raise LookupError(f"no process runs with {marker}")


def cpu_seconds(pid: int) -> float:
    """The CPU time (user and system) a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 of stat, 12 and 13 after the command name.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentiles(samples: list[float]) -> dict[str, float | int]:
    if not samples:
        return {"count": 0}
    ordered = sorted(samples)

    def at(q: float) -> float:
        return round(1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)

    return {
        "count": len(ordered),
        "p50": at(0.50),
        "p90": at(0.90),
        "p99": at(0.99),
        "max": round(1000 * ordered[-1], 2),
    }


# --- the bare echo server --------------------------------------------------------------------


async def echo_server(port: int) -> None:
    """Serve ``/bench.Echo/Echo`` (bytes back as they came) until SIGTERM."""

    async def echo(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        return request

    server = grpc.aio.server()
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                "bench.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(echo)}
            ),
        )
    )
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    stopped = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopped.set)
    await stopped.wait()
    await server.stop(0)


async def measure_echo(address: str, payload: bytes, pid: int) -> dict[str, Any]:
    """Calls/s of ``TABLES`` callers that each call again as soon as answered."""
    latencies: list[float] = []
    calls = 0
    start = end = float("inf")
    stop = asyncio.Event()
    async with grpc.aio.insecure_channel(address) as channel:
        await wait_ready(channel)
        call: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(ECHO_METHOD)

        async def caller() -> None:
            nonlocal calls
            while not stop.is_set():
                sent = time.perf_counter()
                await call(payload, timeout=CALL_TIMEOUT_SECONDS)
                done = time.perf_counter()
                if start <= done < end:
                    calls += 1
                    latencies.append(done - sent)

        tasks = [asyncio.create_task(caller()) for _ in range(TABLES)]
        try:
            await asyncio.sleep(2.0)
            cpu = cpu_seconds(pid)
            start = time.perf_counter()
            end = start + ECHO_SECONDS
            await asyncio.sleep(ECHO_SECONDS)
            cpu = cpu_seconds(pid) - cpu
        finally:
            stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)
    return {
        "concurrency": TABLES,
        "payload_bytes": len(payload),
        "calls_per_second": round(calls / ECHO_SECONDS, 1),
        "server_cpu_percent": round(100 * cpu / ECHO_SECONDS, 1),
        "server_cpu_ms_per_call": round(1000 * cpu / calls, 3) if calls else None,
        "latency_ms": percentiles(latencies),
    }


# --- processes -------------------------------------------------------------------------------


@contextlib.contextmanager
def child(command: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A child process, stopped (SIGTERM, then SIGKILL) however the block ends."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


async def wait_ready(channel: grpc.aio.Channel) -> None:
    """Wait for the server behind ``channel`` to accept calls."""
    await asyncio.wait_for(channel.channel_ready(), READY_TIMEOUT_SECONDS)


async def wait_serving(address: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    async with grpc.aio.insecure_channel(address) as channel:
        # The health stubs' types lack Check, so the method is called by its full name.
        check = channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString,
        )
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the engine exited at start with {process.returncode}")
            with contextlib.suppress(grpc.aio.AioRpcError):
                answer = await check(health_pb2.HealthCheckRequest(), timeout=0.5)
                if answer.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            if time.monotonic() > deadline:
                raise TimeoutError("the engine did not report SERVING")
            await asyncio.sleep(0.1)


def engine_env(nats_url: str, grpc_port: int, metrics_port: int) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "MASA_NATS_URL": nats_url,
            "MASA_GRPC_PORT": str(grpc_port),
            "MASA_METRICS_PORT": str(metrics_port),
            "MASA_NODE_ID": "bench-engine",
            "MASA_GRACE_SECONDS": "1",
            "MASA_TURN_SECONDS": str(TURN_SECONDS),
            # Seats have no watch streams here; they must not forfeit during the run.
            "MASA_SEAT_PROTECTION_SECONDS": "3600",
        }
    )
    return env


def payload_size() -> int:
    """The size of a typical SubmitActionRequest, for the echo calls."""
    request = table_pb2.SubmitActionRequest(
        request_id="0123456789abcdef0123456789abcdef/42",
        table_id="0123456789abcdef0123456789abcdef",
        expected_sequence=42,
    )
    request.action.play.cards.add(rank=5, suit=2)
    return request.ByteSize()


async def run(workdir: Path) -> dict[str, Any]:
    load_at_start = round(os.getloadavg()[0], 2)
    with NatsServer(workdir / "nats") as nats_server:
        grpc_port, metrics_port, echo_port = free_port(), free_port(), free_port()
        engine_command = [sys.executable, "-m", "masa_table_engine"]
        env = engine_env(nats_server.url, grpc_port, metrics_port)
        with child(engine_command, env, workdir / "engine.log") as engine:
            address = f"127.0.0.1:{grpc_port}"
            await wait_serving(address, engine)
            metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
            nats_pid = pid_of(str(workdir / "nats" / "nats-server.conf"))
            paced = [
                await measure_engine(
                    address, metrics_url, engine.pid, nats_pid, interval=TABLES / rate, reads=False
                )
                for rate in PACED_ACTIONS_PER_SECOND
            ]
            saturated = await measure_engine(
                address, metrics_url, engine.pid, nats_pid, interval=0.0, reads=False
            )
            with_reads = await measure_engine(
                address, metrics_url, engine.pid, nats_pid, interval=0.0, reads=True
            )
            mixed = await measure_engine(
                address,
                metrics_url,
                engine.pid,
                nats_pid,
                interval=TABLES / TARGET_ACTIONS_PER_SECOND,
                reads=False,
                fiftyone_every=FIFTYONE_EVERY,
            )
        echo_command = [sys.executable, __file__, "--echo-server", str(echo_port)]
        with child(echo_command, dict(os.environ), workdir / "echo.log") as echo_server:
            echo = await measure_echo(
                f"127.0.0.1:{echo_port}", b"x" * payload_size(), echo_server.pid
            )
    at_target = paced[-1]
    p99 = at_target["submit_action_ms"].get("p99", float("inf"))
    throughput = saturated["engine_accepted_actions_per_second"]
    return {
        "benchmark": "table_engine",
        "python": platform.python_version(),
        "machine": {
            "cpu_cores": os.cpu_count(),
            "platform": platform.platform(),
            # The cores are shared: other work on the machine shows here and in the figures.
            "load_average_1m_at_start": load_at_start,
        },
        "tables": TABLES,
        "game_mix": {
            "elevator": {"seats": list(SEAT_COUNTS)},
            "paced_mixed": {
                "fiftyone_tables": TABLES // FIFTYONE_EVERY,
                "fiftyone": {"seats": 4, "presets": ["classic", "salon", "remi"], "hands": 1},
            },
        },
        "persistence": "every action appended to JetStream before SubmitAction answers",
        "clients": "every seat a human seat played through SubmitAction (greedy policy)",
        "warmup_seconds": WARMUP_SECONDS,
        "targets": {
            "submit_action_p99_ms": TARGET_P99_MS,
            "actions_per_second": TARGET_ACTIONS_PER_SECOND,
        },
        "meets_targets": {
            "submit_action_p99_at_target_rate": p99 <= TARGET_P99_MS,
            # Within 2 %: a schedule's first and last moves can straddle the window's edges.
            "target_rate_kept": at_target["engine_accepted_actions_per_second"]
            >= 0.98 * TARGET_ACTIONS_PER_SECOND,
            "actions_per_second_saturated": throughput >= TARGET_ACTIONS_PER_SECOND,
        },
        "paced": paced,
        "saturated": saturated,
        "saturated_with_a_read": with_reads,
        "paced_mixed": mixed,
        "grpc_echo": echo,
    }


def _interrupted(signum: int, frame: FrameType | None) -> None:
    # SIGTERM becomes an exception, so every child process and temporary file is cleaned up.
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--echo-server":
        asyncio.run(echo_server(int(sys.argv[2])))
        return
    signal.signal(signal.SIGTERM, _interrupted)
    with tempfile.TemporaryDirectory(prefix="masa-bench-") as workdir:
        try:
            result = asyncio.run(run(Path(workdir)))
        except BaseException:
            for log in ("engine.log", "echo.log"):
                path = Path(workdir) / log
                if path.exists():
                    sys.stderr.write(f"--- {log} (tail)\n")
                    sys.stderr.write("\n".join(path.read_text().splitlines()[-20:]) + "\n")
            raise
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
