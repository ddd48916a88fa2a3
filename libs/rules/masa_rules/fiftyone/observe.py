"""A playable 51 state rebuilt from one seat's view: what a stateless bot decides from (P-20).

The view (:class:`~masa_rules.fiftyone.view.View`) holds everything public plus the seat's
own hand. :func:`seat_state` turns it back into a full :class:`~masa_rules.fiftyone.state.State`
by a *determinisation*: cards every seat has seen in another seat's hand (shown twins, a taken
discard, retrieved jokers) go back to that hand, and the cards nobody but their holder has seen
(the rest of the other hands and the stock) are the pack minus everything known, dealt out in
pack order with every hand size and the stock count kept. The face-up bottom card stays the
last card of the stock (F-4). The seat's legal actions depend on its own hand and the public
table only, so ``legal_actions`` and every policy give the same answer on the rebuilt state as
on the real one.

>>> from masa_rules.ruleset import RuleSet
>>> from masa_rules.fiftyone import legal_actions, new_game, view
>>> state = new_game(RuleSet.salon(), 4, "observe")
>>> seat = state.turn.seat
>>> legal_actions(seat_state(view(state, seat)), seat) == legal_actions(state, seat)
True
"""

from __future__ import annotations

import hashlib

from masa_rules.cards import PhysicalCard, fiftyone_pack
from masa_rules.errors import RuleViolation
from masa_rules.fiftyone.state import SeatState, State
from masa_rules.fiftyone.view import View

__all__ = ["seat_state"]


def seat_state(seen: View) -> State:
    """A state consistent with ``seen``, the view of one seat during a hand.

    Raises :class:`~masa_rules.errors.RuleViolation` (``P-20``) for a spectator's view, a view
    of a finished game, or a view whose card counts do not add up to the pack.
    """
    seat, hand = seen.seat, seen.hand
    if seat is None or hand is None:
        raise RuleViolation("P-20", "only a seat's view of a hand in play can be rebuilt")
    if seen.seats[seat].cards != len(hand):
        raise RuleViolation("P-20", "the view's card counts do not add up to the pack")
    known = _known_in_hands(seen, seat)
    public = {*seen.discard, *(c for m in seen.table for c in m.cards)}
    if seen.bottom_card is not None:
        public.add(seen.bottom_card)
    placed = {*hand, *public, *(card for cards in known for card in cards)}
    unseen = [card for card in fiftyone_pack() if card not in placed]
    hidden = [s.cards - len(known[i]) for i, s in enumerate(seen.seats)]
    hidden[seat] = 0
    drawn_stock = seen.stock - (1 if seen.bottom_card is not None else 0)
    if sum(hidden) + drawn_stock != len(unseen):
        raise RuleViolation("P-20", "the view's card counts do not add up to the pack")
    hands: list[tuple[PhysicalCard, ...]] = []
    taken = 0
    for index, cards in enumerate(known):
        own = hand if index == seat else (*cards, *unseen[taken : taken + hidden[index]])
        taken += hidden[index]
        hands.append(tuple(own))
    stock = (*unseen[taken:], *([seen.bottom_card] if seen.bottom_card else []))
    return _state(seen, tuple(hands), stock)


def _known_in_hands(seen: View, seat: int) -> list[tuple[PhysicalCard, ...]]:
    """Cards every seat saw go into another seat's hand and not yet onto the table or pile:
    shown twins, and the turn's taken discard and retrieved jokers."""
    on_table = {*seen.discard, *(c for m in seen.table for c in m.cards)}
    known: list[list[PhysicalCard]] = [
        [] if index == seat else list(public.shown_twins) for index, public in enumerate(seen.seats)
    ]
    turn = seen.turn
    if turn.seat != seat:
        known[turn.seat] += [*([turn.took] if turn.took is not None else []), *turn.jokers]
    return [tuple(c for c in dict.fromkeys(cards) if c not in on_table) for cards in known]


def _state(
    seen: View, hands: tuple[tuple[PhysicalCard, ...], ...], stock: tuple[PhysicalCard, ...]
) -> State:
    # The seeds stay secret (F-5); stand-ins derived from the public commitment keep the
    # rebuilt state deterministic.
    stand_in = hashlib.sha256(b"determinised:" + seen.commitment.encode()).digest()
    return State(
        rules=seen.rules,
        players=seen.players,
        teams=seen.teams,
        game_seed=stand_in,
        hands_limit=seen.hands_limit,
        hand_no=seen.hand_no,
        hands_scored=seen.hands_scored,
        dealer=seen.dealer,
        active=tuple(s.active for s in seen.seats),
        totals=seen.totals,
        eliminated=seen.eliminated,
        phase=seen.phase,
        seats=tuple(
            SeatState(
                hand=cards,
                opened=public.opened,
                opened_with_pairs=public.opened_with_pairs,
                opening_total=public.opening_total,
                pair_status=public.pair_status,
                shown_pairs=public.shown_pairs,
                locked=public.shown_twins,
                islek_penalty=public.islek_penalty,
                free_islek_used=public.free_islek_used,
                bottom_claim=public.bottom_claim,
                turns=public.turns,
            )
            for cards, public in zip(hands, seen.seats, strict=True)
        ),
        stock=stock,
        bottom_card=seen.bottom_card,
        discard=seen.discard,
        last_discarder=seen.last_discarder,
        table=seen.table,
        turn=seen.turn,
        query=seen.query,
        hand_seed=stand_in,
        commitment=seen.commitment,
        reshuffles=seen.reshuffles,
        high_open=seen.high_open,
        high_pairs=seen.high_pairs,
        pair_opened=seen.pair_opened,
        action_count=seen.action_count,
        ranking=seen.ranking,
        turns_without_draw=seen.turns_without_draw,
    )
