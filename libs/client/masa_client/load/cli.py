"""The ``masa-load`` command: drive live tables against a deployment and report as JSON.

``masa-load --address HOST:PORT --tables 200 --duration 30`` plays 200 Elevator tables as
fast as the engine answers, for a 5 s warm-up and a 30 s measured window, prints a progress
line on stderr every second and the report (a latency histogram among it) on stdout. See
``--help`` for the game mix, the rate cap, live tables with bot seats and think times, and
where the tokens come from.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from masa_platform import runner
from masa_platform.settings import (
    LoopSettings,
    SettingsError,
    TlsSettings,
    load_settings,
)

from masa_client.issuer import IssuerMissing, development_issuer
from masa_client.load.credentials import Credentials, CredentialsError, from_file, from_issuer
from masa_client.load.pacing import ThinkTime
from masa_client.load.run import LoadOptions, Progress, run_load
from masa_client.load.tables import GameMix, MixError, TablePlan

__all__ = ["main"]

MAX_TABLES: Final = 20_000
MAX_SECONDS: Final = 24 * 3600.0
MAX_RATE: Final = 100_000.0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="masa-load",
        description="Drive tables on a running table-engine through its public API and "
        "print a JSON report; stops by itself after --warmup plus --duration seconds.",
    )
    parser.add_argument("--address", required=True, help="the table-engine, host:port")
    parser.add_argument("--tables", type=int, default=100, help="tables played at once")
    parser.add_argument(
        "--mix", default="elevator", help="games by weight, e.g. elevator=3,fiftyone=1"
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=None,
        help="the most SubmitActions a second (default: saturated, as fast as answered)",
    )
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds before measuring")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds measured")
    parser.add_argument(
        "--live",
        nargs=2,
        type=float,
        metavar=("LOW", "HIGH"),
        help="live tables: human seats watch their table and think LOW to HIGH seconds "
        "before each move (default: closed tables, every seat played at once from here)",
    )
    parser.add_argument(
        "--humans", type=int, default=None, help="human seats per live table; the rest are bots"
    )
    parser.add_argument("--seats", type=int, default=0, help="seats per table (0: 3 to 6)")
    parser.add_argument("--turn-seconds", type=int, default=600, help="the turn timer")
    parser.add_argument(
        "--token-file",
        type=Path,
        help='JSON {"service": TOKEN, "players": [TOKEN, ...]} (service: an admin token, which '
        "may create tables); default: tokens signed with the development issuer key of `make "
        "run` (.masa/keys) or MASA_JWT_ISSUER_KEY_FILE",
    )
    parser.add_argument(
        "--player-prefix", default="load", help="names of the minted players: PREFIX-N"
    )
    parser.add_argument(
        "--moves",
        choices=("call", "stream"),
        default="call",
        help="how moves go: a SubmitAction call each, or a SubmitActions stream per player",
    )
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per call")
    parser.add_argument("--seed", type=int, default=0, help="seeds the think times")
    parser.add_argument("--quiet", action="store_true", help="no progress line")
    return parser


def _options(args: argparse.Namespace) -> LoadOptions:
    if not 1 <= args.tables <= MAX_TABLES:
        raise MixError(f"--tables must be 1 to {MAX_TABLES}")
    if not (0 <= args.warmup <= MAX_SECONDS and 0 < args.duration <= MAX_SECONDS):
        raise MixError(f"--warmup and --duration must be at most {MAX_SECONDS:.0f} s")
    if args.rate is not None and not 0 < args.rate <= MAX_RATE:
        raise MixError(f"--rate must be above 0 and at most {MAX_RATE:.0f}")
    if not 0 < args.timeout <= 600:
        raise MixError("--timeout must be above 0 and at most 600")
    think = None
    if args.live is not None:
        low, high = args.live
        if not 0 <= low <= high <= 3600:
            raise MixError("--live needs 0 <= LOW <= HIGH <= 3600")
        think = ThinkTime(low, high)
    elif args.humans is not None:
        raise MixError("--humans needs --live (bot seats play only on live tables)")
    return LoadOptions(
        address=args.address,
        tables=args.tables,
        mix=GameMix.parse(args.mix),
        plan=TablePlan(seats=args.seats, humans=args.humans, turn_seconds=args.turn_seconds),
        rate=args.rate,
        think=think,
        warmup_seconds=args.warmup,
        window_seconds=args.duration,
        call_timeout_seconds=args.timeout,
        tls=load_settings(TlsSettings),
        seed=args.seed,
        moves=args.moves,
    )


def _credentials(args: argparse.Namespace, options: LoadOptions) -> Credentials:
    if args.token_file is not None:
        return from_file(args.token_file)
    # Enough players that no player sits at two tables.
    most = options.plan.seats or 6
    return from_issuer(
        development_issuer(),
        players=options.tables * most,
        prefix=args.player_prefix,
        ttl_seconds=options.warmup_seconds + options.window_seconds + 3600,
    )


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    try:
        options = _options(args)
        options.plan.check(options.mix)
        credentials = _credentials(args, options)
        event_loop = load_settings(LoopSettings).event_loop
    except (MixError, CredentialsError, IssuerMissing, SettingsError, OSError) as error:
        print(f"masa-load: {error}", file=sys.stderr)
        sys.exit(2)
    progress = None if args.quiet else Progress(sys.stderr)
    try:
        # The load generator shares the machine with what it measures: uvloop (the default)
        # makes each of its calls cheaper, so more of the machine is left to the service.
        report = runner.run(
            run_load(options, credentials, progress=progress), event_loop=event_loop
        )
    except TimeoutError:
        print(f"masa-load: {options.address} did not answer", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
    print(json.dumps(report, indent=2))
