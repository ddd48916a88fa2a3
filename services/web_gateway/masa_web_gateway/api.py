"""The methods the gateway serves: a player's public API, and nothing a service or an operator
calls (no CreateTable, no grants, holds or settlements, no admin service)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from connectrpc.method import IdempotencyLevel, MethodInfo, StreamType
from google.protobuf import descriptor, message_factory
from masa.ledger.v1 import ledger_pb2
from masa.matchmaking.v1 import matchmaking_pb2
from masa.table.v1 import table_pb2

__all__ = ["EXPOSED", "LEDGER", "MATCHMAKING", "TABLE", "Route", "routes"]

MATCHMAKING: Final = "masa.matchmaking.v1.MatchmakingService"
TABLE: Final = "masa.table.v1.TableService"
LEDGER: Final = "masa.ledger.v1.LedgerService"

EXPOSED: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType(
    {
        MATCHMAKING: (
            "ListLobbies",
            "GetLobby",
            "CreateTicket",
            "GetTicket",
            "ListTickets",
            "CancelTicket",
            "WatchTicket",
            "GetRating",
        ),
        TABLE: ("GetTable", "WatchTable", "SubmitAction", "ResumeControl", "LeaveTable"),
        LEDGER: ("GetBalance", "ListTransfers"),
    }
)

_FILES: Final = {
    MATCHMAKING: matchmaking_pb2.DESCRIPTOR,
    TABLE: table_pb2.DESCRIPTOR,
    LEDGER: ledger_pb2.DESCRIPTOR,
}

# Reads a browser may also send as GET (Connect), which caches and retries freely.
_READS: Final = frozenset({"ListLobbies", "GetLobby", "GetTicket", "ListTickets", "GetRating"})


@dataclass(frozen=True, slots=True)
class Route:
    """One exposed method: its path (``/<service>/<method>``) and message classes."""

    service: str
    info: MethodInfo[Any, Any]

    @property
    def path(self) -> str:
        return f"/{self.service}/{self.info.name}"

    @property
    def streams(self) -> bool:
        return self.info.stream_type is StreamType.SERVER_STREAM


def routes() -> tuple[Route, ...]:
    """Every exposed method, read off the services' descriptors."""
    found = []
    for service, names in EXPOSED.items():
        service_descriptor = _FILES[service].services_by_name[service.rsplit(".", 1)[1]]
        for name in names:
            found.append(
                Route(service, _method_info(service, service_descriptor.methods_by_name[name]))
            )
    return tuple(found)


def _method_info(service: str, method: descriptor.MethodDescriptor) -> MethodInfo[Any, Any]:
    if method.client_streaming:
        raise ValueError(f"{service}/{method.name}: browsers cannot stream requests")
    return MethodInfo(
        name=method.name,
        service_name=service,
        input=message_factory.GetMessageClass(method.input_type),
        output=message_factory.GetMessageClass(method.output_type),
        idempotency_level=(
            IdempotencyLevel.NO_SIDE_EFFECTS if method.name in _READS else IdempotencyLevel.UNKNOWN
        ),
        stream_type=StreamType.SERVER_STREAM if method.server_streaming else StreamType.UNARY,
    )
