"""A test double of the ledger as a node binds a chip table's stakes in it (P-30): the
:class:`~masa_table_engine.app.stakes.StakeBinder` port, answering as
:class:`~masa_table_engine.adapters.ledger_client.GrpcStakeBinder` does over the real ledger
(``test_engine_ledger_contract.py`` runs both), so that the use cases can make chip tables on
the in-memory stores.

It keeps the holds matchmaking placed (:meth:`FakeStakes.hold`) with their states, and the
first answer to each game's bind: the node names its bind by the game, so the ledger answers
the same bind again as the first time (a refusal too) and another bind of the game as a
request id reused (AIP-155). A refusal carries the ledger's reason and metadata.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

from masa.common.v1 import error_pb2
from masa.ledger.v1 import ledger_pb2
from masa_platform.errors import reason_name
from masa_rules.table_config import PayoutRule
from masa_table_engine.app.stakes import StakesRefused, StakesUnavailable

State: TypeAlias = ledger_pb2.StakeHold.State.ValueType
HELD = ledger_pb2.StakeHold.STATE_HELD
BOUND = ledger_pb2.StakeHold.STATE_BOUND
POSTED = ledger_pb2.StakeHold.STATE_POSTED
RELEASED = ledger_pb2.StakeHold.STATE_RELEASED
EXPIRED = ledger_pb2.StakeHold.STATE_EXPIRED


@dataclass
class Hold:
    player_id: str
    amount: int
    # The terms it was placed for (None binds under any, as a hold the ledger placed before
    # it kept them).
    payout: PayoutRule | None = None
    state: State = HELD
    table_id: str = ""
    game_no: int = 0


@dataclass(frozen=True, slots=True)
class _Bind:
    """What a bind of a game asked for."""

    stake: int
    hold_ids: tuple[str, ...]
    payout: PayoutRule


def _refused(
    reason: error_pb2.ErrorReason.ValueType, message: str, metadata: Mapping[str, str]
) -> StakesRefused:
    name = reason_name(reason)
    return StakesRefused(message, name, metadata)


@dataclass
class FakeStakes:
    holds: dict[str, Hold] = field(default_factory=dict)
    # Each game's first bind and its refusal (None: bound).
    answered: dict[tuple[str, int], tuple[_Bind, StakesRefused | None]] = field(
        default_factory=dict
    )
    # The ledger does not answer: every bind is StakesUnavailable.
    unreachable: bool = False

    def hold(
        self, hold_id: str, player_id: str, amount: int, payout: PayoutRule | None = None
    ) -> None:
        """Matchmaking's HoldStakes of one stake, for a game of these terms."""
        self.holds.setdefault(hold_id, Hold(player_id, amount, payout))

    def release(self, hold_id: str) -> None:
        """Matchmaking's ReleaseHold of a hold no table took."""
        if self.holds[hold_id].state == HELD:
            self.holds[hold_id].state = RELEASED

    def expire(self, hold_id: str) -> None:
        """The ledger's expiry of a hold left unbound past its TTL."""
        if self.holds[hold_id].state == HELD:
            self.holds[hold_id].state = EXPIRED

    async def bind(
        self,
        table_id: str,
        game_no: int,
        stake: int,
        hold_ids: Sequence[str],
        payout: PayoutRule,
    ) -> None:
        if self.unreachable:
            raise StakesUnavailable("the ledger did not bind the stakes: UNAVAILABLE")
        asked = _Bind(stake, tuple(hold_ids), payout)
        first = self.answered.get((table_id, game_no))
        if first is not None:
            bind, refused = first
            if bind != asked:
                raise _refused(
                    error_pb2.ERROR_REASON_REQUEST_ID_REUSED,
                    f"request id bind:{table_id}:{game_no} was used for another request",
                    {},
                )
            if refused is not None:
                raise StakesRefused(refused.message, refused.reason, refused.metadata)
            return
        try:
            self._bind(table_id, game_no, asked)
        except StakesRefused as refused:
            self.answered[(table_id, game_no)] = (asked, refused)
            raise
        self.answered[(table_id, game_no)] = (asked, None)

    def _bind(self, table_id: str, game_no: int, asked: _Bind) -> None:
        for hold_id in asked.hold_ids:
            if hold_id not in self.holds:
                raise _refused(
                    error_pb2.ERROR_REASON_HOLD_NOT_FOUND,
                    f"no hold {hold_id!r}",
                    {"hold_id": hold_id},
                )
        chosen = [self.holds[hold_id] for hold_id in asked.hold_ids]
        if len({hold.player_id for hold in chosen}) != len(chosen):
            raise _refused(
                error_pb2.ERROR_REASON_BAD_REQUEST,
                "two holds of one player, who takes one seat (P-2)",
                {"field": "hold_ids"},
            )
        for hold_id, hold in zip(asked.hold_ids, chosen, strict=True):
            _check_bindable(hold_id, hold, asked.stake, asked.payout)
        for hold in chosen:
            hold.state, hold.table_id, hold.game_no = BOUND, table_id, game_no


def _check_bindable(hold_id: str, hold: Hold, stake: int, payout: PayoutRule) -> None:
    if hold.state in (BOUND, POSTED):
        raise _refused(
            error_pb2.ERROR_REASON_HOLD_ALREADY_BOUND,
            f"hold {hold_id!r} is bound to game {hold.table_id}:{hold.game_no}",
            {"hold_id": hold_id, "table_id": hold.table_id, "game_no": str(hold.game_no)},
        )
    if hold.state != HELD:
        state = ledger_pb2.StakeHold.State.Name(hold.state).removeprefix("STATE_")
        raise _refused(
            error_pb2.ERROR_REASON_HOLD_NOT_HELD,
            f"hold {hold_id!r} is {state.lower()}",
            {"hold_id": hold_id, "state": state},
        )
    if hold.amount != stake:
        raise _refused(
            error_pb2.ERROR_REASON_STAKE_MISMATCH,
            f"hold {hold_id!r} holds {hold.amount}, the stake is {stake}",
            {"hold_id": hold_id, "amount": str(hold.amount), "stake": str(stake)},
        )
    if hold.payout is not None and hold.payout.spelt_out() != payout.spelt_out():
        raise _refused(
            error_pb2.ERROR_REASON_TERMS_MISMATCH,
            f"hold {hold_id!r} was placed for other terms",
            {"hold_id": hold_id},
        )
