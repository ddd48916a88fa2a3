"""The hard 51 player (issue 23): it decides from the seat's view only, counts the cards still
unseen (a partial meld whose cards are all in sight is dead), keeps its budget, and plays a
legal action in every position random play reaches."""

from __future__ import annotations

from dataclasses import replace

from fiftyone_support import build, pc
from hypothesis import given, settings
from hypothesis import strategies as st
from masa_rules.fiftyone import Discard, Phase, State, apply, legal_actions, new_game, view
from masa_rules.fiftyone.policies import POLICIES, greedy_policy
from masa_rules.fiftyone.search import _arrangement, _joining, _reading, search
from masa_rules.ruleset import RuleSet
from masa_rules.shuffle import DrawStream


def _partials(dead: str, other_dead: str) -> State:
    """Seat 0 of a salon table, not opened, after its draw: a run 5H 6H 7H, the partial runs
    9C 10C (needs 8C or JC) and 3D 4D (needs 2D or 5D); both copies of ``dead`` and of
    ``other_dead`` lie on the discard pile."""
    pile = " ".join(f"{code} {code}#1" for code in (dead, other_dead))
    return build(
        "salon",
        hands={0: "5H 6H 7H 9C 10C 3D 4D", 1: "KS KS#1 QS", 2: "KD QD JD", 3: "KC QC 2S"},
        discard=pile,
        last_discarder=3,
        seat=0,
        phase=Phase.PLAY,
    )


def _discarded(action: object) -> str:
    assert isinstance(action, Discard)
    return action.card.card.code


def test_F21_hard_throws_the_partial_whose_cards_are_all_in_sight_normal_the_highest() -> None:
    """normal throws 10C (the highest loose card); hard keeps 9C 10C while an 8C or a JC is
    still unseen, and throws from 3D 4D, both of whose 2Ds and 5Ds lie on the pile; with the
    dead cards the other way round it keeps 3D 4D."""
    clubs_live = _partials("2D", "5D")
    assert _discarded(greedy_policy(clubs_live, 0, DrawStream(b"n"))) == "10C"
    assert _discarded(search(clubs_live, 0, DrawStream(b"h"), budget_seconds=None)) in ("3D", "4D")
    diamonds_live = _partials("8C", "JC")
    assert _discarded(search(diamonds_live, 0, DrawStream(b"h"), budget_seconds=None)) in (
        "9C",
        "10C",
    )


def test_P20_the_51_search_decides_from_the_seats_view_only() -> None:
    """At every decision of a salon hand, a twin state whose other hands and stock are dealt
    differently (sizes and the face-up bottom card kept) gets the same action."""
    state = new_game(RuleSet.salon(), 4, "view-only")
    compared = 0
    while state.phase is not Phase.OVER and compared < 40:
        seat = state.to_act[0]
        others = [other for other in range(4) if other != seat]
        bottom = 1 if state.bottom_card is not None else 0
        drawn = state.stock[: len(state.stock) - bottom]
        hidden = [card for other in others for card in state.seats[other].hand] + [*drawn]
        reordered = list(reversed(hidden))
        seats = list(state.seats)
        taken = 0
        for other in others:
            size = len(state.seats[other].hand)
            seats[other] = replace(seats[other], hand=tuple(reordered[taken : taken + size]))
            taken += size
        twin = replace(
            state,
            seats=tuple(seats),
            stock=(*reordered[taken:], *state.stock[len(state.stock) - bottom :]),
        )
        chosen = {
            search(game, seat, DrawStream(b"same"), budget_seconds=None) for game in (state, twin)
        }
        assert len(chosen) == 1
        action = chosen.pop()
        assert action in legal_actions(state, seat)
        state, _ = apply(state, action)
        compared += 1


def test_the_51_search_is_anytime() -> None:
    """Out of time once normal's choice is costed (it always is), hard plays it; a clock that
    never moves lets it cost the rest."""
    state = _partials("2D", "5D")
    ticks = iter(range(1000))
    late = search(state, 0, DrawStream(b"h"), budget_seconds=0.5, clock=lambda: float(next(ticks)))
    assert late == greedy_policy(state, 0, DrawStream(b"h"))
    settled = search(state, 0, DrawStream(b"h"), budget_seconds=0.5, clock=lambda: 0.0)
    assert _discarded(settled) in ("3D", "4D")


@settings(max_examples=60, deadline=None)
@given(
    preset=st.sampled_from(["classic", "salon", "remi"]),
    teams=st.booleans(),
    seed=st.text(max_size=6),
    steps=st.integers(0, 120),
)
def test_hard_plays_a_legal_action_in_every_position(
    preset: str, teams: bool, seed: str, steps: int
) -> None:
    teams = teams and preset != "remi"
    state = new_game(RuleSet.preset_named(preset), 4, seed, teams=teams)
    rng = DrawStream(seed.encode() or b"-")
    for _ in range(steps):
        seat = state.to_act[0]
        following = apply(state, POLICIES["random"](state, seat, rng))[0]
        if following.phase is Phase.OVER:
            break
        state = following
    seat = state.to_act[0]
    assert search(state, seat, rng, budget_seconds=None) in legal_actions(state, seat)


def test_a_draw_past_a_runs_joker_or_below_its_2_is_costed() -> None:
    """The draws hard tries are those that can improve the hand: an ace below a melded 2 3 4,
    and a card two ranks past a run a joker ends, are among them."""
    rules = RuleSet.remi()
    run = (pc("2H").face_index, pc("3H").face_index, pc("4H").face_index)
    loose = (pc("KS").face_index, pc("9D").face_index)
    assert pc("AH").face_index in _joining((*run, *loose), _arrangement((*run, *loose), rules))
    joker_run = (pc("5H").face_index, pc("6H").face_index, pc("XR").face_index)
    faces = (*joker_run, *loose)
    joining = _joining(faces, _arrangement(faces, rules))
    assert {pc("8H").face_index, pc("3H").face_index} <= joining
    assert pc("QC").face_index not in joining


def test_F46_a_seat_whose_partner_opened_still_costs_its_threshold() -> None:
    """A partner's opening lets the seat lay off, not lay down its own melds (F-46): hard
    still counts how far its hand is from the threshold."""
    state = build(
        "salon",
        teams=True,
        hands={0: "5H 6H 7H 9C 10C 3D 4D", 2: "KD QD JD"},
        seats={2: {"opened": True}},
        seat=0,
        phase=Phase.PLAY,
    )
    reading = _reading(view(state, 0))
    assert reading is not None and not reading.opened
