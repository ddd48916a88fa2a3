"""Finding a table: on this node, or the node that serves it."""

from __future__ import annotations

from masa_table_engine.app.node_state import NodeState
from masa_table_engine.app.ports import Directory
from masa_table_engine.app.runtime import TableRuntime

__all__ = ["Lookup", "TableNotFound", "TableUnserved"]


class TableNotFound(Exception):
    def __init__(self, table_id: str) -> None:
        super().__init__(f"no table {table_id!r} on this node")
        self.table_id = table_id


class TableUnserved(Exception):
    """The table exists but no node serves it at the moment: it is being taken over."""

    def __init__(self, table_id: str) -> None:
        super().__init__(f"table {table_id} is being taken over by another node; try again")
        self.table_id = table_id


class Lookup:
    def __init__(self, state: NodeState, directory: Directory | None) -> None:
        self._deps = state.deps
        self._ownership = state.ownership
        self._runtimes = state.runtimes
        self._directory = directory

    def get(self, table_id: str) -> TableRuntime:
        runtime = self._runtimes.get(table_id)
        if runtime is None:
            raise TableNotFound(table_id)
        return runtime

    async def locate(self, table_id: str) -> str | None:
        """The address of the node that serves a table this node does not hold; None when no
        table of that id is known. Raises :class:`TableUnserved` when nobody serves it now (its
        node died or drained and no node has taken it over yet)."""
        holder = await self._ownership.holder(table_id)
        me = self._deps.log.writer
        if holder is not None and holder != me and self._directory is not None:
            address = await self._directory.address_of(holder)
            if address:
                return address
        placed = await self._deps.log.placement(table_id)
        if placed is None:
            if holder is not None and holder != me:
                raise TableUnserved(table_id)
            return None
        if holder is not None and holder != me:
            if placed.node == holder and placed.address:
                return placed.address
            raise TableUnserved(table_id)
        if not placed.finished:
            raise TableUnserved(table_id)
        return placed.address if placed.node != me else None
