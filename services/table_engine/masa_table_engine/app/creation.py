"""Creating a table: everything is validated before the first write (the pure
:func:`~masa_table_engine.domain.table.accept` of the ``Created`` input runs first), then the
lease is taken, the table recorded in this node's index and the first entry appended. A
creation that fails after that leaves no lease and no index entry behind, and no log entry as
far as the log can tell."""

from __future__ import annotations

import logging
from collections.abc import Callable

from masa_rules.table_config import TableConfig

from masa_table_engine.app.drain import Draining
from masa_table_engine.app.housekeeping import forget_finished
from masa_table_engine.app.node_state import NodeState
from masa_table_engine.app.ports import LogConflict
from masa_table_engine.app.stakes import StakeBinder, StakesUnavailable, TableExists
from masa_table_engine.domain.model import Created, Entry
from masa_table_engine.domain.table import Table, accept

__all__ = ["Creation"]

_log = logging.getLogger(__name__)


class Creation:
    def __init__(
        self,
        state: NodeState,
        *,
        new_id: Callable[[], str],
        new_seed: Callable[[], bytes],
        stakes: StakeBinder | None,
    ) -> None:
        self._state = state
        self._deps = state.deps
        self._settings = state.settings
        self._ownership = state.ownership
        self._runtimes = state.runtimes
        self._loading = state.loading
        self._new_id = new_id
        self._new_seed = new_seed
        self._stakes = stakes

    async def create(
        self, config: TableConfig, *, table_id: str = "", request_id: str = ""
    ) -> Table:
        """Start a table; raises ``RuleViolation`` for a configuration the rules refuse, before
        anything is written.

        ``table_id`` is the caller's (AIP-133), else a new one. A table of that id made by the
        same ``request_id`` is returned as it is, also after a restart (the snapshot keeps the
        request id): a retried create makes no second table. A chip table's stakes are bound in
        the ledger (P-30) before anything is written (:mod:`~masa_table_engine.app.stakes`).
        """
        if self._state.draining:
            raise Draining("this node is draining and takes no new table")
        forget_finished(self._state)
        if table_id:
            existing = await self._existing(table_id, request_id)
            if existing is not None:
                return existing
        else:
            table_id = self._new_id()
        item = Created(table_id, config, self._new_seed(), request_id)
        table, entry = accept(None, item, self._deps.clock(), self._settings.timers)
        if config.stake:
            if self._stakes is None:
                raise StakesUnavailable("this node has no ledger to bind the stakes in")
            holds = [seat.hold_id for seat in config.seats if seat.hold_id]
            await self._stakes.bind(table_id, 1, config.stake, holds, config.payout)
        self._loading.add(table_id)
        try:
            await self._write_creation(item, table, entry)
        finally:
            self._loading.discard(table_id)
        _log.info(
            "table created",
            extra={
                "table_id": table_id,
                "game": str(config.game),
                "preset": config.preset,
                "mode": config.mode.value,
                "seats": [seat.kind.value for seat in config.seats],
                "players": [seat.player_id for seat in config.seats if seat.player_id],
                "stake": config.stake,
            },
        )
        return table

    async def _write_creation(self, item: Created, table: Table, entry: Entry) -> None:
        """Lease, index, first entry and snapshot of a new table; then it runs."""
        log = self._deps.log
        table_id = table.table_id
        if not await self._ownership.claim(table_id):
            raise LogConflict(f"table {table_id} is leased by another node")
        try:
            await log.track(table_id)
            await log.append(entry)
        except Exception:
            if not await self._landed(item):
                await self._undo_create(table_id)
                raise
        try:
            await log.save_snapshot(table)
        except Exception:
            # The first entry is in the log and the table in the index: recovery replays it.
            _log.warning("table %s: first snapshot not saved", table_id, exc_info=True)
        self._state.start(self._state.runtime(table, [entry]))

    async def _existing(self, table_id: str, request_id: str) -> Table | None:
        """The table ``table_id`` if ``request_id`` made it; raises :class:`TableExists` if
        another request did."""
        runtime = self._runtimes.get(table_id)
        if runtime is not None:
            table: Table | None = runtime.table
        else:
            snapshot = await self._deps.log.load_snapshot(table_id)
            table = snapshot.table if snapshot is not None else None
        if table is None:
            return None
        if not request_id or table.request_id != request_id:
            raise TableExists(table_id)
        return table

    async def _landed(self, item: Created) -> bool:
        """Whether a creation whose append failed is in the log after all (its seed is new,
        so an equal first entry is this one)."""
        try:
            logged = await self._deps.log.read(item.table_id, 0)
        except Exception:
            return False
        first = logged[0].input if logged else None
        return isinstance(first, Created) and first.seed == item.seed

    async def _undo_create(self, table_id: str) -> None:
        try:
            await self._deps.log.untrack(table_id)
            await self._ownership.release(table_id)
        except Exception:
            # The lease expires on its own; an index entry without a log is dropped (and
            # logged) by the next recovery.
            _log.warning("table %s: failed creation not fully undone", table_id, exc_info=True)
