"""A player that keeps playing its seat while tables move between nodes (issue 12).

It follows the engine's contract: ``FAILED_PRECONDITION`` with reason ``TABLE_MOVED`` names the
owner in ``owner_address``; ``UNAVAILABLE`` (a node dead, draining, or a table being taken
over) means asking another node. A move that got no answer is sent again with the same
``request_id`` and ``expected_sequence``, so it is applied at most once; the request ids the
engine acknowledged are kept for the test to find in the log exactly once.

(Kept out of conftest.py so that tests import it by a unique name.)
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import grpc
import grpc.aio
from engine_support import metadata
from masa.table.v1 import action_pb2, table_pb2, table_pb2_grpc, view_pb2
from masa_platform.errors import rpc_error_info
from masa_rules import elevator, fiftyone
from masa_rules.elevator.policies import greedy_policy as elevator_greedy
from masa_rules.fiftyone.policies import greedy_policy as fiftyone_greedy
from masa_rules.shuffle import DrawStream
from masa_wire import elevator as elevator_wire
from masa_wire import fiftyone as fiftyone_wire
from masa_wire.errors import WireError

T = TypeVar("T")

# Refusals a seat meets without anything being wrong: another input came first.
_RACES = frozenset({"SEQUENCE_MISMATCH", "E-3", "F-21", "P-2"})
_CALL_SECONDS = 2.0
# The node went away under the call: down, too slow, or stopping (a server that stops cancels
# the calls it still holds). The call goes to another node, with the same request id.
_NODE_GONE = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED}
)


class TableGone(Exception):
    """The table is over and no node keeps it in memory any more."""


@dataclass
class RoamingSeat:
    table_id: str
    player: str
    # The addresses of the nodes now (they change as nodes restart on new ports).
    nodes: Callable[[], Sequence[str]]
    address: str = ""
    acknowledged: list[str] = field(default_factory=list)
    # Calls refused while the table moved (UNAVAILABLE, a dead node, TABLE_MOVED).
    refused: int = 0
    # (start, end) of each stretch in which the seat got no answer from any node.
    outages: list[tuple[float, float]] = field(default_factory=list)
    final_state: int = 0
    # How long to wait between looks at the table when the seat has nothing to do.
    poll_seconds: float = 0.05
    deadline: float = float("inf")
    last_error: str = ""
    _channels: dict[str, grpc.aio.Channel] = field(default_factory=dict)

    async def play(self, deadline: float) -> None:
        """Play until the game is over (or the monotonic ``deadline``)."""
        rng = DrawStream(f"{self.table_id}/{self.player}".encode())
        self.deadline = deadline
        try:
            while time.monotonic() < deadline:
                view = await self._view()
                if view.table.table.state != view_pb2.Table.STATE_PLAYING:
                    self.final_state = view.table.table.state
                    return
                action = _choose(view, rng)
                if action is None:
                    await asyncio.sleep(self.poll_seconds)
                    continue
                await self._submit(view, action)
        except TableGone:
            self.final_state = view_pb2.Table.STATE_FINISHED
        finally:
            for channel in self._channels.values():
                await channel.close()

    async def _view(self) -> view_pb2.SeatView:
        request = table_pb2.GetTableRequest(table_id=self.table_id)
        response = await self._call(
            lambda stub: stub.GetTable(
                request, metadata=metadata(self.player), timeout=_CALL_SECONDS
            )
        )
        return response.seat_view

    async def _submit(self, view: view_pb2.SeatView, action: action_pb2.Action) -> None:
        request = table_pb2.SubmitActionRequest(
            request_id=uuid.uuid4().hex,
            table_id=self.table_id,
            expected_sequence=view.table.table.sequence,
            action=action,
        )
        try:
            await self._call(
                lambda stub: stub.SubmitAction(
                    request, metadata=metadata(self.player), timeout=_CALL_SECONDS
                )
            )
        except grpc.aio.AioRpcError as error:
            if _reason(error) not in _RACES:
                raise
            return
        self.acknowledged.append(request.request_id)

    async def _call(
        self, invoke: Callable[[table_pb2_grpc.TableServiceAsyncStub], Awaitable[T]]
    ) -> T:
        down_since: float | None = None
        while True:
            if time.monotonic() > self.deadline:
                raise TimeoutError(
                    f"{self.player} at {self.table_id}: no node answered; last {self.last_error}"
                )
            if not self.address:
                self.address = random.choice(list(self.nodes()))
            stub = table_pb2_grpc.TableServiceStub(self._channel(self.address))
            try:
                answer = await invoke(stub)
            except grpc.aio.AioRpcError as error:
                code = error.code()
                reason = _reason(error)
                self.last_error = f"{self.address}: {code.name} {reason} {error.details()}"
                if reason == "TABLE_MOVED":
                    self.refused += 1
                    owner = _metadata(error).get("owner_address", "")
                    self.address = owner if owner != self.address else ""
                elif code in _NODE_GONE:
                    self.refused += 1
                    others = [a for a in self.nodes() if a != self.address]
                    self.address = random.choice(others) if others else ""
                    await asyncio.sleep(0.05)
                elif code is grpc.StatusCode.NOT_FOUND:
                    raise TableGone(self.table_id) from error
                else:
                    raise
                if down_since is None:
                    down_since = time.monotonic()
                continue
            if down_since is not None:
                self.outages.append((down_since, time.monotonic()))
            return answer

    def _channel(self, address: str) -> grpc.aio.Channel:
        channel = self._channels.get(address)
        if channel is None:
            channel = self._channels[address] = grpc.aio.insecure_channel(address)
        return channel


def _choose(view: view_pb2.SeatView, rng: DrawStream) -> action_pb2.Action | None:
    """The greedy policy's move for the seat, or None when the seat has nothing to do now."""
    try:
        if view.table.WhichOneof("game") == "elevator":
            state = elevator_wire.state_from_seat_view(view)
            if not elevator.legal_actions(state, view.seat):
                return None
            return elevator_wire.action_to_proto(elevator_greedy(state, view.seat, rng))
        fifty = fiftyone_wire.state_from_seat_view(view)
        if fifty.phase is fiftyone.Phase.OVER or not fiftyone.legal_actions(fifty, view.seat):
            return None
        return fiftyone_wire.action_to_proto(fiftyone_greedy(fifty, view.seat, rng))
    except WireError:
        return None


def _metadata(error: grpc.aio.AioRpcError) -> dict[str, str]:
    info = rpc_error_info(error)
    return dict(info.metadata) if info is not None else {}


def _reason(error: grpc.aio.AioRpcError) -> str:
    info = rpc_error_info(error)
    return info.reason if info is not None else ""
