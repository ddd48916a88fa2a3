"""The pure table model (no I/O): replay, snapshots, timers as data, forfeits (P-10..P-12),
leaving a table, the end of tables no player is left at (P-1, P-12), and chip tables that
seat players only (P-13)."""

from __future__ import annotations

import pytest
from masa_rules.errors import IllegalAction, RuleViolation
from masa_rules.table_config import BotLevel, GameKind, Mode, SeatConfig, SeatKind, TableConfig
from masa_table_engine.domain.model import (
    AbandonReason,
    AutopilotChanged,
    Created,
    GameAbandoned,
    GameEvents,
    GameFinished,
    Input,
    PlayerAction,
    SeatChange,
    SeatChanged,
    SeatConnectionChanged,
    SeatForfeited,
    Source,
    TableVoided,
    TimerFired,
    TimerKind,
    TurnStarted,
)
from masa_table_engine.domain.table import (
    Table,
    TimerPolicy,
    accept,
    automated_level,
    automated_seat,
    decode_snapshot,
    due_timers,
    encode_snapshot,
    next_deadline,
    replay,
)

TIMERS = TimerPolicy(seat_protection_seconds=100.0, autopilot_after=3)


def _config(humans: int = 1, players: int = 3, mode: Mode = Mode.SINGLES) -> TableConfig:
    seats = tuple(
        SeatConfig(s, SeatKind.HUMAN, player_id=f"p{s}")
        if s < humans
        else SeatConfig(s, SeatKind.BOT, bot_level=BotLevel.EASY)
        for s in range(players)
    )
    return TableConfig(game=GameKind.ELEVATOR, seats=seats, turn_seconds=10.0, mode=mode)


def _play_out(table: Table, at: float) -> tuple[Table, list[PlayerAction], list[float]]:
    inputs: list[PlayerAction] = []
    times: list[float] = []
    while not table.finished:
        seat = table.actor
        assert seat is not None
        action = table.engine.choose(table.game, seat, BotLevel.EASY, bytes([table.sequence % 256]))
        item = PlayerAction(seat, action, Source.BOT)
        table, _ = accept(table, item, at, TIMERS)
        inputs.append(item)
        times.append(at)
        at += 0.5
    return table, inputs, times


def test_a_log_of_inputs_replays_to_the_same_table_and_a_snapshot_round_trips() -> None:
    created = Created("t1", _config(humans=0), b"\x01" * 32)
    table, entry = accept(None, created, 1000.0, TIMERS)
    assert entry.sequence == 1
    assert isinstance(entry.events[0], GameEvents)
    assert isinstance(entry.events[-1], TurnStarted)
    done, inputs, times = _play_out(table, 1001.0)
    assert done.finished and done.sequence == len(inputs) + 1
    assert replay([created, *inputs], [1000.0, *times], TIMERS) == done
    middle = replay([created, *inputs[:5]], [1000.0, *times[:5]], TIMERS)
    assert decode_snapshot(encode_snapshot(middle)) == middle


def test_an_illegal_action_raises_with_the_rule_and_the_table_is_unchanged() -> None:
    table, _ = accept(None, Created("t2", _config(), b"\x02" * 32), 0.0, TIMERS)
    actor = table.actor
    assert actor is not None
    other = (actor + 1) % 3
    action = table.engine.choose(table.game, actor, BotLevel.EASY, b"x")
    with pytest.raises(IllegalAction):
        accept(table, PlayerAction(other, action, Source.PLAYER), 1.0, TIMERS)
    with pytest.raises(RuleViolation):
        accept(None, Created("t3", _config(players=2), b"\x03" * 32), 0.0, TIMERS)


def test_the_turn_timer_is_data_and_three_timeouts_switch_the_autopilot_on() -> None:
    config = TableConfig(
        game=GameKind.ELEVATOR,
        seats=tuple(SeatConfig(s, SeatKind.HUMAN, player_id=f"p{s}") for s in range(3)),
        turn_seconds=10.0,
    )
    table, _ = accept(None, Created("t4", config, b"\x04" * 32), 0.0, TIMERS)
    assert next_deadline(table) == 10.0
    assert due_timers(table, 9.9) == []
    seat = table.actor
    assert seat is not None
    at = 10.0
    for _ in range(3):
        # Keep the seat on turn with repeated timeouts: after each, the autopilot plays once
        # and the others' turns come round again.
        (timer,) = due_timers(table, at)
        assert table.actor is not None
        assert timer == TimerFired(TimerKind.TURN, table.actor)
        table, _ = accept(table, timer, at, TIMERS)
        assert automated_seat(table) == (timer.seat, Source.AUTOPILOT)
        action = table.engine.choose(table.game, timer.seat, BotLevel.NORMAL, b"a")
        table, _ = accept(table, PlayerAction(timer.seat, action, Source.AUTOPILOT), at, TIMERS)
        at += 10.0
    timeouts = {s: status.consecutive_timeouts for s, status in enumerate(table.seats)}
    assert sum(timeouts.values()) == 3


def test_a_forfeited_seat_is_ranked_last_and_played_by_a_bot() -> None:
    """P-12: while another player stays, a forfeited seat is played to the end by a bot."""
    table, _ = accept(None, Created("t5", _config(humans=2), b"\x05" * 32), 0.0, TIMERS)
    table, _ = accept(table, SeatChanged(1, SeatChange.RECONNECTED), 0.0, TIMERS)
    assert all(t.kind is TimerKind.TURN for t in due_timers(table, 99.0))
    forfeit = TimerFired(TimerKind.SEAT_PROTECTION, 0)
    assert forfeit in due_timers(table, 100.0)
    table, entry = accept(table, forfeit, 100.0, TIMERS)
    assert table.seats[0].forfeited and not table.finished
    with pytest.raises(IllegalAction):
        accept(table, SeatChanged(0, SeatChange.RESUMED), 101.0, TIMERS)
    done, _, _ = _play_out(table, 101.0)
    last = done.ranking[-1]
    assert (last.seat, last.forfeited, last.place) == (0, True, 3)
    assert all(not s.forfeited for s in done.ranking[:-1])
    assert isinstance(entry.events[0], SeatForfeited)


def test_P12_a_table_whose_last_player_forfeits_is_finished_at_once_with_the_forfeit_last() -> None:
    """Bots never play on alone: the forfeit of the last human seat ends the game at once, and
    it is finished, not voided: ranked as it stood, the forfeited seat last."""
    table, _ = accept(None, Created("t6", _config(humans=1), b"\x06" * 32), 0.0, TIMERS)
    table, entry = accept(table, TimerFired(TimerKind.SEAT_PROTECTION, 0), 100.0, TIMERS)
    assert table.finished and not table.abandoned and table.unattended
    finished = entry.events[-1]
    assert isinstance(finished, GameFinished) and finished.ranking == table.ranking
    assert (finished.game_no, finished.hands_played) == (1, 0)
    # Every seat is ranked: the two bots by the cards they hold now (E-11), the forfeit last.
    assert [s.seat for s in table.ranking][-1] == 0
    last = table.ranking[-1]
    assert (last.forfeited, last.place, last.player_id) == (True, 3, "p0")
    assert {s.seat for s in table.ranking} == {0, 1, 2}
    assert not any(isinstance(e, GameAbandoned) for e in entry.events)
    assert table.actor is None and due_timers(table, 1e9) == [] and next_deadline(table) is None
    assert automated_seat(table) is None
    assert decode_snapshot(encode_snapshot(table)) == table
    with pytest.raises(IllegalAction):
        accept(table, SeatChanged(0, SeatChange.RECONNECTED), 101.0, TIMERS)


def _chip_table(players: int = 2) -> TableConfig:
    seats = tuple(
        SeatConfig(s, SeatKind.HUMAN, player_id=f"p{s}", hold_id=f"h{s}") for s in range(players)
    )
    return TableConfig(
        game=GameKind.FIFTYONE, seats=seats, turn_seconds=10.0, preset="classic", stake=100
    )


def test_P12_when_both_players_of_a_chip_table_leave_and_forfeit_the_game_is_finished() -> None:
    """The issue's game: two players at a chip table, one quits and forfeits, then the other.
    The game ends finished (GameFinished, not GameAbandoned), both seats ranked and forfeited,
    each carrying its hold, so the ledger keeps both stakes (P-12, P-30)."""
    table, _ = accept(None, Created("t9", _chip_table(), b"\x09" * 32), 0.0, TIMERS)
    for seat in (0, 1):
        table, _ = accept(table, SeatChanged(seat, SeatChange.RECONNECTED), 1.0, TIMERS)
    table, _ = accept(table, SeatChanged(0, SeatChange.LEFT), 2.0, TIMERS)
    table, first = accept(table, TimerFired(TimerKind.SEAT_PROTECTION, 0), 102.0, TIMERS)
    assert isinstance(first.events[0], SeatForfeited) and not table.finished
    table, _ = accept(table, SeatChanged(1, SeatChange.LEFT), 110.0, TIMERS)
    assert not table.finished
    table, last = accept(table, TimerFired(TimerKind.SEAT_PROTECTION, 1), 210.0, TIMERS)
    assert table.finished and not table.abandoned
    assert not any(isinstance(e, GameAbandoned) for e in last.events)
    finished = last.events[-1]
    assert isinstance(finished, GameFinished)
    assert [(s.seat, s.place, s.forfeited, s.hold_id) for s in finished.ranking] == [
        (0, 1, True, "h0"),
        (1, 1, True, "h1"),
    ]


def test_P30_only_a_game_that_cannot_be_completed_is_voided() -> None:
    """GameAbandoned stays for an operator's void (and a state that cannot be rebuilt)."""
    table, _ = accept(None, Created("t10", _chip_table(), b"\x0a" * 32), 0.0, TIMERS)
    table, entry = accept(table, TableVoided(AbandonReason.VOIDED, "stuck"), 1.0, TIMERS)
    assert table.finished and table.abandoned and table.ranking == ()
    assert entry.events == (GameAbandoned(1, 0, AbandonReason.VOIDED),)


def test_P13_a_chip_table_seats_players_only() -> None:
    bots = _chip_table(players=3)
    bots = TableConfig(
        game=bots.game,
        seats=(*bots.seats[:2], SeatConfig(2, SeatKind.BOT, bot_level=BotLevel.NORMAL)),
        turn_seconds=bots.turn_seconds,
        preset=bots.preset,
        stake=bots.stake,
    )
    with pytest.raises(RuleViolation) as refused:
        accept(None, Created("t11", bots, b"\x0b" * 32), 0.0, TIMERS)
    assert refused.value.rule == "P-13"
    # Without a stake, the same seats are a table (bots play training and free tables).
    free = TableConfig(
        game=bots.game,
        seats=tuple(
            SeatConfig(s.seat, s.kind, s.player_id, bot_level=s.bot_level) for s in bots.seats
        ),
        turn_seconds=bots.turn_seconds,
        preset=bots.preset,
    )
    table, _ = accept(None, Created("t11", free, b"\x0b" * 32), 0.0, TIMERS)
    assert not table.finished


def test_P1_leaving_a_training_table_hands_the_seat_to_a_bot_and_the_last_leaver_ends_it() -> None:
    config = _config(humans=2, mode=Mode.TRAINING)
    table, _ = accept(None, Created("t7", config, b"\x07" * 32), 0.0, TIMERS)
    table, _ = accept(table, SeatChanged(0, SeatChange.RECONNECTED), 1.0, TIMERS)
    table, first = accept(table, SeatChanged(0, SeatChange.LEFT), 2.0, TIMERS)
    status = table.seats[0]
    assert (status.left, status.connected, status.forfeited, status.autopilot) == (
        True,
        False,
        True,
        True,
    )
    assert [type(e) for e in first.events] == [
        SeatConnectionChanged,
        SeatForfeited,
        AutopilotChanged,
    ]
    assert first.events[0] == SeatConnectionChanged(0, False, None, left=True)
    assert not table.finished
    with pytest.raises(IllegalAction):
        accept(table, SeatChanged(0, SeatChange.LEFT), 3.0, TIMERS)
    table, last = accept(table, SeatChanged(1, SeatChange.LEFT), 4.0, TIMERS)
    # Decision: a training table its last player left is finished too, never voided; the bot
    # ranked as it stood, both players who left behind it. It moves no chips (P-1).
    assert table.finished and not table.abandoned
    assert isinstance(last.events[-1], GameFinished)
    assert [(s.seat, s.forfeited) for s in table.ranking] == [(2, False), (0, True), (1, True)]
    assert [s.place for s in table.ranking] == [1, 2, 2]
    created = Created("t7", config, b"\x07" * 32)
    inputs: list[Input] = [
        created,
        SeatChanged(0, SeatChange.RECONNECTED),
        SeatChanged(0, SeatChange.LEFT),
        SeatChanged(1, SeatChange.LEFT),
    ]
    assert replay(inputs, [0.0, 1.0, 2.0, 4.0], TIMERS) == table


def test_P12_leaving_a_table_with_stakes_protects_the_seat_until_it_forfeits() -> None:
    """Leaving is a chosen disconnection: the player may come back until protection runs out."""
    table, _ = accept(None, Created("t8", _config(humans=1), b"\x08" * 32), 0.0, TIMERS)
    table, _ = accept(table, SeatChanged(0, SeatChange.RECONNECTED), 1.0, TIMERS)
    table, entry = accept(table, SeatChanged(0, SeatChange.LEFT), 5.0, TIMERS)
    assert entry.events == (SeatConnectionChanged(0, False, 105.0, left=True),)
    assert table.seats[0].left and not table.seats[0].forfeited and not table.finished
    table, _ = accept(table, SeatChanged(0, SeatChange.RECONNECTED), 50.0, TIMERS)
    assert not table.seats[0].left and table.seats[0].connected
    table, _ = accept(table, SeatChanged(0, SeatChange.LEFT), 60.0, TIMERS)
    assert TimerFired(TimerKind.SEAT_PROTECTION, 0) not in due_timers(table, 159.0)
    assert TimerFired(TimerKind.SEAT_PROTECTION, 0) in due_timers(table, 160.0)
    table, entry = accept(table, TimerFired(TimerKind.SEAT_PROTECTION, 0), 160.0, TIMERS)
    assert table.finished and not table.abandoned and isinstance(entry.events[-1], GameFinished)


def test_p11_the_engines_own_fallback_for_a_hard_seat_is_the_normal_policy() -> None:
    """Issue 23: the search is the bot service's; when it is late the engine plays the fast
    normal policy for a hard seat (a bot's, or a player's autopilot at the lobby's level), in
    either game."""
    elevator = TableConfig(
        game=GameKind.ELEVATOR,
        seats=(
            SeatConfig(0, SeatKind.HUMAN, player_id="p0", bot_level=BotLevel.HARD),
            SeatConfig(1, SeatKind.BOT, bot_level=BotLevel.HARD),
            SeatConfig(2, SeatKind.BOT, bot_level=BotLevel.HARD),
        ),
        turn_seconds=10.0,
    )
    fiftyone = TableConfig(
        game=GameKind.FIFTYONE,
        seats=tuple(SeatConfig(s, SeatKind.BOT, bot_level=BotLevel.HARD) for s in range(4)),
        turn_seconds=10.0,
        mode=Mode.TRAINING,
    )
    for name, config in (("hard", elevator), ("hard-51", fiftyone)):
        table, _ = accept(None, Created(name, config, b"\x07" * 32), 0.0, TIMERS)
        assert table.config.seats[0].bot_level is BotLevel.HARD
        for _ in range(12):
            # The seat that must act: the turn's, or one a 51 query (F-80) waits for.
            seat = table.engine.waiting(table.game)[0]
            salt = table.sequence.to_bytes(8, "big")
            hard = table.engine.choose(table.game, seat, BotLevel.HARD, salt)
            assert hard == table.engine.choose(table.game, seat, BotLevel.NORMAL, salt)
            table, _ = accept(table, PlayerAction(seat, hard, Source.FALLBACK), 1.0, TIMERS)


def test_p11_p12_the_autopilot_plays_at_the_seats_level_and_a_forfeited_seat_at_normal() -> None:
    seats = (
        SeatConfig(0, SeatKind.HUMAN, player_id="p0", bot_level=BotLevel.HARD),
        SeatConfig(1, SeatKind.HUMAN, player_id="p1", bot_level=BotLevel.HARD),
        SeatConfig(2, SeatKind.BOT, bot_level=BotLevel.EASY),
    )
    config = TableConfig(game=GameKind.ELEVATOR, seats=seats, turn_seconds=10.0)
    table, _ = accept(None, Created("levels", config, b"\x09" * 32), 0.0, TIMERS)
    table, _ = accept(table, SeatChanged(1, SeatChange.RECONNECTED), 0.0, TIMERS)
    assert [automated_level(table, seat) for seat in range(3)] == [
        BotLevel.HARD,
        BotLevel.HARD,
        BotLevel.EASY,
    ]
    table, _ = accept(table, TimerFired(TimerKind.SEAT_PROTECTION, 0), 100.0, TIMERS)
    assert table.seats[0].forfeited
    assert automated_level(table, 0) is BotLevel.NORMAL
    assert automated_level(table, 1) is BotLevel.HARD
