"""A seat's 51 view is enough to decide (P-20): ``seat_state`` rebuilds a state that plays alike.

For random positions of every preset (2-4 players, team mode), reached by seeded random play,
the state rebuilt from one seat's view gives that seat the same legal actions, in the same
order, every policy picks the same action on it, and it shows the seat the very same view.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from masa_rules.cards import fiftyone_pack
from masa_rules.errors import RuleViolation
from masa_rules.fiftyone import Phase, State, apply, legal_actions, new_game, seat_state, view
from masa_rules.fiftyone.policies import POLICIES
from masa_rules.ruleset import RuleSet
from masa_rules.shuffle import DrawStream


@st.composite
def positions(draw: st.DrawFn) -> State:
    """A game after a random number of weighted random legal actions, still in play."""
    preset = draw(st.sampled_from(["classic", "salon", "remi"]))
    teams = preset != "remi" and draw(st.booleans())
    players = 4 if preset == "salon" or teams else draw(st.integers(2, 4))
    state = new_game(getattr(RuleSet, preset)(), players, draw(st.text(max_size=8)), teams=teams)
    rng = DrawStream(draw(st.binary(min_size=1, max_size=8)))
    for _ in range(draw(st.integers(0, 160))):
        following = _step(state, rng)
        if following.phase is Phase.OVER:
            break
        state = following
    return state


def _step(state: State, rng: DrawStream) -> State:
    seat = state.to_act[0]
    return apply(state, POLICIES["random"](state, seat, rng))[0]


@settings(max_examples=120, deadline=None)
@given(state=positions(), seat_pick=st.integers(0, 3))
def test_the_rebuilt_state_gives_the_seat_the_same_legal_actions_and_view(
    state: State, seat_pick: int
) -> None:
    seat = seat_pick % state.players
    mine = seat_state(view(state, seat))
    assert legal_actions(mine, seat) == legal_actions(state, seat)
    assert view(mine, seat) == view(state, seat)
    everywhere = [
        *mine.stock,
        *mine.discard,
        *(card for entry in mine.table for card in entry.cards),
        *(card for seat_state_ in mine.seats for card in seat_state_.hand),
    ]
    assert Counter(everywhere) == Counter(fiftyone_pack())


@settings(max_examples=120, deadline=None)
@given(state=positions(), rng_seed=st.integers(0, 1 << 30))
def test_every_policy_picks_the_same_action_from_the_view(state: State, rng_seed: int) -> None:
    for seat in state.to_act:
        mine = seat_state(view(state, seat))
        for policy in POLICIES.values():
            real = policy(state, seat, DrawStream(rng_seed.to_bytes(4, "big")))
            assert policy(mine, seat, DrawStream(rng_seed.to_bytes(4, "big"))) == real


def test_a_spectator_view_cannot_be_rebuilt_into_a_seat() -> None:
    state = new_game(RuleSet.salon(), 4, "spectator")
    with pytest.raises(RuleViolation) as caught:
        seat_state(view(state, None))
    assert caught.value.rule == "P-20"


def test_a_view_whose_counts_do_not_add_up_is_refused() -> None:
    seen = replace(view(new_game(RuleSet.classic(), 3, "counts"), 1), stock=99)
    with pytest.raises(RuleViolation, match="add up"):
        seat_state(seen)
