"""What the terminal says at the end of a hand and a game, and how it names and counts: every
result has its reason and labelled numbers, players always have names, one card is one card."""

from __future__ import annotations

from masa.common.v1 import game_pb2
from masa.table.v1 import event_pb2, table_pb2, view_pb2
from masa_client.render import Style, board, count, describe, game_over, seat_name, with_names
from masa_client.session import public_view

PLAIN = Style(colour=False)


def elevator_table(
    cards: list[int], state: view_pb2.Table.State.ValueType = view_pb2.Table.STATE_FINISHED
) -> view_pb2.TableView:
    seats = [
        view_pb2.SeatState(seat=0, kind=game_pb2.SEAT_KIND_HUMAN, player_id="alice"),
        view_pb2.SeatState(seat=1, kind=game_pb2.SEAT_KIND_BOT, display_name="Ayla"),
        view_pb2.SeatState(seat=2, kind=game_pb2.SEAT_KIND_BOT),
    ]
    for seat, held in zip(seats, cards, strict=True):
        seat.card_count = held
    places = sorted(range(3), key=lambda seat: cards[seat])
    return view_pb2.TableView(
        table=view_pb2.Table(
            table_id="t1",
            state=state,
            config=game_pb2.TableConfig(game=game_pb2.GAME_KIND_ELEVATOR),
        ),
        hand_no=1,
        seats=seats,
        elevator=view_pb2.ElevatorTable(),
        ranking=[
            game_pb2.Standing(seat=seat, place=place + 1, total=cards[seat])
            for place, seat in enumerate(places)
        ],
    )


def test_every_player_has_a_name_and_bots_say_so() -> None:
    table = elevator_table([3, 0, 5])
    assert [seat_name(table, seat, me=0) for seat in range(3)] == [
        "alice (you)",
        "Ayla [bot]",
        "Kerem [bot]",
    ]
    assert seat_name(table, 7) == "a player"
    table.seats[2].bot_level = game_pb2.BOT_LEVEL_HARD
    table.seats[1].bot_level = game_pb2.BOT_LEVEL_EASY
    assert [seat_name(table, seat) for seat in (1, 2)] == ["Ayla [easy bot]", "Kerem [hard bot]"]


def test_a_refusal_from_the_server_names_the_players_it_mentions() -> None:
    table = elevator_table([3, 0, 5])
    assert with_names("it is seat 1's turn, not seat 0's", table) == (
        "it is Ayla [bot]'s turn, not alice's"
    )


def test_counts_agree_with_their_number() -> None:
    assert [count(n, "card") for n in (0, 1, 2)] == ["0 cards", "1 card", "2 cards"]
    text = board(elevator_table([1, 0, 1], state=view_pb2.Table.STATE_PLAYING), PLAIN)
    assert "1 card" in text and "1 cards" not in text


def test_the_end_of_an_elevator_game_says_who_went_out_and_what_the_numbers_are() -> None:
    lines = game_over(elevator_table([3, 0, 5]), PLAIN, me=0)
    assert lines[0] == "game over: Ayla [bot] went out: no cards left (E-11)"
    assert lines[1].split() == ["1.", "Ayla", "[bot]", "0", "cards", "left"]
    assert lines[2].split() == ["2.", "alice", "(you)", "3", "cards", "left"]


def test_a_hand_nobody_went_out_of_says_how_it_was_ranked() -> None:
    lines = game_over(elevator_table([3, 2, 5]), PLAIN)
    assert lines[0].startswith("game over: nobody could play on with the stock empty")
    assert "cards left, then by the sum of their ranks (E-9, E-11)" in lines[0]


def test_a_voided_table_says_it_could_not_be_completed_and_the_stakes_went_back() -> None:
    """P-30: only a game that cannot be completed is voided."""
    (line,) = game_over(elevator_table([3, 2, 5], state=view_pb2.Table.STATE_VOIDED), PLAIN)
    assert line.startswith("game voided: it could not be completed")
    assert "every stake went back (P-30)" in line


def test_P12_a_table_every_player_left_says_so_and_ranks_them_last() -> None:
    table = elevator_table([3, 2, 5])
    (alice,) = [s for s in table.ranking if s.seat == 0]
    alice.player_id, alice.forfeited = "alice", True
    lines = game_over(table, PLAIN, me=0)
    assert lines[0] == (
        "game over: every player left the table, so it ended at once, ranked as it stood (P-12)"
    )
    assert any("alice (you)" in line and "forfeited (P-12)" in line for line in lines[1:])
    # A table of bots only, or one a player stayed at to the end, ends as the rules say.
    assert "every player left" not in game_over(elevator_table([3, 2, 5]), PLAIN)[0]


def test_a_finished_51_hand_names_the_finisher_the_finish_and_labels_the_points() -> None:
    table = elevator_table([0, 0, 0], state=view_pb2.Table.STATE_PLAYING)
    table.table.config.game = game_pb2.GAME_KIND_FIFTYONE
    finished = event_pb2.HandFinished(
        hand_no=2,
        finisher_seat=1,
        finish_kinds=[event_pb2.FINISH_KIND_WITH_JOKER],
        end_reason=event_pb2.HAND_END_REASON_OUT,
        scores=[
            event_pb2.HandScore(seat=0, score=46, total=80),
            event_pb2.HandScore(seat=1, score=0, total=12),
        ],
    )
    text = describe(event_pb2.TableEvent(hand_finished=finished), table, PLAIN, me=0)
    assert text.splitlines()[0] == "— hand 2 over: Ayla [bot] finished with a joker —"
    assert "alice (you) +46 points (total 80)" in text


def test_the_autopilot_taking_over_tells_the_player_how_to_stop_it() -> None:
    table = elevator_table([3, 2, 5], state=view_pb2.Table.STATE_PLAYING)
    on = event_pb2.TableEvent(
        autopilot_changed=event_pb2.AutopilotChanged(
            seat=0, on=True, reason=event_pb2.AUTOPILOT_REASON_TIMEOUTS
        )
    )
    assert "type 'resume'" in describe(on, table, PLAIN, me=0)
    table.seats[0].autopilot = True
    view = view_pb2.SeatView(table=table, seat=0)
    assert "the autopilot is playing for you (P-11): type 'resume'" in board(view, PLAIN)


def test_a_stalled_51_hand_says_why_nobody_finished() -> None:
    table = elevator_table([0, 0, 0], state=view_pb2.Table.STATE_PLAYING)
    table.table.config.game = game_pb2.GAME_KIND_FIFTYONE
    stalled = event_pb2.HandFinished(hand_no=4, end_reason=event_pb2.HAND_END_REASON_STALLED)
    text = describe(event_pb2.TableEvent(hand_finished=stalled), table, PLAIN)
    assert text.splitlines()[0] == (
        "— hand 4 over: rounds went by without a draw from the stock (stall guard): nobody "
        "finished (F-64) —"
    )


def test_a_watcher_with_a_seat_at_the_table_reads_the_result_from_its_seats_view() -> None:
    """``masa watch`` of one's own table: GetTable answers a seated caller with its seat's view,
    whose public table carries the result (E-11), not an empty spectators' view."""
    seated = table_pb2.GetTableResponse(
        seat_view=view_pb2.SeatView(seat=0, table=elevator_table([3, 0, 5]))
    )
    watching = table_pb2.GetTableResponse(spectator_view=elevator_table([3, 0, 5]))
    for answer in (seated, watching):
        lines = game_over(public_view(answer), PLAIN)
        assert lines[0] == "game over: Ayla [bot] went out: no cards left (E-11)"
        assert len(lines) == 4


def test_P12_a_forfeited_seat_is_told_a_bot_plays_it_only_while_the_game_goes_on() -> None:
    finished = elevator_table([3, 0, 5])
    finished.seats[0].forfeited = True
    playing = elevator_table([3, 1, 5], state=view_pb2.Table.STATE_PLAYING)
    playing.seats[0].forfeited = True
    assert "a bot plays it to the end" in board(view_pb2.SeatView(seat=0, table=playing), PLAIN)
    shown = board(view_pb2.SeatView(seat=0, table=finished), PLAIN)
    assert "a bot plays it to the end" not in shown
    assert "game over: Ayla [bot] went out: no cards left (E-11)" in shown
