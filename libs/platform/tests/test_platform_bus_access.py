"""One NATS user per service (masa_platform.bus_access), tried as an attacker holding each.

The deployment's nats-server config holds exactly these users and nats-server accepts it. On a
bus provisioned by the operators' step, every service user is refused every JetStream call that
changes what the bus holds (create, update, delete or purge a stream or bucket, make, remove or
take over a consumer), and every route the issue-19 attack used: a RePublish rule from its own
subjects into a table's result subject, a stream sourcing or mirroring the table logs, deleting
or pulling from another service's consumer. What each service needs still works.

The ``retention`` user (masa-bus sweep) may purge the table stream and two table buckets, read
the results through its own consumer and the result consumers' info, and nothing else: no
publish to any masa subject, no stream created, changed or removed, no other consumer touched,
no table log read.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

import nats
import nats.errors
import pytest
from masa_platform.bus import KvBucket, publish, read_subject
from masa_platform.bus_access import (
    ADMIN,
    BOT,
    LEDGER,
    LEDGER_RESULTS_CONSUMER,
    MATCHMAKING,
    MATCHMAKING_RESULTS_CONSUMER,
    RETENTION,
    RETENTION_READER,
    SERVICE_USERS,
    TABLE_ENGINE,
    TABLES_STREAM,
    bus_users,
    deployment_authorization,
    inbox_prefix,
    password_variable,
)
from masa_platform.bus_plan import bus_plan
from masa_platform.direct import last_message
from masa_platform.provision import provision
from masa_platform.testing import NatsServer, nats_server_binary
from nats.aio.client import Client
from nats.js import api as js_api

DEPLOYED = Path(__file__).resolve().parents[3] / "deploy" / "nats" / "nats-server.conf"
# How long a call waits for the server's answer or its permission error, which comes on its
# own (an -ERR the client reports through its error callback): long for a loaded machine, and
# spent only by a call that neither is refused nor answered, which fails the test.
_ANSWER_SECONDS = 10.0


def test_the_deployment_config_holds_exactly_the_masa_users_and_is_valid() -> None:
    text = DEPLOYED.read_text()
    assert text.endswith(deployment_authorization()), "run scripts/render_bus_users.py"
    env = {**os.environ, **{password_variable(u.name): f"pw-{u.name}" for u in bus_users()}}
    checked = subprocess.run(
        [str(nats_server_binary()), "-c", str(DEPLOYED), "-t"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stderr


@pytest.fixture(scope="module")
def bus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    with NatsServer(tmp_path_factory.mktemp("nats"), secure=True) as server:
        yield server


class Attacker:
    """A connection as one masa user that records the server's permission refusals."""

    def __init__(self, nc: Client, refusals: list[str]) -> None:
        self.nc = nc
        self._refusals = refusals

    async def call(self, subject: str, payload: bytes = b"") -> str:
        """``"refused"`` (the server's permissions stopped it), ``"answered"`` with a success,
        or ``"error"`` (JetStream answered with an error)."""
        inbox = self.nc.new_inbox()
        subscription = await self.nc.subscribe(inbox)
        try:
            await self.nc.publish(subject, payload, reply=inbox)
            async with asyncio.timeout(_ANSWER_SECONDS):
                while True:
                    if any(subject.lower() in refusal for refusal in self._refusals):
                        return "refused"
                    try:
                        reply = await subscription.next_msg(timeout=0.02)
                    except nats.errors.TimeoutError:
                        continue
                    try:
                        answer = json.loads(reply.data or b"{}")
                    except ValueError:
                        return "answered"
                    return "error" if isinstance(answer, dict) and "error" in answer else "answered"
        finally:
            await subscription.unsubscribe()


@asynccontextmanager
async def attacker(server: NatsServer, user: str) -> AsyncIterator[Attacker]:
    refusals: list[str] = []

    async def on_error(error: Exception) -> None:
        refusals.append(str(error).lower())

    nc = await nats.connect(
        server.url,
        user=user,
        password=server.password(user),
        inbox_prefix=inbox_prefix(user),
        error_cb=on_error,
        allow_reconnect=True,
    )
    try:
        yield Attacker(nc, refusals)
    finally:
        await nc.close()


def _streams() -> list[str]:
    return [str(config.name) for config in bus_plan().stream_configs()]


def _managing(stream: str) -> list[tuple[str, bytes]]:
    """Every JetStream call that changes a stream or its consumers."""
    api = "$JS.API"
    config = json.dumps({"name": stream, "subjects": ["evil.>"]}).encode()
    return [
        (f"{api}.STREAM.CREATE.{stream}", config),
        (f"{api}.STREAM.UPDATE.{stream}", config),
        (f"{api}.STREAM.DELETE.{stream}", b""),
        (f"{api}.STREAM.PURGE.{stream}", b""),
        (f"{api}.STREAM.MSG.DELETE.{stream}", b'{"seq": 1}'),
        (f"{api}.STREAM.SNAPSHOT.{stream}", b"{}"),
        (f"{api}.STREAM.RESTORE.{stream}", b"{}"),
        (f"{api}.STREAM.LEADER.STEPDOWN.{stream}", b""),
        (f"{api}.STREAM.PEER.REMOVE.{stream}", b"{}"),
        (f"{api}.CONSUMER.DURABLE.CREATE.{stream}.evil", b"{}"),
        (f"{api}.CONSUMER.CREATE.{stream}.evil.masa.table.v1.t1.log", b"{}"),
        (f"{api}.CONSUMER.DELETE.{stream}.{LEDGER_RESULTS_CONSUMER}", b""),
        (f"{api}.CONSUMER.DELETE.{stream}.{MATCHMAKING_RESULTS_CONSUMER}", b""),
        (f"{api}.CONSUMER.PAUSE.{stream}.{LEDGER_RESULTS_CONSUMER}", b"{}"),
        (f"{api}.CONSUMER.LEADER.STEPDOWN.{stream}.{LEDGER_RESULTS_CONSUMER}", b""),
    ]


_ACCOUNT_WIDE = [
    ("$JS.API.STREAM.CREATE.EVIL", json.dumps({"name": "EVIL", "subjects": ["e.>"]}).encode()),
    ("$JS.API.ACCOUNT.PURGE.masa", b""),
    ("$JS.API.META.LEADER.STEPDOWN", b""),
    ("$JS.API.SERVER.REMOVE", b"{}"),
    ("$JS.API.STREAM.NAMES", b""),
    ("$JS.API.STREAM.LIST", b""),
]


@pytest.mark.parametrize("user", SERVICE_USERS)
async def test_no_service_user_may_change_any_stream_bucket_or_consumer(
    bus: NatsServer, user: str
) -> None:
    calls = [call for stream in _streams() for call in _managing(stream)] + _ACCOUNT_WIDE
    async with attacker(bus, user) as mallory:
        outcomes = await asyncio.gather(*(mallory.call(subject, body) for subject, body in calls))
    if user == MATCHMAKING:
        # A durable on the one create subject matchmaking has: the server refuses it (a
        # connection of its own, whose refusals name no other subject).
        async with attacker(bus, user) as mallory:
            made = await mallory.call(
                "$JS.API.CONSUMER.CREATE.KV_masa_matchmaking_tickets",
                json.dumps(
                    {
                        "stream_name": "KV_masa_matchmaking_tickets",
                        "config": {"durable_name": "evil"},
                    }
                ).encode(),
            )
        assert made == "error"
    allowed = [
        subject
        for (subject, _), outcome in zip(calls, outcomes, strict=True)
        if outcome != "refused"
    ]
    # Matchmaking mirrors two buckets of its own through KV watches, whose ephemeral consumers
    # it makes (by the one create subject that names no consumer, on which the server refuses
    # a durable) and removes; no other service has a consumer on those buckets.
    watched = [
        subject
        for stream in ("KV_masa_matchmaking_tickets", "KV_masa_matchmaking_tables")
        for subject, _ in _managing(stream)
        if subject.startswith(f"$JS.API.CONSUMER.DELETE.{stream}.")
    ]
    assert allowed == (watched if user == MATCHMAKING else [])
    # And the bus is as the plan says: nothing was created, changed or removed.
    await _still_as_planned(bus)


_SWEPT = ("MASA_TABLES", "KV_masa_table_snapshots", "KV_masa_table_index")


async def test_the_retention_user_may_purge_the_swept_streams_and_change_nothing_else(
    bus: NatsServer,
) -> None:
    """Issue 19's sweep runs as its own user: of every call that changes the bus it may only
    purge the table stream and the snapshot and index buckets (a purge's subject filter is in
    its body, which permissions do not see)."""
    harmless = json.dumps({"filter": "masa.table.v1.nobody.>"}).encode()
    calls = [
        (subject, harmless if ".STREAM.PURGE." in subject else body)
        for stream in _streams()
        for subject, body in _managing(stream)
    ] + _ACCOUNT_WIDE
    async with attacker(bus, RETENTION) as sweeper:
        outcomes = await asyncio.gather(*(sweeper.call(subject, body) for subject, body in calls))
    allowed = [
        subject
        for (subject, _), outcome in zip(calls, outcomes, strict=True)
        if outcome != "refused"
    ]
    assert allowed == [f"$JS.API.STREAM.PURGE.{stream}" for stream in _SWEPT]
    await _still_as_planned(bus)


async def test_the_retention_user_reads_results_only_and_writes_nothing(bus: NatsServer) -> None:
    """Its own consumer sees the results and nothing else: the create subject names the
    filter, nats-server refuses a config whose filter differs; it may ask the result consumers
    how far they acknowledged, never fetch from, acknowledge or take them over; it publishes no
    result, no log entry and no bucket entry, and reads no table log. A push consumer it aims
    at another stream's subjects stores nothing there."""
    api = f"$JS.API.CONSUMER.CREATE.{TABLES_STREAM}.{RETENTION_READER}"
    results = "masa.table.v1.*.result"

    def create(config: Mapping[str, object]) -> bytes:
        return json.dumps(
            {"stream_name": TABLES_STREAM, "config": {"name": RETENTION_READER, **config}}
        ).encode()

    async with attacker(bus, RETENTION) as sweeper:
        for subject, body in (
            (f"{api}.masa.table.v1.t1.log", create({"filter_subject": "masa.table.v1.t1.log"})),
            (api, create({"filter_subject": "masa.table.v1.t1.log"})),
            (api, create({})),
            (
                f"$JS.API.CONSUMER.DURABLE.CREATE.{TABLES_STREAM}.{RETENTION_READER}",
                create({"durable_name": RETENTION_READER}),
            ),
            (
                f"$JS.API.CONSUMER.CREATE.{TABLES_STREAM}.{LEDGER_RESULTS_CONSUMER}.{results}",
                create({"name": LEDGER_RESULTS_CONSUMER, "filter_subject": results}),
            ),
            (f"$JS.API.CONSUMER.MSG.NEXT.{TABLES_STREAM}.{LEDGER_RESULTS_CONSUMER}", b"{}"),
            (f"$JS.API.CONSUMER.MSG.NEXT.{TABLES_STREAM}.{MATCHMAKING_RESULTS_CONSUMER}", b"{}"),
            (f"$JS.ACK.{TABLES_STREAM}.{LEDGER_RESULTS_CONSUMER}.1.1.1.1.1", b""),
            (f"$JS.API.STREAM.INFO.{TABLES_STREAM}", b""),
            (f"$JS.API.DIRECT.GET.{TABLES_STREAM}.masa.table.v1.t1.log", b""),
            (f"$JS.API.DIRECT.GET.{TABLES_STREAM}", b'{"next_by_subj": "masa.table.v1.t1.log"}'),
            (
                f"$JS.API.STREAM.MSG.GET.{TABLES_STREAM}",
                b'{"last_by_subj": "masa.table.v1.t1.log"}',
            ),
            ("masa.table.v1.t1.result", b"forged result"),
            ("masa.table.v1.t1.log", b"forged entry"),
            ("$KV.masa_table_snapshots.t1", b"forged snapshot"),
            ("$KV.masa_table_index.node.t1", b""),
            ("masa.ledger.v1.forged", b"forged event"),
            ("masa.deadletter.v1.retention.forged", b"forged letter"),
        ):
            assert await sweeper.call(subject, body) == "refused", subject
        # Through the subject it may use, a config that filters on a log is refused by
        # JetStream itself, and so is one with several filters.
        for config in (
            {"filter_subject": "masa.table.v1.t1.log"},
            {"filter_subjects": ["masa.table.v1.t1.log"]},
            {"filter_subject": results, "filter_subjects": ["masa.table.v1.t1.log"]},
        ):
            assert await sweeper.call(f"{api}.{results}", create(config)) == "error", config
        for durable in (LEDGER_RESULTS_CONSUMER, MATCHMAKING_RESULTS_CONSUMER):
            info = f"$JS.API.CONSUMER.INFO.{TABLES_STREAM}.{durable}"
            assert await sweeper.call(info) == "answered"

        admin = await nats.connect(bus.url, user=ADMIN, password=bus.password(ADMIN))
        try:
            js = admin.jetstream()
            await js.publish("masa.table.v1.seen.result", b"a result", stream=TABLES_STREAM)
            before = (await js.stream_info("MASA_LEDGER")).state.messages
            push = create(
                {
                    "filter_subject": results,
                    "deliver_subject": "masa.ledger.v1.forged",
                    "ack_policy": "none",
                }
            )
            assert await sweeper.call(f"{api}.{results}", push) == "answered"
            await asyncio.sleep(1.0)
            assert (await js.stream_info("MASA_LEDGER")).state.messages == before
            await js.purge_stream(TABLES_STREAM, subject="masa.table.v1.seen.result")
        finally:
            await admin.close()
        delete = f"$JS.API.CONSUMER.DELETE.{TABLES_STREAM}.{RETENTION_READER}"
        assert await sweeper.call(delete) != "refused"
    await _still_as_planned(bus)


async def _still_as_planned(server: NatsServer) -> None:
    nc = await nats.connect(server.url, user=ADMIN, password=server.password(ADMIN))
    try:
        report = await provision(nc, bus_plan(), check_only=True)
        assert (report.created, report.updated) == ([], [])
        names = {info.config.name for info in await nc.jetstream().streams_info()}
        assert "EVIL" not in names
    finally:
        await nc.close()


@pytest.mark.parametrize("user", [LEDGER, MATCHMAKING])
async def test_the_routes_of_the_forged_result_attack_are_closed(
    bus: NatsServer, user: str
) -> None:
    """The issue-19 attack: a RePublish rule from the attacker's own subjects into a table's
    result subject, and Sources or a Mirror copying the table logs (hands and seeds)."""
    own = "masa.ledger.v1.>" if user == LEDGER else "masa.matchmaking.v1.>"
    stream = "MASA_LEDGER" if user == LEDGER else "MASA_MATCHMAKING"
    republish = {
        "name": stream,
        "subjects": [own],
        "republish": {"src": own.replace(">", "forge"), "dest": "masa.table.v1.t1.result"},
    }
    sources = {"name": "COPY", "sources": [{"name": TABLES_STREAM}]}
    mirror = {"name": "COPY", "mirror": {"name": TABLES_STREAM}}
    async with attacker(bus, user) as mallory:
        assert (
            await mallory.call(f"$JS.API.STREAM.UPDATE.{stream}", json.dumps(republish).encode())
            == "refused"
        )
        for config in (sources, mirror):
            assert (
                await mallory.call("$JS.API.STREAM.CREATE.COPY", json.dumps(config).encode())
                == "refused"
            )
        # Their own consumer is theirs only: another's may be neither pulled from, taken
        # over under its name, nor removed.
        other = MATCHMAKING_RESULTS_CONSUMER if user == LEDGER else LEDGER_RESULTS_CONSUMER
        for subject in (
            f"$JS.API.CONSUMER.MSG.NEXT.{TABLES_STREAM}.{other}",
            f"$JS.API.CONSUMER.INFO.{TABLES_STREAM}.{other}",
            f"$JS.API.CONSUMER.CREATE.{TABLES_STREAM}.{other}.masa.table.v1.*.result",
            f"$JS.API.CONSUMER.DELETE.{TABLES_STREAM}.{other}",
            f"$JS.ACK.{TABLES_STREAM}.{other}.1.1.1.1.1",
        ):
            assert await mallory.call(subject, b'{"batch": 1}') == "refused", subject
        # The table log (every hand and seed) is not theirs to read, in any form.
        for subject, body in (
            (f"$JS.API.DIRECT.GET.{TABLES_STREAM}.masa.table.v1.t1.log", b""),
            (f"$JS.API.DIRECT.GET.{TABLES_STREAM}", b'{"next_by_subj": "masa.table.v1.t1.log"}'),
            (
                f"$JS.API.STREAM.MSG.GET.{TABLES_STREAM}",
                b'{"last_by_subj": "masa.table.v1.t1.log"}',
            ),
            ("masa.table.v1.t1.result", b"forged result"),
            ("masa.table.v1.t1.log", b"forged entry"),
        ):
            assert await mallory.call(subject, body) == "refused", subject
    await _still_as_planned(bus)


async def test_a_push_consumer_aimed_at_a_result_subject_delivers_nothing_there(
    bus: NatsServer,
) -> None:
    """A push consumer's deliver subject is not checked against permissions (nats-server
    checks who publishes, not where JetStream delivers), so matchmaking may aim one of its own
    bucket's consumers at a table's result subject. Nothing is delivered where nobody listens,
    and no service user may listen there: the table stream stores nothing."""
    admin = await nats.connect(bus.url, user=ADMIN, password=bus.password(ADMIN))
    try:
        js = admin.jetstream()
        before = (await js.stream_info(TABLES_STREAM)).state.messages
        async with attacker(bus, MATCHMAKING) as mallory:
            await mallory.nc.publish("$KV.masa_matchmaking_tables.forged", b"forged result")
            create = {
                "stream_name": "KV_masa_matchmaking_tables",
                "config": {
                    "deliver_subject": "masa.table.v1.t1.result",
                    "deliver_policy": "all",
                    "ack_policy": "none",
                },
            }
            await mallory.call(
                "$JS.API.CONSUMER.CREATE.KV_masa_matchmaking_tables", json.dumps(create).encode()
            )
            assert await mallory.call("masa.table.v1.t1.result", b"") == "refused"
            await asyncio.sleep(1.0)
        assert (await js.stream_info(TABLES_STREAM)).state.messages == before
    finally:
        await admin.close()


async def test_each_service_can_still_do_its_job(bus: NatsServer) -> None:
    engine = await _service(bus, TABLE_ENGINE)
    ledger = await _service(bus, LEDGER)
    try:
        js = engine.jetstream()
        await publish(js, "masa.table.v1.own.log", b"seed and hands", msg_id="own:1")
        await publish(js, "masa.table.v1.own.result", b"game finished", msg_id="own:1:game")
        assert [
            m.data for m in await read_subject(engine, TABLES_STREAM, "masa.table.v1.own.log")
        ] == [b"seed and hands"]
        index = await KvBucket.open(engine, "masa_table_index")
        await index.put("node.own", b"")
        await index.forget("node.own")
        assert await index.keys("node.") == []
        # The ledger reads a table's last result by its subject, and consumes the results.
        last = await last_message(ledger, TABLES_STREAM, "masa.table.v1.own.result")
        assert last is not None
        assert last.data == b"game finished"
        subscription = await ledger.jetstream().pull_subscribe_bind(
            LEDGER_RESULTS_CONSUMER, stream=TABLES_STREAM
        )
        messages = await subscription.fetch(1, timeout=5)
        assert messages[0].data == b"game finished"
        await messages[0].ack_sync()
    finally:
        await ledger.close()
        await engine.close()


async def _service(server: NatsServer, user: str) -> Client:
    return await nats.connect(
        server.url,
        user=user,
        password=server.password(user),
        inbox_prefix=inbox_prefix(user),
    )


def test_the_bot_may_touch_nothing_on_the_bus() -> None:
    (bot,) = [user for user in bus_users() if user.name == BOT]
    assert bot.publish == ("$JS.API.INFO",)
    assert bot.subscribe == (f"{inbox_prefix(BOT)}.>",)


async def test_provisioning_removes_what_the_self_serve_bus_left_that_reads_the_bus_out(
    bus: NatsServer,
) -> None:
    """Issue 19 review: users allowed to configure streams before the bus was provisioned
    could leave a push consumer delivering table logs to their inbox, or a stream sourcing
    the logs. Provisioning removes every consumer of a planned stream that is not the plan's
    (but matchmaking's watches into its own inbox), and every stream copying a planned one;
    a stream it does not know otherwise is reported and left."""
    nc = await nats.connect(bus.url, user=ADMIN, password=bus.password(ADMIN))
    js = nc.jetstream()
    tickets = "KV_masa_matchmaking_tickets"
    try:
        await js.add_consumer(
            "MASA_TABLES",
            config=js_api.ConsumerConfig(name="leak", deliver_subject="_INBOX.matchmaking.leak"),
        )
        await js.add_consumer(
            tickets, config=js_api.ConsumerConfig(name="aimed", deliver_subject="_INBOX.ledger.x")
        )
        await js.add_consumer(
            tickets,
            config=js_api.ConsumerConfig(name="watch", deliver_subject="_INBOX.matchmaking.w"),
        )
        await js.add_stream(
            js_api.StreamConfig(name="COPY", sources=[js_api.StreamSource(name="MASA_TABLES")])
        )
        await js.add_stream(js_api.StreamConfig(name="OTHER", subjects=["other.>"]))

        checked = await provision(nc, bus_plan(), check_only=True)
        assert checked.differs
        # (Earlier attacks of this module may have left consumers of their own: also removed.)
        assert {
            f"consumer {tickets}/aimed: not in the plan",
            "consumer MASA_TABLES/leak: not in the plan",
            "stream COPY: copies MASA_TABLES",
        } <= set(checked.removed)
        assert not any("/watch:" in removed for removed in checked.removed)
        assert checked.unknown == ["stream OTHER"]
        done = await provision(nc, bus_plan())
        assert sorted(done.removed) == sorted(checked.removed)
        consumers = {info.name for info in await js.consumers_info(tickets)}
        assert "watch" in consumers and "aimed" not in consumers
        assert "leak" not in {info.name for info in await js.consumers_info("MASA_TABLES")}
        streams = {info.config.name for info in await js.streams_info()}
        assert "COPY" not in streams and "OTHER" in streams
        # A flood of poison costs the bus a bounded amount.
        dead = await js.stream_info("MASA_DEAD_LETTERS")
        assert dead.config.max_bytes == bus_plan().streams[-1].max_bytes == 1 << 30
        again = await provision(nc, bus_plan(), check_only=True)
        assert (again.removed, again.unknown) == ([], ["stream OTHER"])
    finally:
        await js.delete_consumer(tickets, "watch")
        await js.delete_stream("OTHER")
        await nc.close()
