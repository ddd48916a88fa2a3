"""``masa-matchmaking`` (or ``python -m masa_matchmaking``): serve MatchmakingService.

Settings are read once from ``MASA_*`` (see
:class:`~masa_matchmaking.settings.MatchmakingSettings`); SIGINT or SIGTERM reports
NOT_SERVING, drains the calls, stops the rounds and gives the lobby leases up, so that another
instance takes the lobbies over at once.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import replace
from socket import gethostname

from masa_platform import runner, tracing
from masa_platform.logs import configure_logging
from masa_platform.metrics import set_build_info, start_metrics_server
from masa_platform.server import wait_for_signal
from masa_platform.settings import SettingsError, load_settings

from masa_matchmaking.bootstrap import load_lobbies, start_matchmaking
from masa_matchmaking.settings import MatchmakingSettings

_log = logging.getLogger("masa_matchmaking")


async def serve(settings: MatchmakingSettings) -> None:
    platform = settings.platform
    set_build_info(platform.service_name, platform.version)
    metrics = start_metrics_server(platform.metrics_host, platform.metrics_port)
    try:
        service = await start_matchmaking(settings)
        try:
            signal_received = await wait_for_signal()
            _log.info("matchmaking stopping", extra={"signal": signal_received.name})
        finally:
            await service.stop()
    finally:
        metrics.close()


def main() -> None:
    try:
        settings = load_settings(MatchmakingSettings)
        load_lobbies(settings)
    except SettingsError as error:
        print(f"masa-matchmaking: {error}", file=sys.stderr)
        sys.exit(2)
    if "MASA_SERVICE_NAME" not in os.environ:
        # The platform's default name is generic; logs and masa_build_info should say which.
        settings = replace(
            settings, platform=replace(settings.platform, service_name="matchmaking")
        )
    platform = settings.platform
    configure_logging(platform.log_level, service=platform.service_name)
    with tracing.exported(platform.service_name, gethostname(), platform.otlp_endpoint):
        runner.run(serve(settings), event_loop=platform.loop.event_loop)


if __name__ == "__main__":
    main()
