"""Ledger values to and from protobuf: the only place the two meet.

Ledger events leave as one :class:`LedgerEvent` envelope each, on subjects that name a table
or no id at all, never a player (``protos/masa/events/v1/ledger_event.proto``).
"""

from __future__ import annotations

from typing import Final, assert_never

from google.protobuf import timestamp_pb2
from masa.common.v1 import chips_pb2, game_pb2
from masa.events.v1 import ledger_event_pb2, result_pb2
from masa.ledger.v1 import ledger_pb2
from masa_rules.table_config import PayoutRule
from masa_wire.table_config import payout_from_proto, payout_to_proto

from masa_ledger.app.ports import OutboxMessage
from masa_ledger.domain.events import (
    ChipsGranted,
    GameSettled,
    GameVoided,
    HoldPlaced,
    HoldsBound,
    HoldVoidCause,
    HoldVoided,
    LedgerEvent,
)
from masa_ledger.domain.model import (
    Account,
    AccountKind,
    GameAbandonment,
    GameKey,
    GameResult,
    Hold,
    HoldState,
    SeatPayout,
    Settlement,
    SettlementState,
    Standing,
    Transfer,
    TransferKind,
)

__all__ = [
    "EVENT_SUBJECTS",
    "HOLD_STATES",
    "TRANSFER_KINDS",
    "abandonment_from_proto",
    "account_to_proto",
    "encode_event",
    "game_result_from_proto",
    "hold_to_proto",
    "rule_from_proto",
    "settlement_to_proto",
    "transfer_to_proto",
]

# Every subject the ledger publishes on, for the stream's configuration.
EVENT_SUBJECTS: Final = ("masa.ledger.v1.>",)

ACCOUNT_KINDS: Final = {
    AccountKind.PLAYER: chips_pb2.ACCOUNT_KIND_PLAYER,
    AccountKind.ESCROW: chips_pb2.ACCOUNT_KIND_ESCROW,
    AccountKind.HOUSE: chips_pb2.ACCOUNT_KIND_HOUSE,
    AccountKind.ISSUER: chips_pb2.ACCOUNT_KIND_ISSUER,
}
TRANSFER_KINDS: Final = {
    TransferKind.GRANT: chips_pb2.TRANSFER_KIND_GRANT,
    TransferKind.STAKE: chips_pb2.TRANSFER_KIND_STAKE,
    TransferKind.PAYOUT: chips_pb2.TRANSFER_KIND_PAYOUT,
    TransferKind.RAKE: chips_pb2.TRANSFER_KIND_RAKE,
    TransferKind.FORFEIT: chips_pb2.TRANSFER_KIND_FORFEIT,
}
HOLD_STATES: Final = {
    HoldState.HELD: ledger_pb2.StakeHold.STATE_HELD,
    HoldState.BOUND: ledger_pb2.StakeHold.STATE_BOUND,
    HoldState.POSTED: ledger_pb2.StakeHold.STATE_POSTED,
    HoldState.RELEASED: ledger_pb2.StakeHold.STATE_RELEASED,
    HoldState.EXPIRED: ledger_pb2.StakeHold.STATE_EXPIRED,
    HoldState.VOIDED: ledger_pb2.StakeHold.STATE_VOIDED,
}
_SETTLEMENT_STATES: Final = {
    SettlementState.SETTLED: ledger_pb2.Settlement.STATE_SETTLED,
    SettlementState.VOIDED: ledger_pb2.Settlement.STATE_VOIDED,
}
_VOID_CAUSES: Final = {
    HoldVoidCause.RELEASED: ledger_event_pb2.HOLD_VOID_CAUSE_RELEASED,
    HoldVoidCause.EXPIRED: ledger_event_pb2.HOLD_VOID_CAUSE_EXPIRED,
}


def timestamp(seconds: float) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromNanoseconds(round(seconds * 1e9))
    return stamp


def account_to_proto(account: Account) -> ledger_pb2.Account:
    message = ledger_pb2.Account(
        account_id=account.account_id,
        kind=ACCOUNT_KINDS[account.kind],
        player_id=account.player_id,
        table_id=account.table_id,
        game_no=account.game_no,
        balance=account.balance,
        held=account.held,
        available=account.available if account.kind is AccountKind.PLAYER else 0,
        pending_stakes=account.pending_stakes,
    )
    if account.created_at is not None:
        message.create_time.CopyFrom(timestamp(account.created_at))
    if account.rule is not None:
        message.payout.CopyFrom(rule_to_proto(account.rule))
    return message


def transfer_to_proto(transfer: Transfer) -> ledger_pb2.Transfer:
    return ledger_pb2.Transfer(
        transfer_id=transfer.transfer_id,
        kind=TRANSFER_KINDS[transfer.kind],
        debit_account_id=transfer.debit_account_id,
        credit_account_id=transfer.credit_account_id,
        amount=transfer.amount,
        table_id=transfer.table_id,
        game_no=transfer.game_no,
        hold_id=transfer.hold_id,
        reason=transfer.reason,
        create_time=timestamp(transfer.created_at),
    )


def hold_to_proto(hold: Hold) -> ledger_pb2.StakeHold:
    message = ledger_pb2.StakeHold(
        hold_id=hold.hold_id,
        state=HOLD_STATES[hold.state],
        player_id=hold.player_id,
        amount=hold.amount,
        lobby_id=hold.lobby_id,
        ticket_id=hold.ticket_id,
        create_time=timestamp(hold.created_at),
        expire_time=timestamp(hold.expire_at),
        table_id=hold.table_id,
        game_no=hold.game_no,
        reason=hold.reason,
    )
    if hold.closed_at is not None:
        message.close_time.CopyFrom(timestamp(hold.closed_at))
    if hold.rule is not None:
        message.payout.CopyFrom(rule_to_proto(hold.rule))
    return message


def rule_to_proto(rule: PayoutRule) -> chips_pb2.PayoutRule:
    """The rule with its shares spelt out: the winner's 10000 when it sets none."""
    return payout_to_proto(rule.spelt_out())


def rule_from_proto(message: chips_pb2.PayoutRule) -> PayoutRule:
    """An unset payout table pays the winner all (P-30's default), kept as that one share, so
    that a game's terms compare equal however they were sent."""
    return payout_from_proto(message).spelt_out()


def _payout_to_proto(payout: SeatPayout) -> ledger_pb2.Payout:
    return ledger_pb2.Payout(
        seat=payout.seat, player_id=payout.player_id, place=payout.place, amount=payout.amount
    )


def settlement_to_proto(settlement: Settlement) -> ledger_pb2.Settlement:
    return ledger_pb2.Settlement(
        table_id=settlement.key.table_id,
        game_no=settlement.key.game_no,
        state=_SETTLEMENT_STATES[settlement.state],
        pot=settlement.pot,
        rake=settlement.rake,
        payouts=[_payout_to_proto(p) for p in settlement.payouts],
        hold_ids=list(settlement.hold_ids),
        transfers=[transfer_to_proto(t) for t in settlement.transfers],
        event_id=settlement.event_id,
        reason=settlement.reason,
        close_time=timestamp(settlement.closed_at),
        payout=rule_to_proto(settlement.rule),
    )


def game_result_from_proto(message: result_pb2.GameFinished) -> GameResult:
    """A GameFinished as the ledger pays it; a training game stakes nothing."""
    return GameResult(
        event_id=message.event_id,
        key=GameKey(table_id=message.table_id, game_no=message.game_no),
        stake=message.stake,
        standings=tuple(
            Standing(
                seat=s.seat,
                player_id=s.player_id,
                place=s.place,
                forfeited=s.forfeited,
                team=s.team,
                hold_id=s.hold_id,
            )
            for s in message.ranking
        ),
        teams=message.mode == game_pb2.MODE_TEAMS,
        published_rule=rule_from_proto(message.payout) if message.HasField("payout") else None,
    )


def abandonment_from_proto(message: result_pb2.GameAbandoned) -> GameAbandonment:
    return GameAbandonment(
        event_id=message.event_id,
        key=GameKey(table_id=message.table_id, game_no=message.game_no),
        reason=message.reason or "game abandoned",
    )


def encode_event(event: LedgerEvent) -> OutboxMessage:
    """The envelope, subject and Nats-Msg-Id of a ledger event."""
    envelope = ledger_event_pb2.LedgerEvent()
    match event:
        case HoldPlaced(hold=hold):
            subject = "masa.ledger.v1.wallet.hold_placed"
            envelope.hold_placed.CopyFrom(
                ledger_event_pb2.HoldPlaced(
                    event_id=event.event_id,
                    occurred_at=timestamp(hold.created_at),
                    hold_id=hold.hold_id,
                    player_id=hold.player_id,
                    amount=hold.amount,
                    lobby_id=hold.lobby_id,
                    ticket_id=hold.ticket_id,
                    expire_time=timestamp(hold.expire_at),
                    payout=None if hold.rule is None else rule_to_proto(hold.rule),
                )
            )
        case HoldVoided(hold=hold, cause=cause):
            subject = "masa.ledger.v1.wallet.hold_voided"
            envelope.hold_voided.CopyFrom(
                ledger_event_pb2.HoldVoided(
                    event_id=event.event_id,
                    occurred_at=timestamp(hold.closed_at or hold.created_at),
                    hold_id=hold.hold_id,
                    player_id=hold.player_id,
                    amount=hold.amount,
                    cause=_VOID_CAUSES[cause],
                    reason=hold.reason,
                    ticket_id=hold.ticket_id,
                )
            )
        case ChipsGranted(transfer=transfer, player_id=player_id):
            subject = "masa.ledger.v1.wallet.chips_granted"
            envelope.chips_granted.CopyFrom(
                ledger_event_pb2.ChipsGranted(
                    event_id=event.event_id,
                    occurred_at=timestamp(transfer.created_at),
                    transfer_id=transfer.transfer_id,
                    player_id=player_id,
                    amount=transfer.amount,
                    reason=transfer.reason,
                )
            )
        case HoldsBound(key=key):
            subject = f"masa.ledger.v1.game.{key.table_id}.holds_bound"
            envelope.holds_bound.CopyFrom(
                ledger_event_pb2.HoldsBound(
                    event_id=event.event_id,
                    occurred_at=timestamp(event.at),
                    table_id=key.table_id,
                    game_no=key.game_no,
                    stake=event.stake,
                    hold_ids=list(event.hold_ids),
                    payout=rule_to_proto(event.rule),
                )
            )
        case GameSettled(settlement=s):
            subject = f"masa.ledger.v1.game.{s.key.table_id}.game_settled"
            envelope.game_settled.CopyFrom(
                ledger_event_pb2.GameSettled(
                    event_id=event.event_id,
                    occurred_at=timestamp(s.closed_at),
                    table_id=s.key.table_id,
                    game_no=s.key.game_no,
                    pot=s.pot,
                    rake=s.rake,
                    payouts=[
                        ledger_event_pb2.Payout(
                            player_id=p.player_id, amount=p.amount, seat=p.seat, place=p.place
                        )
                        for p in s.payouts
                    ],
                    forfeited=s.forfeited,
                )
            )
        case GameVoided(settlement=s):
            subject = f"masa.ledger.v1.game.{s.key.table_id}.game_voided"
            envelope.game_voided.CopyFrom(
                ledger_event_pb2.GameVoided(
                    event_id=event.event_id,
                    occurred_at=timestamp(s.closed_at),
                    table_id=s.key.table_id,
                    game_no=s.key.game_no,
                    hold_ids=list(s.hold_ids),
                    reason=s.reason,
                )
            )
        case _:
            assert_never(event)
    return OutboxMessage(
        event_id=event.event_id, subject=subject, payload=envelope.SerializeToString()
    )
