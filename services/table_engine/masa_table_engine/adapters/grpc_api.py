"""The ``masa.table.v1.TableService`` servicer: authorisation and translation, no judging.

Each RPC finds the table, works out which seat the caller may act or watch as, converts the
request with ``masa_wire`` and hands it to the table's runtime; the engines decide. Errors are
``MasaError``s (or the engines' ``RuleViolation``s), mapped to statuses with ``ErrorInfo`` by
the platform's error interceptor:

- malformed input, or input beyond the limits of :mod:`.limits`: INVALID_ARGUMENT;
- an unknown table: NOT_FOUND, reason TABLE_NOT_FOUND;
- a table another node serves: FAILED_PRECONDITION, reason TABLE_MOVED, with the owner's
  ``host:port`` in the ErrorInfo metadata key ``owner_address`` (and ``table_id``);
- a table whose log does not answer now (NATS away), or that no node serves at the moment
  (its node died or drained and the takeover is under way): UNAVAILABLE, reason
  TABLE_UNAVAILABLE (retry with the same request_id, here or at any node); a watch stream of
  a table this node hands over ends the same way;
- CreateTable on a draining node: UNAVAILABLE, reason NODE_DRAINING;
- another seat: PERMISSION_DENIED, reason NOT_YOUR_SEAT;
- an illegal move: FAILED_PRECONDITION with the rule id;
- a stale expected_sequence: ABORTED, reason SEQUENCE_MISMATCH, with the current sequence;
  an unset one (0) asks for no check, as a write without an etag does (AIP-154);
- a new table on a node that already runs ``max_tables`` (MASA_MAX_TABLES, counting the creates
  in flight): RESOURCE_EXHAUSTED, reason NODE_AT_CAPACITY, before anything is written, so the
  caller places it elsewhere. A retry of a table the node runs is answered at capacity too;
- a spectator's watch of a table that has MASA_MAX_SPECTATORS_PER_TABLE of them (a caller
  without a seat there; seated players are never counted, so they can always watch their own
  table): RESOURCE_EXHAUSTED, reason QUOTA_EXCEEDED, metadata ``quota`` ``table_spectators``;
- a watch stream whose reader fell MASA_WATCH_BACKLOG updates behind ends with
  RESOURCE_EXHAUSTED, reason OVERLOADED, metadata ``quota`` ``watch_backlog``, ``limit`` and
  ``after_sequence`` (the last sequence it sent): the client resumes from there.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import ClassVar

import grpc
from masa.common.v1 import error_pb2
from masa.table.v1 import event_pb2, table_pb2, table_pb2_grpc
from masa_platform.auth import Principal, Role, require_principal, until_token_expires
from masa_platform.errors import (
    DOMAIN,
    BadRequest,
    MasaError,
    NotFound,
    NotYourSeat,
    Overloaded,
    PreconditionFailed,
    RequestIdReused,
    TableMoved,
    Unavailable,
    preview,
    refusal,
)
from masa_platform.handlers import Context
from masa_platform.quotas import QuotaExceeded, held_to_quotas
from masa_rules.errors import RuleViolation
from masa_rules.table_config import TableConfig

from masa_table_engine.adapters.convert import (
    action_from_proto,
    config_from_proto,
    same_action,
    seat_view,
    spectator_view,
    table_to_proto,
    update_for,
)
from masa_table_engine.adapters.limits import check_action, check_config, check_table_id
from masa_table_engine.app.ports import LogConflict, LogUnavailable
from masa_table_engine.app.runtime import (
    SequenceMismatch,
    TableRuntime,
    TooManySpectators,
    WatcherBehind,
    WatchItem,
)
from masa_table_engine.app.stakes import StakesRefused, StakesUnavailable, TableExists
from masa_table_engine.app.tables import Draining, TableNotFound, Tables, TableUnserved
from masa_table_engine.domain.model import PlayerAction, SeatChange, SeatChanged, Source
from masa_table_engine.domain.table import Table

__all__ = [
    "TABLE_SPECTATORS",
    "WATCH_BACKLOG",
    "NodeAtCapacity",
    "SequenceMismatchError",
    "TableServicer",
    "TableUnavailable",
]

# The quotas this service enforces itself, as the refusal's metadata names them.
TABLE_SPECTATORS = "table_spectators"
WATCH_BACKLOG = "watch_backlog"


class SequenceMismatchError(MasaError):
    code: ClassVar[grpc.StatusCode] = grpc.StatusCode.ABORTED
    default_reason: ClassVar[str] = "SEQUENCE_MISMATCH"


class TableExistsError(MasaError):
    """CreateTable named a table id that another request created."""

    code: ClassVar[grpc.StatusCode] = grpc.StatusCode.ALREADY_EXISTS
    default_reason: ClassVar[str] = "TABLE_EXISTS"


class NodeAtCapacity(MasaError):
    """The node runs as many tables as it may (MASA_MAX_TABLES): create the table elsewhere."""

    code: ClassVar[grpc.StatusCode] = grpc.StatusCode.RESOURCE_EXHAUSTED
    default_reason: ClassVar[str] = "NODE_AT_CAPACITY"


class TableUnavailable(MasaError):
    """The table cannot take input here now (its log is unreachable or it moved)."""

    code: ClassVar[grpc.StatusCode] = grpc.StatusCode.UNAVAILABLE
    default_reason: ClassVar[str] = "TABLE_UNAVAILABLE"


class TableServicer(table_pb2_grpc.TableServiceServicer):
    def __init__(self, default_turn_seconds: float, *, max_tables: int) -> None:
        self._default_turn_seconds = default_turn_seconds
        self._max_tables = max_tables
        self._bound: Tables | None = None
        self.owner_address = ""
        # The creates being served, by table id: each holds a place under max_tables.
        self._creating: Counter[str] = Counter()
        self._unnamed = itertools.count()

    def bind(self, tables: Tables, owner_address: str) -> None:
        """Serve ``tables``; until then every call is UNAVAILABLE."""
        self._bound = tables
        self.owner_address = owner_address

    @property
    def _tables(self) -> Tables:
        if self._bound is None:
            raise TableUnavailable("the node is starting")
        return self._bound

    async def CreateTable(  # noqa: N802 (the generated servicer's names)
        self, request: table_pb2.CreateTableRequest, context: Context
    ) -> table_pb2.CreateTableResponse:
        # The caller may name the table (AIP-133); every limit is checked before anything.
        if request.table_id:
            check_table_id(request.table_id)
        check_config(request.config)
        config = config_from_proto(request.config, self._default_turn_seconds)
        tables = self._tables
        key = request.table_id or f"new-{next(self._unnamed)}"
        if key not in self._creating:
            running = bool(request.table_id) and _runs(tables, request.table_id)
            if not running and tables.active + len(self._creating) >= self._max_tables:
                raise NodeAtCapacity(
                    f"this node runs {tables.active} tables, its most; create it on another",
                    metadata={"max_tables": str(self._max_tables)},
                )
        self._creating[key] += 1
        try:
            table = await self._create(request, config)
        finally:
            self._creating[key] -= 1
            if not self._creating[key]:
                del self._creating[key]
        owner = self.owner_address
        return table_pb2.CreateTableResponse(table=table_to_proto(table, owner))

    async def _create(self, request: table_pb2.CreateTableRequest, config: TableConfig) -> Table:
        try:
            return await self._tables.create(
                config, table_id=request.table_id, request_id=request.request_id
            )
        except RuleViolation as error:
            # A configuration the rules refuse is a bad request, not a move made too early.
            raise BadRequest(error.message, reason=error.rule) from None
        except TableExists as error:
            raise TableExistsError(str(error)) from None
        except StakesRefused as error:
            raise PreconditionFailed(
                error.message, reason=error.reason, metadata=error.metadata
            ) from None
        except StakesUnavailable as error:
            raise Unavailable(str(error)) from None
        except (LogConflict, LogUnavailable) as error:
            raise TableUnavailable(str(error)) from None
        except Draining as error:
            raise TableUnavailable(str(error), reason="NODE_DRAINING") from None

    async def GetTable(  # noqa: N802 (the generated servicer's names)
        self, request: table_pb2.GetTableRequest, context: Context
    ) -> table_pb2.GetTableResponse:
        runtime = await self._runtime(request.table_id)
        table = runtime.table
        seat = _own_seat(runtime, require_principal())
        if seat is None:
            return table_pb2.GetTableResponse(
                spectator_view=spectator_view(table, self.owner_address)
            )
        return table_pb2.GetTableResponse(seat_view=seat_view(table, seat, self.owner_address))

    async def WatchTable(  # noqa: N802 (the generated servicer's names)
        self, request: table_pb2.WatchTableRequest, context: Context
    ) -> AsyncIterator[table_pb2.WatchTableResponse]:
        runtime = await self._runtime(request.table_id)
        principal = require_principal()
        own = _own_seat(runtime, principal)
        viewer: int | None = None
        as_player = False
        if request.HasField("seat"):
            # A seat's view holds its hand: its player's to read, and nobody else's (P-20).
            if request.seat != own:
                raise NotYourSeat(f"you may not watch as seat {request.seat}")
            viewer = self._seat_number(runtime, request.seat)
            as_player = viewer == own
        elif own is not None and not request.spectate:
            viewer, as_player = own, True
        after = request.after_sequence if request.HasField("after_sequence") else None
        # Seated players are not counted: spectators can never keep them from their table.
        spectator = own is None and held_to_quotas(principal)
        watched = runtime.watch(
            viewer, as_player=as_player, after_sequence=after, spectator=spectator
        )
        try:
            # Closed with this stream, not whenever it is collected: it holds a spectator's
            # place at the table. The stream ends when the caller's token does.
            async with aclosing(watched):
                async for item in until_token_expires(watched):
                    yield self._watched(item, viewer)
        except TooManySpectators as error:
            raise QuotaExceeded(TABLE_SPECTATORS, str(error.limit), str(error)) from None
        except WatcherBehind as error:
            raise Overloaded(
                str(error),
                metadata={
                    "quota": WATCH_BACKLOG,
                    "limit": str(error.limit),
                    "after_sequence": str(error.last_sequence),
                },
            ) from None
        if not runtime.table.finished:
            # The table was handed over (a drain) or lost: the client finds its new node.
            raise TableUnavailable(f"table {request.table_id} is moving to another node")

    def _watched(self, item: WatchItem, viewer: int | None) -> table_pb2.WatchTableResponse:
        if isinstance(item, Table):
            if viewer is None:
                return table_pb2.WatchTableResponse(
                    spectator_view=spectator_view(item, self.owner_address)
                )
            return table_pb2.WatchTableResponse(
                seat_view=seat_view(item, viewer, self.owner_address)
            )
        return table_pb2.WatchTableResponse(update=update_for(item, viewer))

    async def SubmitAction(  # noqa: N802 (the generated servicer's names)
        self, request: table_pb2.SubmitActionRequest, context: Context
    ) -> table_pb2.SubmitActionResponse:
        update = await self._submit(request, require_principal())
        return table_pb2.SubmitActionResponse(update=update)

    async def SubmitActions(  # noqa: N802 (the generated servicer's names)
        self, requests: AsyncIterator[table_pb2.SubmitActionsRequest], context: Context
    ) -> AsyncIterator[table_pb2.SubmitActionsResponse]:
        # The token was checked when the stream opened; only its expiry can change since, and
        # the stream ends with it, waiting for a move or not.
        principal = require_principal()
        async for request in until_token_expires(requests):
            move = request.action
            try:
                update = await self._submit(move, principal)
            except (MasaError, RuleViolation) as error:
                refused = refusal(error)
                yield table_pb2.SubmitActionsResponse(
                    request_id=move.request_id,
                    refused=table_pb2.ActionRefused(
                        code=refused.code_number,
                        message=refused.message,
                        error=error_pb2.ErrorDetail(
                            reason=refused.reason, domain=DOMAIN, metadata=refused.metadata
                        ),
                    ),
                )
                continue
            yield table_pb2.SubmitActionsResponse(request_id=move.request_id, update=update)

    async def _submit(
        self, request: table_pb2.SubmitActionRequest, principal: Principal
    ) -> event_pb2.TableUpdate:
        runtime = await self._runtime(request.table_id)
        seat = self._acting_seat(
            runtime, principal, request.seat if request.HasField("seat") else None
        )
        if not request.HasField("action"):
            raise BadRequest("action is required")
        table = runtime.table
        earlier = runtime.history.accepted(seat, request.request_id)
        if earlier is not None:
            # The log keeps each action's request id, so a retry is answered after a restart
            # or a move to another node too, however the hand changed since (a meld it laid
            # is no longer in it); the same id with another action is not a retry.
            if not isinstance(earlier.input, PlayerAction) or not same_action(
                earlier.input.action, request.action
            ):
                raise RequestIdReused(
                    f"request_id {preview(request.request_id)} was already used for another move"
                )
            return update_for(earlier, seat)
        before = runtime.history.accepted_before(seat, request.request_id)
        if before is not None:
            # Applied before the snapshot a takeover rebuilt the table from: its events are
            # not kept here, only that it was applied, and where.
            return event_pb2.TableUpdate(sequence=before)
        if request.expected_sequence and request.expected_sequence != table.sequence:
            # Judged against a table that moved on: its limits (the hand's size now) would
            # refuse it for the wrong reason (AIP-154).
            raise SequenceMismatchError(
                str(SequenceMismatch(request.expected_sequence, table.sequence)),
                metadata={"current_sequence": str(table.sequence)},
            )
        check_action(request.action, table.engine.hand_size(table.game, seat))
        action = action_from_proto(table, request.action, seat)
        source = Source.PLAYER if runtime.is_human(seat) else Source.BOT
        try:
            entry = await runtime.commit(
                PlayerAction(seat, action, source, request.request_id),
                # 0 is no sequence a table has: the caller asks for no check (AIP-154).
                expected_sequence=request.expected_sequence or None,
            )
        except SequenceMismatch as error:
            raise SequenceMismatchError(
                str(error), metadata={"current_sequence": str(error.current)}
            ) from None
        except (LogConflict, LogUnavailable) as error:
            raise TableUnavailable(str(error)) from None
        return update_for(entry, seat)

    async def ResumeControl(  # noqa: N802 (the generated servicer's names)
        self, request: table_pb2.ResumeControlRequest, context: Context
    ) -> table_pb2.ResumeControlResponse:
        runtime = await self._runtime(request.table_id)
        seat = self._acting_seat(runtime, require_principal(), None)
        try:
            await runtime.commit(SeatChanged(seat, SeatChange.RESUMED))
        except SequenceMismatch as error:
            raise SequenceMismatchError(
                str(error), metadata={"current_sequence": str(error.current)}
            ) from None
        except (LogConflict, LogUnavailable) as error:
            raise TableUnavailable(str(error)) from None
        return table_pb2.ResumeControlResponse(
            seat_view=seat_view(runtime.table, seat, self.owner_address)
        )

    async def LeaveTable(  # noqa: N802 (the generated servicer's names)
        self, request: table_pb2.LeaveTableRequest, context: Context
    ) -> table_pb2.LeaveTableResponse:
        runtime = await self._runtime(request.table_id)
        seat = self._acting_seat(runtime, require_principal(), None)
        try:
            await runtime.leave(seat)
        except SequenceMismatch as error:
            raise SequenceMismatchError(
                str(error), metadata={"current_sequence": str(error.current)}
            ) from None
        except (LogConflict, LogUnavailable) as error:
            raise TableUnavailable(str(error)) from None
        return table_pb2.LeaveTableResponse(table=table_to_proto(runtime.table, self.owner_address))

    async def find(self, table_id: str) -> TableRuntime:
        """The table if this node serves it, with every table call's errors otherwise (the
        operator's VoidTable looks tables up the same way)."""
        return await self._runtime(table_id)

    async def _runtime(self, table_id: str) -> TableRuntime:
        check_table_id(table_id)
        try:
            runtime = self._tables.get(table_id)
        except TableNotFound:
            pass
        else:
            if not runtime.fenced:
                return runtime
        try:
            owner = await self._tables.locate(table_id)
        except (TableUnserved, LogUnavailable) as error:
            raise TableUnavailable(str(error)) from None
        if owner is not None and owner != self.owner_address:
            raise TableMoved(table_id, owner)
        raise NotFound(f"no table {table_id}", reason="TABLE_NOT_FOUND")

    def _acting_seat(
        self, runtime: TableRuntime, principal: Principal, requested: int | None
    ) -> int:
        """The seat the caller acts for: its own, and only that (bots are played in the
        engine, never through the API)."""
        own = runtime.table.config.seat_of(principal.subject)
        if own is None:
            raise NotYourSeat("you have no seat at this table")
        if requested is not None and requested != own:
            raise NotYourSeat(f"you sit on seat {own}, not on seat {requested}")
        return own

    @staticmethod
    def _seat_number(runtime: TableRuntime, seat: int) -> int:
        if not 0 <= seat < len(runtime.table.seats):
            raise BadRequest(f"there is no seat {seat}")
        return seat


def _runs(tables: Tables, table_id: str) -> bool:
    try:
        tables.get(table_id)
    except TableNotFound:
        return False
    return True


def _own_seat(runtime: TableRuntime, principal: Principal) -> int | None:
    """The caller's seat: a player's, found by the token's subject. An operator (or a service)
    whose subject happens to be a seated player's id is no player: it looks on (P-20)."""
    if Role.PLAYER not in principal.roles:
        return None
    return runtime.table.config.seat_of(principal.subject)
