"""The service token matchmaking shows the ledger and the engines, minted once per period.

A token per call cost a signature here and a verification at the callee for every call
(several per table placed); one token reused until shortly before it expires costs one of
each per period, since the callee keeps the tokens it has verified.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

from masa_platform.auth import Role, mint_token
from masa_platform.settings import AuthSettings

__all__ = ["ServiceToken"]

_TTL_SECONDS: Final = 300.0
# A token is replaced this long before it expires, so that none reaches a callee stale.
_RENEW_BEFORE_SECONDS: Final = 60.0


class ServiceToken:
    def __init__(
        self, auth: AuthSettings, service_name: str, clock: Callable[[], float] = time.time
    ) -> None:
        self._auth = auth
        self._service = service_name
        self._clock = clock
        self._token = ""
        self._renew_at = float("-inf")

    def metadata(self) -> tuple[tuple[str, str]]:
        """The call metadata with the current token."""
        now = self._clock()
        if now >= self._renew_at:
            self._token = mint_token(
                self._auth, self._service, (Role.SERVICE,), ttl_seconds=_TTL_SECONDS, now=now
            )
            self._renew_at = now + _TTL_SECONDS - _RENEW_BEFORE_SECONDS
        return (("authorization", f"Bearer {self._token}"),)
