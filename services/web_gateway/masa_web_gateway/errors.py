"""A service's gRPC status as the Connect error a browser reads, its ``ErrorInfo`` kept."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import grpc
import grpc.aio
from connectrpc.code import Code
from connectrpc.errors import ConnectError, ErrorDetail
from google.protobuf.message import DecodeError
from google.rpc import status_pb2
from masa_platform.errors import to_status
from protobuf.wkt import Any as AnyDetail

__all__ = ["connect_error", "from_masa_error", "from_rpc_error"]

_DETAILS_KEY: Final = "grpc-status-details-bin"
# Every gRPC code has a Connect code of the same name, but for the spelling of CANCELLED.
_CODES: Final[dict[grpc.StatusCode, Code]] = {
    status: Code.CANCELED if status is grpc.StatusCode.CANCELLED else Code[status.name]
    for status in grpc.StatusCode
    if status is not grpc.StatusCode.OK
}


def connect_error(
    code: grpc.StatusCode, message: str, trailing_metadata: Iterable[tuple[str, str | bytes]]
) -> ConnectError:
    """The Connect error of a gRPC status: same code and message, and the details of its
    ``grpc-status-details-bin`` (masa's ``google.rpc.ErrorInfo``) as they are."""
    details: list[ErrorDetail] = []
    for key, value in trailing_metadata:
        if key != _DETAILS_KEY or not isinstance(value, bytes):
            continue
        try:
            status = status_pb2.Status.FromString(value)
        except DecodeError:
            continue
        details.extend(
            ErrorDetail(AnyDetail(type_url=detail.type_url, value=detail.value))
            for detail in status.details
        )
    return ConnectError(_CODES.get(code) or Code.UNKNOWN, message, details)


def from_rpc_error(error: grpc.aio.AioRpcError) -> ConnectError:
    return connect_error(error.code(), error.details() or "", error.trailing_metadata() or ())


def from_masa_error(error: BaseException) -> ConnectError:
    """The gateway's own refusal (masa_platform.errors), as a service would have sent it."""
    status = to_status(error)
    return connect_error(status.code, status.details, status.trailing_metadata)
