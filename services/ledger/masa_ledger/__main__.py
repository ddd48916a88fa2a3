"""``masa-ledger`` (or ``python -m masa_ledger``): serve the ledger, or check a database.

- ``masa-ledger`` / ``masa-ledger serve``: serve LedgerService until SIGINT or SIGTERM.
- ``masa-ledger check``: verify every invariant of the database of ``MASA_DATABASE_URL``
  (or ``--database-url``) and print the report as JSON; exit 0 when every invariant holds,
  1 on any violation, 2 when the database cannot be read (a SQLite file that is not there
  is not made: an empty database would pass every check).

Settings are read once from ``MASA_*`` (see :class:`~masa_ledger.settings.LedgerSettings`).
"""

from __future__ import annotations

import argparse
import json
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

from masa_ledger.app.check import run_check
from masa_ledger.bootstrap import open_store, start_ledger
from masa_ledger.domain.errors import LedgerError
from masa_ledger.settings import LedgerSettings

_log = logging.getLogger("masa_ledger")


async def serve(settings: LedgerSettings) -> None:
    platform = settings.platform
    set_build_info(platform.service_name, platform.version)
    metrics = start_metrics_server(platform.metrics_host, platform.metrics_port)
    try:
        service = await start_ledger(settings)
        try:
            signal_received = await wait_for_signal()
            _log.info("ledger stopping", extra={"signal": signal_received.name})
        finally:
            await service.stop()
    finally:
        metrics.close()


async def check(settings: LedgerSettings) -> int:
    try:
        store = await open_store(settings, create=False)
    except (LedgerError, OSError) as error:
        print(f"masa-ledger check: cannot open the database: {error}", file=sys.stderr)
        return 2
    try:
        report = await run_check(store)
    finally:
        await store.close()
    print(json.dumps(report.to_json(), indent=2))
    return 0 if report.ok else 1


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="masa-ledger", description=__doc__.split("\n")[0])
    parser.add_argument("command", nargs="?", choices=("serve", "check"), default="serve")
    parser.add_argument("--database-url", help="overrides MASA_DATABASE_URL")
    args = parser.parse_args(argv)
    try:
        settings = load_settings(LedgerSettings)
        if args.database_url:
            settings = replace(settings, database_url=args.database_url)
            LedgerSettings.__post_init__(settings)
    except SettingsError as error:
        print(f"masa-ledger: {error}", file=sys.stderr)
        sys.exit(2)
    if "MASA_SERVICE_NAME" not in os.environ:
        # The platform's default name is generic; logs and masa_build_info should say which.
        settings = replace(settings, platform=replace(settings.platform, service_name="ledger"))
    platform = settings.platform
    configure_logging(platform.log_level, service=platform.service_name)
    if args.command == "check":
        sys.exit(runner.run(check(settings), event_loop=platform.loop.event_loop))
    with tracing.exported(platform.service_name, gethostname(), platform.otlp_endpoint):
        runner.run(serve(settings), event_loop=platform.loop.event_loop)


if __name__ == "__main__":
    main()
