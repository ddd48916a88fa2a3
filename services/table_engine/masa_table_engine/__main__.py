"""``python -m masa_table_engine`` (or ``masa-table-engine``): run one table-engine node.

Settings are read once from ``MASA_*`` (see :class:`~masa_table_engine.settings.EngineSettings`);
SIGINT or SIGTERM drains the node: it takes no new table, hands each table over to the other
nodes (a final snapshot, then its lease released), then stops the server.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
from dataclasses import replace
from typing import Final

from masa_platform import runner, tracing
from masa_platform.logs import configure_logging
from masa_platform.metrics import set_build_info, start_metrics_server
from masa_platform.server import wait_for_signal
from masa_platform.settings import load_settings

from masa_table_engine.bootstrap import start_node
from masa_table_engine.settings import EngineSettings

_log = logging.getLogger(__name__)
# How long, past the gRPC drain, leases and the NATS connection get to close cleanly.
_GOODBYE_SECONDS: Final = 5.0
# How long handing the tables over may take before the node stops anyway.
_DRAIN_SECONDS: Final = 10.0


async def serve(settings: EngineSettings) -> None:
    platform = settings.platform
    set_build_info(platform.service_name, platform.version)
    metrics = start_metrics_server(platform.metrics_host, platform.metrics_port)
    node = await start_node(settings)
    # What the start made (modules, settings, the recovered tables' shared parts) lives as
    # long as the process: out of the collector's passes.
    gc.freeze()
    try:
        await wait_for_signal()
    finally:
        # Stopping releases leases and drains NATS; with NATS gone (the whole stack stopping
        # at once) that would wait for a reconnect for ever. Every acknowledged action is
        # already in JetStream, so a node that cannot say goodbye may simply leave.
        try:
            async with asyncio.timeout(_DRAIN_SECONDS):
                await node.drain(leaving=True)
        except TimeoutError:
            _log.warning("drain not finished in time; the other tables' leases expire")
        try:
            async with asyncio.timeout(platform.server.grace_seconds + _GOODBYE_SECONDS):
                await node.stop()
        except TimeoutError:
            _log.warning("stopped without releasing leases or draining NATS: it did not answer")
        metrics.close()


def main() -> None:
    settings = load_settings(EngineSettings)
    if "MASA_SERVICE_NAME" not in os.environ:
        # The platform's default name is generic; logs and masa_build_info should say which.
        settings = replace(
            settings, platform=replace(settings.platform, service_name="table-engine")
        )
    configure_logging(
        settings.platform.log_level,
        service=settings.platform.service_name,
        node=settings.node_id,
    )
    # The live tables' histories are many small long-lived objects, and every full pass of
    # the garbage collector scans them all, stalling every table at once: under the issue-5
    # benchmark a pass came every few seconds and took 100-600 ms. Table data are immutable
    # trees freed by reference counting, and each full pass found only a few hundred objects
    # in cycles, so full passes can be 100 times rarer; the young generations, where the
    # cycles are found, are collected as before. The youngest is collected every 10,000
    # allocations rather than 700 (issue 22: 1-5% of an engine's CPU went to the collector
    # under load): most of what an action allocates is freed by reference counting before a
    # pass, so fewer passes scan fewer survivors, and the few cycles wait a little longer.
    gc.set_threshold(10_000, 10, 1000)
    platform = settings.platform
    with tracing.exported(platform.service_name, settings.node_id, platform.otlp_endpoint):
        runner.run(serve(settings), event_loop=platform.loop.event_loop)


if __name__ == "__main__":
    main()
