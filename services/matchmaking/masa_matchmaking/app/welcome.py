"""The development welcome: every player seen for the first time gets chips (MASA_DEV_WELCOME_CHIPS).

For ``make run`` only: a newcomer, or a practice player of ``masa practice``, must have the
chips for a chip table at once. The grant's request_id derives from the player id, and the
ledger keeps a grant's id for ever, so a player is welcomed once whatever the restarts and
instances; the set of players welcomed by this process only saves the call, and is bounded.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Final

from masa_matchmaking.app.ports import Ledger

__all__ = ["Welcome"]

_REMEMBERED: Final = 100_000


class Welcome:
    def __init__(self, ledger: Ledger | None, amount: int) -> None:
        self._ledger = ledger
        self._amount = amount
        self._seen: OrderedDict[str, None] = OrderedDict()

    @property
    def enabled(self) -> bool:
        return self._ledger is not None and self._amount > 0

    async def greet(self, player_id: str) -> None:
        """Grant the welcome chips the first time ``player_id`` is seen."""
        if self._ledger is None or self._amount <= 0 or player_id in self._seen:
            return
        digest = hashlib.sha256(player_id.encode()).hexdigest()[:32]
        await self._ledger.grant(
            f"welcome-{digest}", player_id, self._amount, "development welcome chips"
        )
        self._seen[player_id] = None
        if len(self._seen) > _REMEMBERED:
            self._seen.popitem(last=False)
