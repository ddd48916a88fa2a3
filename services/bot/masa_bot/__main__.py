"""``python -m masa_bot``: serve BotService until SIGINT/SIGTERM, configured from ``MASA_*``."""

from __future__ import annotations

import logging
from socket import gethostname

from masa_platform import runner, tracing
from masa_platform.lifecycle import Lifecycle
from masa_platform.logs import configure_logging
from masa_platform.metrics import set_build_info, start_metrics_server
from masa_platform.server import wait_for_signal
from masa_platform.settings import load_settings

from masa_bot.bootstrap import bootstrap
from masa_bot.settings import BotSettings

_log = logging.getLogger("masa_bot")


async def serve(settings: BotSettings) -> None:
    platform = settings.platform
    set_build_info(platform.service_name, platform.version)
    async with Lifecycle(platform.service_name) as life:
        metrics = start_metrics_server(platform.metrics_host, platform.metrics_port)

        async def close_metrics() -> None:
            metrics.close()

        life.closing("metrics", close_metrics)
        server = bootstrap(settings)
        await server.start()
        # NOT_SERVING first, then running decisions get the grace period (MASA_GRACE_SECONDS).
        life.draining("grpc", server.stop)
        _log.info(
            "bot serving", extra={"grpc_address": server.address, "metrics_port": metrics.port}
        )
        signal_received = await wait_for_signal()
        _log.info("bot stopping", extra={"signal": signal_received.name})


def main() -> None:
    settings = load_settings(BotSettings)
    platform = settings.platform
    configure_logging(platform.log_level, service=platform.service_name)
    with tracing.exported(platform.service_name, gethostname(), platform.otlp_endpoint):
        runner.run(serve(settings), event_loop=platform.loop.event_loop)


if __name__ == "__main__":
    main()
