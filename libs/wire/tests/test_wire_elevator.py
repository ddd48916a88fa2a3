"""Elevator over the wire: actions round trip, events hide other seats' cards (P-20), and a
seat view rebuilds a state with the same legal actions as the real one."""

from __future__ import annotations

import hashlib

import pytest
from masa.table.v1 import action_pb2, event_pb2, view_pb2
from masa_rules.cards import PhysicalCard
from masa_rules.elevator import (
    ElevatorRules,
    Event,
    Give,
    Pass,
    Play,
    State,
    apply,
    dealt,
    legal_actions,
    new_game,
)
from masa_rules.elevator.policies import random_policy
from masa_rules.shuffle import DrawStream
from masa_wire import WireError
from masa_wire.cards import card_to_proto
from masa_wire.elevator import (
    LOG,
    action_from_proto,
    action_to_proto,
    events_to_proto,
    fill_table_view,
    hand_places,
    seat_view,
    state_from_seat_view,
)


def _games(players: int, seeds: int) -> list[list[tuple[State, list[Event]]]]:
    """Whole random games as (state after, events) per step, the deal first."""
    games = []
    for number in range(seeds):
        rng = DrawStream(hashlib.sha256(f"wire{number}".encode()).digest())
        state = new_game(ElevatorRules(), players, f"wire-{number}")
        steps: list[tuple[State, list[Event]]] = [(state, [dealt(state)])]
        while not state.is_over:
            action = random_policy(state, state.turn, rng)
            state, events = apply(state, action)
            steps.append((state, list(events)))
        games.append(steps)
    return games


def _view(state: State, seat: int) -> view_pb2.SeatView:
    table = view_pb2.TableView(seats=[view_pb2.SeatState(seat=s) for s in range(state.players)])
    fill_table_view(table, state)
    return seat_view(table, state, seat)


def test_every_action_round_trips() -> None:
    card = PhysicalCard.parse("8H#1")
    for action in (Play(2, (card, PhysicalCard.parse("8S"))), Pass(2), Give(2, card)):
        assert action_from_proto(action_to_proto(action), 2) == action


def test_a_named_copy_the_hand_lacks_is_read_as_the_copy_it_holds() -> None:
    message = action_pb2.Action(
        play=action_pb2.Play(cards=[card_to_proto(PhysicalCard.parse("8H"))])
    )
    action = action_from_proto(message, 0, hand=(PhysicalCard.parse("8H#1"),))
    assert action == Play(0, (PhysicalCard.parse("8H#1"),))


@pytest.mark.parametrize(
    "message",
    [
        action_pb2.Action(),
        action_pb2.Action(play=action_pb2.Play()),
        action_pb2.Action(give_card=action_pb2.GiveCard()),
        action_pb2.Action(draw_from_stock=action_pb2.DrawFromStock()),
    ],
)
def test_garbage_actions_are_wire_errors(message: action_pb2.Action) -> None:
    with pytest.raises(WireError):
        action_from_proto(message, 0)


def test_no_seat_and_no_spectator_ever_receives_another_seats_hidden_cards() -> None:
    """P-20: hidden cards (deal, draws, gives, remaining) reach only their owner."""
    for steps in _games(4, 12):
        for viewer in (None, 0, 1, 2, 3):
            for state, events in steps:
                for event in events_to_proto(events, state, viewer):
                    _assert_hidden_from(event, viewer)


def _assert_hidden_from(event: event_pb2.TableEvent, viewer: int | None) -> None:
    kind = event.WhichOneof("kind")
    if kind == "hand_dealt":
        assert (len(event.hand_dealt.hand) > 0) == (viewer is not None)
    elif kind == "passed" and event.passed.HasField("drawn"):
        assert event.passed.seat == viewer
    elif kind == "kopile_started" and event.kopile_started.drawn:
        assert event.kopile_started.seat == viewer
    elif kind == "card_given" and event.card_given.HasField("card"):
        assert viewer in (event.card_given.from_seat, event.card_given.to_seat)
    elif kind == "hand_finished":
        for score in event.hand_finished.scores:
            assert not score.remaining or score.seat == viewer


def test_the_log_viewer_sees_every_draw() -> None:
    for steps in _games(3, 4):
        for state, events in steps:
            for event in events_to_proto(events, state, LOG):
                if event.WhichOneof("kind") == "passed" and event.passed.drew:
                    assert event.passed.HasField("drawn")


def test_P20_a_seat_view_rebuilds_the_legal_actions_every_public_part_and_the_counts() -> None:
    """The seat's legal actions, and what the hard search samples from: every public field
    of the real state (Kopile gives and forced-pass voids included, E-8, E-9), every seat's
    card count and the stock's, and the seat's own hand."""
    gives = voids = 0
    for steps in _games(4, 12) + _games(5, 6):
        for state, _ in steps:
            if state.is_over:
                continue
            seat = state.turn
            rebuilt = state_from_seat_view(_view(state, seat))
            assert set(legal_actions(rebuilt, seat)) == set(legal_actions(state, seat))
            public = ("turn", "phase", "receiver", "givers", "after_play", "forced_turns", "voids")
            assert [getattr(rebuilt, f) for f in public] == [getattr(state, f) for f in public]
            assert (rebuilt.open_play, rebuilt.pile, rebuilt.direction) == (
                state.open_play,
                state.pile,
                state.direction,
            )
            assert [len(hand) for hand in rebuilt.hands] == [len(hand) for hand in state.hands]
            assert len(rebuilt.stock) == len(state.stock)
            assert sorted(card.id for card in rebuilt.hands[seat]) == sorted(
                card.id for card in state.hands[seat]
            )
            gives += state.givers != ()
            voids += state.voids != ()
    assert gives > 0 and voids > 0


def test_the_hand_finished_event_ranks_ties_with_shared_places() -> None:
    assert hand_places([(1,), (0, 2), (3,)]) == {1: 1, 0: 2, 2: 2, 3: 4}
    steps = _games(3, 1)[0]
    state, events = steps[-1]
    finished = events_to_proto(events, state, None)[-1]
    assert finished.WhichOneof("kind") == "hand_finished"
    assert hashlib.sha256(finished.hand_finished.seed).digest() == bytes.fromhex(state.commitment)
    assert [s.seat for s in finished.hand_finished.scores] == [0, 1, 2]


def test_a_view_of_another_game_is_refused() -> None:
    message = view_pb2.SeatView(table=view_pb2.TableView(fiftyone=view_pb2.FiftyOneTable()))
    with pytest.raises(WireError):
        state_from_seat_view(message)


def test_event_kinds_cover_the_elevator_events() -> None:
    kinds = {
        event.WhichOneof("kind")
        for steps in _games(3, 10)
        for state, events in steps
        for event in events_to_proto(events, state, 0)
    }
    assert {"hand_dealt", "played", "passed", "hand_finished"} <= kinds
