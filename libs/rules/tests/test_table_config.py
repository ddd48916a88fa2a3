"""One model of a table's configuration, checked in one place: its seats (P-2), turn time
(P-10), chips (P-1, P-13, P-30), payout rule (P-30) and game options (§2.9, §3)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from masa_rules.errors import RuleViolation
from masa_rules.table_config import (
    BASIS_POINTS,
    MAX_TURN_SECONDS,
    MIN_TURN_SECONDS,
    GameKind,
    GameOptions,
    Mode,
    PayoutRule,
    SeatConfig,
    SeatKind,
    TableConfig,
    check_payout,
    check_table_config,
)


def _humans(count: int, *, holds: bool = False) -> tuple[SeatConfig, ...]:
    return tuple(
        SeatConfig(n, SeatKind.HUMAN, f"p{n}", hold_id=f"h{n}" if holds else "")
        for n in range(count)
    )


ELEVATOR = TableConfig(GameKind.ELEVATOR, _humans(4), turn_seconds=20.0)
FIFTYONE = TableConfig(GameKind.FIFTYONE, _humans(4), turn_seconds=20.0, preset="salon")
CHIPS = replace(ELEVATOR, seats=_humans(4, holds=True), stake=50)


def _refused(config: TableConfig) -> str:
    with pytest.raises(RuleViolation) as refused:
        check_table_config(config)
    return refused.value.rule


def test_p2_p30_the_configurations_a_lobby_makes_are_accepted() -> None:
    check_table_config(ELEVATOR)
    check_table_config(FIFTYONE)
    check_table_config(replace(CHIPS, payout=PayoutRule(250, (7000, 3000))))
    check_table_config(replace(FIFTYONE, mode=Mode.TEAMS, options=GameOptions(open_threshold=81)))
    bots = tuple(SeatConfig(n, SeatKind.BOT) for n in range(1, 6))
    check_table_config(replace(ELEVATOR, seats=_humans(1) + bots, mode=Mode.TRAINING))


@pytest.mark.parametrize(
    "seats",
    [
        (),
        _humans(7),
        (SeatConfig(1, SeatKind.HUMAN, "a"), SeatConfig(0, SeatKind.HUMAN, "b")),
        (SeatConfig(0, SeatKind.HUMAN), SeatConfig(1, SeatKind.BOT), SeatConfig(2, SeatKind.BOT)),
        (SeatConfig(0, SeatKind.HUMAN, "a"), SeatConfig(1, SeatKind.HUMAN, "a")),
    ],
    ids=["none", "seven", "out-of-order", "no-player", "player-twice"],
)
def test_p2_seats_are_numbered_in_order_each_player_once(seats: tuple[SeatConfig, ...]) -> None:
    assert _refused(replace(ELEVATOR, seats=seats)) == "P-2"


@pytest.mark.parametrize("turn", [0.0, MIN_TURN_SECONDS / 2, MAX_TURN_SECONDS + 1])
def test_p10_the_turn_time_is_a_tenth_of_a_second_to_an_hour(turn: float) -> None:
    assert _refused(replace(ELEVATOR, turn_seconds=turn)) == "P-10"
    check_table_config(replace(ELEVATOR, turn_seconds=MIN_TURN_SECONDS))
    check_table_config(replace(ELEVATOR, turn_seconds=MAX_TURN_SECONDS))


def test_p1_a_training_table_moves_no_chips() -> None:
    assert _refused(replace(CHIPS, mode=Mode.TRAINING)) == "P-1"


def test_p13_bots_never_sit_at_a_chip_table() -> None:
    seats = (*CHIPS.seats[:3], SeatConfig(3, SeatKind.BOT))
    assert _refused(replace(CHIPS, seats=seats)) == "P-13"


@pytest.mark.parametrize(
    "config",
    [
        replace(CHIPS, stake=-1),
        replace(CHIPS, seats=_humans(4)),
        replace(ELEVATOR, seats=_humans(4, holds=True)),
        replace(CHIPS, seats=tuple(replace(seat, hold_id="same") for seat in CHIPS.seats)),
        replace(
            ELEVATOR,
            seats=(*_humans(3), SeatConfig(3, SeatKind.BOT, hold_id="h3")),
        ),
    ],
    ids=["negative-stake", "no-holds", "holds-without-stake", "shared-hold", "bot-hold"],
)
def test_p30_each_player_at_a_chip_table_has_a_hold_of_their_own(config: TableConfig) -> None:
    assert _refused(config) == "P-30"


@pytest.mark.parametrize(
    "rule",
    [
        PayoutRule(rake_basis_points=BASIS_POINTS + 1),
        PayoutRule(rake_basis_points=-1),
        PayoutRule(place_shares=(5000, 4000)),
        PayoutRule(place_shares=(0, 10_000)),
        PayoutRule(place_shares=(4000, 6000)),
        PayoutRule(place_shares=(10_000, -1, 1)),
        PayoutRule(place_shares=(5000, 2000, 1000, 1000, 1000)),
    ],
    ids=[
        "rake",
        "negative-rake",
        "sum",
        "zero-winner",
        "increasing",
        "negative",
        "more-than-seats",
    ],
)
def test_p30_a_payout_table_pays_the_prize_winner_first_never_growing(rule: PayoutRule) -> None:
    assert _refused(replace(CHIPS, payout=rule)) == "P-30"


def test_p30_no_shares_pays_the_winner_all() -> None:
    check_payout(PayoutRule(rake_basis_points=BASIS_POINTS))
    assert PayoutRule().shares == (BASIS_POINTS,)
    assert PayoutRule(place_shares=(6000, 4000)).shares == (6000, 4000)
    # The same terms however given: the ledger compares a hold's terms with a table's by these.
    assert PayoutRule(500).spelt_out() == PayoutRule(500, (BASIS_POINTS,)).spelt_out()
    assert PayoutRule(500).spelt_out() == PayoutRule(500, (BASIS_POINTS,))
    assert PayoutRule(500).spelt_out() != PayoutRule(0).spelt_out()


@st.composite
def _payout_tables(draw: st.DrawFn) -> tuple[int, ...]:
    """Non-increasing shares summing to 10000, the winner's positive."""
    cuts = sorted(draw(st.lists(st.integers(0, BASIS_POINTS), max_size=5)))
    shares = [b - a for a, b in zip([0, *cuts], [*cuts, BASIS_POINTS], strict=True)]
    return tuple(sorted(shares, reverse=True))


@given(_payout_tables(), st.integers(0, BASIS_POINTS))
def test_p30_every_non_increasing_table_summing_to_the_prize_is_accepted(
    shares: tuple[int, ...], rake: int
) -> None:
    check_payout(PayoutRule(rake, shares), places=len(shares))
    growing = shares[::-1]
    if growing != shares:
        with pytest.raises(RuleViolation) as refused:
            check_payout(PayoutRule(rake, growing))
        assert refused.value.rule == "P-30"


@pytest.mark.parametrize(
    ("config", "rule"),
    [
        (replace(FIFTYONE, seats=_humans(3)), "F-2"),
        (replace(FIFTYONE, preset="remi", mode=Mode.TEAMS), "F-2"),
        (replace(FIFTYONE, preset="classic", mode=Mode.TEAMS, seats=_humans(2)), "F-2"),
        (replace(FIFTYONE, options=GameOptions(decks=2)), "F-2"),
        (replace(FIFTYONE, preset="chess"), "F-2"),
        (replace(FIFTYONE, options=GameOptions(open_threshold=71)), "F-40"),
        (replace(FIFTYONE, preset="remi", options=GameOptions(escalating_threshold=True)), "F-41"),
        (replace(FIFTYONE, preset="classic", options=GameOptions(hands_per_game=10)), "F-95"),
        (replace(ELEVATOR, mode=Mode.TEAMS), "P-1"),
        (replace(ELEVATOR, preset="salon"), "E-1"),
        (replace(ELEVATOR, options=GameOptions(open_threshold=51)), "E-1"),
        (replace(ELEVATOR, options=GameOptions(escalating_threshold=False)), "E-1"),
        (replace(ELEVATOR, options=GameOptions(decks=3)), "E-1"),
        (replace(ELEVATOR, seats=_humans(2)), "E-1"),
    ],
)
def test_p1_p2_each_game_takes_its_own_options_and_seat_counts(
    config: TableConfig, rule: str
) -> None:
    assert _refused(config) == rule
