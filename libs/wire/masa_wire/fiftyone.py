"""51 (RULES.md §2) between ``masa_rules.fiftyone`` and ``masa.table.v1``.

Hidden information (P-20) follows the engine's own filtering (:func:`masa_rules.fiftyone.event_json`
and :func:`masa_rules.fiftyone.view`), so a seat learns over the wire exactly what the engine
would show it:

- the deal lists only the viewer's own hand (the others see card counts);
- a draw shows the drawn card to the drawer only;
- everything else (discards, melds, lay-offs, retrieved jokers, shown twins and pairs, query
  answers) is played face up and is public;
- at the end of a hand the engine scores every hand face up, so the cards left are public
  then, and the hand's seed is revealed (F-5).

``LOG`` is the viewer of the internal table log, which records every hidden field an event
can carry except the dealt hands, which the seed in the log recomputes (as for Elevator).

Meld ids are positions on the table, as the engine's ``LayOff.meld`` names them; they start
at 0 in every hand. A query's id is the number of the turn it belongs to (one query per turn
at most, F-80).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Final

from google.protobuf import timestamp_pb2
from masa.common.v1 import card_pb2, game_pb2, meld_pb2
from masa.table.v1 import action_pb2, event_pb2, view_pb2
from masa_rules.cards import Card, PhysicalCard, parse_card
from masa_rules.errors import RuleViolation
from masa_rules.fiftyone import (
    Action,
    Answer,
    ClaimBottom,
    DeclarePairs,
    Discard,
    Draw,
    Event,
    LayDown,
    LayOff,
    MeldSpec,
    Phase,
    RetrieveJoker,
    ShowPairs,
    State,
    TableMeld,
    TakeBottom,
    TakeDiscard,
    pairs_needed,
    rules_to_json,
    seat_state,
    threshold,
)
from masa_rules.fiftyone.engine import meld_codes
from masa_rules.fiftyone.scoring import elimination_limit
from masa_rules.fiftyone.state import counts_opened
from masa_rules.melds import Meld, MeldKind, Placed
from masa_rules.ruleset import DeckExhausted, GameLength, RuleSet, RuleSetError

from masa_wire.cards import card_from_proto, card_to_proto, cards_to_proto, face_from_proto
from masa_wire.elevator import LOG, SHUFFLE_ALGORITHM, Viewer, hand_places
from masa_wire.errors import WireError

__all__ = [
    "LOG",
    "SHUFFLE_ALGORITHM",
    "Viewer",
    "action_from_proto",
    "action_to_proto",
    "events_to_proto",
    "fill_table_view",
    "rules_from_config",
    "seat_view",
    "state_from_seat_view",
    "view_from_seat_view",
]

_PRESET: Final = {
    game_pb2.PRESET_UNSPECIFIED: "salon",
    game_pb2.PRESET_CLASSIC: "classic",
    game_pb2.PRESET_SALON: "salon",
    game_pb2.PRESET_REMI: "remi",
}
_KIND: Final = {
    MeldKind.RUN: meld_pb2.MELD_KIND_RUN,
    MeldKind.SET: meld_pb2.MELD_KIND_SET,
    MeldKind.PAIR: meld_pb2.MELD_KIND_PAIR,
}
_KIND_BACK: Final = {value: key for key, value in _KIND.items()}
_PHASE: Final = {
    Phase.DRAW: view_pb2.TURN_PHASE_DRAW,
    Phase.PLAY: view_pb2.TURN_PHASE_MELD,
    Phase.QUERY: view_pb2.TURN_PHASE_QUERY,
    Phase.OVER: view_pb2.TURN_PHASE_UNSPECIFIED,
}
_PHASE_BACK: Final = {value: key for key, value in _PHASE.items()}


# --- configuration -------------------------------------------------------------------------


def rules_from_config(config: game_pb2.TableConfig) -> tuple[RuleSet, int | None]:
    """The rule set of a 51 lobby (P-2, §2.9) and the number of hands it plays (or caps, F-96).

    Raises :class:`WireError` with the rule id for an option the preset does not allow.
    """
    preset = _PRESET.get(config.preset)
    if preset is None:
        raise WireError(f"unknown preset {config.preset}", "F-2")
    options = config.options.fiftyone
    changes: dict[str, object] = {}
    if options.HasField("open_threshold"):
        changes["open_threshold"] = options.open_threshold
    if options.HasField("escalating_threshold"):
        changes["escalating_threshold"] = options.escalating_threshold
    hands = options.hands_per_game if options.HasField("hands_per_game") else None
    try:
        rules = RuleSet.preset_named(preset, **changes)
        if hands is not None and rules.game_length is GameLength.HANDS:
            rules = rules.with_options(hands_per_game=hands)
    except RuleSetError as error:
        raise WireError(str(error), error.rule) from None
    if hands is not None and hands < 1:
        raise WireError(f"a game has at least one hand, not {hands}", "F-95")
    return rules, hands


# --- actions -------------------------------------------------------------------------------


def action_to_proto(action: Action) -> action_pb2.Action:
    """The proto form of an engine action; an opening and a later lay-down are both LayDown."""
    if isinstance(action, Draw):
        return action_pb2.Action(draw_from_stock=action_pb2.DrawFromStock())
    if isinstance(action, TakeDiscard):
        return action_pb2.Action(take_discard=action_pb2.TakeDiscard(pairs=action.pairs))
    if isinstance(action, TakeBottom):
        bottom = action_pb2.TakeBottomCard(melds=[_proposed(spec) for spec in action.melds])
        if action.discard is not None:
            bottom.discard.CopyFrom(card_to_proto(action.discard))
        return action_pb2.Action(take_bottom_card=bottom)
    if isinstance(action, LayDown):
        melds = [_proposed(spec) for spec in action.melds]
        melds += [_proposed_pair(pair) for pair in action.pairs]
        return action_pb2.Action(lay_down=action_pb2.LayDown(melds=melds))
    if isinstance(action, LayOff):
        lay = action_pb2.LayOff(meld_id=action.meld, cards=cards_to_proto(action.cards))
        if action.stands_for is not None:
            lay.stands_for.CopyFrom(_face(action.stands_for))
        if action.at_end is not None:
            lay.end = meld_pb2.MELD_END_HIGH if action.at_end else meld_pb2.MELD_END_LOW
        return action_pb2.Action(lay_off=lay)
    if isinstance(action, RetrieveJoker):
        retrieve = action_pb2.RetrieveJoker(meld_id=action.meld, natural=card_to_proto(action.card))
        return action_pb2.Action(retrieve_joker=retrieve)
    if isinstance(action, Discard):
        discard = action_pb2.Discard(card=card_to_proto(action.card))
        if action.twin is not None:
            discard.twin.CopyFrom(card_to_proto(action.twin))
        return action_pb2.Action(discard=discard)
    if isinstance(action, DeclarePairs):
        return action_pb2.Action(declare_pairs=action_pb2.DeclarePairs())
    if isinstance(action, ShowPairs):
        cards = [card for pair in action.pairs for card in pair]
        return action_pb2.Action(show_gosterge=action_pb2.ShowGosterge(cards=cards_to_proto(cards)))
    if isinstance(action, ClaimBottom):
        claim = action_pb2.ClaimBottomCard(shown=card_to_proto(action.shown))
        return action_pb2.Action(claim_bottom_card=claim)
    answer = action_pb2.QUERY_ANSWER_GIVE if action.give else action_pb2.QUERY_ANSWER_REFUSE
    return action_pb2.Action(answer_query=action_pb2.AnswerQuery(answer=answer))


def _face(card: Card) -> card_pb2.Card:
    return card_to_proto(PhysicalCard.of(card))


def _proposed(spec: MeldSpec) -> meld_pb2.ProposedMeld:
    cards = []
    for card, stands_for in spec:
        placed = card_pb2.PlacedCard(card=card_to_proto(card))
        if stands_for is not None:
            placed.stands_for.CopyFrom(_face(stands_for))
        cards.append(placed)
    return meld_pb2.ProposedMeld(cards=cards)


def _proposed_pair(pair: tuple[PhysicalCard, PhysicalCard]) -> meld_pb2.ProposedMeld:
    return meld_pb2.ProposedMeld(
        kind=meld_pb2.MELD_KIND_PAIR,
        cards=[card_pb2.PlacedCard(card=card_to_proto(card)) for card in pair],
    )


class _Hand:
    """Reads submitted cards as the copies a hand holds (C-4: copies are equal for every rule).

    A card whose named copy the hand does not hold (or has already used in this action) but
    whose other copy it does is read as that other copy, so a client need not track decks.
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


def action_from_proto(message: action_pb2.Action, seat: int, state: State | None = None) -> Action:
    """The 51 action ``seat`` submits; raises :class:`WireError` for anything malformed.

    With ``state`` (the live game), cards are read as the copies the seat holds, and a
    TakeDiscard whose ``expected_card`` is not the top discard is refused.
    """
    kind = message.WhichOneof("kind")
    held: list[PhysicalCard] | None = None
    if state is not None and 0 <= seat < state.players:
        held = list(state.seats[seat].hand)
    hand = _Hand(held)
    if kind == "draw_from_stock":
        return Draw(seat)
    if kind == "take_discard":
        take = message.take_discard
        if take.HasField("expected_card") and state is not None:
            expected = face_from_proto(take.expected_card)
            if not state.discard or state.discard[-1].card != expected:
                raise WireError(f"the top discard is not {expected.code}", "F-30")
        return TakeDiscard(seat, pairs=take.pairs)
    if kind in ("open", "lay_down"):
        proposed = message.open.melds if kind == "open" else message.lay_down.melds
        if not proposed:
            raise WireError("lay down at least one meld or pair", "F-10")
        melds, pairs = _melds(proposed, hand)
        return LayDown(seat, melds, pairs)
    if kind == "lay_off":
        lay = message.lay_off
        if not lay.cards:
            raise WireError("a lay-off needs a card", "F-50")
        end = {meld_pb2.MELD_END_LOW: False, meld_pb2.MELD_END_HIGH: True}.get(lay.end)
        if lay.end and end is None:
            raise WireError(f"unknown meld end {lay.end}")
        stands_for = _natural(lay.stands_for) if lay.HasField("stands_for") else None
        cards = tuple(hand.take(card) for card in lay.cards)
        return LayOff(seat, lay.meld_id, cards, stands_for, end)
    if kind == "retrieve_joker":
        retrieve = message.retrieve_joker
        if not retrieve.HasField("natural"):
            raise WireError("retrieve_joker needs the natural card", "F-55")
        natural = hand.take(retrieve.natural)
        if natural.card.is_joker:
            raise WireError("a joker is replaced by a natural card", "F-55")
        return RetrieveJoker(seat, retrieve.meld_id, natural)
    if kind == "discard":
        discard = message.discard
        if not discard.HasField("card"):
            raise WireError("discard needs a card")
        card = hand.take(discard.card)
        twin = hand.take(discard.twin) if discard.HasField("twin") else None
        return Discard(seat, card, twin)
    if kind == "declare_pairs":
        return DeclarePairs(seat)
    if kind == "show_gosterge":
        shown = [hand.take(card) for card in message.show_gosterge.cards]
        if not shown or len(shown) % 2:
            raise WireError("gösterge shows whole pairs", "F-71")
        return ShowPairs(seat, tuple(zip(shown[::2], shown[1::2], strict=True)))
    if kind == "answer_query":
        answer = message.answer_query.answer
        if answer not in (action_pb2.QUERY_ANSWER_GIVE, action_pb2.QUERY_ANSWER_REFUSE):
            raise WireError("a query is answered GIVE or REFUSE", "F-80")
        return Answer(seat, answer == action_pb2.QUERY_ANSWER_GIVE)
    if kind == "claim_bottom_card":
        if not message.claim_bottom_card.HasField("shown"):
            raise WireError("a claim shows a card identical to the bottom card", "F-34")
        return ClaimBottom(seat, hand.take(message.claim_bottom_card.shown))
    if kind == "take_bottom_card":
        bottom = message.take_bottom_card
        # F-35: the bottom card itself may go into the melds, so it counts as held.
        if held is not None and state is not None and state.bottom_card is not None:
            hand = _Hand([*held, state.bottom_card])
        melds, pairs = _melds(bottom.melds, hand)
        if pairs:
            raise WireError("a hand finish lays down runs and sets", "F-35")
        finish = hand.take(bottom.discard) if bottom.HasField("discard") else None
        return TakeBottom(seat, melds, finish)
    if kind is None:
        raise WireError("the action is empty")
    raise WireError(f"{kind} is not a 51 action")


def _natural(message: card_pb2.Card) -> Card:
    face = face_from_proto(message)
    if face.is_joker:
        raise WireError("a joker stands for a natural card, not a joker", "C-2")
    return face


def _melds(
    proposed: Sequence[meld_pb2.ProposedMeld], hand: _Hand
) -> tuple[tuple[MeldSpec, ...], tuple[tuple[PhysicalCard, PhysicalCard], ...]]:
    melds: list[MeldSpec] = []
    pairs: list[tuple[PhysicalCard, PhysicalCard]] = []
    for meld in proposed:
        if meld.kind not in (meld_pb2.MELD_KIND_UNSPECIFIED, *_KIND_BACK):
            raise WireError(f"unknown meld kind {meld.kind}", "F-10")
        spec = tuple(
            (
                hand.take(placed.card),
                _natural(placed.stands_for) if placed.HasField("stands_for") else None,
            )
            for placed in meld.cards
        )
        is_pair = meld.kind == meld_pb2.MELD_KIND_PAIR or (
            meld.kind == meld_pb2.MELD_KIND_UNSPECIFIED and len(spec) == 2
        )
        if is_pair:
            if len(spec) != 2:
                raise WireError("a pair has two cards", "F-15")
            pairs.append((spec[0][0], spec[1][0]))
        elif len(spec) < 3:
            raise WireError("a meld has at least 3 cards", "F-10")
        else:
            melds.append(spec)
    return tuple(melds), tuple(pairs)


# --- melds ---------------------------------------------------------------------------------


def _meld_from_codes(
    meld_id: int, owner: int, kind: MeldKind, codes: Sequence[str], rules: RuleSet
) -> meld_pb2.Meld:
    """A table meld from the engine's codes (``8H#1``, ``XR=8H``), with its F-14 value."""
    physical: list[PhysicalCard] = []
    placed: list[Placed] = []
    for code in codes:
        card_code, _, stands = code.partition("=")
        card = PhysicalCard.parse(card_code)
        physical.append(card)
        placed.append(Placed(card.card, parse_card(stands) if stands else card.card))
    first = placed[0].stands_for
    # A run's start is the position of its first card; only a low ace (F-11) can lead a run.
    start = 1 if kind is MeldKind.RUN and first.natural_rank() == 14 else int(first.natural_rank())
    value = Meld(kind, tuple(placed), start).value(rules)
    return meld_pb2.Meld(
        meld_id=meld_id,
        kind=_KIND[kind],
        owner_seat=owner,
        value=value,
        cards=[_placed_card(card, p) for card, p in zip(physical, placed, strict=True)],
    )


def _placed_card(card: PhysicalCard, placed: Placed) -> card_pb2.PlacedCard:
    message = card_pb2.PlacedCard(card=card_to_proto(card))
    if card.card.is_joker:
        message.stands_for.CopyFrom(_face(placed.stands_for))
    return message


def _table_meld(meld_id: int, entry: TableMeld, rules: RuleSet) -> meld_pb2.Meld:
    return _meld_from_codes(meld_id, entry.owner, entry.meld.kind, meld_codes(entry), rules)


def _codes(value: object) -> list[str]:
    return [str(code) for code in value] if isinstance(value, list) else []


# --- events --------------------------------------------------------------------------------


def events_to_proto(
    events: Sequence[Event],
    before: State | None,
    after: State,
    viewer: Viewer,
    *,
    query_deadline: timestamp_pb2.Timestamp | None = None,
    timed_out: bool = False,
) -> list[event_pb2.TableEvent]:
    """The events of one ``apply`` (or of the deal) for ``viewer``.

    ``before`` is the state the action was applied to (None for the first deal), ``after`` the
    state it led to. ``query_deadline`` is the table's F-80 window, and ``timed_out`` marks
    answers the table gave for seats that did not answer in time.
    """
    rules = after.rules
    melds = 0 if before is None else len(before.table)
    kinds = {
        # A take that declares pairs (F-31) reports the declaration first.
        index: event_pb2.PAIRS_CAUSE_TOOK_DISCARD
        for index, event in enumerate(events[:-1])
        if event.type == "declare_pairs" and events[index + 1].type == "take_discard"
    }
    out: list[event_pb2.TableEvent] = []
    seed = b""
    for index, event in enumerate(events):
        data = event.data
        kind = event.type
        if kind == "deal":
            melds = 0
            out.append(
                event_pb2.TableEvent(hand_dealt=_dealt(event, events, viewer, after.players))
            )
        elif kind == "draw":
            drew = event_pb2.Drew(seat=_int(data["seat"]), stock_count=_int(data["stock"]))
            if event.private is not None and _sees(viewer, event.to):
                drew.card.CopyFrom(_card(event.private["card"]))
            out.append(event_pb2.TableEvent(drew=drew))
        elif kind == "take_discard":
            took = event_pb2.TookDiscard(seat=_int(data["seat"]), card=_card(data["card"]))
            out.append(event_pb2.TableEvent(took_discard=took))
        elif kind == "declare_pairs":
            cause = kinds.get(index, event_pb2.PAIRS_CAUSE_DECLARED)
            declared = event_pb2.PairsDeclared(seat=_int(data["seat"]), cause=cause)
            out.append(event_pb2.TableEvent(pairs_declared=declared))
        elif kind == "query":
            started = event_pb2.QueryStarted(
                query_id=after.turn.number,
                taker_seat=_int(data["taker"]),
                card=_card(data["card"]),
                asked_seats=_ints(data["asked"]),
            )
            if query_deadline is not None:
                started.deadline.CopyFrom(query_deadline)
            out.append(event_pb2.TableEvent(query_started=started))
        elif kind == "answer":
            give = bool(data["give"])
            answered = event_pb2.QueryAnswered(
                query_id=after.turn.number,
                seat=_int(data["seat"]),
                answer=action_pb2.QUERY_ANSWER_GIVE if give else action_pb2.QUERY_ANSWER_REFUSE,
                timed_out=timed_out,
            )
            out.append(event_pb2.TableEvent(query_answered=answered))
        elif kind == "query_over":
            refused = _ints(data["refused"])
            ended = event_pb2.QueryEnded(
                query_id=after.turn.number, taker_seat=_int(data["taker"]), refused_seats=refused
            )
            out.append(event_pb2.TableEvent(query_ended=ended))
            out.extend(
                event_pb2.TableEvent(
                    pairs_declared=event_pb2.PairsDeclared(
                        seat=seat, cause=event_pb2.PAIRS_CAUSE_REFUSED_QUERY
                    )
                )
                for seat in refused
            )
        elif kind == "take_bottom":
            took_bottom = event_pb2.TookBottomCard(
                seat=_int(data["seat"]), card=_card(data["card"])
            )
            out.append(event_pb2.TableEvent(took_bottom_card=took_bottom))
        elif kind == "claim_bottom":
            claimed = event_pb2.BottomCardClaimed(
                seat=_int(data["seat"]), shown=_card(data["shown"])
            )
            out.append(event_pb2.TableEvent(bottom_card_claimed=claimed))
        elif kind == "lay_down":
            seat = _int(data["seat"])
            new = [
                *((MeldKind.RUN, codes) for codes in _groups(data["melds"])),
                *((MeldKind.PAIR, codes) for codes in _groups(data["pairs"])),
            ]
            laid = []
            for offset, (meld_kind, codes) in enumerate(new):
                reading = _kind_of(meld_kind, codes)
                laid.append(_meld_from_codes(melds + offset, seat, reading, codes, rules))
            melds += len(new)
            if data["opening"]:
                opened = event_pb2.Opened(
                    seat=seat,
                    melds=laid,
                    with_pairs=bool(data["pairs"]),
                    total=_int(data["value"]),
                    threshold=_opening_threshold(before, seat, bool(data["pairs"])),
                )
                out.append(event_pb2.TableEvent(opened=opened))
            else:
                out.append(
                    event_pb2.TableEvent(laid_down=event_pb2.LaidDown(seat=seat, melds=laid))
                )
        elif kind == "lay_off":
            seat, target = _int(data["seat"]), _int(data["meld"])
            cards = _codes(data["cards"])
            entry = before.table[target] if before is not None else None
            owner = entry.owner if entry is not None else seat
            if entry is not None and entry.meld.kind is MeldKind.PAIR:
                # A pair laid off on a pair opener's area is a new pair there (F-50).
                pair = _meld_from_codes(melds, owner, MeldKind.PAIR, _pair_codes(cards), rules)
                melds += 1
                out.append(
                    event_pb2.TableEvent(laid_down=event_pb2.LaidDown(seat=seat, melds=[pair]))
                )
                continue
            result = _codes(data["result"])
            meld_kind = entry.meld.kind if entry is not None else _kind_of(MeldKind.RUN, result)
            meld = _meld_from_codes(target, owner, meld_kind, result, rules)
            placed = next(
                (p for p in meld.cards if _code_of(p) == cards[0]),
                card_pb2.PlacedCard(card=_card(cards[0])),
            )
            laid_off = event_pb2.LaidOff(seat=seat, card=placed, meld=meld)
            out.append(event_pb2.TableEvent(laid_off=laid_off))
        elif kind == "retrieve_joker":
            target = _int(data["meld"])
            entry = before.table[target] if before is not None else None
            result = _codes(data["result"])
            meld_kind = entry.meld.kind if entry is not None else _kind_of(MeldKind.RUN, result)
            owner = entry.owner if entry is not None else _int(data["seat"])
            retrieved = event_pb2.JokerRetrieved(
                seat=_int(data["seat"]),
                joker=_card(data["joker"]),
                natural=_card(data["card"]),
                meld=_meld_from_codes(target, owner, meld_kind, result, rules),
            )
            out.append(event_pb2.TableEvent(joker_retrieved=retrieved))
        elif kind == "discard":
            seat = _int(data["seat"])
            finishing = any(
                later.type == "hand_end" and later.data.get("finisher") == seat
                for later in events[index + 1 :]
            )
            discarded = event_pb2.Discarded(
                seat=seat,
                card=_card(data["card"]),
                islek=bool(data["islek"]),
                islek_penalty=_int(data["penalty"]),
                finishing=finishing,
            )
            if "twin" in data:
                discarded.twin.CopyFrom(_card(data["twin"]))
            out.append(event_pb2.TableEvent(discarded=discarded))
        elif kind == "show_pairs":
            seat = _int(data["seat"])
            shown = [code for pair in _groups(data["pairs"]) for code in pair]
            out.append(
                event_pb2.TableEvent(
                    gosterge_shown=event_pb2.GostergeShown(
                        seat=seat, cards=[_card(code) for code in shown]
                    )
                )
            )
            out.append(
                event_pb2.TableEvent(
                    pairs_declared=event_pb2.PairsDeclared(
                        seat=seat, cause=event_pb2.PAIRS_CAUSE_GOSTERGE
                    )
                )
            )
        elif kind == "turn_passed":
            out.append(
                event_pb2.TableEvent(turn_passed=event_pb2.TurnPassed(seat=_int(data["seat"])))
            )
        elif kind == "reshuffle":
            reshuffled = event_pb2.StockReshuffled(stock_count=_int(data["stock"]))
            out.append(event_pb2.TableEvent(stock_reshuffled=reshuffled))
        elif kind == "reveal":
            seed = bytes.fromhex(str(data["seed"]))
        elif kind == "hand_end":
            out.append(event_pb2.TableEvent(hand_finished=_hand_finished(event, after, seed)))
        # "dealt" is folded into HandDealt; "game_end" becomes the table's GameFinished.
    return out


def _sees(viewer: Viewer, seat: int | None) -> bool:
    return viewer == LOG or (viewer is not None and viewer == seat)


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected a whole number, got {value!r}")
    return value


def _ints(value: object) -> list[int]:
    return [_int(item) for item in value] if isinstance(value, list) else []


def _flags(value: object) -> list[bool]:
    return [bool(item) for item in value] if isinstance(value, list) else []


def _groups(value: object) -> list[list[str]]:
    return [_codes(group) for group in value] if isinstance(value, list) else []


def _card(code: object) -> card_pb2.Card:
    return card_to_proto(PhysicalCard.parse(str(code)))


def _code_of(placed: card_pb2.PlacedCard) -> str:
    return PhysicalCard.of(face_from_proto(placed.card), placed.card.copy).code


def _pair_codes(cards: Sequence[str]) -> list[str]:
    """A pair's codes with the joker annotated as the natural card it pairs (F-15)."""
    natural = next((code for code in cards if not code.startswith("X")), cards[0])
    face = natural.partition("#")[0]
    return [code if not code.startswith("X") else f"{code}={face}" for code in cards]


def _kind_of(hint: MeldKind, codes: Sequence[str]) -> MeldKind:
    """A laid-down group's kind: pairs are named by the event; a run has one suit, a set not."""
    if hint is MeldKind.PAIR:
        return MeldKind.PAIR
    faces = [parse_card((code.partition("=")[2] or code).partition("#")[0]) for code in codes]
    return MeldKind.RUN if len({face.suit for face in faces}) == 1 else MeldKind.SET


def _opening_threshold(before: State | None, seat: int, with_pairs: bool) -> int:
    if before is None:
        return 0
    needed = pairs_needed(before) if with_pairs else threshold(before, seat)
    return needed or 0


def _dealt(
    event: Event, events: Sequence[Event], viewer: Viewer, players: int
) -> event_pb2.HandDealt:
    data = event.data
    hands: dict[int, list[str]] = {}
    for dealt in events:
        if dealt.type == "dealt" and dealt.private is not None and dealt.to is not None:
            hands[dealt.to] = _codes(dealt.private["cards"])
    message = event_pb2.HandDealt(
        hand_no=_int(data["hand"]),
        dealer_seat=_int(data["dealer"]),
        starter_seat=_int(data["starter"]),
        seed_commitment=bytes.fromhex(str(data["commitment"])),
        card_counts=[len(hands.get(seat, [])) for seat in range(players)],
        stock_count=_int(data["stock"]),
        cut_jokers=[_card(code) for code in _codes(data["cutter_jokers"])],
    )
    if viewer is not None and viewer >= 0 and viewer in hands:
        message.hand.extend(_card(code) for code in hands[viewer])
    if data["cutter"] is not None:
        message.cutter_seat = _int(data["cutter"])
    if data["bottom_card"] is not None:
        message.bottom_card.CopyFrom(_card(data["bottom_card"]))
    return message


_FINISH: Final = (
    ("by_hand", event_pb2.FINISH_KIND_BY_HAND),
    ("joker", event_pb2.FINISH_KIND_WITH_JOKER),
    ("pairs", event_pb2.FINISH_KIND_FROM_PAIRS),
    ("bottom_card", event_pb2.FINISH_KIND_WITH_BOTTOM_CARD),
)


def _hand_finished(event: Event, after: State, seed: bytes) -> event_pb2.HandFinished:
    data = event.data
    rules = after.rules
    finisher = data["finisher"]
    scores = _ints(data["scores"])
    opened = _flags(data["opened"])
    with_pairs = _flags(data["opened_with_pairs"])
    pair_status = _flags(data["pair_status"])
    penalties = _ints(data["islek_penalties"])
    left = _groups(data["hands_left"])
    out = set(_ints(data["eliminated"]))
    replayed = (
        finisher is None
        and rules.deck_exhausted is DeckExhausted.REPLAY_IF_NONE_OPENED
        and not any(opened)
    )
    places = hand_places(_tied(scores))
    totals = _ints(data["totals"])
    finish = data["finish"]
    assert isinstance(finish, Mapping)
    message = event_pb2.HandFinished(
        hand_no=_int(data["hand"]),
        replayed=replayed,
        kafa=bool(data["kafa"]),
        seed=seed,
        shuffle_algorithm=SHUFFLE_ALGORITHM,
        end_reason=(
            event_pb2.HAND_END_REASON_OUT
            if finisher is not None
            else event_pb2.HAND_END_REASON_STOCK_EXHAUSTED
        ),
        scores=[
            event_pb2.HandScore(
                seat=seat,
                place=places[seat],
                score=scores[seat],
                total=totals[seat],
                remaining=[_card(code) for code in left[seat]],
                opening=_opening(bool(opened[seat]), bool(with_pairs[seat])),
                pair_status=bool(pair_status[seat]),
                islek_penalty=penalties[seat],
                eliminated=seat in out,
            )
            for seat in range(len(scores))
        ],
    )
    if finisher is not None:
        message.finisher_seat = _int(finisher)
        kinds = [kind for key, kind in _FINISH if finish.get(key)]
        message.finish_kinds.extend(kinds or [event_pb2.FINISH_KIND_NORMAL])
    if rules.game_length is GameLength.ELIMINATION and after.hands_scored:
        message.elimination_limit = elimination_limit(rules, after.hands_scored)
    return message


def _tied(scores: Sequence[int]) -> list[list[int]]:
    """Seats grouped by equal hand score, lowest (best) first."""
    groups: dict[int, list[int]] = {}
    for seat, score in enumerate(scores):
        groups.setdefault(score, []).append(seat)
    return [groups[score] for score in sorted(groups)]


def _opening(opened: bool, with_pairs: bool) -> view_pb2.Opening.ValueType:
    if not opened:
        return view_pb2.OPENING_UNSPECIFIED
    return view_pb2.OPENING_PAIRS if with_pairs else view_pb2.OPENING_MELDS


# --- views ---------------------------------------------------------------------------------


def fill_table_view(view: view_pb2.TableView, state: State) -> None:
    """Set the public 51 fields of ``view`` (the table resource and seats stay the caller's).

    The 51 fields of the seats already present in ``view.seats`` are set too.
    """
    over = state.phase is Phase.OVER
    turn = state.turn
    view.hand_no = state.hand_no
    view.dealer_seat = state.dealer
    if over:
        view.ClearField("turn_seat")
    else:
        view.turn_seat = turn.seat
    view.turn_phase = _PHASE[state.phase]
    view.seed_commitment = bytes.fromhex(state.commitment)
    eliminated_after: dict[int, int] = {}
    for index, group in enumerate(state.eliminated):
        for seat in group:
            eliminated_after[seat] = index + 1
    for public in view.seats:
        seat = public.seat
        if seat >= state.players:
            continue
        own = state.seats[seat]
        public.card_count = len(own.hand)
        if own.opened:
            public.opening = _opening(True, own.opened_with_pairs)
        elif counts_opened(state, seat):
            public.opening = view_pb2.OPENING_PARTNER
        public.pair_status = own.pair_status
        public.total = state.totals[seat]
        public.eliminated = not state.active[seat]
    table = view_pb2.FiftyOneTable(
        melds=[_table_meld(index, entry, state.rules) for index, entry in enumerate(state.table)],
        discard_pile=cards_to_proto(state.discard),
        stock_count=len(state.stock),
        effective_threshold=_series_threshold(state),
        pairs_needed=pairs_needed(state) or 0,
        turn=view_pb2.FiftyOneTurn(
            number=turn.number,
            took_rule=turn.took_rule or "",
            took_used=turn.took_used,
            must_open=turn.must_open,
            retrieved_jokers=cards_to_proto(turn.jokers),
            opened_now=turn.opened_now,
            laid_off_others=turn.laid_off_others,
        ),
        seats=[
            _fiftyone_seat(state, seat, eliminated_after.get(seat, 0))
            for seat in range(state.players)
        ],
        hands_scored=state.hands_scored,
        reshuffles=state.reshuffles,
        high_open=state.high_open,
        high_pairs=state.high_pairs,
        pair_opened=state.pair_opened,
        action_count=state.action_count,
    )
    if turn.took is not None:
        table.turn.taken_discard.CopyFrom(card_to_proto(turn.took))
    if state.bottom_card is not None:
        table.bottom_card.CopyFrom(card_to_proto(state.bottom_card))
    claimant = next((i for i, s in enumerate(state.seats) if s.bottom_claim is not None), None)
    if claimant is not None:
        table.bottom_card_claimant = claimant
    if state.last_discarder is not None:
        table.last_discarder_seat = state.last_discarder
    query = state.query
    if query is not None:
        asked = sorted({*query.pending, *query.refused} | _given(state))
        table.query.CopyFrom(
            view_pb2.PendingQuery(
                query_id=turn.number,
                taker_seat=query.taker,
                card=card_to_proto(query.card),
                asked_seats=asked,
                given_seats=sorted(_given(state)),
                refused_seats=list(query.refused),
            )
        )
    view.fiftyone.CopyFrom(table)


def _given(state: State) -> set[int]:
    """The seats that already answered GIVE: asked (every other unopened active seat) and done."""
    query = state.query
    if query is None:
        return set()
    asked = {
        seat
        for seat in range(state.players)
        if seat != query.taker and state.active[seat] and not counts_opened(state, seat)
    }
    return asked - set(query.pending) - set(query.refused)


def _series_threshold(state: State) -> int:
    """F-40..F-42: what a seat not in pair status must reach now (pair status opens by pairs)."""
    if not state.seats:
        return 0
    plain = replace(state.seats[0], pair_status=False)
    return threshold(replace(state, seats=(plain, *state.seats[1:])), 0) or 0


def _fiftyone_seat(state: State, seat: int, eliminated_after: int) -> view_pb2.FiftyOneSeat:
    own = state.seats[seat]
    message = view_pb2.FiftyOneSeat(
        seat=seat,
        opening_total=own.opening_total,
        shown_pairs=own.shown_pairs,
        shown_twins=cards_to_proto(own.locked),
        islek_penalty=own.islek_penalty,
        free_islek_used=own.free_islek_used,
        turns=own.turns,
        eliminated_after_hand=eliminated_after,
    )
    if own.bottom_claim is not None:
        message.bottom_claim_turn = own.bottom_claim
    return message


def seat_view(table_view: view_pb2.TableView, state: State, seat: int) -> view_pb2.SeatView:
    """``seat``'s view: the public ``table_view`` (already filled) plus its own hand."""
    if state.phase is Phase.OVER:
        return view_pb2.SeatView(table=table_view, seat=seat)
    own = state.seats[seat]
    turn = state.turn
    must_use: list[PhysicalCard] = []
    if turn.seat == seat:
        if turn.took is not None and turn.took_rule in ("F-30", "F-33") and not turn.took_used:
            must_use.append(turn.took)
        must_use.extend(turn.jokers)
    free = state.rules.islek_free_in_pair_status - own.free_islek_used if own.pair_status else 0
    return view_pb2.SeatView(
        table=table_view,
        seat=seat,
        hand=cards_to_proto(sorted(own.hand)),
        must_use=cards_to_proto(must_use),
        undiscardable=cards_to_proto(own.locked),
        free_islek_left=max(0, free),
    )


def view_from_seat_view(message: view_pb2.SeatView) -> dict[str, object]:
    """The engine's view (:func:`masa_rules.fiftyone.view`) that ``message`` was made from.

    The wire view is lossless: this gives back every field the engine's view of that seat
    holds, so a stateless bot can rebuild a playable state from it. Raises
    :class:`WireError` for a view that is not of a 51 hand in play.
    """
    table = message.table
    if table.WhichOneof("game") != "fiftyone":
        raise WireError("the view is not of a 51 table")
    game = table.fiftyone
    config = table.table.config
    rules, hands = rules_from_config(config)
    players = len(table.seats)
    seat = message.seat
    if not 0 <= seat < players or len(game.seats) != players:
        raise WireError("a 51 view needs every seat and the viewing seat", "P-20")
    phase = _PHASE_BACK.get(table.turn_phase)
    if phase is None or phase is Phase.OVER or not table.HasField("turn_seat"):
        raise WireError("only a view of a hand in play can be read back", "P-20")
    turn = game.turn
    pending: list[int] = []
    if game.HasField("query"):
        answered = {*game.query.given_seats, *game.query.refused_seats}
        pending = [s for s in game.query.asked_seats if s not in answered]
    groups: dict[int, list[int]] = {}
    for entry in game.seats:
        if entry.eliminated_after_hand:
            groups.setdefault(entry.eliminated_after_hand, []).append(entry.seat)
    pair_status = table.seats[seat].pair_status
    seen: dict[str, object] = {
        "preset": rules.preset,
        "rules": rules_to_json(rules),
        "hands_limit": hands,
        "players": players,
        "teams": config.mode == game_pb2.MODE_TEAMS,
        "hand_no": table.hand_no,
        "dealer": table.dealer_seat,
        "phase": phase.value,
        "turn": table.turn_seat,
        "to_act": pending if phase is Phase.QUERY else [table.turn_seat],
        "commitment": table.seed_commitment.hex(),
        "stock": game.stock_count,
        "bottom_card": _code(game.bottom_card) if game.HasField("bottom_card") else None,
        "discard": [_code(card) for card in game.discard_pile],
        "last_discarder": (
            game.last_discarder_seat if game.HasField("last_discarder_seat") else None
        ),
        "table": [_meld_json(meld) for meld in game.melds],
        "seats": [_seat_json(table.seats[index], entry) for index, entry in enumerate(game.seats)],
        "taken_discard": (_code(turn.taken_discard) if turn.HasField("taken_discard") else None),
        "opened_this_turn": turn.opened_now,
        "turn_state": {
            "number": turn.number,
            "took_rule": turn.took_rule or None,
            "took_used": turn.took_used,
            "must_open": turn.must_open,
            "jokers": [_code(card) for card in turn.retrieved_jokers],
            "laid_off_others": turn.laid_off_others,
        },
        "query": (
            {
                "taker": game.query.taker_seat,
                "card": _code(game.query.card),
                "pending": pending,
                "refused": list(game.query.refused_seats),
            }
            if game.HasField("query")
            else None
        ),
        "totals": [entry.total for entry in table.seats],
        "hands_scored": game.hands_scored,
        "ranking": [],
        "eliminated": [sorted(groups[hand]) for hand in sorted(groups)],
        "reshuffles": game.reshuffles,
        "high_open": game.high_open,
        "high_pairs": game.high_pairs,
        "pair_opened": game.pair_opened,
        "action_count": game.action_count,
        "seat": seat,
        "hand": [_code(card) for card in message.hand],
        "threshold": None if pair_status else game.effective_threshold,
        "pairs_needed": game.pairs_needed if rules.pairs_to_open is not None else None,
    }
    return seen


def _code(message: card_pb2.Card) -> str:
    return card_from_proto(message).code


def _meld_json(meld: meld_pb2.Meld) -> dict[str, object]:
    kind = _KIND_BACK.get(meld.kind)
    if kind is None or not meld.cards:
        raise WireError(f"meld {meld.meld_id} has no kind or no cards", "F-10")
    codes = []
    faces = []
    for placed in meld.cards:
        code = _code(placed.card)
        face = face_from_proto(placed.card)
        if face.is_joker:
            if not placed.HasField("stands_for"):
                raise WireError("a joker on the table carries the card it stands for", "C-2")
            face = _natural(placed.stands_for)
            code = f"{code}={face.code}"
        codes.append(code)
        faces.append(face)
    first = faces[0].natural_rank()
    start = 1 if kind is MeldKind.RUN and first == 14 else int(first)
    return {"owner": meld.owner_seat, "kind": kind.value, "start": start, "cards": codes}


def _seat_json(public: view_pb2.SeatState, entry: view_pb2.FiftyOneSeat) -> dict[str, object]:
    opened = public.opening in (view_pb2.OPENING_MELDS, view_pb2.OPENING_PAIRS)
    return {
        "seat": entry.seat,
        "active": not public.eliminated,
        "cards": public.card_count,
        "opened": opened,
        "opened_with_pairs": public.opening == view_pb2.OPENING_PAIRS,
        "opening_total": entry.opening_total,
        "pair_status": public.pair_status,
        "shown_pairs": entry.shown_pairs,
        "shown_twins": [_code(card) for card in entry.shown_twins],
        "islek_penalty": entry.islek_penalty,
        "bottom_claim": (entry.bottom_claim_turn if entry.HasField("bottom_claim_turn") else None),
        "free_islek_used": entry.free_islek_used,
        "turns": entry.turns,
    }


def state_from_seat_view(message: view_pb2.SeatView) -> State:
    """A state equivalent to the real one for every decision of ``message.seat``.

    It is the engine's :func:`~masa_rules.fiftyone.seat_state` of the view the message carries:
    the seat's own hand and the public table, with the unseen cards dealt out as stand-ins, so
    ``legal_actions`` and the policies give the same answers as on the real state (P-20).
    """
    try:
        return seat_state(view_from_seat_view(message))
    except RuleViolation as error:
        raise WireError(error.message, error.rule) from None
