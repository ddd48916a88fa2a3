"""``POST /dev/token``: a development player token, as ``masa token`` signs one.

Only a development stack turns it on (``MASA_DEV_ISSUER_KEY_FILE``, which ``make run`` sets to
its run folder's issuer key): it lets anyone be any player, which is what a developer trying
the web client wants and what a deployment must never allow. A deployment's players get their
tokens from its identity provider, and its gateway holds no key.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Final

from masa_platform.auth import Role, TokenSigner

__all__ = ["DevTokens", "TokenRefused"]

# A player id as the services accept it in a token's subject.
_PLAYER: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")
_TTL_SECONDS: Final = 3600.0
MAX_BODY_BYTES: Final = 1024


class TokenRefused(Exception):
    """A request for a token that gets none: its HTTP status and a sentence."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class _Bucket:
    """Tokens minted per second over all callers, with a burst of twice as many."""

    rate: float
    level: float
    at: float

    def take(self, now: float) -> bool:
        self.level = min(2 * self.rate, self.level + (now - self.at) * self.rate)
        self.at = now
        if self.level < 1:
            return False
        self.level -= 1
        return True


class DevTokens:
    def __init__(self, signer: TokenSigner, *, rate: float) -> None:
        self._signer = signer
        self._bucket = _Bucket(rate, 2 * rate, time.monotonic())

    def mint(self, body: bytes) -> bytes:
        """The JSON answer to a request body ``{"player": "<name>"}``; raises TokenRefused."""
        try:
            asked = json.loads(body)
        except (ValueError, UnicodeDecodeError, RecursionError):
            raise TokenRefused(400, 'the body is not JSON: send {"player": "<name>"}') from None
        player = asked.get("player") if isinstance(asked, dict) else None
        if not isinstance(player, str) or not _PLAYER.fullmatch(player):
            raise TokenRefused(
                400,
                "a player name is 1 to 64 letters, digits, '_', '.' or '-', "
                "starting with a letter or a digit",
            )
        if not self._bucket.take(time.monotonic()):
            raise TokenRefused(429, "too many tokens asked for; retry in a second")
        issued = time.time()
        token = self._signer.mint(player, [Role.PLAYER], ttl_seconds=_TTL_SECONDS, now=issued)
        # expires_in as well: a browser's clock need not agree with this one.
        answer = {
            "token": token,
            "player_id": player,
            "expires_at": int(issued + _TTL_SECONDS),
            "expires_in": int(_TTL_SECONDS),
        }
        return json.dumps(answer).encode()
