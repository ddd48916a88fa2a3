"""The 51 engine: :func:`new_game`, :func:`legal_actions`, :func:`is_legal`, :func:`apply`.

Contract of :func:`legal_actions` (openings and lay-offs are combinatorial, so "complete" is
defined per kind):

- every concrete legal action of the kinds Draw, TakeDiscard, TakeBottom (classic), Discard,
  LayOff (one card or one pair, each joker placement), RetrieveJoker, DeclarePairs, ClaimBottom
  and Answer is listed;
- LayDown and ShowPairs (and remi's TakeBottom, which carries a whole hand finish) are listed
  by canonical instances: whenever an opening is possible, the best arrangement that keeps a
  card to discard (F-52; not the discard taken this turn, F-36), with a taken discard in hand
  also an opening that holds it (F-30), and a pair opening when one is possible; for an
  opened seat each meld or pair of its best arrangement; whenever gösterge is possible, one
  set of pairs;
- :func:`is_legal` judges any concrete action exactly: it is :func:`apply` without the result.

Before it lets a seat take on an obligation (use the taken discard, F-30/F-33; open this turn,
F-33r; use a retrieved joker, F-55) the engine checks that the obligation can still be met
while a card to discard stays in hand (F-36, F-52), and it rejects any later play that would
make it impossible, so a seat can always end its turn; the termination test plays 2,000 games
to the end on that promise. A hand ends by a finishing discard (F-60), an empty stock (F-63)
or ``stall_rounds`` rounds without a stock draw (F-64). A game ends after ``hands_per_game``
scored hands (F-95) or, with elimination, when one seat or team is left and at the latest after
``elimination_max_hands`` scored hands (F-96); only classic replays a hand (F-63), at most
``max_replays`` of them in a game. ``tests/test_termination.py`` states both bounds.
"""

from __future__ import annotations

from typing import Any

from masa_rules.cards import Card, PhysicalCard
from masa_rules.errors import IllegalAction
from masa_rules.frozen import evolve
from masa_rules.melds import (
    Meld,
    MeldError,
    MeldKind,
    lay_off,
    pair_meld,
    retrieve_joker,
)
from masa_rules.ruleset import (
    BottomCardRule,
    DeckExhausted,
    GameLength,
    IslekRule,
    OpenedTakeDiscard,
    RuleSet,
)
from masa_rules.shuffle import Seed, commitment, game_seed_bytes, hand_seed

from .actions import (
    Action,
    Answer,
    ClaimBottom,
    DeclarePairs,
    Discard,
    Draw,
    LayDown,
    LayOff,
    RetrieveJoker,
    ShowPairs,
    TakeBottom,
    TakeDiscard,
)
from .deal import deal_cards, reshuffled
from .events import (
    Answered,
    ClaimedBottom,
    Deal,
    DeclaredPairs,
    Discarded,
    Drew,
    Event,
    Finish,
    GameEnded,
    HandEnded,
    HandEndReason,
    LaidDown,
    LaidOff,
    QueryEnded,
    QueryStarted,
    Reshuffled,
    RetrievedJoker,
    Revealed,
    ShowedPairs,
    TookBottom,
    TookDiscard,
)
from .melding import align, can_open, can_use, islek_faces, read_meld
from .scoring import eliminated_now, hand_scores, is_kafa, ranking
from .state import (
    Phase,
    Query,
    SeatState,
    State,
    TableMeld,
    Turn,
    counts_opened,
    next_seat,
    previous_seat,
)

__all__ = [
    "KEEP",
    "apply",
    "is_legal",
    "joker_may_go",
    "meld_codes",
    "new_game",
    "pairs_needed",
    "start",
    "threshold",
    "timeout_action",
]


# F-52: the cards a seat keeps after laying down or off, in every preset: the last card of a
# hand is always the finishing discard.
KEEP = 1


def _illegal(rule: str, message: str) -> IllegalAction:
    return IllegalAction(rule, message)


# --------------------------------------------------------------------------- game and hands


def start(
    rules: RuleSet,
    players: int,
    seed: Seed,
    *,
    teams: bool = False,
    hands: int | None = None,
) -> tuple[State, list[Event]]:
    """A new game, dealt, and the events of its first deal.

    ``hands`` overrides ``hands_per_game`` (F-95) or caps the number of hands (F-96).
    """
    if players not in rules.player_counts:
        raise _illegal(
            "F-2", f"{rules.preset} is played by {rules.players_text} players, not {players}"
        )
    if teams and not (rules.teams_allowed and players == 4):
        raise _illegal(
            "F-2", f"team mode needs 4 players and a preset that has it, not {rules.preset}"
        )
    if hands is not None and hands < 1:
        raise _illegal("F-95", f"a game has at least one hand, not {hands}")
    state = State(
        rules=rules,
        players=players,
        teams=teams,
        game_seed=game_seed_bytes(seed),
        hands_limit=hands,
        hand_no=0,
        hands_scored=0,
        dealer=players - 1,
        active=(True,) * players,
        totals=(0,) * players,
        eliminated=(),
        phase=Phase.PLAY,
        seats=tuple(SeatState(()) for _ in range(players)),
        stock=(),
        bottom_card=None,
        discard=(),
        last_discarder=None,
        table=(),
        turn=Turn(0, 0),
        query=None,
        hand_seed=b"",
        commitment="",
        reshuffles=0,
        high_open=0,
        high_pairs=0,
        pair_opened=False,
        action_count=0,
    )
    return _deal(state, 1, players - 1)


def new_game(
    rules: RuleSet,
    players: int,
    seed: Seed,
    *,
    teams: bool = False,
    hands: int | None = None,
) -> State:
    """A new game, dealt and ready for the starter (F-20).

    >>> from masa_rules.ruleset import RuleSet
    >>> state = new_game(RuleSet.salon(), 4, "doc")
    >>> state.turn.seat, len(state.seats[0].hand), len(state.stock), state.phase.value
    (0, 15, 49, 'play')
    """
    return start(rules, players, seed, teams=teams, hands=hands)[0]


def _deal(state: State, hand_no: int, dealer: int) -> tuple[State, list[Event]]:
    """F-3..F-5: deal hand ``hand_no``; the seat after ``dealer`` starts (F-20: no draw)."""
    order = [next_seat(state, dealer)]
    while order[-1] != dealer:
        order.append(next_seat(state, order[-1]))
    seed = hand_seed(state.game_seed, hand_no)
    deal = deal_cards(state.rules, order, seed)
    starter = order[0]
    seats = tuple(
        SeatState(deal.hands.get(i, ()), turns=1 if i == starter else 0)
        for i in range(state.players)
    )
    committed = commitment(seed)
    new = evolve(
        state,
        hand_no=hand_no,
        dealer=dealer,
        phase=Phase.PLAY,
        seats=seats,
        stock=deal.stock,
        bottom_card=deal.bottom_card,
        discard=(),
        last_discarder=None,
        table=(),
        turn=Turn(starter, 1),
        query=None,
        hand_seed=seed,
        commitment=committed,
        reshuffles=0,
        high_open=0,
        high_pairs=0,
        pair_opened=False,
        turns_without_draw=0,
    )
    events: list[Event] = [
        Deal(
            hand=hand_no,
            dealer=dealer,
            starter=starter,
            cutter=deal.cutter,
            cutter_jokers=tuple(deal.cutter_jokers),
            bottom_card=deal.bottom_card,
            stock=len(deal.stock),
            commitment=committed,
            hands=tuple(seat.hand for seat in seats),
        )
    ]
    return new, events


# --------------------------------------------------------------------------- small helpers


def threshold(state: State, seat: int) -> int | None:
    """F-40..F-42, F-70: the effective opening threshold, None when only pairs may open."""
    if state.seats[seat].pair_status:
        return None
    rules = state.rules
    value = rules.open_threshold
    if state.pair_opened and rules.threshold_after_pair_opening is not None:
        value = max(value, rules.threshold_after_pair_opening)
    if rules.escalating_threshold and state.high_open:
        value = max(value, state.high_open + 1)
    return value


def pairs_needed(state: State) -> int | None:
    """F-41, F-43: pairs a pair opening needs (four plus a meld counts as one more), or None."""
    rules = state.rules
    if rules.pairs_to_open is None:
        return None
    needed = rules.pairs_to_open
    if rules.escalating_threshold and state.high_pairs:
        needed = max(needed, state.high_pairs + 1)
    return needed


def _faces(cards: tuple[PhysicalCard, ...] | list[PhysicalCard]) -> list[Card]:
    return [c.card for c in cards]


def _remove(hand: tuple[PhysicalCard, ...], cards: list[PhysicalCard]) -> tuple[PhysicalCard, ...]:
    rest = list(hand)
    for card in cards:
        if card not in rest:
            raise _illegal("C-4", f"{card.code} is not in the hand")
        rest.remove(card)
    return tuple(rest)


def _set_seat(state: State, index: int, seat: SeatState) -> tuple[SeatState, ...]:
    return (*state.seats[:index], seat, *state.seats[index + 1 :])


def meld_codes(entry: TableMeld) -> list[str]:
    """A table meld as codes: physical codes for naturals, ``XR=8H`` for jokers (C-2)."""
    return [
        f"{card.code}={placed.stands_for.code}" if placed.is_joker else card.code
        for placed, card in zip(entry.meld.cards, entry.cards, strict=True)
    ]


def _open_args(state: State, seat: int) -> tuple[int | None, int | None]:
    needed = pairs_needed(state)
    return threshold(state, seat), needed


def _can_open_now(state: State, seat: int, hand: list[Card], forced: Card | None) -> bool:
    limit, needed = _open_args(state, seat)
    return can_open(
        hand, state.rules, threshold=limit, pairs_needed=needed, forced=forced, keep=KEEP
    )


def _can_still_open(state: State, seat: int) -> bool:
    """F-33r, F-55: can the seat still open this turn, keeping a card it may discard?

    F-36: a taken discard still in hand is not that card, so either the opening holds it or
    it is made from the rest of the hand, which then keeps a card of its own.
    """
    own = state.seats[seat]
    hand = _faces(own.hand)
    took = state.turn.took
    if took is None or took not in own.hand:
        return _can_open_now(state, seat, hand, None)
    rest = list(hand)
    rest.remove(took.card)
    return _can_open_now(state, seat, rest, None) or _can_open_now(state, seat, hand, took.card)


def joker_may_go(state: State, seat: int, entry: TableMeld) -> bool:
    """F-13: in the turn a seat opens, a meld it laid down holds at most
    ``max_jokers_per_meld_at_opening`` jokers to the end of the turn."""
    limit = state.rules.max_jokers_per_meld_at_opening
    return not (state.turn.opened_now and entry.owner == seat and entry.meld.jokers >= limit)


def _joker_targets(state: State, seat: int) -> tuple[TableMeld, ...]:
    """The table melds a joker of ``seat`` may be laid off on now (F-13)."""
    return tuple(m for m in state.table if joker_may_go(state, seat, m))


def _usable(state: State, seat: int, card: Card, hand: list[Card], *, layoff: bool) -> bool:
    """F-33, F-55: can ``card`` still be laid down or off this turn, keeping a card to discard?

    F-36: a taken discard still in hand (other than ``card``) cannot be that card, so it is
    not counted as one; this errs on the safe side when it could share a meld with ``card``.
    """
    own = state.seats[seat]
    took = state.turn.took
    spare_took = took is not None and took in own.hand and took.card != card
    return can_use(
        card,
        hand,
        _joker_targets(state, seat) if card.is_joker else state.table,
        state.rules,
        melds=own.opened and not own.opened_with_pairs,
        pairs=own.opened and own.opened_with_pairs,
        layoff=layoff and counts_opened(state, seat),
        keep=KEEP + spare_took,
    )


def _check_obligations(state: State, seat: int) -> None:
    """Reject a play after which the turn's obligations could no longer be met."""
    turn = state.turn
    own = state.seats[seat]
    hand = _faces(own.hand)
    _check_a_card_to_discard(state, seat)
    if turn.took is not None and turn.took_rule in ("F-30", "F-33") and not turn.took_used:
        if turn.took not in own.hand:
            raise _illegal(turn.took_rule, f"the taken {turn.took.code} must be laid down")
        if own.opened:
            ok = _usable(state, seat, turn.took.card, hand, layoff=turn.took_rule == "F-33")
        elif turn.took_rule == "F-30":
            ok = _can_open_now(state, seat, hand, turn.took.card)
        else:
            ok = _usable(state, seat, turn.took.card, hand, layoff=True)
        if not ok:
            raise _illegal(turn.took_rule, f"the taken {turn.took.code} could no longer be used")
    if turn.must_open and not own.opened and not _can_still_open(state, seat):
        raise _illegal(turn.took_rule or "F-55", "this seat must still open this turn")
    for joker in turn.jokers:
        if joker not in own.hand:
            raise _illegal("F-55", f"the retrieved {joker.code} must be laid down or laid off")
        if own.opened and not _usable(state, seat, joker.card, hand, layoff=True):
            raise _illegal("F-55", f"the retrieved {joker.code} could no longer be used")


def _check_a_card_to_discard(state: State, seat: int) -> None:
    """F-36, F-52: the seat keeps a card it may discard, which the taken discard is not."""
    took = state.turn.took
    if took is not None and state.seats[seat].hand == (took,):
        raise _illegal("F-36", f"keep a card to discard: the taken {took.code} is not one")


# --------------------------------------------------------------------------- apply


def apply(state: State, action: Action) -> tuple[State, list[Event]]:
    """Apply ``action``; an illegal one raises :class:`IllegalAction` and changes nothing."""
    if state.phase is Phase.OVER:
        raise _illegal("F-95", "the game is over")
    if action.seat not in state.to_act:
        if state.phase is Phase.QUERY:
            raise _illegal("F-80", f"seat {action.seat} cannot act while the query is open")
        raise _illegal("F-22", f"it is seat {state.turn.seat}'s turn, not seat {action.seat}'s")
    try:
        new, events = _dispatch(state, action)
    except MeldError as exc:
        raise _illegal(exc.rule, exc.message) from None
    if new is state:
        new = evolve(state)
    # The handler's result is a fresh object nobody else holds yet: count the action in place
    # rather than copying the whole state once more.
    object.__setattr__(new, "action_count", state.action_count + 1)
    return new, events


def is_legal(state: State, action: Action) -> bool:
    """Whether :func:`apply` accepts ``action`` (exact for every kind of action)."""
    try:
        apply(state, action)
    except IllegalAction:
        return False
    return True


def timeout_action(state: State, seat: int) -> Action | None:
    """F-80: what an unanswered query means (GIVE). Turn timeouts go to the autopilot (P-10)."""
    if state.phase is Phase.QUERY and state.query is not None and seat in state.query.pending:
        return Answer(seat, True)
    return None


def _need_phase(state: State, *phases: Phase, rule: str = "F-21") -> None:
    if state.phase not in phases:
        raise _illegal(rule, f"not now: the turn is in its {state.phase.value} phase")


def _draw(state: State, action: Draw) -> tuple[State, list[Event]]:
    _need_phase(state, Phase.DRAW)
    seat = action.seat
    if not state.stock:
        return _exhausted(state, seat)
    card = state.stock[0]
    bottom = state.bottom_card if card != state.bottom_card else None
    own = state.seats[seat]
    new = evolve(
        state,
        stock=state.stock[1:],
        bottom_card=bottom,
        seats=_set_seat(state, seat, evolve(own, hand=tuple(sorted((*own.hand, card))))),
        phase=Phase.PLAY,
    )
    return new, [Drew(seat, len(new.stock), card)]


def _exhausted(state: State, seat: int) -> tuple[State, list[Event]]:
    """F-63: the stock is empty and ``seat`` must draw."""
    rules = state.rules
    if (
        rules.deck_exhausted is DeckExhausted.RESHUFFLE
        and state.reshuffles < rules.reshuffles
        and len(state.discard) > 1
    ):
        number = state.reshuffles + 1
        stock = reshuffled(state.hand_seed, number, state.discard[:-1])
        new = evolve(state, stock=stock, discard=state.discard[-1:], reshuffles=number)
        drawn, events = _draw(new, Draw(seat))
        return drawn, [Reshuffled(number, len(stock)), *events]
    return _no_finisher(state, HandEndReason.STOCK_EXHAUSTED)


def _no_finisher(state: State, reason: HandEndReason) -> tuple[State, list[Event]]:
    """F-63 (and F-64, which ends a hand the same way): no finisher; a classic hand nobody
    opened is replayed while the game has replayed fewer than ``max_replays`` hands, any other
    is scored."""
    rules = state.rules
    replayed = state.hand_no - 1 - state.hands_scored
    replay = (
        rules.deck_exhausted is DeckExhausted.REPLAY_IF_NONE_OPENED
        and not any(s.opened for s in state.seats)
        and replayed < rules.max_replays
    )
    return _end_hand(state, None, Finish(), scored=not replay, reason=reason)


def _previous_discard(state: State, seat: int) -> tuple[PhysicalCard, int]:
    """The top discard and who discarded it, if that is the previous player (F-21, F-30)."""
    before = state.last_discarder
    if not state.discard or before is None or before != previous_seat(state, seat):
        raise _illegal("F-30", "there is no discard of the previous player to take")
    return state.discard[-1], before


def _take_discard(state: State, action: TakeDiscard) -> tuple[State, list[Event]]:
    _need_phase(state, Phase.DRAW)
    seat = action.seat
    rules = state.rules
    card, before = _previous_discard(state, seat)
    own = state.seats[seat]
    goes_pairs = action.pairs or own.pair_status
    if state.seats[before].pair_status and not goes_pairs:
        raise _illegal("F-32", "the seat after a pair-goer takes discards only by going pairs")
    rule: str | None = None
    must_open = False
    events: list[Event] = []
    if action.pairs:
        if own.pair_status:
            raise _illegal("F-70", "this seat is already in pair status")
        if own.opened or rules.pairs_to_open is None:
            raise _illegal("F-70", "only an unopened seat at a table with pair openings goes pairs")
        own = evolve(own, pair_status=True)
        events.append(DeclaredPairs(seat, with_take=True))
    else:
        rule, must_open = _take_rule(state, seat, card)
    state = evolve(state, seats=_set_seat(state, seat, own))
    if rule == "F-30" and rules.sorgu and len(own.hand) > rules.query_skip_max_hand:
        asked = tuple(
            s
            for s in range(state.players)
            if s != seat and state.active[s] and not counts_opened(state, s)
        )
        if asked:
            query = Query(seat, card, asked)
            new = evolve(state, phase=Phase.QUERY, query=query)
            events.append(QueryStarted(seat, card, asked))
            return new, events
    return _give_discard(state, seat, rule, must_open, events)


def _take_rule(state: State, seat: int, card: PhysicalCard) -> tuple[str | None, bool]:
    """The rule under which ``seat`` takes ``card`` without going pairs, and whether it must
    open this turn; raises when no rule lets it take the card."""
    rules = state.rules
    own = state.seats[seat]
    hand = [*_faces(own.hand), card.card]
    if own.pair_status and not own.opened:
        return None, False  # F-31: a pair-goer takes without opening and without using the card.
    if counts_opened(state, seat):
        if rules.opened_take_discard is not OpenedTakeDiscard.MUST_USE:
            return None, False
        if not _usable(state, seat, card.card, hand, layoff=True):
            raise _illegal("F-33", f"{card.code} cannot be laid down or off this turn")
        return "F-33", False
    if rules.first_turn_free_take and own.turns <= 1:
        return None, False  # F-33r: the first turn takes freely.
    if rules.first_turn_free_take:
        # F-36: the opening holds the taken card or leaves another card to discard.
        if not (
            _can_open_now(state, seat, _faces(own.hand), None)
            or _can_open_now(state, seat, hand, card.card)
        ):
            raise _illegal("F-33r", "an unopened seat takes the discard only to open this turn")
        return "F-33r", True
    if not _can_open_now(state, seat, hand, card.card):
        raise _illegal("F-30", f"{card.code} can be taken only to open with it this turn")
    return "F-30", True


def _give_discard(
    state: State, seat: int, rule: str | None, must_open: bool, events: list[Event]
) -> tuple[State, list[Event]]:
    card = state.discard[-1]
    own = state.seats[seat]
    new = evolve(
        state,
        discard=state.discard[:-1],
        seats=_set_seat(state, seat, evolve(own, hand=tuple(sorted((*own.hand, card))))),
        phase=Phase.PLAY,
        query=None,
        turn=evolve(state.turn, took=card, took_rule=rule, must_open=must_open),
    )
    events.append(TookDiscard(seat, card))
    return new, events


def _answer(state: State, action: Answer) -> tuple[State, list[Event]]:
    query = state.query
    if query is None:
        raise _illegal("F-80", "there is no query to answer")
    pending = tuple(s for s in query.pending if s != action.seat)
    refused = query.refused if action.give else (*query.refused, action.seat)
    events: list[Event] = [Answered(action.seat, action.give)]
    if pending:
        return evolve(state, query=evolve(query, pending=pending, refused=refused)), events
    seats = list(state.seats)
    for s in refused:
        # F-80: a seat that refuses goes into pair status (F-70).
        seats[s] = evolve(seats[s], pair_status=True)
    state = evolve(state, seats=tuple(seats))
    events.append(QueryEnded(query.taker, refused))
    return _give_discard(state, query.taker, "F-30", True, events)


def _take_bottom(state: State, action: TakeBottom) -> tuple[State, list[Event]]:
    _need_phase(state, Phase.DRAW, rule="F-23")
    rules = state.rules
    seat = action.seat
    own = state.seats[seat]
    bottom = state.bottom_card
    if bottom is None:
        raise _illegal("F-23", "there is no face-up bottom card")
    stock = state.stock[:-1]
    if rules.bottom_card is BottomCardRule.CLAIM_BY_PAIR_GOER:
        return _take_claimed_bottom(state, action, bottom)
    if rules.bottom_card is not BottomCardRule.HAND_FINISH_ONLY:
        raise _illegal("F-23", f"{rules.preset} has no bottom card to take")
    # F-35: the bottom card only with a hand finish in the same turn, made in this one action.
    if own.opened:
        raise _illegal("F-35", "a hand finish needs a seat that never opened")
    if action.discard is None:
        raise _illegal("F-35", "taking the bottom card needs a finishing discard")
    hand = (*own.hand, bottom)
    placed: list[PhysicalCard] = [c for spec in action.melds for c, _ in spec]
    rest = _remove(hand, [*placed, action.discard])
    if rest:
        raise _illegal("F-35", "a hand finish lays down every card but the discard")
    table = list(state.table)
    total = 0
    events: list[Event] = [TookBottom(seat, bottom)]
    for spec in action.melds:
        meld, cards = read_meld(spec, rules, opening=True)
        total += meld.value(rules)
        table.append(TableMeld(seat, meld, cards))
    limit = threshold(state, seat)
    if limit is None or total < limit:
        raise _illegal("F-40", f"the opening is worth {total}, the threshold is {limit}")
    first = len(state.table)
    events.append(LaidDown(seat, first, tuple(table[first:]), True, total, limit))
    discard = action.discard
    own = evolve(own, hand=(), opened=True, opening_total=total)
    new = evolve(
        state,
        stock=stock,
        bottom_card=None,
        table=tuple(table),
        seats=_set_seat(state, seat, own),
        discard=(*state.discard, discard),
        last_discarder=seat,
        high_open=max(state.high_open, total),
    )
    events.append(Discarded(seat, discard, islek=False, penalty=0, twin=None, finishing=True))
    finish = Finish(by_hand=True, joker=discard.card.is_joker, bottom_card=True)
    ended, more = _end_hand(new, seat, finish, scored=True)
    return ended, events + more


def _take_claimed_bottom(
    state: State, action: TakeBottom, bottom: PhysicalCard
) -> tuple[State, list[Event]]:
    """F-34: the seat that claimed the bottom card takes it on a later turn, on its own."""
    seat = action.seat
    own = state.seats[seat]
    if action.melds or action.discard is not None:
        raise _illegal("F-34", "the claimed bottom card is taken on its own")
    if own.bottom_claim is None or own.bottom_claim >= state.turn.number:
        raise _illegal("F-34", "the bottom card is taken on a turn after claiming it")
    new = evolve(
        state,
        stock=state.stock[:-1],
        bottom_card=None,
        seats=_set_seat(state, seat, evolve(own, hand=tuple(sorted((*own.hand, bottom))))),
        phase=Phase.PLAY,
    )
    return new, [TookBottom(seat, bottom)]


def _open_with_pairs(state: State, own: SeatState, melds: int, pairs: int) -> tuple[SeatState, int]:
    """F-43, F-41: the seat opening with ``pairs`` pairs (and ``melds`` melds), and the number
    of pairs the table asked for."""
    rules = state.rules
    needed = pairs_needed(state)
    if needed is None or rules.pairs_with_meld is None:
        raise _illegal("F-43", f"{rules.preset} has no pair openings")
    count = pairs + melds
    shape_ok = not melds or (melds == 1 and pairs >= rules.pairs_with_meld)
    if not shape_ok or count < (rules.pairs_to_open or 0):
        raise _illegal(
            "F-43",
            f"a pair opening is {rules.pairs_to_open} pairs, or {rules.pairs_with_meld} pairs and a meld",
        )
    if count < needed:
        raise _illegal("F-41", f"this escalating table needs {needed} pairs to open")
    # F-70 (reading): opening with pairs is where going pairs leads: pair status.
    opened = evolve(own, opened=True, opened_with_pairs=True, opening_total=count, pair_status=True)
    return opened, needed


def _open_with_melds(state: State, seat: int, own: SeatState, total: int) -> tuple[SeatState, int]:
    """F-40..F-42, F-70: the seat opening with melds worth ``total``, and its threshold."""
    rules = state.rules
    limit = threshold(state, seat)
    if limit is None:
        raise _illegal("F-70", "a seat in pair status opens only with pairs")
    if total < limit:
        rule = "F-40"
        if total >= rules.open_threshold:
            rule = "F-41" if rules.escalating_threshold and state.high_open else "F-42"
        raise _illegal(rule, f"the opening is worth {total}, the threshold is {limit}")
    return evolve(own, opened=True, opening_total=total), limit


def _lay_down(state: State, action: LayDown) -> tuple[State, list[Event]]:
    _need_phase(state, Phase.PLAY)
    rules = state.rules
    seat = action.seat
    own = state.seats[seat]
    if not action.melds and not action.pairs:
        raise _illegal("F-10", "lay down at least one meld or pair")
    used = [c for spec in action.melds for c, _ in spec] + [
        c for pair in action.pairs for c in pair
    ]
    rest = _remove(own.hand, used)
    if len(rest) < KEEP:
        raise _illegal("F-52", "a hand is finished only by a discard: keep a card")
    opening = not own.opened
    melds = [
        read_meld(spec, rules, opening=opening or state.turn.opened_now) for spec in action.melds
    ]
    pairs: list[tuple[Meld, tuple[PhysicalCard, ...]]] = []
    for first, second in action.pairs:
        meld = pair_meld(first.card, second.card, rules)
        pairs.append((meld, align(meld, [first, second])))
    high_open, high_pairs, pair_opened = state.high_open, state.high_pairs, state.pair_opened
    needed_now = 0
    if opening and pairs:
        own, needed_now = _open_with_pairs(state, own, len(melds), len(pairs))
        high_pairs, pair_opened = max(high_pairs, own.opening_total), True
    elif opening:
        total = sum(m.value(rules) for m, _ in melds)
        own, needed_now = _open_with_melds(state, seat, own, total)
        high_open = max(high_open, total)
    elif own.opened_with_pairs and melds:
        raise _illegal("F-43", "a pair opener lays down pairs only, no new runs or sets")
    elif not own.opened_with_pairs and pairs:
        raise _illegal("F-43", "a seat that opened with melds lays down no pairs of its own")
    table = (*state.table, *(TableMeld(seat, m, c) for m, c in [*melds, *pairs]))
    own = evolve(own, hand=rest)
    turn = state.turn
    turn = evolve(
        turn,
        opened_now=turn.opened_now or opening,
        took_used=turn.took_used or (turn.took is not None and turn.took in used),
        jokers=tuple(j for j in turn.jokers if j not in used),
    )
    new = evolve(
        state,
        seats=_set_seat(state, seat, own),
        table=table,
        turn=turn,
        high_open=high_open,
        high_pairs=high_pairs,
        pair_opened=pair_opened,
    )
    _check_obligations(new, seat)
    at = len(state.table)
    value = own.opening_total if opening else sum(m.value(rules) for m, _ in melds)
    events: list[Event] = [LaidDown(seat, at, table[at:], opening, value, needed_now)]
    return new, events


def _lay_off(state: State, action: LayOff) -> tuple[State, list[Event]]:
    _need_phase(state, Phase.PLAY)
    rules = state.rules
    seat = action.seat
    own = state.seats[seat]
    if not counts_opened(state, seat):
        raise _illegal("F-50", "only an opened seat lays off")
    if not 0 <= action.meld < len(state.table):
        raise _illegal("F-50", f"there is no meld {action.meld} on the table")
    target = state.table[action.meld]
    cards = list(action.cards)
    rest = _remove(own.hand, cards)
    if len(rest) < KEEP:
        raise _illegal("F-52", "the last card of a hand is the finishing discard")
    table = list(state.table)
    at = action.meld
    if target.meld.kind is MeldKind.PAIR:
        if len(cards) != 2:
            raise _illegal("F-50", "a pair opener's area takes a whole pair")
        pair = pair_meld(cards[0].card, cards[1].card, rules)
        if pair.cards[0].stands_for != target.meld.cards[0].stands_for:
            raise _illegal("F-50", "only a pair identical to one in the area is laid off there")
        at = len(table)
        table.append(TableMeld(target.owner, pair, align(pair, cards)))
    else:
        if len(cards) != 1:
            raise _illegal("F-50", "one card at a time is laid off on a run or set")
        meld = lay_off(
            target.meld, cards[0].card, rules, stands_for=action.stands_for, at_end=action.at_end
        )
        if meld.jokers > target.meld.jokers and not joker_may_go(state, seat, target):
            raise _illegal(
                "F-13",
                "a meld laid down in the opening turn keeps its joker limit to the turn's end",
            )
        table[action.meld] = TableMeld(target.owner, meld, align(meld, [*target.cards, cards[0]]))
    turn = state.turn
    turn = evolve(
        turn,
        laid_off_others=turn.laid_off_others or target.owner != seat,
        took_used=turn.took_used or (turn.took in cards and turn.took_rule == "F-33"),
        jokers=tuple(j for j in turn.jokers if j not in cards),
    )
    new = evolve(
        state, seats=_set_seat(state, seat, evolve(own, hand=rest)), table=tuple(table), turn=turn
    )
    _check_obligations(new, seat)
    return new, [LaidOff(seat, action.meld, tuple(cards), at, new.table[at])]


def _retrieve(state: State, action: RetrieveJoker) -> tuple[State, list[Event]]:
    _need_phase(state, Phase.PLAY)
    rules = state.rules
    seat = action.seat
    own = state.seats[seat]
    if not 0 <= action.meld < len(state.table):
        raise _illegal("F-55", f"there is no meld {action.meld} on the table")
    target = state.table[action.meld]
    rest = _remove(own.hand, [action.card])
    meld, joker_face = retrieve_joker(target.meld, action.card.card, rules)
    joker = next(c for c in target.cards if c.card == joker_face)
    cards = [c for c in target.cards if c != joker] + [action.card]
    table = list(state.table)
    table[action.meld] = TableMeld(target.owner, meld, align(meld, cards))
    hand = tuple(sorted((*rest, joker)))
    turn = state.turn
    must_open = turn.must_open or not own.opened
    new = evolve(
        state,
        seats=_set_seat(state, seat, evolve(own, hand=hand)),
        table=tuple(table),
        turn=evolve(turn, must_open=must_open, jokers=(*turn.jokers, joker)),
    )
    # F-55: an unopened seat retrieves only while opening this turn.
    if not own.opened and not _can_open_now(new, seat, _faces(hand), None):
        raise _illegal("F-55", "an unopened seat retrieves a joker only while opening")
    if rules.retrieved_joker_must_be_used:
        _check_obligations(new, seat)
    else:
        new = evolve(new, turn=evolve(new.turn, jokers=turn.jokers))
    return new, [RetrievedJoker(seat, action.meld, action.card, joker, table[action.meld])]


def _discardable(state: State, seat: int, islek: frozenset[int]) -> list[PhysicalCard]:
    """F-61 classic: the cards a seat may discard without the twin exception (F-36: never
    the discard it took this turn)."""
    own = state.seats[seat]
    took = state.turn.took
    return [c for c in own.hand if c != took and c not in own.locked and c.face_index not in islek]


def _islek_locked(state: State, action: Discard, islek: frozenset[int]) -> tuple[PhysicalCard, ...]:
    """F-61 classic: the seat's shown twins after discarding an işlek (or shown) card, which
    needs a twin shown with it unless the seat has nothing else to discard."""
    card = action.card
    own = state.seats[action.seat]
    locked = own.locked
    twin = action.twin
    if twin is None:
        if _discardable(state, action.seat, islek):
            # A seat whose every card is işlek or shown may discard any of them (F-61 reading).
            raise _illegal(
                "F-61", f"{card.code} is işlek (or a shown twin) and may not be discarded"
            )
        return locked
    if (
        twin == card
        or twin not in own.hand
        or twin.card != card.card
        or own.opened
        or card in locked
    ):
        raise _illegal("F-61", "an unopened seat shows an identical işlek card to discard one")
    return (*locked, twin)


def _check_turn_done(state: State, action: Discard) -> None:
    """C-4, F-36, F-30/F-33, F-55: the card is in hand and the turn's duties are done."""
    _need_phase(state, Phase.PLAY)
    own = state.seats[action.seat]
    turn = state.turn
    card = action.card
    if card not in own.hand:
        raise _illegal("C-4", f"{card.code} is not in the hand")
    if card == turn.took:
        raise _illegal("F-36", f"{card.code} was taken from the discard pile this turn")
    if turn.took is not None and turn.took_rule in ("F-30", "F-33") and not turn.took_used:
        raise _illegal(turn.took_rule, f"the taken {turn.took.code} must be used this turn")
    if turn.must_open and not own.opened:
        raise _illegal(turn.took_rule or "F-55", "this seat must open before discarding")
    if turn.jokers:
        raise _illegal("F-55", "the retrieved joker must be laid down or laid off first")


def _discard(state: State, action: Discard) -> tuple[State, list[Event]]:
    _check_turn_done(state, action)
    rules = state.rules
    seat = action.seat
    own = state.seats[seat]
    turn = state.turn
    card = action.card
    finishing = len(own.hand) == 1
    islek_set = islek_faces(state.table, rules)
    is_islek = not finishing and card.face_index in islek_set
    penalty = 0
    locked = own.locked
    free_used = own.free_islek_used
    if action.twin is not None and not (is_islek and rules.islek is IslekRule.ILLEGAL):
        raise _illegal("F-61", "a twin is shown only to discard an işlek card in classic")
    if rules.islek is IslekRule.ILLEGAL and not finishing and (is_islek or card in locked):
        locked = _islek_locked(state, action, islek_set)
    elif rules.islek is IslekRule.PENALTY and is_islek:
        if own.pair_status and free_used < rules.islek_free_in_pair_status:
            free_used += 1
        else:
            penalty = rules.islek_penalty
    rest = tuple(c for c in own.hand if c != card)
    own = evolve(
        own,
        hand=rest,
        locked=tuple(c for c in locked if c != card),
        islek_penalty=own.islek_penalty + penalty,
        free_islek_used=free_used,
    )
    seats = _set_seat(state, seat, own)
    discard = (*state.discard, card)
    events: list[Event] = [Discarded(seat, card, is_islek, penalty, action.twin, finishing)]
    if finishing:
        by_hand = turn.opened_now and not (
            rules.hand_finish_forbids_layoff and turn.laid_off_others
        )
        finish = Finish(by_hand=by_hand, joker=card.card.is_joker, pairs=own.opened_with_pairs)
        new = evolve(state, seats=seats, discard=discard, last_discarder=seat)
        ended, more = _end_hand(new, seat, finish, scored=True)
        return ended, events + more
    return _next_turn(state, events, seats, discard=discard, last_discarder=seat)


def _next_turn(
    state: State, events: list[Event], seats: tuple[SeatState, ...] | None = None, **changes: Any
) -> tuple[State, list[Event]]:
    """Pass the turn to the next seat, applying ``seats`` and ``changes`` in the same copy.

    F-64: when ``stall_rounds`` full rounds have passed without a card drawn from the stock,
    the hand ends instead, as F-63 ends it.
    """
    seats = seats if seats is not None else state.seats
    stalled = 0 if _drew_from_stock(state.turn) else state.turns_without_draw + 1
    if stalled >= state.rules.stall_rounds * sum(state.active):
        ended = evolve(state, seats=seats, turns_without_draw=stalled, **changes)
        more = _no_finisher(ended, HandEndReason.STALLED)
        return more[0], events + more[1]
    seat = next_seat(state, state.turn.seat)
    own = seats[seat]
    seats = (*seats[:seat], evolve(own, turns=own.turns + 1), *seats[seat + 1 :])
    new = evolve(
        state,
        seats=seats,
        turn=Turn(seat, state.turn.number + 1),
        phase=Phase.DRAW,
        turns_without_draw=stalled,
        **changes,
    )
    return new, events


def _drew_from_stock(turn: Turn) -> bool:
    """F-64: whether the turn took its card from the stock (a draw, or the claimed bottom
    card): every turn but the starter's first (F-20) takes a card, and only a discard taken
    is not the stock's."""
    return turn.number > 1 and turn.took is None


def _declare_pairs(state: State, action: DeclarePairs) -> tuple[State, list[Event]]:
    _need_phase(state, Phase.DRAW, Phase.PLAY, rule="F-70")
    own = state.seats[action.seat]
    if state.rules.pairs_to_open is None:
        raise _illegal("F-70", f"{state.rules.preset} has no pair openings")
    if own.opened or own.pair_status:
        raise _illegal("F-70", "only an unopened seat not yet in pair status goes pairs")
    new = evolve(state, seats=_set_seat(state, action.seat, evolve(own, pair_status=True)))
    # A seat that took the discard to open may not go pairs if it then could not open.
    _check_obligations(new, action.seat)
    return new, [DeclaredPairs(action.seat)]


def _show_pairs(state: State, action: ShowPairs) -> tuple[State, list[Event]]:
    _need_phase(state, Phase.DRAW, Phase.PLAY, rule="F-71")
    rules = state.rules
    own = state.seats[action.seat]
    if not rules.gosterge:
        raise _illegal("F-71", f"{rules.preset} has no gösterge")
    if own.opened or own.pair_status:
        raise _illegal("F-71", "gösterge is for an unopened seat not yet in pair status")
    if len(action.pairs) != rules.gosterge_pairs:
        raise _illegal("F-71", f"gösterge shows {rules.gosterge_pairs} pairs")
    cards = [c for pair in action.pairs for c in pair]
    _remove(own.hand, cards)
    for first, second in action.pairs:
        pair_meld(first.card, second.card, rules)
    new = evolve(
        state, seats=_set_seat(state, action.seat, evolve(own, pair_status=True, shown_pairs=True))
    )
    _check_obligations(new, action.seat)
    return new, [ShowedPairs(action.seat, action.pairs)]


def _claim_bottom(state: State, action: ClaimBottom) -> tuple[State, list[Event]]:
    _need_phase(state, Phase.DRAW, Phase.PLAY, rule="F-34")
    own = state.seats[action.seat]
    bottom = state.bottom_card
    if state.rules.bottom_card is not BottomCardRule.CLAIM_BY_PAIR_GOER:
        raise _illegal("F-34", f"{state.rules.preset} has no bottom-card claim")
    if bottom is None or not own.pair_status:
        raise _illegal("F-34", "a pair-goer claims the face-up bottom card while it is there")
    if any(s.bottom_claim is not None for s in state.seats):
        raise _illegal("F-34", "the bottom card is already claimed")
    if action.shown not in own.hand or action.shown.card != bottom.card:
        raise _illegal("F-34", f"the claim shows a card identical to {bottom.code}")
    new = evolve(
        state, seats=_set_seat(state, action.seat, evolve(own, bottom_claim=state.turn.number))
    )
    return new, [ClaimedBottom(action.seat, action.shown)]


# --------------------------------------------------------------------------- end of a hand


def _end_hand(
    state: State,
    finisher: int | None,
    finish: Finish,
    *,
    scored: bool,
    reason: HandEndReason = HandEndReason.OUT,
) -> tuple[State, list[Event]]:
    """F-60, F-63, F-90..F-97: score the hand, eliminate, then deal the next or end the game."""
    scores = hand_scores(state, finisher, finish) if scored else (0,) * state.players
    totals = tuple(t + s for t, s in zip(state.totals, scores, strict=True))
    hands_scored = state.hands_scored + (1 if scored else 0)
    scored_state = evolve(state, totals=totals, hands_scored=hands_scored)
    out = eliminated_now(scored_state, totals, hands_scored) if scored else ()
    active = tuple(a and i not in out for i, a in enumerate(state.active))
    eliminated = (*state.eliminated, out) if out else state.eliminated
    seats = state.seats
    events: list[Event] = [
        Revealed(state.hand_no, state.hand_seed, state.commitment),
        HandEnded(
            hand=state.hand_no,
            reason=reason,
            finisher=finisher,
            finish=finish,
            kafa=is_kafa(state, finisher),
            replayed=not scored,
            opened=tuple(s.opened for s in seats),
            opened_with_pairs=tuple(s.opened_with_pairs for s in seats),
            pair_status=tuple(s.pair_status for s in seats),
            islek_penalties=tuple(s.islek_penalty for s in seats),
            hands_left=tuple(s.hand for s in seats),
            scores=scores,
            totals=totals,
            eliminated=out,
            seed=state.hand_seed,
        ),
    ]
    new = evolve(scored_state, active=active, eliminated=eliminated)
    if _game_over(new):
        final = evolve(new, phase=Phase.OVER, query=None)
        places = ranking(final)
        final = evolve(final, ranking=places)
        events.append(GameEnded(totals, places))
        return final, events
    dealt, more = _deal(new, state.hand_no + 1, next_seat(new, state.dealer))
    return dealt, events + more


def _game_over(state: State) -> bool:
    rules = state.rules
    if rules.game_length is GameLength.HANDS:
        return state.hands_scored >= (state.hands_limit or rules.hands_per_game)
    limit = rules.elimination_max_hands
    if state.hands_limit is not None:
        limit = min(limit, state.hands_limit)
    if state.hands_scored >= limit:
        return True
    seats = [i for i, a in enumerate(state.active) if a]
    if state.teams:
        return len({i % 2 for i in seats}) <= 1
    return len(seats) <= 1


def _dispatch(state: State, action: Action) -> tuple[State, list[Event]]:  # noqa: C901, PLR0911 - one arm per action kind
    if isinstance(action, Draw):
        return _draw(state, action)
    if isinstance(action, TakeDiscard):
        return _take_discard(state, action)
    if isinstance(action, Discard):
        return _discard(state, action)
    if isinstance(action, LayDown):
        return _lay_down(state, action)
    if isinstance(action, LayOff):
        return _lay_off(state, action)
    if isinstance(action, RetrieveJoker):
        return _retrieve(state, action)
    if isinstance(action, TakeBottom):
        return _take_bottom(state, action)
    if isinstance(action, DeclarePairs):
        return _declare_pairs(state, action)
    if isinstance(action, ShowPairs):
        return _show_pairs(state, action)
    if isinstance(action, ClaimBottom):
        return _claim_bottom(state, action)
    return _answer(state, action)
