"""What keeps a table moving between players' inputs: bots, the autopilot and timers.

One driver task per table (:meth:`TableRuntime.start`) plays the turns of bot seats, autopilot
seats and timed-out turns, fires the timers (P-10..P-12) and logs the disconnection of seats
whose grace window ended without a stream (:mod:`.presence`), all through the table's commit
pipeline (:class:`~masa_table_engine.app.runtime.TableRuntime`). Bot decisions come from the
:class:`~masa_table_engine.app.ports.Decider` (the bot service); when it does not answer in
time, or answers with an illegal move, the engine's in-process policy plays instead, so a
table never stalls. Between steps the driver sleeps until the next deadline or a change, on the
deps' clock (a fake one in tests). After a failed write it retries, a little later each time,
until the log answers; it stops when the game is over and everything it owes is done, or when
the table is no longer this node's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Final

from masa_rules.errors import RuleViolation

from masa_table_engine.app.ports import LogConflict
from masa_table_engine.app.runtime import Deps, RuntimeSettings, SequenceMismatch, TableRuntime
from masa_table_engine.domain.model import Source
from masa_table_engine.domain.table import Table, automated_seat, due_timers, next_deadline

__all__ = ["TableDriver"]

_log = logging.getLogger(__name__)

# After a failed write or sync the driver waits this long before trying again, doubling up
# to the longest wait while the log stays away; once it answers the table runs on at once.
_RETRY_SECONDS: Final = 0.25
_LONGEST_RETRY_SECONDS: Final = 1.0


class TableDriver:
    def __init__(self, runtime: TableRuntime, deps: Deps, settings: RuntimeSettings) -> None:
        self._runtime = runtime
        self._deps = deps
        self._settings = settings
        # Every line the driver logs names its table, so one filter follows a table's story.
        self._log = logging.LoggerAdapter(_log, {"table_id": runtime.table.table_id})

    async def run(self) -> None:
        runtime = self._runtime
        changes = runtime.changes
        retry = _RETRY_SECONDS
        while not runtime.fenced and (not runtime.table.finished or runtime.owing):
            changes.clear()
            try:
                if await runtime.catch_up() and await self._step():
                    retry = _RETRY_SECONDS
                    continue
            except LogConflict:
                return
            except SequenceMismatch:
                # An earlier attempt of the driver's landed after all and was adopted.
                continue
            except Exception as error:
                self._log.warning(
                    "table %s: a step failed (%r); retrying", runtime.table.table_id, error
                )
                await asyncio.sleep(retry)
                retry = min(retry * 2, _LONGEST_RETRY_SECONDS)
                continue
            retry = _RETRY_SECONDS
            if runtime.table.finished:
                if not runtime.owing:
                    return
                # Woken by the relay once the results are out, or tried again after a while.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(retry):
                        await changes.wait()
                continue
            deadline = _earliest(next_deadline(runtime.table), runtime.presence_deadline)
            runtime.arm(deadline)
            timeout = None if deadline is None else max(0.0, deadline - self._deps.clock())
            await self._deps.clock.wait(changes, timeout)

    async def _step(self) -> bool:
        """Do one thing that is due; False when there is nothing to do until a change."""
        runtime = self._runtime
        timers = due_timers(runtime.table, self._deps.clock())
        if timers:
            with self._deps.metrics.loop("table_timers"):
                for timer in timers:
                    try:
                        await runtime.commit(timer)
                    except RuleViolation:
                        # Another input got there first (the player acted just in time).
                        self._log.debug("timer %s no longer applies", timer)
            return True
        if await runtime.record_absences():
            return True
        if await runtime.record_returns():
            return True
        automated = automated_seat(runtime.table)
        if automated is None:
            return False
        seat, source = automated
        await self._play_for(seat, source)
        return True

    async def _play_for(self, seat: int, source: Source) -> None:
        table = self._runtime.table
        if self._settings.bot_delay_seconds:
            await asyncio.sleep(self._settings.bot_delay_seconds)
        action = await self._ask_bot(table, seat)
        await self._runtime.commit_automated(table, seat, source, action)

    async def _ask_bot(self, table: Table, seat: int) -> object | None:
        decider = self._deps.decider
        if decider is None:
            return None
        try:
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow the
            # cancellation of a stopping table, whose driver then never ends.
            async with asyncio.timeout(self._settings.bot_timeout_seconds):
                return await decider.decide(table, seat)
        except Exception:
            _log.info(
                "no bot decision for table %s seat %d; using the fallback",
                table.table_id,
                seat,
                extra={"table_id": table.table_id, "seat": seat},
            )
            return None


def _earliest(*deadlines: float | None) -> float | None:
    return min((d for d in deadlines if d is not None), default=None)
