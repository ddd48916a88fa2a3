"""The legal actions of a seat (see :mod:`masa_rules.fiftyone.engine` for the contract).

Kinds whose instances are few are enumerated exactly; openings and further lay-downs are given
by canonical instances built from the solver. Every listed action passes
:func:`~masa_rules.fiftyone.engine.is_legal`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from masa_rules.cards import Card, PhysicalCard
from masa_rules.melds import (
    Meld,
    MeldError,
    MeldKind,
    layoff_options,
    pair_meld,
    retrieve_joker,
)
from masa_rules.ruleset import BottomCardRule, IslekRule, RuleSet

from .actions import (
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
    TakeBottom,
    TakeDiscard,
)
from .engine import KEEP, is_legal, joker_may_go, pairs_needed, threshold
from .melding import (
    cached_opening,
    cached_opening_keeping,
    cached_pairs,
    cached_pairs_with_meld,
    islek_faces,
    melds_with,
    opening_bound,
    opening_reaches,
    pairs_bound,
)
from .state import Phase, State, counts_opened

__all__ = ["legal_actions", "legal_by_kind"]


Maker = Callable[[], list[Action]]


def legal_by_kind(state: State, seat: int) -> list[tuple[type, Maker]]:
    """The kinds of action ``seat`` may have now, each with a function listing its instances.

    A kind is labelled by an action class; ``TakeDiscard(pairs=True)`` is listed under
    :class:`DeclarePairs`, since that is what it does.

    Listing some kinds takes the solver; a caller that needs one kind only (the random
    policy) calls that kind's function alone. A kind may turn out to have no instance.
    """
    if state.phase is Phase.OVER or seat not in state.to_act:
        return []
    if state.phase is Phase.QUERY:
        return [(Answer, lambda: [Answer(seat, True), Answer(seat, False)])]
    kinds: list[tuple[type, Maker]] = []
    pending = _obligations_pending(state)
    if state.phase is Phase.DRAW:
        kinds.append((Draw, lambda: [Draw(seat)]))
        kinds.append((TakeDiscard, lambda: [a for a in [TakeDiscard(seat)] if _may_take(state, a)]))
        # Taking the discard to go pairs declares pairs (F-31, F-70): listed with DeclarePairs.
        kinds.append(
            (
                DeclarePairs,
                lambda: [a for a in [TakeDiscard(seat, pairs=True)] if _may_take(state, a)],
            )
        )
        kinds.append((TakeBottom, lambda: _bottom_actions(state, seat)))
    else:
        kinds.append((Discard, lambda: [] if pending else _discards(state, seat)))
        kinds.append((LayDown, lambda: _lay_downs(state, seat)))
        kinds.append((LayOff, lambda: _filtered(state, _lay_offs(state, seat), check=pending)))
        kinds.append(
            (RetrieveJoker, lambda: _filtered(state, _retrievals(state, seat), check=True))
        )
    own = state.seats[seat]
    rules = state.rules
    if not own.opened:
        if not own.pair_status and rules.pairs_to_open is not None:
            kinds.append(
                (DeclarePairs, lambda: _filtered(state, [DeclarePairs(seat)], check=pending))
            )
            if rules.gosterge:
                kinds.append(
                    (ShowPairs, lambda: _filtered(state, _show_pairs(state, seat), check=pending))
                )
        if rules.bottom_card is BottomCardRule.CLAIM_BY_PAIR_GOER and own.pair_status:
            kinds.append((ClaimBottom, lambda: _claims(state, seat)))
    return kinds


def legal_actions(state: State, seat: int) -> list[Action]:
    """Every legal action of ``seat`` now (canonical instances for lay-downs).

    >>> from masa_rules.ruleset import RuleSet
    >>> from masa_rules.fiftyone.engine import new_game
    >>> state = new_game(RuleSet.classic(), 2, "doc")
    >>> legal_actions(state, 1)
    []
    >>> sorted({type(a).__name__ for a in legal_actions(state, 0)})
    ['DeclarePairs', 'Discard']
    """
    return [action for _, make in legal_by_kind(state, seat) for action in make()]


def _filtered(state: State, actions: Iterable[Action], *, check: bool) -> list[Action]:
    return [a for a in actions if not check or is_legal(state, a)]


def _may_take(state: State, action: TakeDiscard) -> bool:
    if not state.discard or state.last_discarder is None:
        return False
    return is_legal(state, action)


def _obligations_pending(state: State) -> bool:
    turn = state.turn
    own = state.seats[turn.seat]
    took = turn.took is not None and turn.took_rule in ("F-30", "F-33") and not turn.took_used
    return took or (turn.must_open and not own.opened) or bool(turn.jokers)


def _discards(state: State, seat: int) -> list[Action]:
    rules = state.rules
    own = state.seats[seat]
    # F-36: never the discard taken this turn.
    hand = [c for c in own.hand if c != state.turn.took]
    if len(own.hand) == 1 or rules.islek is not IslekRule.ILLEGAL:
        return [Discard(seat, c) for c in hand]
    islek = islek_faces(state.table, rules)
    allowed = [c for c in hand if c not in own.locked and c.face_index not in islek]
    out: list[Action] = [Discard(seat, c) for c in (allowed or hand)]
    if not own.opened:
        for card in hand:
            if card.face_index not in islek or card in own.locked:
                continue
            out += [Discard(seat, card, t) for t in own.hand if t != card and t.card == card.card]
    return out


def _physical(
    melds: Sequence[Meld], hand: Sequence[PhysicalCard], first: PhysicalCard | None
) -> list[MeldSpec]:
    """Physical cards for the solver's melds, using ``first`` for its face when it appears."""
    pool = sorted(hand, key=lambda c: c != first)
    out: list[MeldSpec] = []
    for meld in melds:
        spec: list[tuple[PhysicalCard, Card | None]] = []
        for placed in meld.cards:
            card = next(c for c in pool if c.face_index == placed.card.index)
            pool.remove(card)
            spec.append((card, placed.stands_for if placed.is_joker else None))
        out.append(tuple(spec))
    return out


def _lay_downs(state: State, seat: int) -> list[Action]:
    rules = state.rules
    own = state.seats[seat]
    hand = own.hand
    # The taken discard may since have gone into a joker retrieval (F-55).
    took = state.turn.took if state.turn.took in hand else None
    out: list[Action] = []
    if not own.opened:
        out += _meld_openings(state, seat, took)
        out += _pair_openings(state, seat, took)
    elif own.opened_with_pairs:
        for spec in _physical(cached_pairs(hand, rules), hand, took):
            out.append(LayDown(seat, (), ((spec[0][0], spec[1][0]),)))
    elif opening_bound(hand, rules) > 0:
        for spec in _physical(cached_opening(hand, rules).melds, hand, took):
            out.append(LayDown(seat, (spec,)))
    if own.opened and took is not None and not took.card.is_joker:
        out += _uses_of(state, seat, took)
    unique = list(dict.fromkeys(out))
    return [a for a in unique if is_legal(state, a)]


def _meld_openings(state: State, seat: int, took: PhysicalCard | None) -> list[Action]:
    """F-40, F-52, F-36: the best opening that keeps a card to discard, and with a taken
    discard in hand also an opening that holds it (F-30 needs one; F-33r takes either)."""
    rules = state.rules
    hand = state.seats[seat].hand
    limit = threshold(state, seat)
    if limit is None or not opening_reaches(hand, rules, limit):
        return []
    if took is None:
        found = [cached_opening_keeping(hand, rules, limit)]
    else:
        rest = [c for c in hand if c != took]
        found = [
            cached_opening_keeping(rest, rules, limit),
            cached_opening_keeping(hand, rules, limit, took.card),
        ]
    return [
        LayDown(seat, tuple(_physical(opening.melds, hand, took)))
        for opening in found
        if opening is not None
    ]


def _pair_openings(state: State, seat: int, took: PhysicalCard | None) -> list[Action]:
    """F-43: the most pairs (keeping a card to discard, F-52, which is not the taken discard,
    F-36), and four pairs with a meld."""
    rules = state.rules
    hand = state.seats[seat].hand
    needed = pairs_needed(state)
    if needed is None:
        return []
    out: list[Action] = []
    pairs = list(cached_pairs(hand, rules)) if pairs_bound(hand) >= needed else []
    if took is not None and not any(p.cards[0].stands_for == took.card for p in pairs):
        pairs = _pair_with(pairs, took.card, rules)
    paired = took is None or any(p.cards[0].stands_for == took.card for p in pairs)
    if len(hand) - 2 * len(pairs) - (0 if paired else 1) < KEEP:
        pairs = pairs[:-1]
    if len(pairs) >= needed:
        specs = _physical(pairs, hand, took)
        out.append(LayDown(seat, (), tuple((s[0][0], s[1][0]) for s in specs)))
    found = cached_pairs_with_meld(hand, rules)
    if found is not None and (rules.pairs_with_meld or 0) + 1 >= needed:
        specs = _physical([*found.pairs, found.meld], hand, took)
        pair_specs = tuple((s[0][0], s[1][0]) for s in specs[:-1])
        out.append(LayDown(seat, (specs[-1],), pair_specs))
    return out


def _pair_with(pairs: list[Meld], card: Card, rules: RuleSet) -> list[Meld]:
    """F-30: swap the taken card in for the natural of a joker pair (same number of pairs)."""
    for index, pair in enumerate(pairs):
        joker = next((p.card for p in pair.cards if p.is_joker), None)
        if joker is not None and not card.is_joker:
            return [*pairs[:index], pair_meld(card, joker, rules), *pairs[index + 1 :]]
    return pairs


def _uses_of(state: State, seat: int, took: PhysicalCard) -> list[Action]:
    """F-30, F-33: lay-downs of an opened seat that use the taken card."""
    own = state.seats[seat]
    if own.opened_with_pairs:
        partners = [c for c in own.hand if c != took and (c.card == took.card or c.card.is_joker)]
        return [LayDown(seat, (), ((took, p),)) for p in partners]
    hand = [c.card for c in own.hand]
    groups = melds_with(took.card, hand, state.rules, opening=state.turn.opened_now)
    return [LayDown(seat, (_group_spec(group, own.hand, took),)) for group in groups]


def _group_spec(
    group: Sequence[Card], hand: Sequence[PhysicalCard], first: PhysicalCard
) -> MeldSpec:
    """Physical cards for a group of faces, ``first`` for its own face; jokers unannotated."""
    pool = sorted(hand, key=lambda c: c != first)
    spec: list[tuple[PhysicalCard, Card | None]] = []
    for face in group:
        card = next(c for c in pool if c.face_index == face.index)
        pool.remove(card)
        spec.append((card, None))
    return tuple(spec)


def _lay_offs(state: State, seat: int) -> list[Action]:
    """F-50: every lay-off that keeps a card to discard (F-52) other than the taken one (F-36)."""
    if not counts_opened(state, seat):
        return []
    hand = state.seats[seat].hand
    spare = sum(1 for c in hand if c != state.turn.took)
    out: list[Action] = []
    for card in hand:
        if spare - (card != state.turn.took) >= KEEP:
            out += _single_lay_offs(state, seat, card)
    if spare - 2 >= KEEP:
        out += _pair_lay_offs(state, seat)
    return out


def _single_lay_offs(state: State, seat: int, card: PhysicalCard) -> list[Action]:
    """One card on a run or set; a joker at each place it fits (F-13: not on a meld laid down
    this opening turn that holds its jokers already)."""
    rules = state.rules
    face = card.card
    if not face.is_joker and card.face_index not in islek_faces(state.table, rules):
        return []
    out: list[Action] = []
    for index, entry in enumerate(state.table):
        if entry.meld.kind is MeldKind.PAIR:
            continue
        if face.is_joker and not joker_may_go(state, seat, entry):
            continue
        options = layoff_options(entry.meld, face, rules)
        if not face.is_joker:
            out += [LayOff(seat, index, (card,))] if options else []
            continue
        for result in options:
            placed = result.cards[0] if result.start != entry.meld.start else result.cards[-1]
            if entry.meld.kind is MeldKind.SET:
                placed = next(p for p in result.cards if p.card == face)
            out.append(LayOff(seat, index, (card,), stands_for=placed.stands_for))
    return out


def _pair_lay_offs(state: State, seat: int) -> list[Action]:
    """F-50: a pair identical to one in a pair opener's area (twins, or a natural and a joker)."""
    hand = state.seats[seat].hand
    out: list[Action] = []
    for index, entry in enumerate(state.table):
        if entry.meld.kind is not MeldKind.PAIR:
            continue
        face = entry.meld.cards[0].stands_for
        naturals = [c for c in hand if c.card == face]
        jokers = [c for c in hand if c.card.is_joker]
        if len(naturals) == 2:
            out.append(LayOff(seat, index, (naturals[0], naturals[1])))
        for natural in naturals:
            out += [LayOff(seat, index, (natural, j)) for j in jokers]
    return out


def _retrievals(state: State, seat: int) -> list[Action]:
    rules = state.rules
    own = state.seats[seat]
    out: list[Action] = []
    for index, entry in enumerate(state.table):
        if not entry.meld.jokers:
            continue
        rank = entry.meld.rank if entry.meld.kind is MeldKind.SET else None
        stands = {p.stands_for for p in entry.meld.cards if p.is_joker}
        for card in own.hand:
            if card.card.is_joker or (card.card.rank is not rank and card.card not in stands):
                continue
            try:
                retrieve_joker(entry.meld, card.card, rules)
            except MeldError:
                continue
            out.append(RetrieveJoker(seat, index, card))
    return out


def _bottom_actions(state: State, seat: int) -> list[Action]:
    rules = state.rules
    own = state.seats[seat]
    bottom = state.bottom_card
    if bottom is None:
        return []
    if rules.bottom_card is BottomCardRule.CLAIM_BY_PAIR_GOER:
        if own.bottom_claim is not None and own.bottom_claim < state.turn.number:
            return [TakeBottom(seat)]
        return []
    if rules.bottom_card is not BottomCardRule.HAND_FINISH_ONLY or own.opened:
        return []
    return _bottom_finish(state, seat, bottom)


def _bottom_finish(state: State, seat: int, bottom: PhysicalCard) -> list[Action]:
    """F-35: one hand finish with the bottom card, if the seat has one."""
    rules = state.rules
    own = state.seats[seat]
    limit = threshold(state, seat)
    if limit is None:
        return []
    hand = (*own.hand, bottom)
    faces = [c.card for c in hand]
    if not opening_reaches(faces, rules, limit) or len(cached_opening(faces, rules).leftover) > 2:
        return []
    for discard in hand:
        rest = [c for c in hand if c != discard]
        best = cached_opening([c.card for c in rest], rules)
        if best.leftover or best.value < limit:
            continue
        action = TakeBottom(seat, tuple(_physical(best.melds, rest, bottom)), discard)
        if is_legal(state, action):
            return [action]
    return []


def _show_pairs(state: State, seat: int) -> list[Action]:
    """F-71: one canonical gösterge."""
    own = state.seats[seat]
    pairs = cached_pairs([c.card for c in own.hand], state.rules)
    if len(pairs) < state.rules.gosterge_pairs:
        return []
    specs = _physical(pairs[: state.rules.gosterge_pairs], own.hand, None)
    return [ShowPairs(seat, tuple((s[0][0], s[1][0]) for s in specs))]


def _claims(state: State, seat: int) -> list[Action]:
    """F-34: claim the bottom card with each identical card in hand."""
    bottom = state.bottom_card
    if bottom is None or any(s.bottom_claim is not None for s in state.seats):
        return []
    return [ClaimBottom(seat, c) for c in state.seats[seat].hand if c.card == bottom.card]
