"""One load run: open the channel, start a driver per table, warm up, measure, report.

The run ends by itself after the warm-up and the measured window: the drivers are cancelled
(calls in flight with them) and the channel is closed, so nothing outlives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, TextIO

from masa.table.v1 import table_pb2_grpc
from masa_platform.settings import TlsSettings
from masa_platform.tls import open_channel

from masa_client.load.closed import ClosedDriver
from masa_client.load.credentials import Credentials
from masa_client.load.live import LiveDriver
from masa_client.load.pacing import RateCap, ThinkTime
from masa_client.load.session import MoveStreams, Session, Window
from masa_client.load.tables import GameMix, TablePlan

__all__ = ["LoadOptions", "Progress", "run_load"]

READY_SECONDS: Final = 30.0
# How long cancelled drivers get to finish their calls before the channel closes.
_WIND_DOWN_SECONDS: Final = 5.0


@dataclass(frozen=True, slots=True)
class LoadOptions:
    address: str
    tables: int
    mix: GameMix
    plan: TablePlan
    # The most actions a second the run sends (None: saturated, every table as fast as
    # answered). Closed tables also spread it evenly over their schedules.
    rate: float | None
    # Live tables (human seats thinking, bot seats, watch streams); None: closed tables.
    think: ThinkTime | None
    warmup_seconds: float
    window_seconds: float
    call_timeout_seconds: float = 10.0
    tls: TlsSettings | None = None
    seed: int = 0
    # "call": a SubmitAction call per move; "stream": a SubmitActions stream per player.
    moves: str = "call"


class Progress:
    """A one-line summary rewritten every second while the run goes (a line each on a file)."""

    def __init__(self, out: TextIO, every: float = 1.0) -> None:
        self._out = out
        self._every = every
        self._tty = out.isatty()

    async def show(self, session: Session, started: float, options: LoadOptions) -> None:
        total = options.warmup_seconds + options.window_seconds
        last_count, last_at = 0, started
        while True:
            await asyncio.sleep(self._every)
            now = time.perf_counter()
            rate = (session.accepted_total - last_count) / (now - last_at)
            last_count, last_at = session.accepted_total, now
            stage = "measuring" if session.window.measuring(now) else "warming up"
            p99 = session.counts.all_submits().percentile_ms(0.99)
            line = (
                f"masa-load {now - started:6.1f}/{total:.0f} s {stage:<10} "
                f"accepted {session.accepted_total} ({rate:.1f}/s) "
                f"p99 {p99:.1f} ms refused {session.errors_total}"
            )
            self._out.write(f"\r{line}" if self._tty else f"{line}\n")
            self._out.flush()

    def done(self) -> None:
        if self._tty:
            self._out.write("\n")
            self._out.flush()


async def run_load(
    options: LoadOptions,
    credentials: Credentials,
    *,
    progress: Progress | None = None,
    on_window: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Drive the tables for the warm-up and the window; returns the report.

    ``on_window`` is told ``"start"`` and ``"end"`` as the measured window opens and closes,
    so that a caller can read the deployment's own counters over the same window.
    """
    if options.plan.humans is not None and options.think is None:
        raise ValueError("bot seats need live tables (a think time)")
    options.plan.check(options.mix)
    async with open_channel(options.address, options.tls) as channel:
        await asyncio.wait_for(channel.channel_ready(), READY_SECONDS)
        stub = table_pb2_grpc.TableServiceStub(channel)
        session = Session(
            stub,
            credentials,
            options.mix,
            options.plan,
            RateCap(options.rate),
            options.call_timeout_seconds,
            Window(),
            MoveStreams(stub) if options.moves == "stream" else None,
        )
        drivers = _drivers(session, options)
        started = time.perf_counter()
        tasks = [asyncio.create_task(run()) for run in drivers]
        shown = asyncio.create_task(progress.show(session, started, options)) if progress else None
        own_cpu = 0.0
        try:
            await _sleep_watching(tasks, options.warmup_seconds)
            if on_window is not None:
                on_window("start")
            own_cpu = time.process_time()
            session.window.start = time.perf_counter()
            session.window.end = session.window.start + options.window_seconds
            await _sleep_watching(tasks, options.window_seconds)
            own_cpu = time.process_time() - own_cpu
            if on_window is not None:
                on_window("end")
        finally:
            for task in [*tasks, *([shown] if shown else [])]:
                task.cancel()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    asyncio.gather(*tasks, *([shown] if shown else []), return_exceptions=True),
                    _WIND_DOWN_SECONDS,
                )
            if session.streams is not None:
                session.streams.close()
            if progress is not None:
                progress.done()
    return _report(session, options, own_cpu)


async def _sleep_watching(tasks: list[asyncio.Task[None]], seconds: float) -> None:
    """Sleep, but fail at once should a driver fail (a bug, not a refused call)."""
    done, _ = await asyncio.wait(tasks, timeout=seconds, return_when=asyncio.FIRST_EXCEPTION)
    for task in done:
        if not task.cancelled() and task.exception() is not None:
            raise RuntimeError("a table driver failed") from task.exception()


def _drivers(session: Session, options: LoadOptions) -> list[Callable[[], Any]]:
    if options.think is not None:
        think = options.think
        return [
            LiveDriver(session, slot, think, seed=options.seed * 1_000_003 + slot).run
            for slot in range(options.tables)
        ]
    interval = options.tables / options.rate if options.rate else 0.0
    return [
        ClosedDriver(session, slot, interval=interval, offset=interval * slot / options.tables).run
        for slot in range(options.tables)
    ]


def _report(session: Session, options: LoadOptions, own_cpu: float) -> dict[str, Any]:
    counts = session.counts
    window = options.window_seconds
    return {
        "tool": "masa-load",
        "address": options.address,
        "tables": options.tables,
        "game_mix": options.mix.describe(),
        "tables_kind": "live" if options.think else "closed",
        "moves": options.moves,
        "seats": options.plan.seats or "cycling",
        "human_seats": options.plan.humans if options.plan.humans is not None else "all",
        "turn_seconds": options.plan.turn_seconds,
        "think_seconds": [options.think.low, options.think.high] if options.think else None,
        "rate_cap_actions_per_second": options.rate,
        "warmup_seconds": options.warmup_seconds,
        "window_seconds": window,
        "accepted_actions": counts.accepted,
        "actions_per_second": round(counts.accepted / window, 1),
        "submit_action_ms": counts.all_submits().summary(),
        "submit_action_ms_by_game": {
            game: histogram.summary() for game, histogram in sorted(counts.submit.items())
        },
        "get_table_ms": counts.get_table.summary(),
        "tables_created": counts.tables_created,
        "games_finished": counts.games_finished,
        "client_resyncs": counts.resyncs,
        "refused": dict(sorted(counts.errors.items())),
        "load_generator_cpu_percent": round(100 * own_cpu / window, 1),
    }
