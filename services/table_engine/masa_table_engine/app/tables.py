"""The use cases of a table-engine node: create tables, find them, recover and hand them over.

:class:`Tables` owns what they share (:class:`~masa_table_engine.app.node_state.NodeState`: the
runtimes by table id, the dependencies, the settings) and hands each call to the module that
does it: :mod:`~masa_table_engine.app.lookup` (find a table),
:mod:`~masa_table_engine.app.creation` (create one), :mod:`~masa_table_engine.app.recovery`
(resume this node's tables after a restart, rebuild any table whose lease it wins, void the
ones that cannot be rebuilt), :mod:`~masa_table_engine.app.takeover` (take over the tables
nobody serves), :mod:`~masa_table_engine.app.drain` (hand every table over, and return to
service), :mod:`~masa_table_engine.app.fencing` (settle tables another node wrote to) and
:mod:`~masa_table_engine.app.housekeeping` (forget finished tables, settle fenced ones,
release stray leases).
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Callable

from masa_platform.tasks import stop_tasks
from masa_rules.table_config import TableConfig

from masa_table_engine.app.creation import Creation
from masa_table_engine.app.drain import Drain, Draining, NodeLeaving
from masa_table_engine.app.fencing import Fencing
from masa_table_engine.app.housekeeping import Housekeeping
from masa_table_engine.app.lookup import Lookup, TableNotFound, TableUnserved
from masa_table_engine.app.node_state import NodeState
from masa_table_engine.app.ports import Directory
from masa_table_engine.app.recovery import Recovery, RecoveryReport
from masa_table_engine.app.runtime import Deps, RuntimeSettings, TableRuntime
from masa_table_engine.app.stakes import StakeBinder
from masa_table_engine.app.takeover import Takeover
from masa_table_engine.domain.model import AbandonReason, TableVoided
from masa_table_engine.domain.table import Table, next_deadline

__all__ = ["Draining", "NodeLeaving", "RecoveryReport", "TableNotFound", "TableUnserved", "Tables"]


class Tables:
    def __init__(
        self,
        deps: Deps,
        settings: RuntimeSettings,
        *,
        new_id: Callable[[], str] = lambda: uuid.uuid4().hex,
        new_seed: Callable[[], bytes] = lambda: secrets.token_bytes(32),
        stakes: StakeBinder | None = None,
        directory: Directory | None = None,
        takeover_scan_seconds: float = 1.0,
    ) -> None:
        self._state = NodeState(deps, settings)
        self._deps = deps
        self._runtimes = self._state.runtimes
        self.outbox = self._state.outbox
        self._lookup = Lookup(self._state, directory)
        self._creation = Creation(self._state, new_id=new_id, new_seed=new_seed, stakes=stakes)
        self._recovery = Recovery(self._state)
        self._takeover = Takeover(self._state, self._recovery, directory, takeover_scan_seconds)
        self._drain = Drain(self._state, self._takeover)
        self._fencing = Fencing(self._state, self._recovery)
        self._housekeeping = Housekeeping(self._state, self._fencing)

    def get(self, table_id: str) -> TableRuntime:
        return self._lookup.get(table_id)

    async def locate(self, table_id: str) -> str | None:
        """See :meth:`Lookup.locate <masa_table_engine.app.lookup.Lookup.locate>`."""
        return await self._lookup.locate(table_id)

    @property
    def active(self) -> int:
        return sum(1 for runtime in self._runtimes.values() if not runtime.table.finished)

    @property
    def served(self) -> list[str]:
        """The ids of the live tables this node serves now."""
        return [
            table_id
            for table_id, runtime in self._runtimes.items()
            if not runtime.table.finished and not runtime.fenced
        ]

    @property
    def draining(self) -> bool:
        return self._state.draining

    @property
    def frozen(self) -> int:
        """Tables that cannot take input now (see TableRuntime.frozen)."""
        return sum(1 for runtime in self._runtimes.values() if runtime.frozen)

    @property
    def players_online(self) -> int:
        """Human seats with a player connected, at tables in play."""
        return sum(
            1
            for runtime in self._runtimes.values()
            if not runtime.table.finished
            for status in runtime.table.seats
            if status.connected
        )

    def overdue(self, slack_seconds: float) -> int:
        """Tables in play, not frozen, whose next timer ran out more than ``slack_seconds``
        ago: the timer should have moved them (P-10, P-11), so nothing is moving them."""
        cutoff = self._deps.clock() - slack_seconds
        count = 0
        for runtime in self._runtimes.values():
            deadline = next_deadline(runtime.table)
            if deadline is not None and deadline < cutoff and not runtime.frozen:
                count += 1
        return count

    async def create(
        self, config: TableConfig, *, table_id: str = "", request_id: str = ""
    ) -> Table:
        """See :meth:`Creation.create <masa_table_engine.app.creation.Creation.create>`."""
        return await self._creation.create(config, table_id=table_id, request_id=request_id)

    async def recover(self) -> RecoveryReport:
        """See :meth:`Recovery.recover <masa_table_engine.app.recovery.Recovery.recover>`."""
        return await self._recovery.recover()

    async def recover_table(self, table_id: str, node: str = "") -> bool:
        """See :meth:`Recovery.recover_table
        <masa_table_engine.app.recovery.Recovery.recover_table>`."""
        return await self._recovery.recover_table(table_id, node)

    def start_takeover(self) -> None:
        self._takeover.start()

    async def scan_for_unserved(self) -> bool:
        """See :meth:`Takeover.scan <masa_table_engine.app.takeover.Takeover.scan>`."""
        return await self._takeover.scan()

    async def take_over_unserved(self) -> int:
        """See :meth:`Takeover.take_over_unserved
        <masa_table_engine.app.takeover.Takeover.take_over_unserved>` (every node's index)."""
        return await self._takeover.take_over_unserved()

    async def drain(self) -> int:
        """See :meth:`Drain.drain <masa_table_engine.app.drain.Drain.drain>`."""
        return await self._drain.drain()

    def resume(self) -> bool:
        """See :meth:`Drain.resume <masa_table_engine.app.drain.Drain.resume>`."""
        return self._drain.resume()

    async def void(self, table_id: str, details: str) -> Table:
        """End a table this node serves without a ranking (an operator's order, for a stuck
        game): ``GameAbandoned`` goes out and the ledger releases the stakes."""
        runtime = self.get(table_id)
        await runtime.commit(TableVoided(AbandonReason.VOIDED, details[:256]))
        return runtime.table

    async def lease_lost(self, table_id: str) -> None:
        """See :meth:`Fencing.lease_lost <masa_table_engine.app.fencing.Fencing.lease_lost>`."""
        await self._fencing.lease_lost(table_id)

    def start_housekeeping(self) -> None:
        self._housekeeping.start()

    async def close(self) -> None:
        await stop_tasks(self._housekeeping.task, self._takeover.task)
        for runtime in self._runtimes.values():
            await runtime.stop()
            if not runtime.table.finished:
                self._deps.metrics.table_closed(runtime.game)
        self._runtimes.clear()
        await self.outbox.close()
