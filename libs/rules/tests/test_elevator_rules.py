"""One scenario per Elevator rule (rules.md §3, E-1..E-11), built from fixed positions."""

from __future__ import annotations

import pytest
from masa_rules.cards import PhysicalCard
from masa_rules.elevator import (
    Direction,
    ElevatorRules,
    Give,
    HandEnded,
    JokerStart,
    Kopile,
    Pass,
    Passed,
    Phase,
    Play,
    State,
    apply,
    dealt,
    legal_actions,
    new_game,
    position,
)
from masa_rules.elevator.deal import deal
from masa_rules.errors import IllegalAction, RuleViolation
from masa_rules.shuffle import commitment


def cards(*codes: str) -> tuple[PhysicalCard, ...]:
    return tuple(PhysicalCard.parse(code) for code in codes)


def play(state: State, seat: int, *codes: str) -> State:
    after, _ = apply(state, Play(seat, cards(*codes)))
    return after


def passed(state: State, seat: int) -> State:
    after, _ = apply(state, Pass(seat))
    return after


def rejected(state: State, action: Play | Pass | Give) -> str:
    """The rule id that rejects ``action``; the state must stay as it was."""
    before = state
    with pytest.raises(IllegalAction) as caught:
        apply(state, action)
    assert state == before
    return caught.value.rule


def plays_of(state: State, seat: int) -> set[tuple[str, ...]]:
    return {
        tuple(card.code for card in action.cards)
        for action in legal_actions(state, seat)
        if isinstance(action, Play)
    }


def first_seed(rules: ElevatorRules, players: int, wanted: str) -> str:
    """A seed whose starting card is ``wanted`` (a face code, copies alike)."""
    for n in range(5000):
        seed = f"starter-{n}"
        state = new_game(rules, players, seed)
        if state.top.card.code == wanted:
            return seed
    raise AssertionError(f"no seed turns up {wanted}")


# E-1 ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("players", [2, 7])
def test_E1_only_three_to_six_players_may_sit(players: int) -> None:
    with pytest.raises(RuleViolation) as caught:
        new_game(ElevatorRules(), players, "seed")
    assert caught.value.rule == "E-1"


@pytest.mark.parametrize(
    ("players", "decks", "total"), [(3, None, 54), (5, None, 54), (6, None, 108), (4, 2, 108)]
)
def test_E1_one_pack_of_54_or_two_packs_by_default_for_six(
    players: int, decks: int | None, total: int
) -> None:
    state = new_game(ElevatorRules(decks=decks), players, "seed")
    held = sum(len(hand) for hand in state.hands) + len(state.stock) + len(state.pile)
    assert held == total
    assert state.decks == total // 54


def test_E1_aces_are_high() -> None:
    state = position([["AH", "2H"], ["3C"], ["4C"]], pile=["KS"])
    assert plays_of(state, 0) == {("AH",)}


# E-2 ---------------------------------------------------------------------------------------


def test_E2_seven_cards_each_and_the_next_card_turned_up() -> None:
    state = new_game(ElevatorRules(), 4, "seed")
    assert [len(hand) for hand in state.hands] == [7, 7, 7, 7]
    assert len(state.pile) == 1
    assert len(state.stock) == 54 - 28 - 1


def test_E2_an_ace_turned_up_starts_the_pile_descending() -> None:
    seed = first_seed(ElevatorRules(), 4, "AS")
    state = new_game(ElevatorRules(), 4, seed)
    assert state.direction is Direction.DESCENDING


def test_E2_a_joker_turned_up_lets_the_first_player_play_anything() -> None:
    rules = ElevatorRules()
    state = new_game(rules, 4, first_seed(rules, 4, "XR"))
    assert state.free
    naturals = {card.code for card in state.hands[0] if card.face_index < 52}
    assert {cards[0] for cards in plays_of(state, 0)} >= naturals


def test_E2_the_bury_option_puts_a_turned_up_joker_under_the_stock() -> None:
    seed = first_seed(ElevatorRules(), 4, "XB")
    state = new_game(ElevatorRules(joker_start=JokerStart.BURY), 4, seed)
    assert not state.free
    assert state.stock[-1].code == "XB"
    assert dealt(state).buried == cards("XB")


def test_E2_the_deal_is_recomputed_from_the_revealed_seed() -> None:
    state = new_game(ElevatorRules(), 5, "fair")
    opening = dealt(state)
    assert opening.commitment == commitment(state.seed)
    again = deal(ElevatorRules(), 5, bytes.fromhex(state.seed.hex()), leader=0)
    assert again.hands == opening.hands == state.hands
    assert again.starter == opening.starter == state.top


# E-3 ---------------------------------------------------------------------------------------


def test_E3_the_seat_after_the_dealer_leads_and_play_moves_to_the_next_seat() -> None:
    state = position([["9H"], ["3C", "4C"], ["5C"]], pile=["8S"], stock=["2D"])
    assert state.turn == 0
    assert rejected(state, Pass(1)) == "E-3"
    state = position([["9H", "KD"], ["3C", "4C"], ["5C"]], pile=["8S"], stock=["2D"])
    assert play(state, 0, "9H").turn == 1


def test_E3_a_later_hand_is_led_by_the_previous_winner() -> None:
    first = new_game(ElevatorRules(), 4, "match")
    second = new_game(ElevatorRules(), 4, "match", hand_no=2, leader=2)
    assert second.turn == 2
    assert second.seed != first.seed
    assert legal_actions(second, 0) == []


# E-4 ---------------------------------------------------------------------------------------


def test_E4_a_play_is_the_opposite_colour_and_strictly_higher_when_ascending() -> None:
    state = position([["9H", "10S", "8H", "7D", "KD"], ["3C"], ["4C"]], pile=["8S"])
    assert plays_of(state, 0) == {("9H",), ("KD",)}
    assert rejected(state, Play(0, cards("8H"))) == "E-4"
    assert rejected(state, Play(0, cards("10S"))) == "E-4"


def test_E4_a_play_is_strictly_lower_when_descending() -> None:
    state = position(
        [["7H", "9H", "8D", "6S"], ["3C"], ["4C"]], pile=["8S"], direction=Direction.DESCENDING
    )
    assert plays_of(state, 0) == {("7H",)}
    assert rejected(state, Play(0, cards("9H"))) == "E-4"
    assert rejected(state, Play(0, cards("6S"))) == "E-4"


def test_C4_a_card_not_in_hand_is_refused_as_not_the_players_not_as_E4() -> None:
    """10H would go on 8S by E-4, so E-4 is not what forbids it: it is not in the hand (C-4,
    as 51 refuses it)."""
    state = position([["9H"], ["3C"], ["4C"]], pile=["8S"])
    assert rejected(state, Play(0, cards("10H"))) == "C-4"
    assert rejected(state, Play(0, cards("7H"))) == "C-4"


# E-5 ---------------------------------------------------------------------------------------


def test_E5_a_multi_card_play_alternates_colour() -> None:
    state = position([["8H", "8S", "8D", "KC"], ["3C"], ["4C"]], pile=["5C"])
    assert plays_of(state, 0) >= {("8H", "8S", "8D"), ("8D", "8S", "8H"), ("8H", "8S")}
    assert ("8H", "8D") not in plays_of(state, 0)
    assert rejected(state, Play(0, cards("8H", "8D"))) == "E-5"
    after = play(state, 0, "8H", "8S", "8D")
    assert after.top.code == "8D"
    assert after.hands[0] == cards("KC")


def test_E5_two_cards_of_one_rank_and_colour_never_follow_each_other() -> None:
    rules = ElevatorRules(decks=2)
    state = position([["8H", "8H#1", "8S", "9S"], ["3C"], ["4C"]], pile=["5C"], rules=rules)
    assert rejected(state, Play(0, cards("8H", "8H#1"))) == "E-5"
    assert ("8H", "8S", "8H#1") in plays_of(state, 0)
    assert rejected(state, Play(0, cards("8H", "9S"))) == "E-5"


# E-6 ---------------------------------------------------------------------------------------


def test_E6_an_ace_turns_the_direction_descending_and_a_two_ascending() -> None:
    state = position([["AH", "KD"], ["2C", "QS"], ["4C", "5C"]], pile=["KS"], stock=["3D"])
    state = play(state, 0, "AH")
    assert state.direction is Direction.DESCENDING
    state = play(state, 1, "2C")
    assert state.direction is Direction.ASCENDING
    assert plays_of(state, 2) == set()


def test_E6_an_ace_on_a_free_pile_turns_descending_whatever_the_direction() -> None:
    state = position([["AS", "KD"], ["3C"], ["4C"]], pile=["XR"])
    assert play(state, 0, "AS").direction is Direction.DESCENDING


# E-7 ---------------------------------------------------------------------------------------


def test_E7_a_joker_goes_on_the_other_colour_and_then_anything_follows() -> None:
    state = position(
        [["XR", "XB", "3D"], ["KS", "4C"], ["5C"]],
        pile=["9S"],
        direction=Direction.DESCENDING,
        rules=ElevatorRules(decks=2),
    )
    assert ("XR",) in plays_of(state, 0)
    assert ("XB",) not in plays_of(state, 0)
    assert rejected(state, Play(0, cards("XB"))) == "E-7"
    state = play(state, 0, "XR")
    assert state.free
    assert state.direction is Direction.DESCENDING
    assert plays_of(state, 1) == {("KS",), ("4C",)}
    state = play(state, 1, "KS")
    assert state.direction is Direction.DESCENDING


def test_E7_a_joker_is_a_play_of_its_own() -> None:
    state = position([["XR", "5H"], ["3C"], ["4C"]], pile=["4S"])
    assert rejected(state, Play(0, cards("XR", "5H"))) == "E-7"


def test_E7_only_the_other_joker_goes_on_a_joker_by_default() -> None:
    hands = [["XR#1", "XB"], ["3C"], ["4C"]]
    default = position(hands, pile=["XR"], rules=ElevatorRules(decks=2))
    assert {("XB",)} <= plays_of(default, 0)
    assert ("XR#1",) not in plays_of(default, 0)
    assert rejected(default, Play(0, cards("XR#1"))) == "E-7"
    either = position(
        hands, pile=["XR"], rules=ElevatorRules(decks=2, joker_on_joker_any_colour=True)
    )
    assert {("XB",), ("XR#1",)} <= plays_of(either, 0)


# E-8 ---------------------------------------------------------------------------------------


def test_E8_a_player_who_cannot_play_passes_and_draws_one_card() -> None:
    state = position([["3H"], ["4C", "5C"], ["6C"]], pile=["KS"], stock=["QH", "JH"])
    assert legal_actions(state, 0) == [Pass(0)]
    after, events = apply(state, Pass(0))
    assert after.hands[0] == cards("3H", "QH")
    assert after.stock == cards("JH")
    assert events == [Passed(0, voluntary=False, drew=cards("QH")[0])]
    assert after.turn == 1  # the drawn card is not played in that turn


def test_E8_a_voluntary_pass_is_allowed_only_right_after_a_play() -> None:
    hands = [["9H", "3H"], ["10S", "10D"], ["JS", "2C"]]
    state = position(hands, pile=["8S"], stock=["4D", "5D"])
    assert rejected(state, Pass(0)) == "E-8"  # the starting card is not a play
    state = play(state, 0, "9H")
    assert Pass(1) in legal_actions(state, 1)  # able to play, but the previous player played
    state = passed(state, 1)
    assert Pass(2) not in legal_actions(state, 2)
    assert rejected(state, Pass(2)) == "E-8"  # after a pass the next must play if able


# E-9 ---------------------------------------------------------------------------------------


def _kopile_table(stock: tuple[str, ...], rules: ElevatorRules | None = None) -> State:
    """Seat 0 plays 9H; seat 1 could answer with 10C but passes; seats 2 and 3 cannot."""
    state = position(
        [["9H", "KD", "5D"], ["3C", "10C"], ["3S", "4S"], ["2S", "5S"]],
        pile=["8S"],
        stock=stock,
        rules=rules or ElevatorRules(),
    )
    return play(state, 0, "9H")


def test_E9_kopile_draws_one_card_per_opponent() -> None:
    state = _kopile_table(("6H", "7H", "8H", "9D", "10S", "JC"))
    state = passed(passed(state, 1), 2)
    after, events = apply(state, Pass(3))
    assert events[-1] == Kopile(0, cards("9D", "10S", "JC"), ())
    assert after.hands[0] == cards("KD", "5D", "9D", "10S", "JC")
    assert after.turn == 0
    assert after.phase is Phase.PLAY


def test_E9_a_short_stock_is_made_up_by_opponents_giving_in_turn_order() -> None:
    state = _kopile_table(("6H", "7H", "8H", "9D"))
    state = passed(passed(state, 1), 2)  # seats 1 and 2 draw 6H and 7H
    state, events = apply(state, Pass(3))  # seat 3 draws 8H; seat 0 takes the last card, 9D
    assert events[-1] == Kopile(0, cards("9D"), (1, 2))
    assert state.phase is Phase.GIVE
    assert rejected(state, Give(2, cards("3S")[0])) == "E-9"
    assert rejected(state, Pass(0)) == "E-9"
    # KD is seat 0's card: not seat 1's to give (C-4).
    assert rejected(state, Give(1, cards("KD")[0])) == "C-4"
    assert {type(action) for action in legal_actions(state, 1)} == {Give}
    state, _ = apply(state, Give(1, cards("3C")[0]))
    state, _ = apply(state, Give(2, cards("3S")[0]))
    assert state.phase is Phase.PLAY
    assert state.turn == 0
    assert state.hands[0] == cards("KD", "5D", "9D", "3C", "3S")
    assert state.hands[1] == cards("10C", "6H")


def test_E9_a_giver_who_gives_away_the_last_card_wins_at_once() -> None:
    state = position([["9H", "KD"], ["3C"], ["4S", "5S"]], pile=["8S"])
    state = play(state, 0, "9H")
    state = passed(state, 1)
    state, events = apply(state, Pass(2))
    assert events[-1] == Kopile(0, (), (1, 2))
    state, events = apply(state, Give(1, cards("3C")[0]))
    assert state.is_over
    assert state.winner == 1
    assert isinstance(events[-1], HandEnded)
    assert events[-1].reason == "out"


def test_E9_after_kopile_the_drawer_and_each_following_player_must_play_if_able() -> None:
    stock = ("QH", "7H", "8H", "9D", "10S", "JC")
    state = _kopile_table(stock)
    state = passed(passed(passed(state, 1), 2), 3)
    assert state.forced_turns == 4
    assert rejected(state, Pass(0)) == "E-9"
    state = play(state, 0, "10S")
    assert rejected(state, Pass(1)) == "E-9"  # a legal voluntary pass under E-8 alone
    relaxed = _kopile_table(stock, ElevatorRules(kopile_forces_round=False))
    relaxed = passed(passed(passed(relaxed, 1), 2), 3)
    assert rejected(relaxed, Pass(0)) == "E-8"
    relaxed = play(relaxed, 0, "10S")
    assert Pass(1) in legal_actions(relaxed, 1)


# E-10 --------------------------------------------------------------------------------------


def test_E10_with_an_empty_stock_play_goes_on_without_drawing() -> None:
    state = position([["3H", "KC"], ["4C", "QD"], ["5C", "AD"]], pile=["KS"])
    after, events = apply(state, Pass(0))
    assert events == [Passed(0, voluntary=False, drew=None)]
    assert after.hands[0] == state.hands[0]
    after = passed(after, 1)
    assert not after.is_over
    assert after.stock == ()
    assert plays_of(after, 2) == {("AD",)}


# E-11 --------------------------------------------------------------------------------------


def test_E11_the_first_out_wins_and_the_rest_rank_by_cards_then_rank_sum() -> None:
    state = position(
        [["9H"], ["3C", "4C"], ["2C", "5C"], ["KC", "XB", "2S"]], pile=["8S"], stock=["2D"]
    )
    after, events = apply(state, Play(0, cards("9H")))
    assert after.is_over
    assert after.winner == 0
    assert after.ranking == ((0,), (1, 2), (3,))
    assert events[-1] == HandEnded(
        reason="out",
        winner=0,
        ranking=((0,), (1, 2), (3,)),
        cards_left=(0, 2, 2, 3),
        rank_sums=(0, 7, 7, 30),
        seed=state.seed.hex(),
    )
    assert rejected(after, Pass(1)) == "E-11"


def test_E11_without_rank_sums_equal_card_counts_share_a_place() -> None:
    rules = ElevatorRules(rank_by_sum=False)
    state = position([["9H"], ["3C", "4C"], ["2C", "KC"]], pile=["8S"], stock=["2D"], rules=rules)
    assert play(state, 0, "9H").ranking == ((0,), (1, 2))


def test_E9_E11_nobody_played_since_the_starter_and_nobody_can_play_ranks_the_hand() -> None:
    """The one blocked end E-9 keeps: no play since the starting card and an empty stock."""
    state = position([["3H", "KC"], ["4H"], ["5D", "6D"]], pile=["KS"])
    after, events = apply(state, Pass(0))
    assert after.is_over
    assert after.end_reason == "blocked"
    assert after.ranking == ((1,), (2,), (0,))
    assert after.winner == 1
    assert isinstance(events[-1], HandEnded)
    # Someone could still play: the hand goes on, and that seat must play (E-8).
    able = position([["3H", "KC"], ["4H"], ["5D", "AD"]], pile=["KS"])
    able = passed(passed(able, 0), 1)
    assert not able.is_over and legal_actions(able, 2) == [Play(2, cards("AD"))]


def test_E9_kopile_repeats_until_a_giver_gives_away_the_last_card() -> None:
    """Kopile applies again whenever the turn comes back to the last player with everyone
    else passing, even when that player passed too: a blocked hand still ends with a seat
    that holds no cards (the stock is empty and nobody can play on 9H)."""
    state = position([["9H", "KD"], ["3C", "4C", "6S"], ["5S", "7C"]], pile=["8S"])
    state = play(state, 0, "9H")
    kopiles = 0
    while not state.is_over:
        actions = legal_actions(state, state.turn)
        assert not any(isinstance(a, Play) for a in actions)
        state, events = apply(state, actions[0])
        kopiles += sum(isinstance(e, Kopile) for e in events)
    assert kopiles == 2
    assert state.end_reason == "out" and state.winner == 2 and state.hands[2] == ()
    assert state.open_play == 0 and len(state.hands[0]) == 5
