"""51 actions (F-21..F-80) to and from ``masa.table.v1.Action``.

An opening and a later lay-down are both :class:`~masa_rules.fiftyone.LayDown`; on the wire a
seat may send either ``open`` or ``lay_down``. Cards a seat submits are read as the copies its
hand holds (C-4), so a client need not track which deck a card came from.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from masa.common.v1 import card_pb2, meld_pb2
from masa.table.v1 import action_pb2
from masa_rules.cards import PhysicalCard
from masa_rules.fiftyone import (
    Action,
    Answer,
    ClaimBottom,
    DeclarePairs,
    Discard,
    Draw,
    LayDown,
    LayOff,
    MeldSpec,
    RetrieveJoker,
    ShowPairs,
    State,
    TakeBottom,
    TakeDiscard,
)

from masa_wire.cards import (
    card_from_proto,
    card_to_proto,
    cards_to_proto,
    face_from_proto,
    face_to_proto,
)
from masa_wire.errors import WireError
from masa_wire.fiftyone.melds import KIND_BACK, natural_from_proto, proposed_meld, proposed_pair

__all__ = ["action_from_proto", "action_to_proto"]

_END: Final = {meld_pb2.MELD_END_LOW: False, meld_pb2.MELD_END_HIGH: True}


def action_to_proto(action: Action) -> action_pb2.Action:
    """The proto form of an engine action."""
    if isinstance(action, LayDown | LayOff | RetrieveJoker):
        return _meld_action_to_proto(action)
    if isinstance(action, DeclarePairs | ShowPairs | ClaimBottom | Answer):
        return _declaration_to_proto(action)
    match action:
        case Draw():
            return action_pb2.Action(draw_from_stock=action_pb2.DrawFromStock())
        case TakeDiscard(pairs=pairs):
            return action_pb2.Action(take_discard=action_pb2.TakeDiscard(pairs=pairs))
        case TakeBottom():
            return action_pb2.Action(take_bottom_card=_take_bottom(action))
        case Discard(card=card, twin=twin):
            discard = action_pb2.Discard(card=card_to_proto(card))
            if twin is not None:
                discard.twin.CopyFrom(card_to_proto(twin))
            return action_pb2.Action(discard=discard)


def _meld_action_to_proto(action: LayDown | LayOff | RetrieveJoker) -> action_pb2.Action:
    match action:
        case LayDown(melds=melds, pairs=pairs):
            proposed = [*map(proposed_meld, melds), *map(proposed_pair, pairs)]
            return action_pb2.Action(lay_down=action_pb2.LayDown(melds=proposed))
        case LayOff():
            return action_pb2.Action(lay_off=_lay_off(action))
        case RetrieveJoker(meld=meld, card=card):
            retrieve = action_pb2.RetrieveJoker(meld_id=meld, natural=card_to_proto(card))
            return action_pb2.Action(retrieve_joker=retrieve)


def _declaration_to_proto(
    action: DeclarePairs | ShowPairs | ClaimBottom | Answer,
) -> action_pb2.Action:
    match action:
        case DeclarePairs():
            return action_pb2.Action(declare_pairs=action_pb2.DeclarePairs())
        case ShowPairs(pairs=pairs):
            shown = cards_to_proto(card for pair in pairs for card in pair)
            return action_pb2.Action(show_gosterge=action_pb2.ShowGosterge(cards=shown))
        case ClaimBottom(shown=shown_card):
            claim = action_pb2.ClaimBottomCard(shown=card_to_proto(shown_card))
            return action_pb2.Action(claim_bottom_card=claim)
        case Answer(give=give):
            answer = action_pb2.QUERY_ANSWER_GIVE if give else action_pb2.QUERY_ANSWER_REFUSE
            return action_pb2.Action(answer_query=action_pb2.AnswerQuery(answer=answer))


def _take_bottom(action: TakeBottom) -> action_pb2.TakeBottomCard:
    bottom = action_pb2.TakeBottomCard(melds=[proposed_meld(spec) for spec in action.melds])
    if action.discard is not None:
        bottom.discard.CopyFrom(card_to_proto(action.discard))
    return bottom


def _lay_off(action: LayOff) -> action_pb2.LayOff:
    lay = action_pb2.LayOff(meld_id=action.meld, cards=cards_to_proto(action.cards))
    if action.stands_for is not None:
        lay.stands_for.CopyFrom(face_to_proto(action.stands_for))
    if action.at_end is not None:
        lay.end = meld_pb2.MELD_END_HIGH if action.at_end else meld_pb2.MELD_END_LOW
    return lay


class _Hand:
    """Reads submitted cards as the copies a hand holds (C-4: copies are equal for every rule).

    A card whose named copy the hand does not hold (or has already used in this action) but
    whose other copy it does is read as that other copy.
    """

    def __init__(self, held: Sequence[PhysicalCard] | None) -> None:
        self._held = None if held is None else list(held)
        self._used: set[PhysicalCard] = set()

    def take(self, message: card_pb2.Card) -> PhysicalCard:
        card = card_from_proto(message)
        if self._held is not None:
            candidates = [card] + [c for c in self._held if c.face_index == card.face_index]
            for candidate in candidates:
                if candidate in self._held and candidate not in self._used:
                    card = candidate
                    break
        self._used.add(card)
        return card


_Reader = Callable[[action_pb2.Action, int, "State | None", _Hand], Action]


def action_from_proto(message: action_pb2.Action, seat: int, state: State | None = None) -> Action:
    """The 51 action ``seat`` submits; raises :class:`WireError` for anything malformed.

    With ``state`` (the live game), cards are read as the copies the seat holds, and a
    TakeDiscard whose ``expected_card`` is not the top discard is refused.
    """
    kind = message.WhichOneof("kind")
    if kind is None:
        raise WireError("the action is empty")
    reader = _READERS.get(kind)
    if reader is None:
        raise WireError(f"{kind} is not a 51 action")
    held = state.seats[seat].hand if state is not None and 0 <= seat < state.players else None
    return reader(message, seat, state, _Hand(held))


def _draw(message: action_pb2.Action, seat: int, state: State | None, hand: _Hand) -> Action:
    return Draw(seat)


def _take_discard(
    message: action_pb2.Action, seat: int, state: State | None, hand: _Hand
) -> Action:
    take = message.take_discard
    if take.HasField("expected_card") and state is not None:
        expected = face_from_proto(take.expected_card)
        if not state.discard or state.discard[-1].card != expected:
            raise WireError(f"the top discard is not {expected.code}", "F-30")
    return TakeDiscard(seat, pairs=take.pairs)


def _lay_down(message: action_pb2.Action, seat: int, state: State | None, hand: _Hand) -> Action:
    proposed = message.open.melds if message.HasField("open") else message.lay_down.melds
    if not proposed:
        raise WireError("lay down at least one meld or pair", "F-10")
    melds, pairs = _melds(proposed, hand)
    return LayDown(seat, melds, pairs)


def _lay_off_from(
    message: action_pb2.Action, seat: int, state: State | None, hand: _Hand
) -> Action:
    lay = message.lay_off
    if not lay.cards:
        raise WireError("a lay-off needs a card", "F-50")
    end = _END.get(lay.end)
    if lay.end and end is None:
        raise WireError(f"unknown meld end {lay.end}")
    stands_for = natural_from_proto(lay.stands_for) if lay.HasField("stands_for") else None
    cards = tuple(hand.take(card) for card in lay.cards)
    return LayOff(seat, lay.meld_id, cards, stands_for, end)


def _retrieve(message: action_pb2.Action, seat: int, state: State | None, hand: _Hand) -> Action:
    retrieve = message.retrieve_joker
    if not retrieve.HasField("natural"):
        raise WireError("retrieve_joker needs the natural card", "F-55")
    natural = hand.take(retrieve.natural)
    if natural.card.is_joker:
        raise WireError("a joker is replaced by a natural card", "F-55")
    return RetrieveJoker(seat, retrieve.meld_id, natural)


def _discard(message: action_pb2.Action, seat: int, state: State | None, hand: _Hand) -> Action:
    discard = message.discard
    if not discard.HasField("card"):
        raise WireError("discard needs a card")
    card = hand.take(discard.card)
    twin = hand.take(discard.twin) if discard.HasField("twin") else None
    return Discard(seat, card, twin)


def _declare(message: action_pb2.Action, seat: int, state: State | None, hand: _Hand) -> Action:
    return DeclarePairs(seat)


def _show(message: action_pb2.Action, seat: int, state: State | None, hand: _Hand) -> Action:
    shown = [hand.take(card) for card in message.show_gosterge.cards]
    if not shown or len(shown) % 2:
        raise WireError("gösterge shows whole pairs", "F-71")
    return ShowPairs(seat, tuple(zip(shown[::2], shown[1::2], strict=True)))


def _answer(message: action_pb2.Action, seat: int, state: State | None, hand: _Hand) -> Action:
    answer = message.answer_query.answer
    if answer not in (action_pb2.QUERY_ANSWER_GIVE, action_pb2.QUERY_ANSWER_REFUSE):
        raise WireError("a query is answered GIVE or REFUSE", "F-80")
    return Answer(seat, answer == action_pb2.QUERY_ANSWER_GIVE)


def _claim(message: action_pb2.Action, seat: int, state: State | None, hand: _Hand) -> Action:
    if not message.claim_bottom_card.HasField("shown"):
        raise WireError("a claim shows a card identical to the bottom card", "F-34")
    return ClaimBottom(seat, hand.take(message.claim_bottom_card.shown))


def _take_bottom_from(
    message: action_pb2.Action, seat: int, state: State | None, hand: _Hand
) -> Action:
    bottom = message.take_bottom_card
    # F-35: the bottom card itself may go into the melds, so it counts as held.
    if state is not None and state.bottom_card is not None and 0 <= seat < state.players:
        hand = _Hand([*state.seats[seat].hand, state.bottom_card])
    melds, pairs = _melds(bottom.melds, hand)
    if pairs:
        raise WireError("a hand finish lays down runs and sets", "F-35")
    finish = hand.take(bottom.discard) if bottom.HasField("discard") else None
    return TakeBottom(seat, melds, finish)


_READERS: Final[dict[str, _Reader]] = {
    "draw_from_stock": _draw,
    "take_discard": _take_discard,
    "open": _lay_down,
    "lay_down": _lay_down,
    "lay_off": _lay_off_from,
    "retrieve_joker": _retrieve,
    "discard": _discard,
    "declare_pairs": _declare,
    "show_gosterge": _show,
    "answer_query": _answer,
    "claim_bottom_card": _claim,
    "take_bottom_card": _take_bottom_from,
}


def _melds(
    proposed: Sequence[meld_pb2.ProposedMeld], hand: _Hand
) -> tuple[tuple[MeldSpec, ...], tuple[tuple[PhysicalCard, PhysicalCard], ...]]:
    melds: list[MeldSpec] = []
    pairs: list[tuple[PhysicalCard, PhysicalCard]] = []
    for meld in proposed:
        spec = _spec(meld, hand)
        if _is_pair(meld, spec):
            pairs.append((spec[0][0], spec[1][0]))
        elif len(spec) < 3:
            raise WireError("a meld has at least 3 cards", "F-10")
        else:
            melds.append(spec)
    return tuple(melds), tuple(pairs)


def _spec(meld: meld_pb2.ProposedMeld, hand: _Hand) -> MeldSpec:
    if meld.kind not in (meld_pb2.MELD_KIND_UNSPECIFIED, *KIND_BACK):
        raise WireError(f"unknown meld kind {meld.kind}", "F-10")
    return tuple(
        (
            hand.take(placed.card),
            natural_from_proto(placed.stands_for) if placed.HasField("stands_for") else None,
        )
        for placed in meld.cards
    )


def _is_pair(meld: meld_pb2.ProposedMeld, spec: MeldSpec) -> bool:
    """F-15: a meld named a pair, or an unnamed one of two cards; a pair has two cards."""
    is_pair = meld.kind == meld_pb2.MELD_KIND_PAIR or (
        meld.kind == meld_pb2.MELD_KIND_UNSPECIFIED and len(spec) == 2
    )
    if is_pair and len(spec) != 2:
        raise WireError("a pair has two cards", "F-15")
    return is_pair
