"""What the table use cases of one node share: its runtimes by table id, the tables being
created or loaded, the tables fenced off, whether it drains, its results relay; and the steps
they all take (build and start a runtime, release a lease without failing)."""

from __future__ import annotations

import logging

from masa_table_engine.app.driver import TableDriver
from masa_table_engine.app.outbox import Outbox
from masa_table_engine.app.runtime import Deps, RuntimeSettings, TableRuntime
from masa_table_engine.domain.model import Entry
from masa_table_engine.domain.table import Table

__all__ = ["NodeState"]

_log = logging.getLogger(__name__)


class NodeState:
    def __init__(self, deps: Deps, settings: RuntimeSettings) -> None:
        self.deps = deps
        self.settings = settings
        self.ownership = deps.ownership
        self.outbox = Outbox(deps.results, deps.metrics)
        self.runtimes: dict[str, TableRuntime] = {}
        # Tables being created or loaded (leased, not yet running), and tables fenced off
        # while running, to be settled at the next housekeeping pass.
        self.loading: set[str] = set()
        self.fenced: set[str] = set()
        self.draining = False

    def runtime(
        self,
        table: Table,
        history: list[Entry],
        requests: tuple[tuple[int, str, int], ...] = (),
    ) -> TableRuntime:
        return TableRuntime(
            table,
            history,
            self.deps,
            self.settings,
            outbox=self.outbox,
            on_fenced=self._on_fenced,
            requests=requests,
        )

    def start(self, runtime: TableRuntime) -> None:
        self.runtimes[runtime.table.table_id] = runtime
        self.deps.metrics.table_opened(runtime.game)
        runtime.start(TableDriver(runtime, self.deps, self.settings).run())

    async def release_quietly(self, table_id: str) -> None:
        try:
            await self.ownership.release(table_id)
        except Exception:
            _log.warning("table %s: lease not released; it expires", table_id, exc_info=True)

    def _on_fenced(self, table_id: str) -> None:
        self.fenced.add(table_id)
