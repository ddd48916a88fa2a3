"""51 events to ``masa.table.v1.TableEvent``, each for one viewer (P-20).

Every engine event converts on its own, by one ``match`` on its class, into the table events a
viewer receives: a seat sees its own dealt cards and its own draw, the log (``LOG``) sees
every hidden field, a spectator (``None``) nothing hidden. Some engine events become two
table events (a gösterge is shown *and* puts the seat in pair status), and two become none
(the seed reveal travels inside ``HandFinished``; the table reports the game's end itself).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from google.protobuf import timestamp_pb2
from masa.table.v1 import action_pb2, event_pb2
from masa_rules import fiftyone as engine
from masa_rules.fiftyone.scoring import elimination_limit
from masa_rules.melds import MeldKind
from masa_rules.ruleset import GameLength, RuleSet

from masa_wire.cards import card_to_proto, cards_to_proto
from masa_wire.elevator import LOG, SHUFFLE_ALGORITHM, Viewer, hand_places
from masa_wire.fiftyone.melds import meld_to_proto, placed_card
from masa_wire.fiftyone.views import opening_to_proto

__all__ = ["events_to_proto"]

_FINISH: Final = (
    ("by_hand", event_pb2.FINISH_KIND_BY_HAND),
    ("joker", event_pb2.FINISH_KIND_WITH_JOKER),
    ("pairs", event_pb2.FINISH_KIND_FROM_PAIRS),
    ("bottom_card", event_pb2.FINISH_KIND_WITH_BOTTOM_CARD),
)
_END_REASON: Final = {
    engine.HandEndReason.OUT: event_pb2.HAND_END_REASON_OUT,
    engine.HandEndReason.STOCK_EXHAUSTED: event_pb2.HAND_END_REASON_STOCK_EXHAUSTED,
    engine.HandEndReason.STALLED: event_pb2.HAND_END_REASON_STALLED,
}


@dataclass(frozen=True, slots=True)
class _Context:
    """What a conversion needs besides the event: the state the action led to, the viewer,
    the table's F-80 query window and whether the table answered for silent seats."""

    after: engine.State
    viewer: Viewer
    query_deadline: timestamp_pb2.Timestamp | None
    timed_out: bool

    def sees(self, seat: int) -> bool:
        return self.viewer == LOG or (self.viewer is not None and self.viewer == seat)


def events_to_proto(
    events: Sequence[engine.Event],
    after: engine.State,
    viewer: Viewer,
    *,
    query_deadline: timestamp_pb2.Timestamp | None = None,
    timed_out: bool = False,
) -> list[event_pb2.TableEvent]:
    """The events of one ``apply`` (or of the deal), which led to ``after``, for ``viewer``.

    ``query_deadline`` is the table's F-80 window, and ``timed_out`` marks answers the table
    gave for seats that did not answer in time.
    """
    context = _Context(after, viewer, query_deadline, timed_out)
    return [message for event in events for message in _event_to_proto(event, context)]


def _event_to_proto(  # noqa: C901, PLR0911, PLR0912 - one match arm per 51 event kind
    event: engine.Event, context: _Context
) -> list[event_pb2.TableEvent]:
    rules = context.after.rules
    match event:
        case engine.Deal():
            return [event_pb2.TableEvent(hand_dealt=_dealt(event, context))]
        case engine.Drew():
            return [event_pb2.TableEvent(drew=_drew(event, context))]
        case engine.TookDiscard(seat=seat, card=card):
            took = event_pb2.TookDiscard(seat=seat, card=card_to_proto(card))
            return [event_pb2.TableEvent(took_discard=took)]
        case engine.QueryStarted():
            return [event_pb2.TableEvent(query_started=_query_started(event, context))]
        case engine.Answered():
            return [event_pb2.TableEvent(query_answered=_answered(event, context))]
        case engine.QueryEnded():
            return _query_ended(event, context)
        case engine.TookBottom(seat=seat, card=card):
            bottom = event_pb2.TookBottomCard(seat=seat, card=card_to_proto(card))
            return [event_pb2.TableEvent(took_bottom_card=bottom)]
        case engine.ClaimedBottom(seat=seat, shown=shown):
            claimed = event_pb2.BottomCardClaimed(seat=seat, shown=card_to_proto(shown))
            return [event_pb2.TableEvent(bottom_card_claimed=claimed)]
        case engine.LaidDown():
            return [_laid_down(event, rules)]
        case engine.LaidOff():
            return [_laid_off(event, rules)]
        case engine.RetrievedJoker():
            return [event_pb2.TableEvent(joker_retrieved=_retrieved(event, rules))]
        case engine.DeclaredPairs(seat=seat, with_take=with_take):
            cause = (
                event_pb2.PAIRS_CAUSE_TOOK_DISCARD if with_take else event_pb2.PAIRS_CAUSE_DECLARED
            )
            return [_pairs_declared(seat, cause)]
        case engine.ShowedPairs():
            return _gosterge(event)
        case engine.Discarded():
            return [event_pb2.TableEvent(discarded=_discarded(event))]
        case engine.Reshuffled(stock=stock):
            reshuffled = event_pb2.StockReshuffled(stock_count=stock)
            return [event_pb2.TableEvent(stock_reshuffled=reshuffled)]
        case engine.HandEnded():
            return [event_pb2.TableEvent(hand_finished=_hand_finished(event, context.after))]
        case engine.Revealed() | engine.GameEnded():
            # The seed travels in HandFinished; the table reports GameFinished itself.
            return []


def _dealt(event: engine.Deal, context: _Context) -> event_pb2.HandDealt:
    message = event_pb2.HandDealt(
        hand_no=event.hand,
        dealer_seat=event.dealer,
        starter_seat=event.starter,
        seed_commitment=bytes.fromhex(event.commitment),
        card_counts=[len(hand) for hand in event.hands],
        stock_count=event.stock,
        cut_jokers=cards_to_proto(event.cutter_jokers),
    )
    viewer = context.viewer
    if viewer is not None and 0 <= viewer < len(event.hands):
        message.hand.extend(cards_to_proto(event.hands[viewer]))
    if event.cutter is not None:
        message.cutter_seat = event.cutter
    if event.bottom_card is not None:
        message.bottom_card.CopyFrom(card_to_proto(event.bottom_card))
    return message


def _drew(event: engine.Drew, context: _Context) -> event_pb2.Drew:
    drew = event_pb2.Drew(seat=event.seat, stock_count=event.stock)
    if context.sees(event.seat):
        drew.card.CopyFrom(card_to_proto(event.card))
    return drew


def _query_started(event: engine.QueryStarted, context: _Context) -> event_pb2.QueryStarted:
    started = event_pb2.QueryStarted(
        query_id=context.after.turn.number,
        taker_seat=event.taker,
        card=card_to_proto(event.card),
        asked_seats=event.asked,
    )
    if context.query_deadline is not None:
        started.deadline.CopyFrom(context.query_deadline)
    return started


def _answered(event: engine.Answered, context: _Context) -> event_pb2.QueryAnswered:
    return event_pb2.QueryAnswered(
        query_id=context.after.turn.number,
        seat=event.seat,
        answer=action_pb2.QUERY_ANSWER_GIVE if event.give else action_pb2.QUERY_ANSWER_REFUSE,
        timed_out=context.timed_out,
    )


def _query_ended(event: engine.QueryEnded, context: _Context) -> list[event_pb2.TableEvent]:
    ended = event_pb2.QueryEnded(
        query_id=context.after.turn.number, taker_seat=event.taker, refused_seats=event.refused
    )
    # F-80: a seat that refuses goes into pair status (F-70).
    refused = [_pairs_declared(s, event_pb2.PAIRS_CAUSE_REFUSED_QUERY) for s in event.refused]
    return [event_pb2.TableEvent(query_ended=ended), *refused]


def _pairs_declared(seat: int, cause: event_pb2.PairsCause.ValueType) -> event_pb2.TableEvent:
    return event_pb2.TableEvent(pairs_declared=event_pb2.PairsDeclared(seat=seat, cause=cause))


def _laid_down(event: engine.LaidDown, rules: RuleSet) -> event_pb2.TableEvent:
    melds = [meld_to_proto(event.first + i, m, rules) for i, m in enumerate(event.melds)]
    if not event.opening:
        return event_pb2.TableEvent(laid_down=event_pb2.LaidDown(seat=event.seat, melds=melds))
    opened = event_pb2.Opened(
        seat=event.seat,
        melds=melds,
        with_pairs=any(m.meld.kind is MeldKind.PAIR for m in event.melds),
        total=event.value,
        threshold=event.threshold,
    )
    return event_pb2.TableEvent(opened=opened)


def _laid_off(event: engine.LaidOff, rules: RuleSet) -> event_pb2.TableEvent:
    meld = meld_to_proto(event.at, event.result, rules)
    if event.result.meld.kind is MeldKind.PAIR:
        # A pair laid off on a pair opener's area is a new pair there (F-50).
        return event_pb2.TableEvent(laid_down=event_pb2.LaidDown(seat=event.seat, melds=[meld]))
    index = event.result.cards.index(event.cards[0])
    card = placed_card(event.cards[0], event.result.meld.cards[index])
    return event_pb2.TableEvent(laid_off=event_pb2.LaidOff(seat=event.seat, card=card, meld=meld))


def _retrieved(event: engine.RetrievedJoker, rules: RuleSet) -> event_pb2.JokerRetrieved:
    return event_pb2.JokerRetrieved(
        seat=event.seat,
        joker=card_to_proto(event.joker),
        natural=card_to_proto(event.card),
        meld=meld_to_proto(event.meld, event.result, rules),
    )


def _gosterge(event: engine.ShowedPairs) -> list[event_pb2.TableEvent]:
    cards = cards_to_proto(card for pair in event.pairs for card in pair)
    shown = event_pb2.GostergeShown(seat=event.seat, cards=cards)
    return [
        event_pb2.TableEvent(gosterge_shown=shown),
        _pairs_declared(event.seat, event_pb2.PAIRS_CAUSE_GOSTERGE),
    ]


def _discarded(event: engine.Discarded) -> event_pb2.Discarded:
    discarded = event_pb2.Discarded(
        seat=event.seat,
        card=card_to_proto(event.card),
        islek=event.islek,
        islek_penalty=event.penalty,
        finishing=event.finishing,
    )
    if event.twin is not None:
        discarded.twin.CopyFrom(card_to_proto(event.twin))
    return discarded


def _hand_finished(event: engine.HandEnded, after: engine.State) -> event_pb2.HandFinished:
    places = hand_places(_tied(event.scores))
    out = set(event.eliminated)
    message = event_pb2.HandFinished(
        hand_no=event.hand,
        replayed=event.replayed,
        kafa=event.kafa,
        seed=event.seed,
        shuffle_algorithm=SHUFFLE_ALGORITHM,
        end_reason=_END_REASON[event.reason],
        scores=[
            event_pb2.HandScore(
                seat=seat,
                place=places[seat],
                score=score,
                total=event.totals[seat],
                remaining=cards_to_proto(event.hands_left[seat]),
                opening=opening_to_proto(event.opened[seat], event.opened_with_pairs[seat]),
                pair_status=event.pair_status[seat],
                islek_penalty=event.islek_penalties[seat],
                eliminated=seat in out,
            )
            for seat, score in enumerate(event.scores)
        ],
    )
    if event.finisher is not None:
        message.finisher_seat = event.finisher
        kinds = [kind for key, kind in _FINISH if getattr(event.finish, key)]
        message.finish_kinds.extend(kinds or [event_pb2.FINISH_KIND_NORMAL])
    if after.rules.game_length is GameLength.ELIMINATION and after.hands_scored:
        message.elimination_limit = elimination_limit(after.rules, after.hands_scored)
    return message


def _tied(scores: Sequence[int]) -> list[list[int]]:
    """Seats grouped by equal hand score, lowest (best) first."""
    groups: dict[int, list[int]] = {}
    for seat, score in enumerate(scores):
        groups.setdefault(score, []).append(seat)
    return [groups[score] for score in sorted(groups)]
