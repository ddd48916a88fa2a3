"""``masa-bus``: the operator's commands for the bus.

- ``masa-bus provision``, as the operators' NATS user (``admin``), makes every stream, bucket
  and durable consumer of the bus plan (:mod:`masa_platform.bus_plan`) or brings it to the
  plan, removes the consumers and copying streams nobody planned (:mod:`masa_platform.
  provision`), and prints one JSON document of what it did; ``--check`` only reports, and
  exits 1 when the bus differs from the plan, an unknown stream included.
- ``masa-bus sweep``, as the ``retention`` NATS user, removes the finished tables whose result
  is settled and older than ``MASA_TABLE_RETENTION_SECONDS`` (:mod:`masa_platform.retention`)
  and prints one JSON document of what it swept and kept; ``--every SECONDS`` runs it again
  after each interval until SIGTERM or SIGINT, one document a run (a failed run is reported on
  stderr and the next one tried).

Settings come from ``MASA_*``: ``MASA_NATS_URL``, ``MASA_NATS_USER`` and ``MASA_NATS_PASSWORD``
(the command's user), the plan's own (:class:`~masa_platform.bus_plan.BusSettings`) and the
sweep's (:class:`~masa_platform.retention.SweepSettings`). Exit codes: 0 done, 1 the bus
differs (``--check``), refused a change or failed a sweep, 2 unusable settings.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

import nats.errors

from masa_platform.bus import connect
from masa_platform.bus_plan import BusSettings, bus_plan
from masa_platform.provision import ProvisionFailed, provision
from masa_platform.retention import SweepFailed, SweepSettings, sweep
from masa_platform.settings import SettingsError, load_settings

__all__ = ["OperatorBusSettings", "main"]

_MOST_EVERY_SECONDS: Final = 86_400.0


@dataclass(frozen=True, slots=True)
class OperatorBusSettings:
    nats_url: str = "nats://127.0.0.1:4222"
    nats_user: str = ""
    nats_password: str = ""
    bus: BusSettings = field(default_factory=BusSettings)
    sweep: SweepSettings = field(default_factory=SweepSettings)

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
    sweep_command = commands.add_parser(
        "sweep", help="remove the finished tables whose result is settled and past its retention"
    )
    sweep_command.add_argument(
        "--every",
        type=float,
        metavar="SECONDS",
        help=f"sweep again after each SECONDS (1 to {_MOST_EVERY_SECONDS:.0f}) until stopped",
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
    return 1 if check and report.differs else 0


async def _sweep(settings: OperatorBusSettings, *, every: float | None) -> int:
    nc = await connect(
        settings.nats_url,
        name="masa-bus-sweep",
        user=settings.nats_user,
        password=settings.nats_password,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        while True:
            try:
                report = await sweep(nc, settings.sweep)
            except (SweepFailed, nats.errors.Error, TimeoutError) as error:
                if every is None:
                    raise
                # A bus that is away for a while is not the end of a periodic sweep.
                print(f"masa-bus: sweep failed: {error!r}", file=sys.stderr, flush=True)
            else:
                print(json.dumps(report.as_json(), sort_keys=True), flush=True)
            if every is None:
                return 0
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), every)
            if stop.is_set():
                return 0
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
        await nc.drain()


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # The connection's own notices ("disconnected" as it closes) are not the command's output.
    logging.getLogger("masa_platform.bus").setLevel(logging.ERROR)
    try:
        settings = load_settings(OperatorBusSettings)
    except SettingsError as error:
        print(f"masa-bus: {error}", file=sys.stderr)
        return 2
    every: float | None = getattr(args, "every", None)
    if every is not None and not 1.0 <= every <= _MOST_EVERY_SECONDS:
        print(f"masa-bus: --every must be 1 to {_MOST_EVERY_SECONDS:.0f} seconds", file=sys.stderr)
        return 2
    try:
        if args.command == "sweep":
            return asyncio.run(_sweep(settings, every=every))
        return asyncio.run(_provision(settings, check=args.check))
    except (ProvisionFailed, SweepFailed) as failed:
        print(f"masa-bus: {failed}", file=sys.stderr)
        return 1
    except (nats.errors.Error, OSError, TimeoutError) as error:
        print(f"masa-bus: NATS at {settings.nats_url}: {error!r}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
