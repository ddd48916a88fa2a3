"""Elevator (rules.md §3) between ``masa_rules.elevator`` and ``masa.table.v1``.

Hidden information (P-20) is decided here and nowhere else: every event is converted *for a
viewer*, a seat number or ``None`` for a spectator, and carries only what that viewer may know,
exactly what :func:`masa_rules.elevator.view` would show it:

- the deal lists only the viewer's own hand (the others see card counts);
- a pass shows the drawn card, and a Kopile the cards drawn from the stock, to the drawer only;
- a given card is seen by the giver and the receiver only;
- at the end of the hand a seat sees its own remaining cards only; the seed is revealed (F-5).

``LOG`` is the viewer of the internal table log, which records every hidden field an event
can carry (the deal itself is recomputed from the seed, which the log also holds).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from itertools import pairwise
from typing import Final

from masa.bot.v1 import bot_pb2
from masa.table.v1 import action_pb2, event_pb2, view_pb2
from masa_rules.cards import PhysicalCard
from masa_rules.elevator import (
    Action,
    Dealt,
    Direction,
    ElevatorRules,
    Event,
    Gave,
    Give,
    HandEnded,
    Kopile,
    Pass,
    Passed,
    Phase,
    Play,
    Played,
    State,
    new_game,
)
from masa_rules.elevator.engine import may_pass_voluntarily
from masa_rules.elevator.moves import RANK, RED, is_joker
from masa_rules.elevator.observe import deal_unseen
from masa_rules.elevator.state import MAX_TELLS, Tell
from masa_rules.errors import RuleViolation

from masa_wire.cards import card_from_proto, card_to_proto, cards_from_proto, cards_to_proto
from masa_wire.errors import WireError

__all__ = [
    "LOG",
    "SHUFFLE_ALGORITHM",
    "Viewer",
    "action_from_proto",
    "action_to_proto",
    "event_to_proto",
    "events_to_proto",
    "fill_table_view",
    "hand_places",
    "observe",
    "seat_view",
    "state_from_observation",
    "state_from_seat_view",
]

# The viewer of the internal log: sees every hidden field (see the module docstring).
LOG: Final = -1
Viewer = int | None
SHUFFLE_ALGORITHM: Final = "masa-hmac-sha256-fisher-yates/1"

_DIRECTION: Final = {
    Direction.ASCENDING: view_pb2.DIRECTION_ASCENDING,
    Direction.DESCENDING: view_pb2.DIRECTION_DESCENDING,
}
_DIRECTION_BACK: Final = {value: key for key, value in _DIRECTION.items()}
# E-5: the longest play, every card of one rank of two packs.
_LONGEST_PLAY: Final = 8


# --- actions -------------------------------------------------------------------------------


def action_to_proto(action: Action) -> action_pb2.Action:
    if isinstance(action, Play):
        return action_pb2.Action(play=action_pb2.Play(cards=cards_to_proto(action.cards)))
    if isinstance(action, Pass):
        return action_pb2.Action(pass_turn=action_pb2.Pass())
    return action_pb2.Action(give_card=action_pb2.GiveCard(card=cards_to_proto([action.card])[0]))


def action_from_proto(
    message: action_pb2.Action, seat: int, hand: Sequence[PhysicalCard] | None = None
) -> Action:
    """The Elevator action ``seat`` submits; raises :class:`WireError` for anything else.

    With ``hand``, a card whose named copy the hand does not hold but whose other copy it does
    is read as that other copy: copies are equal for every rule (C-4), so a client need not
    track which deck a card came from.
    """
    kind = message.WhichOneof("kind")
    if kind == "play":
        if not message.play.cards:
            raise WireError("a play needs at least one card")
        cards = cards_from_proto(message.play.cards)
        return Play(seat, tuple(_held(card, hand) for card in cards))
    if kind == "pass_turn":
        return Pass(seat)
    if kind == "give_card":
        if not message.give_card.HasField("card"):
            raise WireError("give_card needs a card")
        return Give(seat, _held(card_from_proto(message.give_card.card), hand))
    if kind is None:
        raise WireError("the action is empty")
    raise WireError(f"{kind} is not an Elevator action")


def _held(card: PhysicalCard, hand: Sequence[PhysicalCard] | None) -> PhysicalCard:
    if hand is None or card in hand:
        return card
    for held in hand:
        if held.face_index == card.face_index:
            return held
    return card


# --- events --------------------------------------------------------------------------------


def events_to_proto(
    events: Sequence[Event], after: State, viewer: Viewer
) -> list[event_pb2.TableEvent]:
    """The events of one ``apply`` (or of the deal), which led to ``after``, for ``viewer``."""
    converted: list[event_pb2.TableEvent] = []
    for index, event in enumerate(events):
        # A pass that triggers a Kopile reports the stock before the Kopile's own draws.
        later_draws = sum(len(e.drew) for e in events[index + 1 :] if isinstance(e, Kopile))
        converted.append(event_to_proto(event, after, viewer, stock_before=later_draws))
    return converted


def event_to_proto(
    event: Event, after: State, viewer: Viewer, *, stock_before: int = 0
) -> event_pb2.TableEvent:
    """One event for ``viewer``; ``after`` is the state once the whole action was applied."""
    if isinstance(event, Dealt):
        return event_pb2.TableEvent(hand_dealt=_dealt(event, viewer))
    if isinstance(event, Played):
        return event_pb2.TableEvent(
            played=event_pb2.Played(
                seat=event.seat,
                cards=cards_to_proto(event.cards),
                direction=_DIRECTION[event.direction],
                free_play=is_joker(event.cards[-1]),
                cards_left=len(after.hands[event.seat]),
            )
        )
    if isinstance(event, Passed):
        passed = event_pb2.Passed(
            seat=event.seat,
            drew=event.drew is not None,
            stock_count=len(after.stock) + stock_before,
            voluntary=event.voluntary,
        )
        if event.drew is not None and _sees(viewer, event.seat):
            passed.drawn.CopyFrom(cards_to_proto([event.drew])[0])
        return event_pb2.TableEvent(passed=passed)
    if isinstance(event, Kopile):
        return event_pb2.TableEvent(
            kopile_started=event_pb2.KopileStarted(
                seat=event.seat,
                owed=after.players - 1,
                drawn_from_stock=len(event.drew),
                drawn=cards_to_proto(event.drew) if _sees(viewer, event.seat) else [],
                givers=list(event.givers),
            )
        )
    if isinstance(event, Gave):
        given = event_pb2.CardGiven(
            from_seat=event.seat,
            to_seat=event.to,
            giver_won=after.winner == event.seat and not after.hands[event.seat],
        )
        if _sees(viewer, event.seat) or _sees(viewer, event.to):
            given.card.CopyFrom(cards_to_proto([event.card])[0])
        return event_pb2.TableEvent(card_given=given)
    return event_pb2.TableEvent(hand_finished=_hand_finished(event, after, viewer))


def _sees(viewer: Viewer, seat: int) -> bool:
    return viewer in (LOG, seat)


def _dealt(event: Dealt, viewer: Viewer) -> event_pb2.HandDealt:
    own = cards_to_proto(event.hands[viewer]) if viewer is not None and viewer >= 0 else []
    return event_pb2.HandDealt(
        hand_no=event.hand_no,
        # E-3: the first hand is led by the seat after the dealer.
        dealer_seat=(event.leader - 1) % event.players,
        starter_seat=event.leader,
        seed_commitment=bytes.fromhex(event.commitment),
        hand=own,
        card_counts=[len(hand) for hand in event.hands],
        stock_count=event.stock_count,
        pile_start=cards_to_proto([event.starter])[0],
        direction=_DIRECTION[event.direction],
        buried_jokers=cards_to_proto(event.buried),
    )


def hand_places(ranking: Sequence[Sequence[int]]) -> dict[int, int]:
    """Seat -> place from a ranking of tied groups: ties share a place, the next skips (1, 1, 3)."""
    places: dict[int, int] = {}
    for group in ranking:
        place = len(places) + 1
        for seat in group:
            places[seat] = place
    return places


def _hand_finished(event: HandEnded, after: State, viewer: Viewer) -> event_pb2.HandFinished:
    places = hand_places(event.ranking)
    scores = [
        event_pb2.HandScore(
            seat=seat,
            place=places[seat],
            # Elevator keeps no points; the cards left are the score that E-11 ranks by.
            score=event.cards_left[seat],
            total=event.cards_left[seat],
            remaining=cards_to_proto(after.hands[seat]) if _sees(viewer, seat) else [],
            rank_sum=event.rank_sums[seat],
        )
        for seat in range(after.players)
    ]
    finished = event_pb2.HandFinished(
        hand_no=after.hand_no,
        scores=scores,
        seed=bytes.fromhex(event.seed),
        shuffle_algorithm=SHUFFLE_ALGORITHM,
        end_reason=(
            event_pb2.HAND_END_REASON_OUT
            if event.reason == "out"
            else event_pb2.HAND_END_REASON_BLOCKED
        ),
    )
    if event.winner is not None:
        finished.finisher_seat = event.winner
    return finished


# --- views ---------------------------------------------------------------------------------


def fill_table_view(view: view_pb2.TableView, state: State) -> None:
    """Set the public Elevator fields of ``view`` (the table resource and seats stay the caller's).

    Seat card counts are set on the seats already present in ``view.seats``.
    """
    over = state.phase is Phase.OVER
    view.hand_no = state.hand_no
    view.dealer_seat = (state.leader - 1) % state.players
    if over:
        view.ClearField("turn_seat")
        view.turn_phase = view_pb2.TURN_PHASE_UNSPECIFIED
    else:
        view.turn_seat = state.turn
        view.turn_phase = (
            view_pb2.TURN_PHASE_GIVE if state.phase is Phase.GIVE else view_pb2.TURN_PHASE_PLAY
        )
    view.seed_commitment = bytes.fromhex(state.commitment)
    for seat_state in view.seats:
        if seat_state.seat < state.players:
            seat_state.card_count = len(state.hands[seat_state.seat])
    table = view_pb2.ElevatorTable(
        pile=cards_to_proto(state.pile),
        direction=_DIRECTION[state.direction],
        free_play=state.free,
        stock_count=len(state.stock),
        kopile_owed=len(state.givers),
        must_play=not over and not may_pass_voluntarily(state),
        after_play=state.after_play,
        forced_turns=state.forced_turns,
        voids=_voids_to_proto(state.tells),
    )
    if state.receiver is not None:
        table.kopile_seat = state.receiver
    if state.open_play is not None:
        table.last_play_seat = state.open_play
    view.elevator.CopyFrom(table)


def seat_view(table_view: view_pb2.TableView, state: State, seat: int) -> view_pb2.SeatView:
    """``seat``'s view: the public ``table_view`` (already filled) plus its own hand."""
    return view_pb2.SeatView(
        table=table_view, seat=seat, hand=cards_to_proto(sorted(state.hands[seat]))
    )


def _decks(table: view_pb2.TableView, seen: Sequence[PhysicalCard]) -> int | None:
    """The table's packs: its option, else two if a second copy of a card was seen."""
    options = table.table.config.options
    if options.HasField("elevator") and options.elevator.HasField("decks"):
        return options.elevator.decks
    return 2 if any(card.copy for card in seen) else None


def _voids_to_proto(tells: Sequence[Sequence[Tell]]) -> list[view_pb2.ElevatorVoid]:
    """E-8: each seat's latest forced pass that still tells of its hand (tells in full go to
    a bot's observation only: :func:`observe`)."""
    voids: list[view_pb2.ElevatorVoid] = []
    for seat, told in enumerate(tells):
        forced = next((t for t in reversed(told) if not t.may_pass and not t.played), None)
        if forced is not None:
            voids.append(
                view_pb2.ElevatorVoid(
                    seat=seat,
                    top=card_to_proto(forced.top),
                    direction=_DIRECTION[forced.direction],
                    held=forced.held,
                )
            )
    return voids


def _voids_from_proto(game: view_pb2.ElevatorTable, players: int) -> tuple[tuple[Tell, ...], ...]:
    """E-8: the voids the view lists, one per seat at most, as forced passes."""
    if not game.voids:
        return ()
    tells: list[tuple[Tell, ...]] = [()] * players
    for void in game.voids:
        direction = _DIRECTION_BACK.get(void.direction)
        if not 0 <= void.seat < players or tells[void.seat] or direction is None or not void.held:
            raise WireError("a void names a seat, a top card, a direction and what it held", "E-8")
        top = card_from_proto(void.top)
        tells[void.seat] = (Tell(top, direction, False, (), void.held, void.held, exact=False),)
    return tuple(tells)


def observe(observation: bot_pb2.Observation, state: State) -> None:
    """Add to a bot's ``observation`` every seat's tells (public: what everyone saw)."""
    observation.elevator_tells.extend(
        view_pb2.ElevatorTell(
            seat=seat,
            top=card_to_proto(tell.top),
            direction=_DIRECTION[tell.direction],
            may_pass=tell.may_pass,
            played=cards_to_proto(tell.played),
            hand=tell.hand,
            held=tell.held,
            exact=tell.exact,
        )
        for seat, told in enumerate(state.tells)
        for tell in told
    )


def state_from_observation(observation: bot_pb2.Observation) -> State:
    """:func:`state_from_seat_view` of the observation's view, with the observation's tells
    (when it has any) in place of the view's voids."""
    state = state_from_seat_view(observation.view)
    if not observation.elevator_tells:
        return state
    return replace(state, tells=_tells_from_proto(observation.elevator_tells, state))


def _tells_from_proto(
    messages: Sequence[view_pb2.ElevatorTell], state: State
) -> tuple[tuple[Tell, ...], ...]:
    """The tells of :func:`observe`, each checked against the state the view gave: a seat in
    it, at most ``MAX_TELLS`` a seat, no more cards held than the seat holds now, and cards
    played that are on the pile, each in one tell only, and make a play (E-5, E-7): what a
    search reads of them then costs no more than a real hand's tells do."""
    tells: list[list[Tell]] = [[] for _ in range(state.players)]
    on_pile = set(state.pile)
    played_before: set[PhysicalCard] = set()
    for message in messages:
        direction = _DIRECTION_BACK.get(message.direction)
        if not 0 <= message.seat < state.players or direction is None:
            raise WireError("a tell names a seat and a direction", "P-20")
        played = cards_from_proto(message.played)
        own = tells[message.seat]
        if (
            len(own) >= MAX_TELLS
            or len(played) > _LONGEST_PLAY
            or not 0 < message.held <= message.hand
            or message.held > len(state.hands[message.seat])
            or not on_pile.issuperset(played)
            or not played_before.isdisjoint(played)
            or len(set(played)) != len(played)
            or not _a_play(played)
        ):
            raise WireError(
                f"a tell of seat {message.seat} does not fit the view: at most {MAX_TELLS} a "
                "seat, 0 < held <= its hand, and cards played from the pile, once, as a play",
                "P-20",
            )
        played_before.update(played)
        own.append(
            Tell(
                card_from_proto(message.top),
                direction,
                message.may_pass,
                played,
                message.hand,
                message.held,
                message.exact,
            )
        )
    return tuple(tuple(own) for own in tells)


def _a_play(cards: Sequence[PhysicalCard]) -> bool:
    """Whether ``cards`` could be one play: none (a pass), a joker alone, or cards of one rank
    with colours alternating (E-5, E-7)."""
    if len(cards) <= 1:
        return True
    faces = [card.face_index for card in cards]
    if any(is_joker(card) for card in cards) or len({RANK[face] for face in faces}) != 1:
        return False
    return all(RED[a] != RED[b] for a, b in pairwise(faces))


def _givers(
    game: view_pb2.ElevatorTable, phase: Phase, turn: int, receiver: int | None, players: int
) -> tuple[int, ...]:
    """E-9: the seats still to give a Kopile card, the one on turn first."""
    if phase is not Phase.GIVE:
        return ()
    if receiver is None or not 0 < game.kopile_owed < players or not 0 <= turn < players:
        raise WireError("a view of a Kopile needs its receiver and the cards owed", "E-9")
    return tuple((turn + k) % players for k in range(game.kopile_owed))


def state_from_seat_view(message: view_pb2.SeatView) -> State:
    """A state equivalent to the real one for every decision of ``message.seat``.

    Only what the seat may know is in it: its own hand, the pile, the direction, the turn and
    how many cards every seat and the stock hold. The cards it has not seen are dealt to the
    other hands and the stock in pack order (``masa_rules.elevator.observe.deal_unseen``): a
    determinisation that a search samples anew and no other policy reads. ``after_play``
    and ``forced_turns`` are the view's (E-8, E-9); the seats still to give a Kopile card are
    the ``kopile_owed`` seats from the one on turn. A view whose card counts do not add up to
    the pack is refused (P-20).
    """
    table = message.table
    if table.WhichOneof("game") != "elevator":
        raise WireError("the view is not of an Elevator table")
    game = table.elevator
    players = len(table.seats)
    if not game.pile or not 0 <= message.seat < players:
        raise WireError("an Elevator view needs a pile and the viewing seat")
    direction = _DIRECTION_BACK.get(game.direction)
    if direction is None:
        raise WireError("an Elevator view needs a direction")
    hand = cards_from_proto(message.hand)
    pile = cards_from_proto(game.pile)
    phase = Phase.PLAY
    if table.turn_phase == view_pb2.TURN_PHASE_GIVE:
        phase = Phase.GIVE
    elif not table.HasField("turn_seat"):
        phase = Phase.OVER
    decks = _decks(table, (*pile, *hand))
    try:
        # A template state supplies the rules and the seed-derived fields a view never carries.
        template = new_game(
            ElevatorRules(decks=decks), players, "view", hand_no=max(1, table.hand_no)
        )
        sizes = [0] * players
        for seat_state in table.seats:
            if 0 <= seat_state.seat < players:
                sizes[seat_state.seat] = seat_state.card_count
        sizes[message.seat] = len(hand)
        hands, stock = deal_unseen(
            message.seat, hand, pile, sizes, game.stock_count, template.decks
        )
    except RuleViolation as refused:
        raise WireError(refused.message, refused.rule) from None
    turn = table.turn_seat if table.HasField("turn_seat") else message.seat
    receiver = game.kopile_seat if game.HasField("kopile_seat") else None
    givers = _givers(game, phase, turn, receiver, players)
    return replace(
        template,
        hands=hands,
        stock=stock,
        pile=pile,
        direction=direction,
        phase=phase,
        turn=turn,
        open_play=game.last_play_seat if game.HasField("last_play_seat") else None,
        after_play=game.after_play,
        forced_turns=game.forced_turns,
        receiver=receiver,
        givers=givers,
        tells=_voids_from_proto(game, players),
    )
