"""Properties of the Elevator engine over generated games (Hypothesis).

- every game ends, within the bound argued in ``masa_rules.elevator.engine``, even when every
  seat passes whenever it may and the stock is empty, and it ends with a seat holding no
  cards unless nobody played since the starting card (E-9);
- every card is in exactly one place after every action;
- no view shows another seat's hand, the stock order or an unrevealed seed;
- every action outside ``legal_actions`` is rejected and leaves the state unchanged;
- replaying the log rebuilds the state and the events exactly, and JSON round-trips.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from masa_rules.cards import PhysicalCard, elevator_pack
from masa_rules.elevator import (
    Action,
    Direction,
    ElevatorRules,
    Event,
    GameLog,
    Give,
    JokerStart,
    Pass,
    Play,
    State,
    action_from_json,
    action_to_json,
    apply,
    dealt,
    event_to_json,
    legal_actions,
    new_game,
    position,
    replay_events,
    state_from_json,
    state_to_json,
    view,
)
from masa_rules.errors import IllegalAction

RULES = st.builds(
    ElevatorRules,
    decks=st.sampled_from([None, 1, 2]),
    joker_start=st.sampled_from(JokerStart),
    joker_on_joker_any_colour=st.booleans(),
    kopile_forces_round=st.booleans(),
    rank_by_sum=st.booleans(),
)
SEEDS = st.text(max_size=12)


def action_bound(state: State) -> int:
    """The engine docstring's bound on the number of actions in a hand (E-9, E-10)."""
    cards, players = 54 * state.decks, state.players
    return (
        cards + players * cards + (cards + 1) * (2 * players + cards * (2 * players - 1)) + players
    )


def assert_ends_as_e9_says(state: State) -> None:
    """Out: the winner holds no cards; blocked only when nobody played since the starter."""
    assert state.is_over
    if state.end_reason == "blocked":
        assert state.open_play is None and not state.stock
    else:
        assert state.end_reason == "out" and state.winner is not None
        assert state.hands[state.winner] == ()
    assert sum(map(len, state.ranking)) == state.players


def stubborn(state: State, actions: list[Action]) -> Action:
    """The slowest player: passes whenever it may, else the first legal action."""
    return next((action for action in actions if isinstance(action, Pass)), actions[0])


def assert_cards_accounted(state: State) -> None:
    everywhere = [*state.stock, *state.pile, *(card for hand in state.hands for card in hand)]
    assert Counter(everywhere) == Counter(elevator_pack(state.decks))


def card_codes(value: object) -> Iterator[str]:
    """Every string in a JSON value that reads as a physical card code."""
    if isinstance(value, dict):
        for item in value.values():
            yield from card_codes(item)
    elif isinstance(value, list):
        for item in value:
            yield from card_codes(item)
    elif isinstance(value, str):
        try:
            yield PhysicalCard.parse(value).code
        except ValueError:
            return


def others_reshuffled(state: State, seat: int | None) -> State:
    """``state`` with the stock and every hand but ``seat``'s dealt differently, sizes kept."""
    hidden = [card for s, hand in enumerate(state.hands) if s != seat for card in hand]
    hidden = [*reversed(hidden), *reversed(state.stock)]
    hands, taken = [], 0
    for s, hand in enumerate(state.hands):
        if s == seat:
            hands.append(hand)
        else:
            hands.append(tuple(hidden[taken : taken + len(hand)]))
            taken += len(hand)
    return replace(state, hands=tuple(hands), stock=tuple(hidden[taken:]))


def assert_view_hides_secrets(state: State) -> None:
    for seat in [None, *range(state.players)]:
        seen = view(state, seat)
        json.dumps(seen)
        own = state.hands[seat] if seat is not None else ()
        allowed = {card.code for card in (*own, *state.pile)}
        assert set(card_codes(seen)) <= allowed
        assert seen["seed"] is None or state.is_over
        # The view must not change when everything hidden from this seat is dealt otherwise.
        assert view(others_reshuffled(state, seat), seat) == seen


class ElevatorGame(RuleBasedStateMachine):
    """Random legal play interleaved with arbitrary, mostly illegal, submissions."""

    state: State
    log: GameLog
    events: list[Event]

    @initialize(rules=RULES, players=st.integers(3, 6), seed=SEEDS)
    def deal(self, rules: ElevatorRules, players: int, seed: str) -> None:
        self.state = new_game(rules, players, seed)
        self.log = GameLog(rules, players, seed, ())
        self.events = [dealt(self.state)]

    def _accept(self, action: Action) -> None:
        self.state, happened = apply(self.state, action)
        self.log = self.log.extended([action])
        self.events.extend(happened)

    @precondition(lambda self: not self.state.is_over)
    @rule(pick=st.integers(0, 1 << 16))
    def play_a_legal_action(self, pick: int) -> None:
        actions = legal_actions(self.state, self.state.turn)
        assert actions, "a seat on turn always has a legal action"
        self._accept(actions[pick % len(actions)])

    @rule(
        seat=st.integers(0, 6),
        kind=st.sampled_from(["play", "pass", "give"]),
        picks=st.lists(st.integers(0, 1 << 16), min_size=1, max_size=4),
        from_hand=st.booleans(),
    )
    def submit_anything(self, seat: int, kind: str, picks: list[int], from_hand: bool) -> None:
        hand = self.state.hands[seat] if seat < self.state.players else ()
        pool = hand if from_hand and hand else elevator_pack(2)
        chosen = tuple(pool[pick % len(pool)] for pick in picks)
        action: Action
        if kind == "play":
            action = Play(seat, chosen)
        elif kind == "give":
            action = Give(seat, chosen[0])
        else:
            action = Pass(seat)
        if action in legal_actions(self.state, seat):
            self._accept(action)
            return
        before = self.state
        snapshot = state_to_json(before)
        with pytest.raises(IllegalAction) as caught:
            apply(before, action)
        # An Elevator rule, or C-4 for a card that is not the player's (the 51 refusal too).
        assert caught.value.rule.startswith("E-") or caught.value.rule == "C-4"
        assert state_to_json(before) == snapshot

    @invariant()
    def every_card_is_in_exactly_one_place(self) -> None:
        assert_cards_accounted(self.state)

    @invariant()
    def no_view_leaks(self) -> None:
        assert_view_hides_secrets(self.state)

    @invariant()
    def json_round_trips(self) -> None:
        data = json.loads(json.dumps(state_to_json(self.state)))
        assert state_from_json(data) == self.state

    def teardown(self) -> None:
        if not hasattr(self, "log"):
            return
        assert self.state.action_count == len(self.log.actions)
        rebuilt, events = replay_events(self.log)
        assert rebuilt == self.state
        assert [event_to_json(e) for e in events] == [event_to_json(e) for e in self.events]
        for action in self.log.actions:
            assert action_from_json(json.loads(json.dumps(action_to_json(action)))) == action


ElevatorGame.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=90,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestElevatorGame = ElevatorGame.TestCase


@settings(max_examples=60, deadline=None)
@given(rules=RULES, players=st.integers(3, 6), seed=SEEDS, passes=st.booleans())
def test_every_game_ends_within_the_bound(
    rules: ElevatorRules, players: int, seed: str, passes: bool
) -> None:
    state = new_game(rules, players, seed)
    bound = action_bound(state)
    while not state.is_over:
        actions = legal_actions(state, state.turn)
        state, _ = apply(state, stubborn(state, actions) if passes else actions[0])
        assert state.action_count <= bound
    assert_ends_as_e9_says(state)


@st.composite
def empty_stock_positions(draw: st.DrawFn) -> State:
    """Worst case: the stock is empty from the start and the cards lie anywhere."""
    players = draw(st.integers(3, 6))
    pack = draw(st.permutations(elevator_pack(2 if players == 6 else 1)))
    sizes = [draw(st.integers(1, 12)) for _ in range(players)]
    hands, taken = [], 1
    for size in sizes:
        hands.append([card.code for card in pack[taken : taken + size]])
        taken += size
    return position(
        hands,
        pile=[pack[0].code],
        direction=draw(st.sampled_from(Direction)),
        turn=draw(st.integers(0, players - 1)),
        after_play=draw(st.booleans()),
        open_play=draw(st.none() | st.integers(0, players - 1)),
    )


@settings(max_examples=150, deadline=None)
@given(state=empty_stock_positions())
def test_termination_with_an_empty_stock_and_everyone_passing_when_allowed(state: State) -> None:
    bound = action_bound(state)
    while not state.is_over:
        state, _ = apply(state, stubborn(state, legal_actions(state, state.turn)))
        assert state.action_count <= bound
    assert_ends_as_e9_says(state)
