"""Whether the gateway can do its job: the services it forwards to say SERVING.

It can when matchmaking, the ledger and at least one table-engine node answer their health
check with SERVING; a stopping gateway says NOT_SERVING at once, so that a load balancer sends
no new browser to it while its streams end.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping

import grpc
import grpc.aio
from grpc_health.v1 import health_pb2

from masa_web_gateway.metrics import GatewayMetrics

__all__ = ["Health"]

_log = logging.getLogger(__name__)


class Health:
    def __init__(
        self,
        channels: Mapping[str, grpc.aio.Channel],
        *,
        required: tuple[str, ...],
        tables: tuple[str, ...],
        metrics: GatewayMetrics,
    ) -> None:
        # The services it was configured with, fixed now: a table-engine node the pattern
        # admits later is reached when a table lives there, not counted for the verdict.
        self._channels = dict(channels)
        self._required = required
        self._tables = tables
        self._metrics = metrics
        self._serving: dict[str, bool] = dict.fromkeys(channels, False)
        self.stopping = False

    @property
    def serving(self) -> bool:
        if self.stopping:
            return False
        return all(self._serving[address] for address in self._required) and any(
            self._serving[address] for address in self._tables
        )

    def report(self) -> bytes:
        """The JSON of ``/healthz``: the verdict and each service's own."""
        services = {
            address: "SERVING" if up else "NOT_SERVING" for address, up in self._serving.items()
        }
        status = "SERVING" if self.serving else "NOT_SERVING"
        return json.dumps({"status": status, "services": services}).encode()

    async def check_once(self, timeout: float) -> None:
        results = await asyncio.gather(
            *(self._check(address, channel, timeout) for address, channel in self._channels.items())
        )
        for address, up in zip(self._channels, results, strict=True):
            if up != self._serving[address]:
                _log.info("service health", extra={"address": address, "serving": up})
            self._serving[address] = up
            self._metrics.upstream_up.labels(address).set(1 if up else 0)

    async def watch(self, interval: float) -> None:
        """Check every ``interval`` seconds until cancelled."""
        while True:
            await self.check_once(timeout=interval)
            await asyncio.sleep(interval)

    @staticmethod
    async def _check(address: str, channel: grpc.aio.Channel, timeout: float) -> bool:
        # The health stubs' types lack Check, so the method is called by its full name.
        check = channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString,
        )
        try:
            answer = await check(health_pb2.HealthCheckRequest(), timeout=timeout)
        except grpc.aio.AioRpcError:
            return False
        return bool(answer.status == health_pb2.HealthCheckResponse.SERVING)
