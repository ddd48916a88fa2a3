"""The Elevator engine: ``new_game``, ``legal_actions`` and ``apply`` (rules.md §3, E-1..E-11).

``apply`` is a pure function. It never mutates its input; an illegal action raises
:class:`~masa_rules.errors.IllegalAction` carrying the E-rule it breaks, and the caller still
holds the unchanged state.

Provable fairness (F-5): the hand seed is ``hand_seed(game_seed, hand_no)``. The
:class:`~masa_rules.elevator.events.Dealt` event publishes ``commitment(hand_seed)``; the
:class:`~masa_rules.elevator.events.HandEnded` event reveals the hand seed in hex. Anyone can
then check the commitment and recompute the deal with :mod:`masa_rules.elevator.deal`.

Multi-hand games (E-3) are kept simple: a game is one hand. A match of several hands calls
``new_game`` once per hand with ``hand_no`` counting up from 1 and ``leader`` set to the
previous winner; the first hand is led by seat 0, the seat after the dealer.

Termination (E-9, E-10). Every hand ends, and it ends with a seat that holds no cards, except
in the one case E-9 keeps: nobody has played since the starting card, the stock is empty and
nobody can play, when the hand is ranked by E-11 (``"blocked"``). With ``C`` cards in the pack
and ``p`` players:

- Cards never leave the pile and the stock is never refilled, so there are at most ``C`` plays
  (each puts at least one card on the pile for good), and while the stock holds cards at most
  ``C`` passes and Kopiles (each draws at least one card), with at most ``p - 2`` gives each.
- Take a stretch of actions between two plays during which the stock is empty, and let ``L``
  be the seat that made the last play. Within ``p - 1`` passes the turn comes back to ``L``
  with everyone else passing, so Kopile applies (E-9: it repeats, even when ``L`` passed
  too); after it, ``L`` and the ``p - 1`` others pass again (a play ends the stretch) and
  Kopile applies again. Each round of ``p`` passes and ``p - 1`` gives takes one card from
  every opponent, and a giver who gives away their last card wins at once. So a stretch holds
  at most ``h`` rounds, ``h < C`` the smallest opponent hand: at most ``2p + C(2p - 1)``
  actions. There are at most ``C + 1`` such stretches.
- Before the first play with an empty stock, every pass is forced (E-8 allows a voluntary
  pass only after a play) and changes no hand and no pile: if nobody can play, the hand ends
  ``"blocked"`` at once; otherwise a seat that can play must, within ``p`` turns.

Hence a hand takes at most ``C + pC + (C + 1)(2p + C(2p - 1)) + p`` actions;
``tests/test_elevator_properties.py`` checks this bound against adversarial play, and the
termination test plays 2,000 games to a winner with no cards.
"""

from __future__ import annotations

from masa_rules.cards import PhysicalCard, Rank
from masa_rules.elevator.actions import Action, Give, Pass, Play
from masa_rules.elevator.deal import deal
from masa_rules.elevator.events import Dealt, Event, Gave, HandEnded, Kopile, Passed, Played
from masa_rules.elevator.moves import RANK, can_play, direction_after, legal_plays, play_fault
from masa_rules.elevator.ranking import rank_seats, rank_sum
from masa_rules.elevator.rules import ElevatorRules
from masa_rules.elevator.state import MAX_TELLS, Direction, Phase, State, Tell
from masa_rules.errors import IllegalAction, RuleViolation
from masa_rules.frozen import evolve
from masa_rules.shuffle import Seed, hand_seed

__all__ = ["apply", "dealt", "legal_actions", "new_game"]


def new_game(
    rules: ElevatorRules, players: int, seed: Seed, *, hand_no: int = 1, leader: int = 0
) -> State:
    """Deal hand ``hand_no`` of the game with secret ``seed`` to ``players`` seats (E-1..E-3).

    >>> state = new_game(ElevatorRules(), 4, "doc")
    >>> [len(hand) for hand in state.hands], len(state.stock), state.turn
    ([7, 7, 7, 7], 25, 0)
    """
    rules.check_players(players)
    if hand_no < 1:
        raise RuleViolation("E-3", f"hands are numbered from 1, not {hand_no}")
    if not 0 <= leader < players:
        raise RuleViolation("E-3", f"the leader must be one of seats 0-{players - 1}")
    secret = hand_seed(seed, hand_no)
    cards = deal(rules, players, secret, leader)
    # E-2: an ace turned up starts the pile descending; anything else ascending.
    ace = RANK[cards.starter.face_index] == Rank.ACE
    return State(
        rules=rules,
        players=players,
        hand_no=hand_no,
        leader=leader,
        decks=rules.pack_count(players),
        seed=secret,
        hands=cards.hands,
        stock=cards.stock,
        pile=(cards.starter,),
        direction=Direction.DESCENDING if ace else Direction.ASCENDING,
        phase=Phase.PLAY,
        turn=leader,
        open_play=None,
        # E-8 (decision): the starting card is not a play, so the leader must play if able.
        after_play=False,
        forced_turns=0,
        receiver=None,
        givers=(),
        winner=None,
        ranking=(),
        end_reason=None,
        action_count=0,
    )


def dealt(state: State) -> Dealt:
    """The deal of ``state``'s hand, recomputed from its seed (the first event of a hand).

    Only meaningful for states that come from :func:`new_game`, not from ``position``.
    """
    cards = deal(state.rules, state.players, state.seed, state.leader)
    ace = RANK[cards.starter.face_index] == Rank.ACE
    return Dealt(
        hand_no=state.hand_no,
        players=state.players,
        decks=state.decks,
        leader=state.leader,
        commitment=state.commitment,
        hands=cards.hands,
        buried=cards.buried,
        starter=cards.starter,
        direction=Direction.DESCENDING if ace else Direction.ASCENDING,
        stock_count=len(cards.stock),
    )


def may_pass_voluntarily(state: State) -> bool:
    """E-8: only right after a play; E-9 (decision): never in the round after a Kopile."""
    return state.after_play and state.forced_turns == 0


def legal_actions(state: State, seat: int) -> list[Action]:
    """Every action ``seat`` may take now; empty when it is not that seat's move."""
    if state.phase is Phase.OVER or seat != state.turn:
        return []
    hand = state.hands[seat]
    if state.phase is Phase.GIVE:
        return [Give(seat, card) for card in hand]
    plays = legal_plays(
        hand, state.pile[-1], state.direction, state.rules.joker_on_joker_any_colour
    )
    actions: list[Action] = [Play(seat, cards) for cards in plays]
    if not plays or may_pass_voluntarily(state):
        actions.append(Pass(seat))
    return actions


def apply(state: State, action: Action) -> tuple[State, list[Event]]:
    """Apply ``action`` to ``state``; return the new state and what happened."""
    if state.phase is Phase.OVER:
        raise IllegalAction("E-11", "the hand is over")
    if isinstance(action, Give):
        return _give(state, action)
    if state.phase is Phase.GIVE:
        raise IllegalAction(
            "E-9", f"seat {state.turn} must first give seat {state.receiver} a card (Kopile)"
        )
    if action.seat != state.turn:
        raise IllegalAction("E-3", f"it is seat {state.turn}'s turn, not seat {action.seat}'s")
    if isinstance(action, Play):
        return _play(state, action)
    return _pass(state, action)


def _play(state: State, action: Play) -> tuple[State, list[Event]]:
    seat, cards = action.seat, action.cards
    hand = state.hands[seat]
    fault = play_fault(
        cards, hand, state.pile[-1], state.direction, state.rules.joker_on_joker_any_colour
    )
    if fault is not None:
        raise IllegalAction(*fault)
    left = tuple(card for card in hand if card not in cards)
    direction = direction_after(cards, state.direction)
    events: list[Event] = [Played(seat, cards, direction)]
    after = evolve(
        state,
        hands=_with_hand(state.hands, seat, left),
        pile=state.pile + cards,
        direction=direction,
        turn=(seat + 1) % state.players,
        open_play=seat,
        after_play=True,
        forced_turns=max(0, state.forced_turns - 1),
        action_count=state.action_count + 1,
        tells=_told(
            state,
            seat,
            spent=len(cards),
            tell=Tell(
                state.pile[-1],
                state.direction,
                may_pass_voluntarily(state),
                cards,
                len(hand),
                len(left),
            ),
        ),
    )
    if not left:
        return _finish(after, seat, "out", events)
    return after, events


def _pass(state: State, action: Pass) -> tuple[State, list[Event]]:
    seat = action.seat
    hand = state.hands[seat]
    able = can_play(hand, state.pile[-1], state.direction, state.rules.joker_on_joker_any_colour)
    if able and not may_pass_voluntarily(state):
        if state.forced_turns:
            raise IllegalAction("E-9", "in the round after a Kopile every player must play if able")
        raise IllegalAction("E-8", "the previous player did not play, so you must play if able")
    # E-8, E-10: draw one card if the stock has any; it cannot be played this turn.
    drew = state.stock[0] if state.stock else None
    hands = state.hands if drew is None else _with_hand(state.hands, seat, (*hand, drew))
    following = (seat + 1) % state.players
    events: list[Event] = [Passed(seat, able, drew)]
    after = evolve(
        state,
        hands=hands,
        stock=state.stock[1:],
        turn=following,
        after_play=False,
        forced_turns=max(0, state.forced_turns - 1),
        action_count=state.action_count + 1,
        tells=_told(
            state,
            seat,
            took=drew is not None,
            # A pass is public as voluntary or not (the Passed event says so): one that was not
            # says that none of the seat's cards could go on the top.
            tell=Tell(
                state.pile[-1], state.direction, able, (), len(hand), len(hand), exact=drew is None
            ),
        ),
    )
    # E-9: Kopile whenever the turn comes back to the seat that made the last play, everyone
    # else having passed since; it repeats, even when that seat passed too.
    if state.open_play == following:
        return _kopile(after, following, events)
    return _end_if_blocked(after, events)


def _kopile(state: State, seat: int, events: list[Event]) -> tuple[State, list[Event]]:
    """E-9: everyone passed on ``seat``'s play; it draws one card per opponent, or is given them."""
    owed = state.players - 1
    drew = state.stock[:owed]
    givers = tuple((seat + k) % state.players for k in range(1, owed - len(drew) + 1))
    events.append(Kopile(seat, drew, givers))
    after = evolve(
        state,
        hands=_with_hand(state.hands, seat, state.hands[seat] + drew),
        stock=state.stock[owed:],
        phase=Phase.GIVE if givers else Phase.PLAY,
        turn=givers[0] if givers else seat,
        after_play=False,
        forced_turns=state.players if state.rules.kopile_forces_round else 0,
        receiver=seat if givers else None,
        givers=givers,
        tells=_told(state, seat, took=True),
    )
    return after, events


def _give(state: State, action: Give) -> tuple[State, list[Event]]:
    if state.phase is not Phase.GIVE or state.receiver is None:
        raise IllegalAction("E-9", "nobody is owed a card now")
    seat, card = action.seat, action.card
    if seat != state.turn:
        raise IllegalAction("E-9", f"seat {state.turn} gives next, not seat {seat}")
    hand = state.hands[seat]
    if card not in hand:
        raise IllegalAction("C-4", f"{card.code} is not in your hand")
    receiver = state.receiver
    left = tuple(held for held in hand if held != card)
    hands = _with_hand(state.hands, seat, left)
    hands = _with_hand(hands, receiver, (*hands[receiver], card))
    events: list[Event] = [Gave(seat, receiver, card)]
    givers = state.givers[1:]
    after = evolve(
        state,
        hands=hands,
        phase=Phase.GIVE if givers else Phase.PLAY,
        turn=givers[0] if givers else receiver,
        receiver=receiver if givers else None,
        givers=givers,
        action_count=state.action_count + 1,
        tells=_told(state, seat, spent=1, took=True),
    )
    if not left:
        # E-9: a giver who gives away their last card wins at once.
        return _finish(after, seat, "out", events)
    return after, events


def _end_if_blocked(state: State, events: list[Event]) -> tuple[State, list[Event]]:
    """E-9: nobody has played since the starting card, the stock is empty and nobody can
    play: no pass can change that, so the hand ends and is ranked by E-11."""
    if state.stock or state.open_play is not None:
        return state, events
    top, direction = state.pile[-1], state.direction
    joker_any = state.rules.joker_on_joker_any_colour
    if any(can_play(hand, top, direction, joker_any) for hand in state.hands):
        return state, events
    return _finish(state, state.turn, "blocked", events)


def _finish(
    state: State, actor: int, reason: str, events: list[Event]
) -> tuple[State, list[Event]]:
    """E-11: rank the seats, reveal the seed (F-5) and close the hand."""
    ranking = rank_seats(state.hands, state.rules.rank_by_sum)
    if reason == "out":
        winner: int | None = actor
    else:
        winner = ranking[0][0] if len(ranking[0]) == 1 else None
    events.append(
        HandEnded(
            reason=reason,
            winner=winner,
            ranking=ranking,
            cards_left=tuple(len(hand) for hand in state.hands),
            rank_sums=tuple(rank_sum(hand) for hand in state.hands),
            seed=state.seed.hex(),
        )
    )
    after = evolve(
        state,
        phase=Phase.OVER,
        turn=actor,
        receiver=None,
        givers=(),
        winner=winner,
        ranking=ranking,
        end_reason=reason,
    )
    return after, events


def _told(
    state: State, seat: int, *, spent: int = 0, took: bool = False, tell: Tell | None = None
) -> tuple[tuple[Tell, ...], ...]:
    """``state.tells`` after ``seat`` played or gave ``spent`` cards (which may have been any
    of its own), took or gave cards (``took``: its hand then can no longer be rebuilt from its
    plays), and made the move ``tell``; tells that no longer say anything are dropped."""
    tells = list(state.tells) or [()] * state.players
    kept = [
        Tell(t.top, t.direction, t.may_pass, t.played, t.hand, t.held - spent, t.exact and not took)
        for t in tells[seat]
        if t.held > spent
    ]
    if tell is not None and tell.held > 0:
        kept.append(tell)
    tells[seat] = tuple(kept[-MAX_TELLS:])
    return tuple(tells)


def _with_hand(
    hands: tuple[tuple[PhysicalCard, ...], ...], seat: int, hand: tuple[PhysicalCard, ...]
) -> tuple[tuple[PhysicalCard, ...], ...]:
    """``hands`` with ``seat``'s hand replaced."""
    return (*hands[:seat], hand, *hands[seat + 1 :])
