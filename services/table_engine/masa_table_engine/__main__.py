"""``python -m masa_table_engine`` (or ``masa-table-engine``): run one table-engine node.

Settings are read once from ``MASA_*`` (see :class:`~masa_table_engine.node.EngineSettings`);
SIGINT or SIGTERM drains the server and stops the tables, whose state is already in JetStream.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import replace

from masa_platform.logs import configure_logging
from masa_platform.metrics import set_build_info, start_metrics_server
from masa_platform.server import wait_for_signal
from masa_platform.settings import load_settings

from masa_table_engine.node import EngineSettings, start_node


async def serve(settings: EngineSettings) -> None:
    platform = settings.platform
    set_build_info(platform.service_name, platform.version)
    metrics = start_metrics_server(platform.metrics_host, platform.metrics_port)
    node = await start_node(settings)
    try:
        await wait_for_signal()
    finally:
        await node.stop()
        metrics.close()


def main() -> None:
    settings = load_settings(EngineSettings)
    if "MASA_SERVICE_NAME" not in os.environ:
        # The platform's default name is generic; logs and masa_build_info should say which.
        settings = replace(
            settings, platform=replace(settings.platform, service_name="table-engine")
        )
    configure_logging(settings.platform.log_level, service=settings.platform.service_name)
    asyncio.run(serve(settings))


if __name__ == "__main__":
    main()
