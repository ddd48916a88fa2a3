"""ListTransfers and ListHolds page over real gRPC on every backend (AIP-158), and refuse any
page token the ledger did not make for that listing, its filters and its caller.

Each attack is sent as a client would send it, and is answered INVALID_ARGUMENT with reason
INVALID_PAGE_TOKEN; the ledger then answers the same listing as before. Before page tokens were
keyed, the ledger took a token of unkeyed parts (``base64("<seq>:<sha256(filters)[:16]>")``):
anyone could make one for any sequence number, and 2^63 overflowed SQLite's integer (INTERNAL).
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeAlias

import grpc
import grpc.aio
import pytest
from grpc_status import rpc_status
from ledger_support import (
    ADMIN,
    MATCHMAKING,
    ledger_settings,
    running_ledger,
    token_metadata,
)
from masa.common.v1 import chips_pb2, error_pb2
from masa.ledger.v1 import ledger_pb2, ledger_pb2_grpc
from masa_ledger.bootstrap import LedgerService
from masa_platform.errors import error_info, reason_name
from masa_platform.page_tokens import MAX_TOKEN_CHARACTERS, PageTokens
from masa_platform.testing import NatsServer

AYSE = token_metadata("ayse")
MEHMET = token_metadata("mehmet")
Stub: TypeAlias = "ledger_pb2_grpc.LedgerServiceAsyncStub"
Metadata = tuple[tuple[str, str], ...]
GRANTS = 7
HOLDS = 3


INVALID_PAGE_TOKEN = (
    grpc.StatusCode.INVALID_ARGUMENT,
    reason_name(error_pb2.ERROR_REASON_INVALID_PAGE_TOKEN),
)


@dataclass(frozen=True, slots=True)
class Below:
    """The cursor as the ledger seals it, for a forger that guessed the format but not the key."""

    seq: int


def unkeyed(seq: int, filters: list[Any]) -> str:
    """A token in the format the ledger took before its tokens were keyed."""
    digest = hashlib.sha256(json.dumps(filters).encode()).hexdigest()[:16]
    return base64.urlsafe_b64encode(f"{seq}:{digest}".encode()).decode().rstrip("=")


def encoded(document: str) -> str:
    return base64.urlsafe_b64encode(document.encode()).decode()


def forged(seq: int, method: str, caller: str, filters: tuple[str | int, ...]) -> str:
    """The right format, binding and cursor, sealed with a key that is not the ledger's."""
    return PageTokens(b"\0" * 32).seal(
        Below(seq),
        listing=f"/masa.ledger.v1.LedgerService/{method}",
        caller=caller,
        filters=filters,
    )


# Each attack: the method it is sent to, and its token.
ATTACKS: dict[str, tuple[str, str]] = {
    "unkeyed digest of the transfers": (
        "ListTransfers",
        unkeyed(3, ["player:ayse", None, "", 0]),
    ),
    "unkeyed digest of the holds": ("ListHolds", unkeyed(3, ["ayse", None, "", 0])),
    "seq 2^63 of the transfers": ("ListTransfers", unkeyed(2**63, ["player:ayse", None, "", 0])),
    "seq 2^63 of the holds": ("ListHolds", unkeyed(2**63, ["ayse", None, "", 0])),
    "a tag of another key": (
        "ListTransfers",
        forged(3, "ListTransfers", "ayse", ("ayse", 0, "", 0)),
    ),
    "the largest seq under another key": (
        "ListHolds",
        forged(2**63 - 2, "ListHolds", "ayse", ("ayse", 0, "", 0)),
    ),
    "Infinity": ("ListTransfers", encoded('{"o": Infinity, "s": "x"}')),
    "deep nesting": ("ListHolds", encoded('{"o": ' + "[" * 5000 + "]" * 5000 + "}")),
    "over-long": ("ListTransfers", "A" * (MAX_TOKEN_CHARACTERS + 1)),
    "megabyte": ("ListHolds", "A" * 1_000_000),
    "not base64url": ("ListTransfers", "page+2/=="),
}


@asynccontextmanager
async def ledger_with_history(
    nats_server: NatsServer, database: str
) -> AsyncIterator[tuple[LedgerService, Stub]]:
    """A ledger where ayse has GRANTS grants and HOLDS holds, and mehmet one grant."""
    async with (
        running_ledger(ledger_settings(nats_server, database)) as service,
        grpc.aio.insecure_channel(service.server.address) as channel,
    ):
        stub = ledger_pb2_grpc.LedgerServiceStub(channel)
        for player, grants in (("ayse", GRANTS), ("mehmet", 1)):
            for _ in range(grants):
                await stub.GrantChips(
                    ledger_pb2.GrantChipsRequest(
                        request_id=f"grant-{uuid.uuid4().hex[:8]}", player_id=player, amount=100
                    ),
                    metadata=ADMIN,
                )
        for n in range(HOLDS):
            await stub.HoldStake(
                ledger_pb2.HoldStakeRequest(
                    request_id=f"h-{n}", player_id="ayse", amount=10, payout=chips_pb2.PayoutRule()
                ),
                metadata=MATCHMAKING,
            )
        yield service, stub


async def refusal(call: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call
    info = error_info(await rpc_status.aio.from_call(call))
    assert info is not None
    return refused.value.code(), info.reason


def lister(stub: Stub, method: str) -> Callable[..., Any]:
    """ListTransfers or ListHolds, called with the request's fields."""
    if method == "ListTransfers":
        return lambda metadata=AYSE, **fields: stub.ListTransfers(
            ledger_pb2.ListTransfersRequest(**fields), metadata=metadata
        )
    return lambda metadata=AYSE, **fields: stub.ListHolds(
        ledger_pb2.ListHoldsRequest(**fields), metadata=metadata
    )


def ids(response: Any) -> list[str]:
    if isinstance(response, ledger_pb2.ListTransfersResponse):
        return [transfer.transfer_id for transfer in response.transfers]
    return [hold.hold_id for hold in response.holds]


def flat(pages: list[list[str]]) -> list[str]:
    return [item for page in pages for item in page]


async def every_page(call: Callable[..., Any], size: int, **fields: Any) -> list[list[str]]:
    pages: list[list[str]] = []
    token = ""
    while True:
        response = await call(page_size=size, page_token=token, **fields)
        pages.append(ids(response))
        token = response.next_page_token
        if not token:
            return pages


@pytest.mark.parametrize(
    ("method", "sizes"), [("ListTransfers", [2, 2, 2, 1]), ("ListHolds", [2, 1])]
)
async def test_pages_follow_their_tokens_to_an_empty_token_on_the_last_page(
    nats_server: NatsServer, database: str, method: str, sizes: list[int]
) -> None:
    async with ledger_with_history(nats_server, database) as (_, stub):
        call = lister(stub, method)
        whole = ids(await call())
        assert len(whole) == sum(sizes) and not (await call()).next_page_token
        pages = await every_page(call, 2)
        assert [len(page) for page in pages] == sizes
        assert flat(pages) == whole
        exact = await every_page(call, len(whole))
        assert exact == [whole], "a page that ends the listing has no token"
        assert await refusal(call(page_size=-1)) == (
            grpc.StatusCode.INVALID_ARGUMENT,
            reason_name(error_pb2.ERROR_REASON_BAD_REQUEST),
        )

        def as_service(**fields: Any) -> Any:
            return call(metadata=ADMIN, player_id="ayse", **fields)

        assert flat(await every_page(as_service, 3)) == whole, "a service pages for a player"


@pytest.mark.parametrize("attack", ATTACKS)
async def test_a_token_the_ledger_did_not_make_is_invalid_page_token(
    nats_server: NatsServer, database: str, attack: str
) -> None:
    method, token = ATTACKS[attack]
    async with ledger_with_history(nats_server, database) as (_, stub):
        call = lister(stub, method)
        before = ids(await call(page_size=2))
        assert await refusal(call(page_size=2, page_token=token)) == INVALID_PAGE_TOKEN
        assert ids(await call(page_size=2)) == before
        assert (await stub.GetBalance(ledger_pb2.GetBalanceRequest(), metadata=AYSE)).account


async def test_a_token_continues_only_its_own_listing_filters_and_caller(
    nats_server: NatsServer, database: str
) -> None:
    async with ledger_with_history(nats_server, database) as (_, stub):
        transfers = lister(stub, "ListTransfers")
        holds = lister(stub, "ListHolds")
        grants = {"kind": chips_pb2.TRANSFER_KIND_GRANT}
        ayse = (await transfers(page_size=2, **grants)).next_page_token
        assert ayse
        for replay in (
            transfers(metadata=MEHMET, page_size=2, page_token=ayse, **grants),
            transfers(page_size=2, page_token=ayse),
            transfers(page_size=2, page_token=ayse, kind=chips_pb2.TRANSFER_KIND_STAKE),
            transfers(page_size=2, page_token=ayse, table_id="t1", game_no=1, **grants),
            transfers(metadata=ADMIN, player_id="ayse", page_size=2, page_token=ayse, **grants),
            holds(page_size=2, page_token=ayse),
        ):
            assert await refusal(replay) == INVALID_PAGE_TOKEN
        # The service's token for ayse's listing is the service's, not ayse's.
        served = await transfers(metadata=ADMIN, player_id="ayse", page_size=2, **grants)
        assert (
            await refusal(transfers(page_size=2, page_token=served.next_page_token, **grants))
            == INVALID_PAGE_TOKEN
        )
        following = await transfers(page_size=2, page_token=ayse, **grants)
        assert len(following.transfers) == 2, "the token still continues its own listing"
