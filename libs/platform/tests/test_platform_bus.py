from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import nats.errors
import nats.js.errors
import pytest
from masa_platform.acks import AckedPublisher
from masa_platform.bus import (
    KvBucket,
    LeaseLost,
    Leases,
    RevisionConflict,
    StoredMessage,
    connect,
    last_subject_sequence,
    publish,
    read_subject,
)
from masa_platform.testing import NatsServer
from nats.aio.client import Client
from nats.js import JetStreamContext, api


@pytest.fixture
async def nc(nats_server: NatsServer) -> AsyncIterator[Client]:
    client = await connect(nats_server.url, name="masa-platform-test")
    yield client
    await client.drain()


@pytest.fixture
def js(nc: Client) -> JetStreamContext:
    return nc.jetstream()


async def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.01)


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


async def tables_stream(js: JetStreamContext) -> tuple[str, str]:
    """A fresh stream named like MASA_TABLES (made here as the operators would, with direct
    gets allowed); returns (stream, subject prefix)."""
    name = unique("MASA_TABLES_")
    prefix = f"{name.lower()}.table.v1"
    await js.add_stream(api.StreamConfig(name=name, subjects=[f"{prefix}.>"], allow_direct=True))
    return name, prefix


async def new_bucket(nc: Client, prefix: str, ttl_seconds: float | None = None) -> KvBucket:
    """A fresh bucket made as the operators would, opened as a service does."""
    name = unique(prefix)
    await nc.jetstream().create_key_value(
        api.KeyValueConfig(bucket=name, ttl=ttl_seconds, direct=True)
    )
    return await KvBucket.open(nc, name)


async def test_a_repeated_msg_id_is_stored_once(js: JetStreamContext) -> None:
    stream, prefix = await tables_stream(js)
    subject = f"{prefix}.t1.result"
    first = await publish(js, subject, b"GameFinished", msg_id="evt-1")
    again = await publish(js, subject, b"GameFinished", msg_id="evt-1")
    other = await publish(js, subject, b"GameFinished", msg_id="evt-2")
    assert not first.duplicate
    assert again.duplicate
    assert again.seq == first.seq
    assert other.seq == first.seq + 1
    info = await js.stream_info(stream)
    assert info.state.messages == 2


async def test_a_bucket_opens_with_the_ttl_it_was_provisioned_with(nc: Client) -> None:
    assert (await new_bucket(nc, "leases_", ttl_seconds=2.5)).ttl_seconds == 2.5
    assert (await new_bucket(nc, "snapshots_")).ttl_seconds is None


async def test_a_bucket_nobody_provisioned_is_not_made_by_opening_it(nc: Client) -> None:
    name = unique("missing_")
    with pytest.raises(nats.js.errors.BucketNotFoundError):
        await KvBucket.open(nc, name)
    with pytest.raises(nats.js.errors.NotFoundError):
        await nc.jetstream().stream_info(f"KV_{name}")


async def test_kv_writes_are_guarded_by_revision(nc: Client) -> None:
    bucket = await new_bucket(nc, "snapshots_")
    assert await bucket.get("t1") is None
    created = await bucket.create("t1", b"v1")
    with pytest.raises(RevisionConflict):
        await bucket.create("t1", b"again")
    updated = await bucket.update("t1", b"v2", created)
    with pytest.raises(RevisionConflict):
        await bucket.update("t1", b"stale", created)
    entry = await bucket.get("t1")
    assert entry is not None
    assert (entry.value, entry.revision) == (b"v2", updated)
    put = await bucket.put("t1", b"v3")
    with pytest.raises(RevisionConflict):
        await bucket.delete("t1", updated)
    await bucket.delete("t1", put)
    assert await bucket.get("t1") is None
    assert await bucket.create("t1", b"reborn") > put


@pytest.mark.parametrize("acked", [False, True], ids=["kv-update", "acked-publisher"])
async def test_a_lease_is_exclusive_renewable_and_expires(nc: Client, acked: bool) -> None:
    """Renewed through nats-py's KV update or, as the engines renew, through the shared ack
    inbox: the same fence either way."""
    bucket = await new_bucket(nc, "leases_", ttl_seconds=1.0)
    publisher = await AckedPublisher.started(nc) if acked else None
    engine_1 = Leases(bucket, "engine-1", publisher=publisher)
    engine_2 = Leases(bucket, "engine-2", publisher=publisher)

    lease = await engine_1.acquire("table.t1")
    assert lease is not None
    assert await engine_2.acquire("table.t1") is None
    assert await engine_1.holder_of("table.t1") == "engine-1"

    renewed = await engine_1.renew(lease)
    assert renewed.revision > lease.revision
    with pytest.raises(LeaseLost):
        await engine_1.renew(lease)

    # A restarted engine-1 takes its own lease back.
    reclaimed = await engine_1.acquire("table.t1")
    assert reclaimed is not None

    # Unrenewed, the lease expires with the bucket TTL and another node can take it.
    taken = None
    for _ in range(60):
        await asyncio.sleep(0.1)
        taken = await engine_2.acquire("table.t1")
        if taken is not None:
            break
    assert taken is not None
    assert await engine_1.holder_of("table.t1") == "engine-2"
    with pytest.raises(LeaseLost):
        await engine_1.renew(reclaimed)
    await engine_1.release(reclaimed)
    assert await engine_1.holder_of("table.t1") == "engine-2"

    await engine_2.release(taken)
    assert await engine_2.holder_of("table.t1") is None
    assert await engine_1.acquire("table.t1") is not None
    if publisher is not None:
        await publisher.close()


async def test_the_server_survives_kill_and_restart_and_clients_reconnect(tmp_path: Path) -> None:
    with NatsServer(tmp_path / "nats", sync_always=True) as server:
        client = await connect(server.url, name="restart-test")
        try:
            js = client.jetstream()
            stream, prefix = await tables_stream(js)
            before = await publish(js, f"{prefix}.t1.log", b"a1")
            port = server.port

            server.restart(kill=True)
            assert server.port == port

            # The client notices the dropped connection and reconnects on its own (counted: a
            # poll of is_connected can miss the moment it was down on a busy machine).
            await wait_until(lambda: client.stats["reconnects"] >= 1 and client.is_connected)
            assert await last_subject_sequence(client, stream, f"{prefix}.t1.log") == before.seq
            after = await publish(js, f"{prefix}.t1.log", b"a2")
            assert after.seq == before.seq + 1
        finally:
            await client.close()


async def test_read_subject_reads_a_long_subject_in_a_few_round_trips(
    nc: Client, js: JetStreamContext
) -> None:
    stream, prefix = await tables_stream(js)
    for n in range(1200):
        await publish(js, f"{prefix}.t{n % 3}.log", f"{n}".encode(), headers={"Masa-Node": "a"})
    requests_before = nc.stats["out_msgs"]
    found = await read_subject(nc, stream, f"{prefix}.t1.log")
    requests = nc.stats["out_msgs"] - requests_before
    assert [int(m.data) for m in found] == list(range(1, 1200, 3))
    assert found[0].headers["Masa-Node"] == "a"
    # One direct get per batch of 256 (a subscribe, a request, an unsubscribe each): not one
    # request per message.
    assert requests < 15
    tail = await read_subject(nc, stream, f"{prefix}.t1.log", after=found[-3].seq)
    assert [m.seq for m in tail] == [m.seq for m in found[-2:]]
    assert await read_subject(nc, stream, f"{prefix}.t1.log", after=found[-1].seq) == []
    assert await read_subject(nc, stream, f"{prefix}.t9.log") == []
    # Reading made no consumer: a service may read without being allowed to make one.
    assert await js.consumers_info(stream) == []


async def test_kv_keys_lists_the_live_keys_under_a_prefix_on_the_server(
    nc: Client, js: JetStreamContext
) -> None:
    bucket = await new_bucket(nc, "index_")
    for n in range(300):
        await bucket.put(f"node-{n % 2}.t{n}", b"")
    await bucket.delete("node-1.t1")
    revision = await bucket.put("node-1.t3", b"again")
    await bucket.delete("node-1.t3", revision)
    mine = await bucket.keys("node-1.")
    assert sorted(mine) == sorted(f"node-1.t{n}" for n in range(5, 300, 2))
    assert len(await bucket.keys()) == 298
    assert await bucket.keys("node-9.") == []
    # A forgotten key leaves one marker, which expires by itself (a per-message TTL: no
    # service may purge a bucket).
    await bucket.forget("node-0.t0")
    assert "node-0.t0" not in await bucket.keys("node-0.")
    info = await js.stream_info(
        f"KV_{bucket.bucket}", subjects_filter=f"$KV.{bucket.bucket}.node-0.t0"
    )
    assert info.state.subjects == {f"$KV.{bucket.bucket}.node-0.t0": 1}
    marker = await js.get_last_msg(f"KV_{bucket.bucket}", f"$KV.{bucket.bucket}.node-0.t0")
    assert marker.headers is not None
    assert marker.headers["Nats-TTL"] == "5m"
    assert marker.headers["KV-Operation"] == "PURGE"


async def _leases(nc: Client, count: int) -> KvBucket:
    """A new bucket of ``count`` leases: ``t<n>`` held by ``node-<n % 3>``."""
    bucket = await new_bucket(nc, "leases_")
    for n in range(count):
        await bucket.put(f"t{n}", f"node-{n % 3}".encode())
    return bucket


async def test_kv_entries_lists_the_live_entries_with_their_values_in_one_listing(
    nc: Client,
) -> None:
    bucket = await _leases(nc, 10)
    await bucket.put("t0", b"node-9")
    await bucket.delete("t1")
    found = {entry.key: entry for entry in await bucket.entries()}
    assert set(found) == {f"t{n}" for n in range(10)} - {"t1"}
    assert found["t0"].value == b"node-9"
    assert found["t4"].value == b"node-1"
    current = await bucket.get("t4")
    assert current is not None
    assert found["t4"].revision == current.revision
    assert await bucket.entries("nothing.") == []


async def test_kv_entries_of_reads_the_named_keys_live_entries_in_a_few_requests(
    nc: Client,
) -> None:
    bucket = await _leases(nc, 600)
    await bucket.delete("t1")
    await bucket.forget("t2")
    await bucket.put("t0", b"node-9")
    asked = (
        [f"t{n}" for n in range(0, 600, 2)] + ["t1", "absent"] + [f"t{n}" for n in range(1, 600, 2)]
    )
    requests_before = nc.stats["out_msgs"]
    found = {entry.key: entry for entry in await bucket.entries_of(asked)}
    requests = nc.stats["out_msgs"] - requests_before
    assert set(found) == {f"t{n}" for n in range(600)} - {"t1", "t2"}
    assert found["t0"].value == b"node-9"
    current = await bucket.get("t599")
    assert current is not None and found["t599"].revision == current.revision
    # One request per 256 keys, not one per key: the server refuses more keys at once than
    # that ("too many results").
    assert requests == 3
    assert await bucket.entries_of([]) == []
    assert await bucket.entries_of(["absent"]) == []


async def test_a_paused_server_answers_nothing_until_it_resumes(tmp_path: Path) -> None:
    with NatsServer(tmp_path / "nats") as server:
        client = await connect(server.url, name="pause-test")
        try:
            js = client.jetstream()
            stream, prefix = await tables_stream(js)
            server.pause()
            with pytest.raises(nats.errors.TimeoutError):
                await publish(js, f"{prefix}.t1.log", b"a1", msg_id="t1:1", timeout=0.5)
            # Still connected: a stalled server looks like a slow one to its clients.
            assert client.is_connected
            server.resume()
            # The publish that timed out was still delivered and is stored after all (the
            # stream takes it in on its own time, so a read may come first).
            found: list[StoredMessage] = []
            async with asyncio.timeout(5):
                while not found:
                    found = await read_subject(client, stream, f"{prefix}.t1.log")
            assert [m.data for m in found] == [b"a1"]
        finally:
            await client.close()
