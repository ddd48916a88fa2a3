"""``masa-bus``: the operator's commands for the bus, run as the operators' NATS user.

- ``masa-bus provision`` makes every stream, bucket and durable consumer of the bus plan
  (:mod:`masa_platform.bus_plan`) or brings it to the plan, and prints one JSON document of what
  it did; ``--check`` only reports, and exits 1 when the bus differs from the plan.

Settings come from ``MASA_*``: ``MASA_NATS_URL``, ``MASA_NATS_USER`` and ``MASA_NATS_PASSWORD``
(the operators' user), and the plan's own (:class:`~masa_platform.bus_plan.BusSettings`).
Exit codes: 0 done, 1 the bus differs (``--check``) or refused a change, 2 unusable settings.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

import nats.errors

from masa_platform.bus import connect
from masa_platform.bus_plan import BusSettings, bus_plan
from masa_platform.provision import ProvisionFailed, provision
from masa_platform.settings import SettingsError, load_settings

__all__ = ["OperatorBusSettings", "main"]


@dataclass(frozen=True, slots=True)
class OperatorBusSettings:
    nats_url: str = "nats://127.0.0.1:4222"
    nats_user: str = ""
    nats_password: str = ""
    bus: BusSettings = field(default_factory=BusSettings)

    def __post_init__(self) -> None:
        if bool(self.nats_user) != bool(self.nats_password):
            raise SettingsError("MASA_NATS_USER and MASA_NATS_PASSWORD must be set together")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="masa-bus", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    provision_command = commands.add_parser(
        "provision", help="make the bus hold the plan's streams, buckets and consumers"
    )
    provision_command.add_argument(
        "--check", action="store_true", help="only report differences; exit 1 when there are any"
    )
    return parser


async def _provision(settings: OperatorBusSettings, *, check: bool) -> int:
    nc = await connect(
        settings.nats_url,
        name="masa-bus",
        user=settings.nats_user,
        password=settings.nats_password,
    )
    try:
        report = await provision(nc, bus_plan(settings.bus), check_only=check)
    finally:
        await nc.drain()
    print(json.dumps(report.as_json(), sort_keys=True))
    return 1 if check and (report.created or report.updated) else 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # The connection's own notices ("disconnected" as it closes) are not the command's output.
    logging.getLogger("masa_platform.bus").setLevel(logging.ERROR)
    try:
        settings = load_settings(OperatorBusSettings)
    except SettingsError as error:
        print(f"masa-bus: {error}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_provision(settings, check=args.check))
    except ProvisionFailed as failed:
        print(f"masa-bus: {failed}", file=sys.stderr)
        return 1
    except (nats.errors.Error, OSError, TimeoutError) as error:
        print(f"masa-bus: NATS at {settings.nats_url}: {error!r}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
