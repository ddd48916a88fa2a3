"""Health says NOT_SERVING while the ledger cannot reach its database, and SERVING again
once it can: nothing freezes silently. (PostgreSQL, through a proxy the test cuts; an
embedded SQLite file cannot go away, so the test exists when PostgreSQL is configured.)"""

from __future__ import annotations

import grpc.aio
from grpc_health.v1 import health_pb2
from ledger_support import (
    POSTGRES_DSN,
    TcpProxy,
    as_url,
    eventually,
    ledger_settings,
    postgres_schema,
    running_ledger,
)
from masa_platform.testing import HealthStub, NatsServer
from psycopg.conninfo import conninfo_to_dict, make_conninfo

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING

if POSTGRES_DSN:

    async def test_health_follows_the_database(nats_server: NatsServer) -> None:
        async with postgres_schema() as dsn:
            proxy = TcpProxy(int(conninfo_to_dict(dsn).get("port") or 5432))
            await proxy.start()
            through_proxy = make_conninfo(dsn, host="127.0.0.1", port=proxy.port, connect_timeout=2)
            settings = ledger_settings(nats_server, as_url(through_proxy))
            try:
                async with (
                    running_ledger(settings) as service,
                    grpc.aio.insecure_channel(service.server.address) as channel,
                ):
                    health = HealthStub(channel)

                    async def status() -> int:
                        answer = await health.Check(health_pb2.HealthCheckRequest(), timeout=10)
                        return int(answer.status)

                    assert await status() == SERVING
                    await proxy.close()

                    async def down() -> bool:
                        return await status() == NOT_SERVING

                    await eventually(down, timeout=60, what="NOT_SERVING without a database")
                    await proxy.start()

                    async def up() -> bool:
                        return await status() == SERVING

                    await eventually(up, timeout=60, what="SERVING again")
                    # And it serves again.
                    transfer, granted = await service.ledger.grant("after", "ayse", 5, "")
                    assert (transfer.amount, granted) == (5, True)
            finally:
                await proxy.close()
