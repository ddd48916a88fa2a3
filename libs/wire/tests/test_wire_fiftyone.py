"""51 over the wire: every action round trips, events carry no other seat's cards (P-20), and
a seat's wire view gives back the engine's own view of that seat, for every preset."""

from __future__ import annotations

import pytest
from masa.common.v1 import card_pb2, game_pb2, meld_pb2
from masa.table.v1 import action_pb2, event_pb2, view_pb2
from masa_rules.cards import PhysicalCard, parse_card
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
    Phase,
    RetrieveJoker,
    ShowPairs,
    State,
    TableMeld,
    TakeBottom,
    TakeDiscard,
    apply,
    legal_actions,
    start,
    view,
)
from masa_rules.fiftyone.policies import greedy_policy, random_policy
from masa_rules.ruleset import RuleSet
from masa_rules.shuffle import DrawStream
from masa_wire import WireError
from masa_wire.cards import card_to_proto
from masa_wire.fiftyone import (
    LOG,
    action_from_proto,
    action_to_proto,
    events_to_proto,
    fill_table_view,
    rules_from_config,
    seat_view,
    state_from_seat_view,
    view_from_seat_view,
)
from masa_wire.fiftyone.melds import meld_to_proto

_PRESETS = {
    "classic": game_pb2.PRESET_CLASSIC,
    "salon": game_pb2.PRESET_SALON,
    "remi": game_pb2.PRESET_REMI,
}

Step = tuple[State | None, Action | None, State, list[Event]]


def _game(preset: str, players: int, seed: int, *, teams: bool = False) -> list[Step]:
    """A whole one-hand game as (before, action, after, events), the deal first."""
    rng = DrawStream(f"wire-policy-{seed}".encode())
    rules, hands = rules_from_config(_config(preset, players, teams=teams))
    state, events = start(rules, players, f"wire-{preset}-{seed}", teams=teams, hands=hands)
    steps: list[Step] = [(None, None, state, events)]
    for _ in range(3000):
        if state.phase is Phase.OVER:
            break
        seat = state.to_act[0]
        policy = greedy_policy if rng.below(10) < 7 else random_policy
        action = policy(state, seat, rng)
        after, events = apply(state, action)
        steps.append((state, action, after, events))
        state = after
    assert state.phase is Phase.OVER
    return steps


def _config(preset: str, players: int, *, teams: bool = False) -> game_pb2.TableConfig:
    return game_pb2.TableConfig(
        game=game_pb2.GAME_KIND_FIFTYONE,
        preset=_PRESETS[preset],
        mode=game_pb2.MODE_TEAMS if teams else game_pb2.MODE_SINGLES,
        options=game_pb2.GameOptions(fiftyone=game_pb2.FiftyOneOptions(hands_per_game=1)),
        seats=[game_pb2.SeatAssignment(seat=s) for s in range(players)],
    )


def _view(state: State, seat: int, config: game_pb2.TableConfig) -> view_pb2.SeatView:
    table = view_pb2.TableView(
        table=view_pb2.Table(config=config),
        seats=[view_pb2.SeatState(seat=s) for s in range(state.players)],
    )
    fill_table_view(table, state)
    return seat_view(table, state, seat)


_CASES = [("classic", 4, False), ("classic", 2, False), ("salon", 4, False), ("remi", 3, False)]
_CASES += [("salon", 4, True), ("classic", 4, True)]


@pytest.mark.parametrize(("preset", "players", "teams"), _CASES)
def test_actions_events_and_views_over_whole_games(preset: str, players: int, teams: bool) -> None:
    """F-1..F-97 through the wire: P-20 filtering and lossless views on every step."""
    config = _config(preset, players, teams=teams)
    for seed in range(3):
        seen_kinds: set[str] = set()
        for before, action, after, events in _game(preset, players, seed, teams=teams):
            if action is not None and before is not None:
                message = action_to_proto(action)
                assert action_from_proto(message, action.seat, before) == action
                assert action_from_proto(message, action.seat) == action
            log = events_to_proto(events, after, LOG)
            seen_kinds.update(e.WhichOneof("kind") or "" for e in log)
            for viewer in [None, *range(players)]:
                for event in events_to_proto(events, after, viewer):
                    _assert_no_foreign_cards(event, viewer)
            if after.phase is not Phase.OVER:
                for seat in range(players):
                    assert view_from_seat_view(_view(after, seat, config)) == view(after, seat)
                for seat in after.to_act:
                    rebuilt = state_from_seat_view(_view(after, seat, config))
                    assert legal_actions(rebuilt, seat) == legal_actions(after, seat)
        assert {"hand_dealt", "discarded", "hand_finished"} <= seen_kinds


def _assert_no_foreign_cards(event: event_pb2.TableEvent, viewer: int | None) -> None:
    kind = event.WhichOneof("kind")
    if kind == "hand_dealt" and viewer is None:
        assert not event.hand_dealt.hand
    if kind == "drew" and event.drew.seat != viewer:
        assert not event.drew.HasField("card")
    if kind == "hand_finished":
        assert len(event.hand_finished.seed) == 32


def test_a_meld_converted_again_is_a_message_of_the_callers_own() -> None:
    """F-14, C-2: a table meld's conversion is kept (melds stay on the table for the hand), and
    each call gets a message of its own: changing one changes no later answer, another id or
    other rules give their own, and an equal meld that is another object reads the same."""
    state = next(after for _, _, after, _ in _game("classic", 4, 0) if after.table)
    entry = state.table[0]
    first = meld_to_proto(0, entry, state.rules)
    expected = meld_pb2.Meld()
    expected.CopyFrom(first)
    assert first.value == entry.meld.value(state.rules)
    assert first.owner_seat == entry.owner and len(first.cards) == len(entry.cards)
    first.value += 1000
    first.cards.pop()
    assert meld_to_proto(0, entry, state.rules) == expected
    assert meld_to_proto(5, entry, state.rules).meld_id == 5
    salon = RuleSet.salon()
    assert meld_to_proto(0, entry, salon).value == entry.meld.value(salon)
    twin = TableMeld(entry.owner, entry.meld, tuple(entry.cards))
    assert twin is not entry and meld_to_proto(0, twin, state.rules) == expected


def test_the_deal_shows_each_seat_its_own_cards_only() -> None:
    """F-3, P-20: a seat receives its own dealt cards and everyone's counts, nothing more."""
    state, events = start(RuleSet.classic(), 4, "deal")
    for seat in range(4):
        (dealt,) = [e for e in events_to_proto(events, state, seat) if e.HasField("hand_dealt")]
        assert [c.SerializeToString() for c in dealt.hand_dealt.hand] == [
            card_to_proto(c).SerializeToString() for c in state.seats[seat].hand
        ]
        assert list(dealt.hand_dealt.card_counts) == [len(s.hand) for s in state.seats]
        assert dealt.hand_dealt.seed_commitment.hex() == state.commitment
    (spectator,) = events_to_proto(events, state, None)
    assert not spectator.hand_dealt.hand


def _card(code: str) -> card_pb2.Card:
    return card_to_proto(PhysicalCard.parse(code))


def test_every_kind_of_action_round_trips() -> None:
    """C-2, C-4: melds with joker readings, pairs, lay-off ends, twins and answers survive."""
    pc = PhysicalCard.parse
    actions: list[Action] = [
        Draw(1),
        TakeDiscard(1),
        TakeDiscard(1, pairs=True),
        LayDown(1, (((pc("7H"), None), (pc("XR"), parse_card("8H")), (pc("9H#1"), None)),)),
        LayDown(1, (), ((pc("5S"), pc("5S#1")), (pc("XB"), pc("KD")))),
        LayOff(1, 3, (pc("XR"),), parse_card("10H"), True),
        LayOff(1, 0, (pc("4C"),), None, False),
        LayOff(1, 2, (pc("QS"), pc("QS#1"))),
        RetrieveJoker(1, 2, pc("8H")),
        Discard(1, pc("KS")),
        Discard(1, pc("KS"), pc("KS#1")),
        DeclarePairs(1),
        ShowPairs(1, ((pc("2S"), pc("2S#1")), (pc("3H"), pc("3H#1")))),
        Answer(1, True),
        Answer(1, False),
        ClaimBottom(1, pc("9D")),
        TakeBottom(1),
        TakeBottom(1, (((pc("2C"), None), (pc("3C"), None), (pc("4C"), None)),), pc("AS")),
    ]
    for action in actions:
        assert action_from_proto(action_to_proto(action), 1) == action


def test_copies_are_read_as_the_ones_the_hand_holds() -> None:
    """C-4: a client may name either copy; a pair of twins uses both copies."""
    state, _ = start(RuleSet.classic(), 2, "copies")
    seat = state.turn.seat
    hand = state.seats[seat].hand
    held = hand[0]
    other = PhysicalCard(held.face_index, 1 - held.copy)
    message = action_pb2.Action(discard=action_pb2.Discard(card=card_to_proto(other)))
    if other not in hand:
        assert action_from_proto(message, seat, state) == Discard(seat, held)


@pytest.mark.parametrize(
    "message",
    [
        action_pb2.Action(),
        action_pb2.Action(play=action_pb2.Play()),
        action_pb2.Action(discard=action_pb2.Discard()),
        action_pb2.Action(lay_down=action_pb2.LayDown()),
        action_pb2.Action(
            open=action_pb2.Open(
                melds=[meld_pb2.ProposedMeld(cards=[card_pb2.PlacedCard(card=_card("7H"))])]
            )
        ),
        action_pb2.Action(answer_query=action_pb2.AnswerQuery()),
        action_pb2.Action(show_gosterge=action_pb2.ShowGosterge(cards=[_card("7H")])),
        action_pb2.Action(lay_off=action_pb2.LayOff(meld_id=0)),
        action_pb2.Action(retrieve_joker=action_pb2.RetrieveJoker(natural=_card("XR"))),
        action_pb2.Action(
            discard=action_pb2.Discard(card=card_pb2.Card(rank=card_pb2.Rank.ValueType(3)))
        ),
    ],
)
def test_malformed_actions_are_bad_requests(message: action_pb2.Action) -> None:
    with pytest.raises(WireError):
        action_from_proto(message, 0)


def test_lobby_options_become_the_rule_set() -> None:
    """P-2, §2.9: preset and options; a threshold the preset does not allow names F-40."""
    config = _config("classic", 4)
    config.options.fiftyone.open_threshold = 81
    config.options.fiftyone.hands_per_game = 3
    rules, hands = rules_from_config(config)
    assert (rules.preset, rules.open_threshold, rules.hands_per_game, hands) == (
        "classic",
        81,
        3,
        3,
    )
    config.options.fiftyone.open_threshold = 70
    with pytest.raises(WireError) as error:
        rules_from_config(config)
    assert error.value.reason == "F-40"


def test_a_spectator_view_cannot_be_read_back() -> None:
    """P-20: only a seat's view of a hand in play rebuilds a state."""
    state, _ = start(RuleSet.salon(), 4, "spectator")
    table = view_pb2.TableView(
        table=view_pb2.Table(config=_config("salon", 4)),
        seats=[view_pb2.SeatState(seat=s) for s in range(4)],
    )
    fill_table_view(table, state)
    with pytest.raises(WireError):
        state_from_seat_view(view_pb2.SeatView(table=table, seat=7))
    with pytest.raises(WireError):
        state_from_seat_view(view_pb2.SeatView(table=view_pb2.TableView(), seat=0))


def test_a_legal_action_list_converts() -> None:
    state, _ = start(RuleSet.salon(), 4, "legal")
    seat = state.turn.seat
    for action in legal_actions(state, seat):
        assert action_from_proto(action_to_proto(action), seat, state) == action


def test_F64_a_stalled_hand_reports_its_reason_and_the_count_is_public() -> None:
    """The starter discards, the next seat takes it on its first turn (F-33r) and discards
    another card: with stall_rounds=1 two turns without a stock draw end the hand."""
    state, _ = start(RuleSet.remi(stall_rounds=1), 2, "stall", hands=1)
    starter = state.turn.seat
    state, _ = apply(state, Discard(starter, state.seats[starter].hand[0]))
    table = view_pb2.TableView(seats=[view_pb2.SeatState(seat=s) for s in range(2)])
    fill_table_view(table, state)
    assert table.fiftyone.turns_without_stock_draw == 1
    taker = state.turn.seat
    state, _ = apply(state, TakeDiscard(taker))
    keep = next(c for c in state.seats[taker].hand if c != state.turn.took)
    after, events = apply(state, Discard(taker, keep))
    (finished,) = [e for e in events_to_proto(events, after, LOG) if e.HasField("hand_finished")]
    assert finished.hand_finished.end_reason == event_pb2.HAND_END_REASON_STALLED
    assert not finished.hand_finished.HasField("finisher_seat")
