"""The split of a pot by the ranking (P-30, F-97, P-12): ties, teams, remainders, forfeits."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st
from masa_ledger.domain.errors import BadInput
from masa_ledger.domain.model import Standing
from masa_ledger.domain.validation import check_rule
from masa_rules.payout import split_pot
from masa_rules.table_config import PayoutRule


def _seat(
    seat: int, place: int, *, forfeited: bool = False, team: int = 0, staked: bool = True
) -> Standing:
    return Standing(
        seat=seat,
        player_id=f"p{seat}",
        place=place,
        forfeited=forfeited,
        team=team,
        hold_id=f"h{seat}" if staked else "",
    )


def _paid(
    pot: int, standings: list[Standing], rule: PayoutRule | None = None, *, teams: bool = False
) -> dict[int, int]:
    split = split_pot(pot, standings, rule or PayoutRule(), teams=teams)
    assert split.rake + split.forfeited + sum(p.amount for p in split.payouts) == pot
    return {p.seat: p.amount for p in split.payouts}


def test_p30_the_winner_takes_the_pot_by_default() -> None:
    assert _paid(400, [_seat(0, 2), _seat(1, 1), _seat(2, 3), _seat(3, 4)]) == {1: 400}


def test_p30_the_rake_is_taken_first_and_rounded_down() -> None:
    split = split_pot(
        333, [_seat(0, 1), _seat(1, 2)], PayoutRule(rake_basis_points=250), teams=False
    )
    assert split.rake == 8  # 333 * 2.5% = 8.325
    assert [(p.seat, p.amount) for p in split.payouts] == [(0, 325)]


def test_p30_a_payout_table_shares_the_prize_by_place() -> None:
    rule = PayoutRule(place_shares=(6000, 3000, 1000))
    assert _paid(1000, [_seat(0, 3), _seat(1, 1), _seat(2, 2), _seat(3, 4)], rule) == {
        1: 600,
        2: 300,
        0: 100,
    }


def test_p30_tied_seats_share_the_places_they_occupy_equally() -> None:
    rule = PayoutRule(place_shares=(6000, 4000))
    # Two tied for first occupy places 1 and 2: 10000 basis points between them.
    assert _paid(400, [_seat(0, 1), _seat(1, 1), _seat(2, 3)], rule) == {0: 200, 1: 200}
    # Two tied for second share place 2's 4000 and place 3's nothing.
    assert _paid(400, [_seat(0, 1), _seat(1, 2), _seat(2, 2)], rule) == {0: 240, 1: 80, 2: 80}


def test_p30_remainder_chips_go_to_the_better_place_then_the_lower_seat() -> None:
    # 100 among three tied winners: 33 each and one chip left, for the lowest seat.
    assert _paid(100, [_seat(2, 1), _seat(0, 1), _seat(1, 1)]) == {0: 34, 1: 33, 2: 33}
    # 101 split 50/50: place 1 takes the odd chip.
    assert _paid(101, [_seat(0, 2), _seat(1, 1)], PayoutRule(place_shares=(5000, 5000))) == {
        1: 51,
        0: 50,
    }


def test_p30_teams_share_their_place_equally_between_partners() -> None:
    standings = [_seat(0, 1, team=0), _seat(2, 1, team=0), _seat(1, 3, team=1), _seat(3, 3, team=1)]
    assert _paid(400, standings, teams=True) == {0: 200, 2: 200}
    rule = PayoutRule(place_shares=(7000, 3000))
    assert _paid(400, standings, rule, teams=True) == {0: 140, 2: 140, 1: 60, 3: 60}


def test_p12_a_forfeited_seat_is_never_paid_and_the_next_takes_its_place() -> None:
    standings = [_seat(0, 4, forfeited=True), _seat(1, 1), _seat(2, 2), _seat(3, 3)]
    assert _paid(400, standings, PayoutRule(place_shares=(7000, 3000))) == {1: 280, 2: 120}
    # Even a forfeited seat the engine ranked first wins nothing.
    assert _paid(400, [_seat(0, 1, forfeited=True), _seat(1, 2)]) == {1: 400}


def test_p12_a_forfeited_partner_leaves_the_team_share_to_the_other() -> None:
    standings = [
        _seat(0, 1, team=0),
        _seat(2, 4, team=0, forfeited=True),
        _seat(1, 2, team=1),
        _seat(3, 2, team=1),
    ]
    assert _paid(300, standings, teams=True) == {0: 300}


def test_p12_when_every_staking_seat_forfeited_the_prize_goes_to_the_house() -> None:
    split = split_pot(
        200,
        [_seat(0, 3, forfeited=True), _seat(1, 4, forfeited=True), _seat(2, 1, staked=False)],
        PayoutRule(rake_basis_points=1000),
        teams=False,
    )
    assert (split.rake, split.forfeited, split.payouts) == (20, 180, ())


def test_p30_bots_stake_nothing_and_win_nothing() -> None:
    # A bot won; the pot of the humans goes to the best human.
    standings = [_seat(0, 1, staked=False), _seat(1, 2), _seat(2, 3)]
    assert _paid(200, standings, PayoutRule(place_shares=(7000, 3000))) == {1: 140, 2: 60}


def test_p30_shares_of_places_nobody_fills_are_shared_out_in_proportion() -> None:
    rule = PayoutRule(place_shares=(5000, 3000, 2000))
    # Two paid seats occupy places 1 and 2, whose shares are 5000:3000.
    assert _paid(800, [_seat(0, 1), _seat(1, 2)], rule) == {0: 500, 1: 300}


def test_an_empty_pot_pays_nothing() -> None:
    split = split_pot(0, [_seat(0, 1), _seat(1, 2)], PayoutRule(), teams=False)
    assert (split.rake, split.forfeited, split.payouts) == (0, 0, ())


@pytest.mark.parametrize(
    "rule",
    [
        PayoutRule(rake_basis_points=10_001),
        PayoutRule(place_shares=(5000, 4000)),
        PayoutRule(place_shares=(0, 10_000)),
        PayoutRule(place_shares=(4000, 6000)),
        PayoutRule(place_shares=(10_000, -1, 1)),
        PayoutRule(place_shares=(10_000,) + (0,) * 16),
    ],
    ids=["rake", "sum", "no-winner", "growing", "negative", "more-places-than-holds"],
)
def test_p30_a_payout_rule_that_does_not_pay_the_prize_properly_is_refused(
    rule: PayoutRule,
) -> None:
    with pytest.raises(BadInput) as refused:
        check_rule(rule)
    assert refused.value.metadata == {"field": "payout"}


def test_p30_a_rule_without_shares_pays_the_winner_all_as_the_engine_and_the_lobby_read_it() -> (
    None
):
    """The table model's one reading of an empty payout table (masa_rules.table_config)."""
    rule = PayoutRule(rake_basis_points=500)
    assert check_rule(rule) == rule
    assert _paid(200, [_seat(0, 2), _seat(1, 1)], rule) == {1: 190}


@st.composite
def _games(draw: st.DrawFn) -> tuple[int, list[Standing], PayoutRule, bool]:
    seats = draw(st.integers(2, 6))
    teams = seats == 4 and draw(st.booleans())
    places = draw(st.lists(st.integers(1, seats), min_size=seats, max_size=seats))
    standings = [
        Standing(
            seat=seat,
            player_id=f"p{seat}",
            place=places[seat],
            forfeited=draw(st.booleans()) and draw(st.booleans()),
            team=seat % 2 if teams else 0,
            hold_id=f"h{seat}" if draw(st.integers(0, 4)) else "",
        )
        for seat in range(seats)
    ]
    cut = sorted(draw(st.lists(st.integers(1, 9999), max_size=3, unique=True)))
    bounds = [0, *cut, 10_000]
    shares = sorted((b - a for a, b in itertools.pairwise(bounds)), reverse=True)
    rule = PayoutRule(draw(st.integers(0, 10_000)), tuple(shares))
    return draw(st.integers(0, 10**12)), standings, rule, teams


@given(_games())
def test_p31_a_split_always_pays_exactly_the_pot_and_only_paid_seats(
    game: tuple[int, list[Standing], PayoutRule, bool],
) -> None:
    pot, standings, rule, teams = game
    check_rule(rule)
    split = split_pot(pot, standings, rule, teams=teams)
    assert split.rake + split.forfeited + sum(p.amount for p in split.payouts) == pot
    paid = {s.seat for s in standings if s.hold_id and not s.forfeited}
    assert {p.seat for p in split.payouts} <= paid
    assert all(p.amount > 0 for p in split.payouts)
    assert split.forfeited == (0 if paid else pot - split.rake)
    # A better place never gets less than a worse one (ties and teams aside).
    by_seat = {p.seat: p.amount for p in split.payouts}
    if not teams:
        ranked = sorted((s for s in standings if s.seat in paid), key=lambda s: s.place)
        for better, worse in itertools.pairwise(ranked):
            if better.place < worse.place:
                assert by_seat.get(better.seat, 0) + 1 >= by_seat.get(worse.seat, 0)
