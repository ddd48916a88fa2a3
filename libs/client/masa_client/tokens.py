"""The bearer token a client sends, fixed or renewed before it expires.

A client is given either a token (a string: it is sent until it expires, and then every call
fails UNAUTHENTICATED, reason ``TOKEN_EXPIRED``) or a *source* of tokens: a function that asks
the identity provider for a fresh one. With a source the client sends its token until
``renew_before_seconds`` before the token's ``exp``, then asks for the next; a call or stream
the server still ends with ``TOKEN_EXPIRED`` (a clock ahead of the client's, a token revoked
early) is retried once with a token asked for there and then, and a watch stream resumes from
the last sequence it delivered, so that nothing is lost or repeated.

The client never checks a token: it reads ``exp`` to know when to ask for the next one, and the
server alone decides whether a token is good.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import time
from collections.abc import Callable
from typing import Final, TypeAlias

from masa_client.errors import MasaCallError

__all__ = ["TOKEN_EXPIRED", "Bearer", "TokenSource", "expires_at"]

TOKEN_EXPIRED: Final = "TOKEN_EXPIRED"

# A token, or a function returning a fresh one (it may block briefly: it runs on each renewal).
TokenSource: TypeAlias = str | Callable[[], str]


def expires_at(token: str) -> float:
    """The ``exp`` of a JWT, unverified; infinity when it has none the client can read."""
    parts = token.split(".")
    if len(parts) != 3:
        return math.inf
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload))
    except (binascii.Error, ValueError):
        return math.inf
    expiry = claims.get("exp") if isinstance(claims, dict) else None
    return float(expiry) if isinstance(expiry, int | float) else math.inf


class Bearer:
    """The ``authorization`` metadata of a client's calls, from a :data:`TokenSource`."""

    def __init__(
        self,
        source: TokenSource,
        *,
        renew_before_seconds: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._renew = source if callable(source) else None
        self._renew_before = renew_before_seconds
        self._clock = clock
        self._token = source if isinstance(source, str) else ""
        self._renew_at = -math.inf
        self._metadata: tuple[tuple[str, str]] = (("authorization", f"Bearer {self._token}"),)

    @property
    def renews(self) -> bool:
        """Whether a refused token can be replaced (the client was given a source)."""
        return self._renew is not None

    def metadata(self) -> tuple[tuple[str, str]]:
        """The metadata with the current token, asking the source for the next one when it is
        about to expire."""
        if self._renew is not None and self._clock() >= self._renew_at:
            self._fetch(self._renew)
        return self._metadata

    def refused(self, error: MasaCallError) -> bool:
        """After ``error``: whether to call again, with a fresh token (a renewable one expired)."""
        if error.reason != TOKEN_EXPIRED or self._renew is None:
            return False
        self._fetch(self._renew)
        return True

    def _fetch(self, renew: Callable[[], str]) -> None:
        self._token = renew()
        expiry = expires_at(self._token)
        # Ahead by renew_before, or by half its life for a token that lives less than twice that.
        self._renew_at = expiry - min(self._renew_before, (expiry - self._clock()) / 2)
        self._metadata = (("authorization", f"Bearer {self._token}"),)
