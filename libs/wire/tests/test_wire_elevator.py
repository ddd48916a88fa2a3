"""Elevator over the wire: actions round trip, events hide other seats' cards (P-20), and a
seat view rebuilds a state with the same legal actions as the real one."""

from __future__ import annotations

import hashlib

import pytest
from masa.bot.v1 import bot_pb2
from masa.common.v1 import card_pb2
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
from masa_rules.elevator.state import MAX_TELLS
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
    observe,
    seat_view,
    state_from_observation,
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
    of the real state (Kopile gives included, E-9; a bot's observation adds every seat's
    tells, E-8), every seat's card count and the stock's, and the seat's own hand."""
    gives = told = 0
    for steps in _games(4, 12) + _games(5, 6):
        for state, _ in steps:
            if state.is_over:
                continue
            seat = state.turn
            observation = bot_pb2.Observation(view=_view(state, seat))
            observe(observation, state)
            rebuilt = state_from_observation(observation)
            assert set(legal_actions(rebuilt, seat)) == set(legal_actions(state, seat))
            public = ("turn", "phase", "receiver", "givers", "after_play", "forced_turns", "tells")
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
            told += any(state.tells)
    assert gives > 0 and told > 0


def test_E8_a_table_view_lists_each_seats_latest_forced_pass_as_a_void() -> None:
    """Table views carry no tells, only each seat's latest forced pass (a void), which a
    client without an observation reads back as a forced pass."""
    voided = 0
    for steps in _games(4, 12):
        for state, _ in steps:
            if state.is_over:
                continue
            seat = state.turn
            view = _view(state, seat)
            forced = {
                other: next(t for t in reversed(told) if not t.may_pass and not t.played)
                for other, told in enumerate(state.tells)
                if any(not t.may_pass and not t.played for t in told)
            }
            listed = {void.seat: void.held for void in view.table.elevator.voids}
            assert listed == {other: tell.held for other, tell in forced.items()}
            rebuilt = state_from_seat_view(view)
            for other, tell in forced.items():
                (read,) = rebuilt.tells[other]
                assert (read.top, read.direction, read.held, read.may_pass) == (
                    tell.top,
                    tell.direction,
                    tell.held,
                    False,
                )
            voided += bool(forced)
    assert voided > 0


def test_P20_tells_out_of_bounds_are_refused() -> None:
    state = _games(4, 1)[0][20][0]
    seat = state.turn
    observation = bot_pb2.Observation(view=_view(state, seat))
    observe(observation, state)
    assert observation.elevator_tells
    for bad in (
        {"seat": 9},
        {"held": 0},
        {"held": 40, "hand": 40},
        {"played": [observation.elevator_tells[0].top] * 9},
    ):
        broken = bot_pb2.Observation()
        broken.CopyFrom(observation)
        tell = broken.elevator_tells[0]
        for field, value in bad.items():
            if field == "played":
                tell.ClearField("played")
                tell.played.extend(value)  # type: ignore[arg-type]
            else:
                setattr(tell, field, value)
        with pytest.raises(WireError) as refused:
            state_from_observation(broken)
        assert refused.value.reason == "P-20"
    # Cards played must be on the pile, in one tell only, and make a play: a forged
    # observation cannot make the search rebuild hands of cards the table never saw.
    pile = list(observation.view.table.elevator.pile)
    ranks: dict[int, card_pb2.Card] = {}
    for card in pile:
        ranks.setdefault(card.rank, card)
    two_ranks = list(ranks.values())[:2]
    assert len(two_ranks) == 2
    for played, also in (
        ([observation.view.hand[0]], None),
        ([pile[-1]], [pile[-1]]),
        (two_ranks, None),
    ):
        forged = bot_pb2.Observation()
        forged.CopyFrom(observation)
        first = forged.elevator_tells[0]
        first.ClearField("played")
        first.played.extend(played)
        if also is not None:
            second = forged.elevator_tells[1]
            second.ClearField("played")
            second.played.extend(also)
        with pytest.raises(WireError) as refused:
            state_from_observation(forged)
        assert refused.value.reason == "P-20"
    many = bot_pb2.Observation()
    many.CopyFrom(observation)
    first = many.elevator_tells[0]
    many.elevator_tells.extend([first] * MAX_TELLS)
    with pytest.raises(WireError):
        state_from_observation(many)


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
