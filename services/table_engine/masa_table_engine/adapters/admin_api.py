"""The ``masa.table.v1.TableAdminService`` servicer: an operator's drain, resume and void.

All are operators' calls (the admin role, checked by the platform's auth interceptor).

- DrainNode drains this node as SIGTERM does (``Node.drain``), without stopping it: the
  process stays up answering health NOT_SERVING, refusing CreateTable with NODE_DRAINING,
  and sending its former tables' players on (TABLE_MOVED, or TABLE_UNAVAILABLE while the
  takeover runs), until it is stopped. The request names the node: a call that reached
  another node (a stale address) drains nothing and fails with FAILED_PRECONDITION, reason
  NODE_MISMATCH, naming this node and, when the registry knows it, the named node's address.
- ResumeNode returns a node an operator drained to service (``Node.resume``): new tables and
  takeovers again, live in the registry, health SERVING. A node that was not drained is left
  as it is (``resumed`` false); one that SIGTERM drains to stop cannot be resumed
  (FAILED_PRECONDITION). It names the node, as DrainNode does.
- VoidTable ends a table this node serves with a ``TableVoided`` entry (``Tables.void``): its
  ``GameAbandoned`` goes out through the outbox like any result, and the ledger voids the
  stakes once (P-30). A table served elsewhere gets the errors of every table call
  (TABLE_MOVED with the owner's address, TABLE_NOT_FOUND, TABLE_UNAVAILABLE); a finished one
  is left as it is (``applied`` false).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable

from masa.table.v1 import admin_pb2, admin_pb2_grpc
from masa_platform.errors import PreconditionFailed
from masa_platform.handlers import Context
from masa_rules.errors import RuleViolation

from masa_table_engine.adapters.convert import table_to_proto
from masa_table_engine.adapters.grpc_api import TableServicer, TableUnavailable
from masa_table_engine.adapters.limits import check_node_id, check_table_id, check_void_reason
from masa_table_engine.app.ports import LogConflict, LogUnavailable
from masa_table_engine.app.tables import NodeLeaving, TableNotFound, Tables

__all__ = ["TableAdminServicer"]

_log = logging.getLogger(__name__)

_DEFAULT_REASON = "voided by an operator"


class TableAdminServicer(admin_pb2_grpc.TableAdminServiceServicer):
    def __init__(self, node_id: str, tables: TableServicer) -> None:
        self._node_id = node_id
        self._table_api = tables
        self._drain: Callable[[], Awaitable[int]] | None = None
        self._resume: Callable[[], Awaitable[bool]] | None = None
        self._address_of: Callable[[str], Awaitable[str | None]] | None = None
        self._tables: Tables | None = None

    def bind(
        self,
        tables: Tables,
        *,
        drain: Callable[[], Awaitable[int]],
        resume: Callable[[], Awaitable[bool]],
        address_of: Callable[[str], Awaitable[str | None]],
    ) -> None:
        """Serve the node's ``tables``; until then every call is UNAVAILABLE."""
        self._tables = tables
        self._drain = drain
        self._resume = resume
        self._address_of = address_of

    async def DrainNode(  # noqa: N802 (the generated servicer's names)
        self, request: admin_pb2.DrainNodeRequest, context: Context
    ) -> admin_pb2.DrainNodeResponse:
        drain, _ = await self._this_node(request.node_id, "drained")
        _log.warning("draining on an operator's request")
        handed = await drain()
        return admin_pb2.DrainNodeResponse(node_id=self._node_id, tables_handed_over=handed)

    async def ResumeNode(  # noqa: N802 (the generated servicer's names)
        self, request: admin_pb2.ResumeNodeRequest, context: Context
    ) -> admin_pb2.ResumeNodeResponse:
        _, resume = await self._this_node(request.node_id, "resumed")
        try:
            resumed = await resume()
        except NodeLeaving as error:
            raise PreconditionFailed(str(error)) from None
        if resumed:
            _log.warning("back in service on an operator's request")
        return admin_pb2.ResumeNodeResponse(node_id=self._node_id, resumed=resumed)

    async def _this_node(
        self, requested: str, verb: str
    ) -> tuple[Callable[[], Awaitable[int]], Callable[[], Awaitable[bool]]]:
        """The node's drain and resume, for a call that names this node; a call that names
        another one (a stale address) is refused, and nothing is done."""
        node_id = check_node_id(requested)
        drain, resume, address_of = self._drain, self._resume, self._address_of
        if drain is None or resume is None or address_of is None:
            raise TableUnavailable("the node is starting")
        if node_id != self._node_id:
            address = None
            with contextlib.suppress(Exception):
                address = await address_of(node_id)
            raise PreconditionFailed(
                f"this is node {self._node_id}, not {node_id}: nothing {verb}",
                reason="NODE_MISMATCH",
                metadata={"node_id": self._node_id, "node_address": address or ""},
            )
        return drain, resume

    async def VoidTable(  # noqa: N802 (the generated servicer's names)
        self, request: admin_pb2.VoidTableRequest, context: Context
    ) -> admin_pb2.VoidTableResponse:
        table_id = check_table_id(request.table_id)
        reason = check_void_reason(request.reason) or _DEFAULT_REASON
        runtime = await self._table_api.find(table_id)
        if self._tables is None:
            raise TableUnavailable("the node is starting")
        applied = not runtime.table.finished
        if applied:
            try:
                await self._tables.void(table_id, reason)
            except RuleViolation:
                # The game ended (or was voided) between the look and the write.
                applied = False
            except (LogConflict, LogUnavailable) as error:
                raise TableUnavailable(str(error)) from None
            except TableNotFound:
                # Handed over between the look and the write: the caller finds its new node.
                raise TableUnavailable(f"table {table_id} is moving to another node") from None
        if applied:
            _log.warning(
                "table voided on an operator's request",
                extra={"table_id": table_id, "reason": reason},
            )
        owner = self._table_api.owner_address
        return admin_pb2.VoidTableResponse(
            table=table_to_proto(runtime.table, owner), applied=applied
        )
