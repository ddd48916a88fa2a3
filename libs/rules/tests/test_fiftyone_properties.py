"""Properties of the 51 engine over random legal play (Hypothesis, stateful and plain).

- all 106 cards are accounted for after every action, none in two places (C-4, F-1);
- no view holds another seat's hand, the stock order or a seed (P-20): a view does not change
  when the hidden cards are dealt differently;
- every action of an exactly enumerated kind that is not in ``legal_actions`` is rejected with
  the state unchanged, and every listed action is accepted;
- random legal play always ends; ``replay`` of the log and the JSON snapshot reproduce the state.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace

from fiftyone_support import count_cards
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from masa_rules.cards import PhysicalCard
from masa_rules.errors import IllegalAction
from masa_rules.fiftyone import (
    Action,
    Answer,
    ClaimBottom,
    DeclarePairs,
    Discard,
    Draw,
    LayOff,
    Phase,
    RetrieveJoker,
    State,
    TakeBottom,
    TakeDiscard,
    apply,
    game_log,
    is_legal,
    legal_actions,
    new_game,
    replay,
    state_from_json,
    state_to_json,
    view,
    view_json,
)
from masa_rules.fiftyone.policies import random_policy
from masa_rules.ruleset import RuleSet
from masa_rules.shuffle import DrawStream

TABLES = [
    ("classic", 4, False),
    ("salon", 4, False),
    ("remi", 3, False),
    ("classic", 2, False),
    ("salon", 4, True),
]
EXACT = (Draw, TakeDiscard, Discard, LayOff, RetrieveJoker, DeclarePairs, ClaimBottom, Answer)


def universe(state: State) -> list[Action]:
    """Candidate actions of the exactly enumerated kinds, for every seat."""
    out: list[Action] = []
    for seat in range(state.players):
        hand = state.seats[seat].hand
        out += [Draw(seat), TakeDiscard(seat), TakeDiscard(seat, pairs=True), TakeBottom(seat)]
        out += [DeclarePairs(seat), Answer(seat, True), Answer(seat, False)]
        others = [c for s in state.seats for c in s.hand if c not in hand][:3]
        out += [Discard(seat, c) for c in (*hand, *others)]
        out += [ClaimBottom(seat, c) for c in hand]
        for index in range(len(state.table)):
            out += [LayOff(seat, index, (c,)) for c in hand if not c.card.is_joker]
            out += [RetrieveJoker(seat, index, c) for c in hand if not c.card.is_joker]
    return out


def hidden_redealt(state: State, seat: int, rng: random.Random) -> State:
    """The same state with everything ``seat`` cannot see dealt differently."""
    others = [s for s in range(state.players) if s != seat]
    stock = list(state.stock)
    bottom = stock.pop() if state.bottom_card is not None and stock else None
    pool: list[PhysicalCard] = [c for s in others for c in state.seats[s].hand] + stock
    rng.shuffle(pool)
    seats = list(state.seats)
    for s in others:
        size = len(seats[s].hand)
        seats[s] = replace(seats[s], hand=tuple(sorted(pool[:size])))
        pool = pool[size:]
    new_stock = tuple(pool) + ((bottom,) if bottom is not None else ())
    return replace(
        state, seats=tuple(seats), stock=new_stock, hand_seed=b"other", game_seed=b"other"
    )


class RandomPlay(RuleBasedStateMachine):
    """Random legal play, checking the invariants after every action."""

    state: State
    actions: list[Action]

    @initialize(table=st.sampled_from(TABLES), seed=st.integers(0, 10**6))
    def deal(self, table: tuple[str, int, bool], seed: int) -> None:
        preset, players, teams = table
        self.ruleset = RuleSet.preset_named(preset)
        self.setup = (players, f"property-{seed}".encode(), teams)
        self.state = new_game(self.ruleset, players, self.setup[1], teams=teams, hands=1)
        self.actions = []

    @precondition(lambda self: self.state.phase is not Phase.OVER)
    @rule(pick=st.integers(0, 10**6))
    def act(self, pick: int) -> None:
        seat = self.state.to_act[0]
        actions = legal_actions(self.state, seat)
        assert actions, "a seat that must act always has a legal action"
        action = actions[pick % len(actions)]
        self.state, _ = apply(self.state, action)
        self.actions.append(action)

    @rule()
    def illegal_actions_change_nothing(self) -> None:
        state = self.state
        snapshot = json.dumps(state_to_json(state))
        legal = {a for s in state.to_act for a in legal_actions(state, s)}
        assert all(is_legal(state, a) for a in legal), "every listed action is accepted"
        for action in universe(state):
            if action in legal:
                continue
            try:
                apply(state, action)
            except IllegalAction:
                continue
            raise AssertionError(f"{action} was accepted but not listed")
        assert json.dumps(state_to_json(state)) == snapshot

    @invariant()
    def every_card_once(self) -> None:
        assert count_cards(self.state) == 106

    @invariant()
    def views_hide_what_they_must(self) -> None:
        rng = random.Random(len(self.actions))
        for seat in (*range(self.state.players), None):
            seen = view_json(view(self.state, seat))
            text = json.dumps(seen)
            assert self.state.hand_seed.hex() not in text
            assert self.state.game_seed.hex() not in text
            other = hidden_redealt(self.state, 0 if seat is None else seat, rng)
            if seat is None:
                other = hidden_redealt(other, 1, rng)
            redealt = view_json(view(other, seat))
            assert redealt | {"commitment": None} == seen | {"commitment": None}

    @invariant()
    def replay_and_snapshot_reproduce_the_state(self) -> None:
        players, seed, teams = self.setup
        log = game_log(self.ruleset, players, seed, self.actions, teams=teams, hands=1)
        assert replay(json.loads(json.dumps(log))) == self.state
        assert state_from_json(json.loads(json.dumps(state_to_json(self.state)))) == self.state


TestRandomPlay = RandomPlay.TestCase
TestRandomPlay.settings = settings(
    max_examples=25, stateful_step_count=60, deadline=None, suppress_health_check=list(HealthCheck)
)


@settings(max_examples=10, deadline=None)
@given(table=st.sampled_from(TABLES), seed=st.integers(0, 10**6))
def test_random_legal_play_always_ends(table: tuple[str, int, bool], seed: int) -> None:
    preset, players, teams = table
    state = new_game(RuleSet.preset_named(preset), players, seed, teams=teams, hands=2)
    rng = DrawStream(seed.to_bytes(4, "big"))
    for _ in range(20_000):
        if state.phase is Phase.OVER:
            break
        state, _ = apply(state, random_policy(state, state.to_act[0], rng))
        assert count_cards(state) == 106
    assert state.phase is Phase.OVER and state.ranking
