"""The pure domain: lobbies (P-2), the shipped set, filters, rounds by rating (chip tables
seat players only, P-13), ratings, a lobby's recent waits and whether it seats a player now."""

from __future__ import annotations

from collections.abc import Callable
from importlib.resources import files

import pytest
from masa_matchmaking.domain.catalog import parse_lobbies
from masa_matchmaking.domain.errors import BadInput, InvalidLobby, Refused
from masa_matchmaking.domain.lobby import MatchingPolicy
from masa_matchmaking.domain.lobby_filter import parse_filter
from masa_matchmaking.domain.matching import match_round, players_needed
from masa_matchmaking.domain.rating import PlayerRating, Result, rate_game
from masa_matchmaking.domain.ticket import Failure, Placement, Ticket, TicketState
from masa_matchmaking.domain.waits import RecentWaits, WaitSummary, seats_now
from masa_rules.table_config import BotLevel, GameKind, Mode

SHIPPED = parse_lobbies((files("masa_matchmaking") / "lobbies.toml").read_text())
BY_ID = {lobby.lobby_id: lobby for lobby in SHIPPED}


def _ticket(
    n: int,
    rating: float = 25.0,
    at: float = 0.0,
    *,
    party_size: int = 1,
    party_code: str = "",
    bot_level: BotLevel | None = None,
    front: bool = False,
) -> Ticket:
    return Ticket(
        f"t{n}",
        f"r{n}",
        "x",
        f"p{n}",
        f"p{n}",
        TicketState.SEARCHING,
        at,
        at + 300,
        at,
        party_size=party_size,
        party_code=party_code,
        bot_level=bot_level,
        rating=rating,
        front=front,
    )


def test_p2_the_shipped_lobbies_cover_every_game_preset_and_mode() -> None:
    assert {
        "salon-51",
        "salon-81",
        "salon-escalating",
        "salon-teams",
        "classic",
        "remi",
        "elevator",
        "training-51",
        "training-elevator",
    } <= set(BY_ID)
    assert BY_ID["salon-51"].options.open_threshold == 51
    assert BY_ID["salon-81"].options.open_threshold == 81
    assert BY_ID["salon-escalating"].options.escalating_threshold is True
    assert BY_ID["salon-teams"].mode is Mode.TEAMS
    assert (BY_ID["elevator"].min_seats, BY_ID["elevator"].max_seats) == (3, 6)
    assert {lobby.game for lobby in SHIPPED if lobby.training} == set(GameKind)
    # P-13: no chip lobby fills with bots, the Elevator one included.
    assert not any(lobby.bot_fill.enabled for lobby in SHIPPED if lobby.chips)
    assert BY_ID["elevator"].chips


@pytest.mark.parametrize(
    ("change", "rule"),
    [
        ('game = "fiftyone"\npreset = "salon"\nseats = 3', "F-2"),
        ('game = "fiftyone"\npreset = "remi"\nseats = 4\nescalating_threshold = true', "F-41"),
        ('game = "fiftyone"\npreset = "salon"\nseats = 4\nopen_threshold = 71', "F-40"),
        ('game = "fiftyone"\npreset = "remi"\nmode = "teams"\nseats = 4', "F-2"),
        ('game = "elevator"\nmin_seats = 2\nmax_seats = 6', "E-1"),
        ('game = "elevator"\nmode = "teams"\nseats = 4', "P-1"),
        ('game = "elevator"\nmode = "training"\nseats = 4\nstake = 10', "P-1"),
        ('game = "elevator"\nseats = 4\nstake = 10\nbot_fill = { enabled = true }', "P-13"),
    ],
)
def test_p2_a_lobby_the_rules_refuse_does_not_load(change: str, rule: str) -> None:
    with pytest.raises(InvalidLobby) as refused:
        parse_lobbies(f'[[lobby]]\nid = "bad"\nname = "Bad"\n{change}\n')
    assert refused.value.rule == rule


@pytest.mark.parametrize(
    "text",
    [
        '[[lobby]]\nid = "a"\nname = "A"\ngame = "elevator"\nseats = 4\nstak = 5\n',
        '[[lobby]]\nid = "a"\nname = "A"\ngame = "elevator"\nseats = true\n',
        '[[lobby]]\nid = "A!"\nname = "A"\ngame = "elevator"\nseats = 4\n',
        '[[lobby]]\nid = "a"\nname = "A"\ngame = "elevator"\nseats = 4\n' * 2,
        '[[lobby]]\nid = "a"\nname = "A"\ngame = "chess"\nseats = 4\n',
        '[[lobby]]\nid = "a"\nname = "A"\ngame = "elevator"\nseats = 4\nplace_shares = [5000]\n',
        "not toml [",
        "",
    ],
)
def test_p2_a_malformed_lobby_file_is_refused_with_the_reason(text: str) -> None:
    with pytest.raises(InvalidLobby):
        parse_lobbies(text)


def test_p2_filters_read_aip160_comparisons_and_refuse_the_rest() -> None:
    def ids(text: str) -> set[str]:
        predicate = parse_filter(text)
        return {lobby.lobby_id for lobby in SHIPPED if predicate(lobby)}

    assert ids("game = ELEVATOR") == {"elevator", "training-elevator"}
    assert ids('mode = "MODE_TEAMS"') == {"salon-teams"}
    assert ids("game = fiftyone AND stake >= 100 AND mode != teams") == {
        "salon-51",
        "salon-81",
        "salon-escalating",
    }
    assert ids("preset = REMI") == {"remi"}
    assert ids("") == set(BY_ID)
    for bad in ("game = chess", "stake = lots", "mode < TEAMS", "colour = red", "game = A OR b"):
        with pytest.raises(BadInput):
            parse_filter(bad)


def test_p2_a_full_table_of_close_ratings_is_matched_at_once() -> None:
    lobby = BY_ID["salon-51"]
    queue = [_ticket(i, 25 + i) for i in range(5)]
    (plan,) = match_round(lobby, queue, 0.0)
    assert plan.ticket_ids == ("t0", "t1", "t2", "t3")
    assert plan.spread == 3


def test_p2_the_allowed_spread_widens_with_waiting() -> None:
    lobby = BY_ID["salon-51"]
    queue = [_ticket(0, 10), _ticket(1, 20), _ticket(2, 30), _ticket(3, 40)]
    assert match_round(lobby, queue, 1.0) == []
    assert match_round(lobby, queue, 20.0) == []  # 5 + 0.5 * 20 = 15 < 30
    (plan,) = match_round(lobby, queue, 31.0)  # open after 30 s
    assert plan.spread == 30
    policy = MatchingPolicy(base_spread=5, spread_per_second=1, open_after_seconds=10)
    assert (policy.spread(0), policy.spread(4), policy.spread(10)) == (5, 9, float("inf"))


def test_p2_the_front_of_the_queue_goes_first() -> None:
    lobby = BY_ID["salon-51"]
    queue = [_ticket(i, 25, at=float(i)) for i in range(4)]
    queue.append(_ticket(9, 25, at=9.0, front=True))
    (plan,) = match_round(lobby, queue, 10.0)
    assert "t9" in plan.ticket_ids and "t3" not in plan.ticket_ids


def test_p2_a_round_makes_at_most_the_tables_it_may_place_oldest_first() -> None:
    lobby = BY_ID["salon-51"]
    queue = [_ticket(i, 25, at=float(i)) for i in range(40)]
    plans = match_round(lobby, queue, 100.0, limit=3)
    assert [plan.ticket_ids for plan in plans] == [
        tuple(f"t{n}" for n in range(first, first + 4)) for first in (0, 4, 8)
    ]
    assert match_round(lobby, queue, 100.0, limit=0) == []


def test_p2_a_long_queue_of_equal_ratings_seats_everyone_once_in_queue_order() -> None:
    """The case that once made a round quadratic (each anchor walked past every unit seated
    before it): ten thousand players of one rating make 2,500 tables, each of four neighbours
    in the queue."""
    lobby = BY_ID["salon-51"]
    queue = [_ticket(i, 25, at=float(i)) for i in range(10_000)]
    plans = match_round(lobby, queue, 20_000.0)
    assert len(plans) == 2_500
    seated = [ticket_id for plan in plans for ticket_id in plan.ticket_ids]
    assert seated == [f"t{n}" for n in range(10_000)]


def test_p2_short_tables_and_bot_fill_wait_their_time() -> None:
    elevator = BY_ID["elevator"]
    three = [_ticket(i) for i in range(3)]
    assert match_round(elevator, three, 5.0) == []
    (plan,) = match_round(elevator, three, 10.0)
    assert len(plan.seats) == 3 and not any(seat.bot for seat in plan.seats)
    # Bots complete a short table only in a lobby without a stake.
    (free,) = parse_lobbies(
        '[[lobby]]\nid = "free"\nname = "Free"\ngame = "elevator"\nmin_seats = 3\n'
        "max_seats = 6\nbot_fill = { enabled = true, fill_after_seconds = 10 }\n"
    )
    alone = [_ticket(0)]
    assert match_round(free, alone, 5.0) == []
    (filled,) = match_round(free, alone, 10.0)
    assert [seat.bot for seat in filled.seats] == [False, True, True]
    assert match_round(BY_ID["salon-51"], alone, 3_000.0) == []  # no bots in salon by default


def test_P13_a_chip_lobby_never_plans_a_bot_seat_however_long_its_players_wait() -> None:
    """A table that cannot be filled keeps its players waiting: one or two players alone in a
    chip lobby are never seated with bots, and every table planned is players only."""
    for lobby in (lobby for lobby in SHIPPED if lobby.chips):
        for players in range(1, lobby.max_seats + 1):
            plans = match_round(lobby, [_ticket(i) for i in range(players)], 86_400.0)
            assert all(not seat.bot for plan in plans for seat in plan.seats), lobby.lobby_id
            seated = sum(len(plan.seats) for plan in plans)
            assert seated == (players if players >= lobby.min_seats else 0), lobby.lobby_id


def test_P13_a_chip_lobby_needs_its_smallest_table_of_players_where_bots_never_fill() -> None:
    elevator, salon = BY_ID["elevator"], BY_ID["salon-51"]
    assert [players_needed(elevator, n) for n in range(5)] == [3, 2, 1, 0, 0]
    assert [players_needed(salon, n) for n in (1, 3, 4, 9)] == [3, 1, 0, 0]
    # Where bots complete the tables, nobody more is needed.
    assert players_needed(BY_ID["training-51"], 1) == 0
    (free,) = parse_lobbies(
        '[[lobby]]\nid = "free"\nname = "Free"\ngame = "elevator"\nmin_seats = 3\n'
        "max_seats = 6\nbot_fill = { enabled = true }\n"
    )
    assert players_needed(free, 1) == 0


def test_p1_training_fills_at_once_with_the_asked_level() -> None:
    (plan,) = match_round(BY_ID["training-51"], [_ticket(0, bot_level=BotLevel.EASY)], 0.0)
    assert [seat.bot_level for seat in plan.seats] == [None, *[BotLevel.EASY] * 3]


def test_p1_teams_seat_a_party_as_partners_opposite() -> None:
    lobby = BY_ID["salon-teams"]
    queue = [
        _ticket(0, party_size=2, party_code="AAAAAAAA"),
        _ticket(1),
        _ticket(2),
        _ticket(3, party_size=2, party_code="AAAAAAAA"),
    ]
    (plan,) = match_round(lobby, queue, 0.0)
    seat_of = {seat.ticket_id: seat.seat for seat in plan.seats}
    assert {seat_of["t0"], seat_of["t3"]} in ({0, 2}, {1, 3})
    assert {seat_of["t1"], seat_of["t2"]} in ({0, 2}, {1, 3})
    # Half a party waits for its partner.
    assert match_round(lobby, [queue[0], queue[1], queue[2]], 0.0) == []


def test_p2_a_ticket_moves_only_along_its_lifecycle() -> None:
    ticket = _ticket(0)
    placement = Placement("t", 0, 4, BotLevel.NORMAL, 1, "me", 1.0)
    placing = ticket.placing(placement)
    with pytest.raises(Refused) as refused:
        placing.cancelled(2.0)
    assert refused.value.reason == "TICKET_PLACING"
    matched = placing.matched(2.0)
    changes: tuple[Callable[[Ticket], Ticket], ...] = (
        lambda t: t.cancelled(3.0),
        lambda t: t.placing(placement),
        lambda t: t.expired(3.0),
    )
    for change in changes:
        with pytest.raises(Refused):
            change(matched)
    assert placing.requeued(3.0).requeues == 1
    # P-30: a player put back because of another player goes first, uncounted.
    innocent = placing.requeued(3.0, counted=False)
    assert (innocent.requeues, innocent.front, innocent.state) == (0, True, TicketState.SEARCHING)
    assert ticket.failed(Failure("X", "y"), 2.0).state is TicketState.FAILED


def test_p30_ratings_follow_the_final_ranking_and_teams_move_together() -> None:
    ratings = {p: PlayerRating(p, GameKind.FIFTYONE) for p in "abcd"}
    singles = rate_game([Result("a", 1), Result("b", 2), Result("c", 3)], ratings, teams=False)
    after = {o.player_id: o.after[0] for o in singles}
    assert after["a"] > 25 > after["c"]
    teams = rate_game(
        [Result("a", 1, 0), Result("c", 1, 0), Result("b", 3, 1), Result("d", 3, 1)],
        ratings,
        teams=True,
    )
    moved = {o.player_id: o.after[0] - 25 for o in teams}
    assert moved["a"] == pytest.approx(moved["c"])
    assert moved["a"] > 0 > moved["b"]
    assert rate_game([Result("a", 1)], ratings, teams=False) == []
    rating = ratings["a"].applied("t/1", 27.0, 8.0, 1.0)
    assert rating.has_applied("t/1") and rating.games == 1


def _seated(n: int, lobby: str, created: float, seated: float) -> Ticket:
    ticket = _ticket(n, at=created)
    return Ticket(
        ticket.ticket_id,
        ticket.request_id,
        lobby,
        ticket.player_id,
        ticket.display_name,
        TicketState.MATCHED,
        created,
        created + 300,
        seated,
    )


def test_recent_waits_keep_the_last_placements_of_each_lobby_once_each() -> None:
    waits = RecentWaits(["elevator"], keep=10)
    assert waits.summary("elevator") is None
    # Heard out of order (a mirror loading the bucket), and one of them twice.
    for n in reversed(range(1, 21)):
        waits.heard(_seated(n, "elevator", created=100.0 * n, seated=100.0 * n + n))
    waits.heard(_seated(20, "elevator", created=2000.0, seated=2020.0))
    # Only the last 10 seated count: waits 11 .. 20 s.
    assert waits.summary("elevator") == WaitSummary(10, 15.5, 19.0)
    # A searching ticket, or a lobby not kept, counts nothing.
    waits.heard(_ticket(30, at=5000.0))
    waits.heard(_seated(31, "elsewhere", created=0.0, seated=900.0))
    assert waits.summary("elevator") == WaitSummary(10, 15.5, 19.0)
    assert waits.summary("elsewhere") is None


def test_P13_a_lobby_seats_a_player_now_when_one_more_makes_a_table() -> None:
    elevator = BY_ID["elevator"]  # 3 to 6 players, a short table after 10 s
    training = BY_ID["training-elevator"]
    assert seats_now(training, [], 0.0)
    assert not seats_now(elevator, [], 0.0)
    two = [_ticket(1, at=0.0), _ticket(2, at=1.0)]
    # Two search and a third makes a short table once the first has waited the short wait.
    assert not seats_now(elevator, two, elevator.short_table_after_seconds - 1)
    assert seats_now(elevator, two, elevator.short_table_after_seconds)
    five = [_ticket(n, at=100.0) for n in range(5)]
    assert seats_now(elevator, five, 100.0)
