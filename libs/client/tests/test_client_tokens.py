"""The bearer token a client sends (masa_client.tokens): a fixed token as given, a source asked
for the next token ahead of the current one's expiry, and a refusal that says the token expired
answered with a fresh one only."""

from __future__ import annotations

import grpc
from masa_client.errors import MasaCallError
from masa_client.tokens import TOKEN_EXPIRED, Bearer, expires_at
from masa_platform.testing import token


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _refusal(reason: str) -> MasaCallError:
    return MasaCallError(code=grpc.StatusCode.UNAUTHENTICATED, message="no", reason=reason)


def test_a_source_is_asked_ahead_of_each_expiry_and_not_before() -> None:
    clock = Clock(1_000_000.0)
    asked: list[float] = []

    def source() -> str:
        asked.append(clock.now)
        return token("ayse", ttl_seconds=600, now=clock.now)

    bearer = Bearer(source, renew_before_seconds=30, clock=clock)
    first = bearer.metadata()
    clock.now += 569
    assert bearer.metadata() == first
    clock.now += 1
    assert bearer.metadata() != first
    assert asked == [1_000_000.0, 1_000_570.0]


def test_a_short_token_is_renewed_at_half_its_life() -> None:
    clock = Clock(2_000_000.0)
    bearer = Bearer(lambda: token("bora", ttl_seconds=10, now=clock.now), clock=clock)
    first = bearer.metadata()
    clock.now += 4.9
    assert bearer.metadata() == first
    clock.now += 0.1
    assert bearer.metadata() != first


def test_only_an_expiry_refusal_of_a_renewable_token_is_retried() -> None:
    fixed = Bearer(token("cem"))
    assert not fixed.renews
    assert not fixed.refused(_refusal(TOKEN_EXPIRED))
    given = iter(["one.e30.x", "two.e30.x"])
    renewing = Bearer(lambda: next(given))
    assert renewing.metadata() == (("authorization", "Bearer one.e30.x"),)
    assert not renewing.refused(_refusal("UNAUTHENTICATED"))
    assert renewing.refused(_refusal(TOKEN_EXPIRED))
    assert renewing.metadata() == (("authorization", "Bearer two.e30.x"),)


def test_the_expiry_of_a_token_the_client_cannot_read_is_never() -> None:
    assert expires_at(token("deniz", ttl_seconds=60, now=100.0)) == 160.0
    for unreadable in ("", "opaque", "a.!!!.c", "a.e30.c", "a.WzFd.c"):
        assert expires_at(unreadable) == float("inf")
