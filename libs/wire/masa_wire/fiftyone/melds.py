"""Melds on the table and melds proposed by a seat (F-10..F-16, C-2) to and from protobuf.

A table meld's id is its position on the table, as the engine's ``LayOff.meld`` names it; ids
start at 0 in every hand.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Final

from masa.common.v1 import card_pb2, meld_pb2
from masa_rules.cards import Card, PhysicalCard, Rank
from masa_rules.fiftyone import MeldSpec, TableMeld
from masa_rules.melds import LOW_ACE, Meld, MeldKind, Placed
from masa_rules.ruleset import RuleSet

from masa_wire.cards import card_from_proto, card_to_proto, face_from_proto, face_to_proto
from masa_wire.errors import WireError

__all__ = [
    "KIND",
    "KIND_BACK",
    "meld_from_proto",
    "meld_to_proto",
    "natural_from_proto",
    "placed_card",
    "proposed_meld",
    "proposed_pair",
]

KIND: Final = {
    MeldKind.RUN: meld_pb2.MELD_KIND_RUN,
    MeldKind.SET: meld_pb2.MELD_KIND_SET,
    MeldKind.PAIR: meld_pb2.MELD_KIND_PAIR,
}
KIND_BACK: Final = {value: key for key, value in KIND.items()}


# A meld stays on the table for the rest of its hand, unchanged (a lay-off makes a new one), so
# every view and event of the hand converts the same objects again: the engine keeps the last
# messages by the meld's identity (issue 22: a 51 view spent half its time here). The key holds
# the meld and the rules themselves, so an id is never taken for another object's. The limit
# holds the melds of a full engine's 51 tables (a few hundred bytes each: under 8 MiB).
_CONVERTED_LIMIT: Final = 16_384
_converted: OrderedDict[tuple[int, int, int], tuple[TableMeld, RuleSet, meld_pb2.Meld]] = (
    OrderedDict()
)
_converted_lock = threading.Lock()


def meld_to_proto(meld_id: int, entry: TableMeld, rules: RuleSet) -> meld_pb2.Meld:
    """A table meld with its id, kind, owner, F-14 value and each joker's reading (C-2); a
    message of the caller's own."""
    key = (id(entry), meld_id, id(rules))
    with _converted_lock:
        known = _converted.get(key)
        if known is not None and known[0] is entry and known[1] is rules:
            _converted.move_to_end(key)
            message = meld_pb2.Meld()
            message.CopyFrom(known[2])
            return message
    message = _meld_message(meld_id, entry, rules)
    kept = meld_pb2.Meld()
    kept.CopyFrom(message)
    with _converted_lock:
        _converted[key] = (entry, rules, kept)
        _converted.move_to_end(key)
        if len(_converted) > _CONVERTED_LIMIT:
            _converted.popitem(last=False)
    return message


def _meld_message(meld_id: int, entry: TableMeld, rules: RuleSet) -> meld_pb2.Meld:
    return meld_pb2.Meld(
        meld_id=meld_id,
        kind=KIND[entry.meld.kind],
        owner_seat=entry.owner,
        value=entry.meld.value(rules),
        cards=[
            placed_card(card, placed)
            for card, placed in zip(entry.cards, entry.meld.cards, strict=True)
        ],
    )


def placed_card(card: PhysicalCard, placed: Placed) -> card_pb2.PlacedCard:
    """A card of a table meld; a joker carries the card it stands for."""
    message = card_pb2.PlacedCard(card=card_to_proto(card))
    if card.card.is_joker:
        message.stands_for.CopyFrom(face_to_proto(placed.stands_for))
    return message


def meld_from_proto(message: meld_pb2.Meld) -> TableMeld:
    """The table meld a view lists; raises :class:`WireError` for one that cannot be read."""
    kind = KIND_BACK.get(message.kind)
    if kind is None or not message.cards:
        raise WireError(f"meld {message.meld_id} has no kind or no cards", "F-10")
    physical: list[PhysicalCard] = []
    placed: list[Placed] = []
    for item in message.cards:
        card = card_from_proto(item.card)
        stands_for = card.card
        if stands_for.is_joker:
            if not item.HasField("stands_for"):
                raise WireError("a joker on the table carries the card it stands for", "C-2")
            stands_for = natural_from_proto(item.stands_for)
        physical.append(card)
        placed.append(Placed(card.card, stands_for))
    first = placed[0].stands_for.natural_rank()
    # A run's start is the position of its first card; only a low ace (F-11) can lead a run.
    start = LOW_ACE if kind is MeldKind.RUN and first is Rank.ACE else int(first)
    return TableMeld(message.owner_seat, Meld(kind, tuple(placed), start), tuple(physical))


def natural_from_proto(message: card_pb2.Card) -> Card:
    """The natural card a joker stands for (C-2); a joker is refused."""
    face = face_from_proto(message)
    if face.is_joker:
        raise WireError("a joker stands for a natural card, not a joker", "C-2")
    return face


def proposed_meld(spec: MeldSpec) -> meld_pb2.ProposedMeld:
    """A meld a seat lays down, jokers annotated where the seat chose a reading."""
    cards = []
    for card, stands_for in spec:
        placed = card_pb2.PlacedCard(card=card_to_proto(card))
        if stands_for is not None:
            placed.stands_for.CopyFrom(face_to_proto(stands_for))
        cards.append(placed)
    return meld_pb2.ProposedMeld(cards=cards)


def proposed_pair(pair: Sequence[PhysicalCard]) -> meld_pb2.ProposedMeld:
    """A pair a pair opener lays down (F-43)."""
    return meld_pb2.ProposedMeld(
        kind=meld_pb2.MELD_KIND_PAIR,
        cards=[card_pb2.PlacedCard(card=card_to_proto(card)) for card in pair],
    )
