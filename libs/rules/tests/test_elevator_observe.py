"""A seat's view is enough to decide (P-20): ``seat_state`` rebuilds a state that plays alike.

For random positions reached by seeded random play, the state rebuilt from one seat's view
gives that seat the same legal actions, in the same order, and every policy picks the same
action on it as on the real state.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from masa_rules.cards import elevator_pack
from masa_rules.elevator import (
    ElevatorRules,
    JokerStart,
    State,
    apply,
    legal_actions,
    new_game,
    seat_state,
    view,
)
from masa_rules.elevator.policies import POLICIES
from masa_rules.errors import RuleViolation
from masa_rules.shuffle import DrawStream

RULES = st.builds(
    ElevatorRules,
    decks=st.sampled_from([None, 1, 2]),
    joker_start=st.sampled_from(JokerStart),
    joker_on_joker_any_colour=st.booleans(),
    kopile_forces_round=st.booleans(),
)


@st.composite
def positions(draw: st.DrawFn) -> State:
    """A hand after a random number of random legal actions, maybe finished."""
    state = new_game(draw(RULES), draw(st.integers(3, 6)), draw(st.text(max_size=8)))
    rng = DrawStream(draw(st.binary(min_size=1, max_size=8)))
    for _ in range(draw(st.integers(0, 120))):
        if state.is_over:
            break
        state, _ = apply(state, POLICIES["random"](state, state.turn, rng))
    return state


@settings(max_examples=150, deadline=None)
@given(state=positions(), seat_pick=st.integers(0, 5))
def test_the_rebuilt_state_gives_the_seat_the_same_legal_actions(
    state: State, seat_pick: int
) -> None:
    seat = seat_pick % state.players
    mine = seat_state(view(state, seat))
    assert legal_actions(mine, seat) == legal_actions(state, seat)
    assert mine.hands[seat] == state.hands[seat]
    assert [len(hand) for hand in mine.hands] == [len(hand) for hand in state.hands]
    assert len(mine.stock) == len(state.stock)


@settings(max_examples=150, deadline=None)
@given(state=positions(), rng_seed=st.binary(min_size=1, max_size=8))
def test_every_policy_picks_the_same_action_from_the_view(state: State, rng_seed: bytes) -> None:
    assume(not state.is_over)
    seat = state.turn
    mine = seat_state(view(state, seat))
    for policy in POLICIES.values():
        real = policy(state, seat, DrawStream(rng_seed))
        rebuilt = policy(mine, seat, DrawStream(rng_seed))
        assert rebuilt == real


@settings(max_examples=60, deadline=None)
@given(state=positions(), seat_pick=st.integers(0, 5))
def test_the_rebuilt_state_holds_every_card_once_and_shows_the_same_view(
    state: State, seat_pick: int
) -> None:
    seat = seat_pick % state.players
    mine = seat_state(view(state, seat))
    everywhere = [*mine.stock, *mine.pile, *(card for hand in mine.hands for card in hand)]
    assert Counter(everywhere) == Counter(elevator_pack(mine.decks))
    seen = view(state, seat)
    rebuilt = view(mine, seat)
    # Only the stand-in seed's commitment differs while the hand runs (F-5).
    if not state.is_over:
        seen.pop("commitment")
        rebuilt.pop("commitment")
    assert rebuilt == seen


def test_a_spectator_view_cannot_be_rebuilt_into_a_seat() -> None:
    state = new_game(ElevatorRules(), 3, "spectator")
    with pytest.raises(RuleViolation) as caught:
        seat_state(view(state, None))
    assert caught.value.rule == "P-20"


def test_a_view_whose_counts_do_not_add_up_is_refused() -> None:
    seen = view(new_game(ElevatorRules(), 3, "counts"), 1)
    seen["stock_count"] = 99
    with pytest.raises(RuleViolation, match="add up"):
        seat_state(seen)
