"""The pure table model over the 51 engine: lobby options, whole games with every preset and team
mode, the F-80 query window as a timer, a timed-out turn played out by the autopilot, replay."""

from __future__ import annotations

import pytest
from masa_rules import fiftyone
from masa_rules.errors import RuleViolation
from masa_rules.table_config import (
    BotLevel,
    GameKind,
    GameOptions,
    Mode,
    SeatConfig,
    SeatKind,
    TableConfig,
)
from masa_table_engine.domain.model import (
    Created,
    GameEvents,
    Input,
    PlayerAction,
    Source,
    TimerKind,
    TurnStarted,
    TurnTimedOut,
)
from masa_table_engine.domain.table import (
    Table,
    TimerPolicy,
    accept,
    automated_seat,
    decode_snapshot,
    due_timers,
    encode_snapshot,
    replay,
)

TIMERS = TimerPolicy(query_seconds=2.0)
SEED = bytes(range(32))


def _config(
    preset: str,
    players: int = 4,
    *,
    humans: int = 0,
    mode: Mode = Mode.TRAINING,
    options: GameOptions | None = None,
) -> TableConfig:
    seats = tuple(
        SeatConfig(s, SeatKind.HUMAN, player_id=f"p{s}")
        if s < humans
        else SeatConfig(s, SeatKind.BOT)
        for s in range(players)
    )
    return TableConfig(
        game=GameKind.FIFTYONE,
        seats=seats,
        turn_seconds=10.0,
        preset=preset,
        mode=mode,
        options=options or GameOptions(hands_per_game=1),
    )


def _move(table: Table, seat: int) -> object:
    return table.engine.choose(table.game, seat, BotLevel.NORMAL, table.sequence.to_bytes(8, "big"))


def _play_out(table: Table) -> tuple[Table, list[Input], list[float]]:
    inputs: list[Input] = []
    times: list[float] = []
    while not table.finished:
        automated = automated_seat(table)
        assert automated is not None
        seat, source = automated
        item = PlayerAction(seat, _move(table, seat), source)
        table, _ = accept(table, item, 1.0, TIMERS)
        inputs.append(item)
        times.append(1.0)
    return table, inputs, times


@pytest.mark.parametrize(
    ("preset", "players", "mode", "options"),
    [
        ("classic", 4, Mode.TRAINING, GameOptions(hands_per_game=1, open_threshold=71)),
        ("classic", 2, Mode.SINGLES, GameOptions(hands_per_game=1)),
        ("remi", 3, Mode.TRAINING, GameOptions(hands_per_game=1)),
        ("salon", 4, Mode.TRAINING, GameOptions(hands_per_game=2, escalating_threshold=True)),
        ("salon", 4, Mode.TEAMS, GameOptions(hands_per_game=2)),
    ],
)
def test_bot_games_of_every_preset_finish_replay_and_snapshot(
    preset: str, players: int, mode: Mode, options: GameOptions
) -> None:
    """F-95..F-97, P-1: a finished game ranks every seat; replay and snapshots reproduce it."""
    config = _config(preset, players, mode=mode, options=options)
    created = Created("t-51", config, SEED)
    table, _ = accept(None, created, 0.0, TIMERS)
    assert isinstance(table.game, fiftyone.State)
    finished, inputs, times = _play_out(table)
    assert sorted(s.seat for s in finished.ranking) == list(range(players))
    assert finished.ranking[0].place == 1
    if mode is Mode.TEAMS:
        places = {s.seat: s.place for s in finished.ranking}
        assert places[0] == places[2] and places[1] == places[3]
        assert {s.team for s in finished.ranking if s.seat in (0, 2)} == {0}
    replayed = replay([created, *inputs], [0.0, *times], TIMERS)
    assert replayed.game == finished.game
    assert decode_snapshot(encode_snapshot(finished)).game == finished.game


def test_lobby_options_the_preset_forbids_are_refused_with_the_rule() -> None:
    """F-2, F-40, F-41, F-95, F-96: seats, thresholds and game length come from the lobby and
    are checked by masa_rules.lobby."""
    bad = [
        (_config("salon", 3), "F-2"),
        (_config("remi", 4, mode=Mode.TEAMS), "F-2"),
        (_config("classic", options=GameOptions(open_threshold=70)), "F-40"),
        (_config("remi", 3, options=GameOptions(escalating_threshold=True)), "F-41"),
        (_config("classic", options=GameOptions(hands_per_game=4)), "F-95"),
        (_config("classic", options=GameOptions(hands_per_game=99)), "F-95"),
        (_config("salon", options=GameOptions(hands_per_game=1000)), "F-96"),
    ]
    for config, rule in bad:
        with pytest.raises(RuleViolation) as error:
            accept(None, Created("bad", config, SEED), 0.0, TIMERS)
        assert error.value.rule == rule


def _to_query(table: Table) -> Table:
    """Play (every seat a silent human, moved by the policy) until a query opens (F-80)."""
    at = 1.0
    for _ in range(2000):
        if table.engine.phase(table.game) == "query":
            return table
        seat = table.engine.waiting(table.game)[0]
        table, _ = accept(table, PlayerAction(seat, _move(table, seat), Source.PLAYER), at, TIMERS)
    raise AssertionError("no query opened")


def test_an_unanswered_query_gives_when_its_window_closes() -> None:
    """F-80: the query window is min(rules, settings); silence at its end counts as GIVE."""
    config = _config("salon", humans=4, options=GameOptions(hands_per_game=3))
    table, _ = accept(None, Created("q", config, SEED), 0.0, TIMERS)
    table = _to_query(table)
    game = table.game
    assert isinstance(game, fiftyone.State) and game.query is not None
    taker, asked = game.query.taker, game.query.pending
    assert table.turn_deadline == 1.0 + TIMERS.query_seconds
    assert automated_seat(table) is None
    assert due_timers(table, 2.9) == []
    (timer,) = due_timers(table, 3.0)
    assert (timer.kind, timer.seat) == (TimerKind.QUERY, taker)
    table, entry = accept(table, timer, 3.0, TIMERS)
    answers = [e for e in entry.events if isinstance(e, GameEvents)]
    assert len(answers) == len(asked) and all(e.timeout for e in answers)
    after = table.game
    assert isinstance(after, fiftyone.State)
    assert after.phase is fiftyone.Phase.PLAY and after.turn.seat == taker
    assert after.turn.took is not None
    assert not any(after.seats[s].pair_status for s in asked)
    (started,) = [e for e in entry.events if isinstance(e, TurnStarted)]
    assert (started.seat, started.phase, started.deadline) == (taker, "meld", 13.0)


def test_the_fallback_bot_plays_only_for_a_seat_that_must_act() -> None:
    """F-22, F-80: the engine's own bot moves only a seat the game waits for, in a turn and in
    a query; every other seat is refused with the rule, as at the start of a hand."""
    config = _config("salon", humans=4, options=GameOptions(hands_per_game=3))
    table, _ = accept(None, Created("f", config, SEED), 0.0, TIMERS)
    for state in (table.game, _to_query(table).game):
        assert isinstance(state, fiftyone.State)
        for seat in range(4):
            if seat in state.to_act:
                action = table.engine.choose(state, seat, BotLevel.NORMAL, b"s")
                assert action in fiftyone.legal_actions(state, seat)
                continue
            assert not fiftyone.legal_actions(state, seat)
            with pytest.raises(RuleViolation) as refused:
                table.engine.choose(state, seat, BotLevel.NORMAL, b"s")
            assert refused.value.rule == "F-22"


def test_a_timed_out_51_turn_is_played_to_its_end_by_the_autopilot() -> None:
    """P-10: a 51 turn is many actions; after a timeout the autopilot plays all of them."""
    config = _config("classic", 2, humans=1)
    table, entry = accept(None, Created("t", config, SEED), 0.0, TIMERS)
    (started,) = [e for e in entry.events if isinstance(e, TurnStarted)]
    assert started.seat == 0 and started.deadline == 10.0
    (timer,) = due_timers(table, 10.0)
    table, entry = accept(table, timer, 10.0, TIMERS)
    assert any(isinstance(e, TurnTimedOut) for e in entry.events)
    game = table.game
    assert isinstance(game, fiftyone.State)
    number = game.turn.number
    while isinstance(table.game, fiftyone.State) and table.game.turn.number == number:
        assert automated_seat(table) == (0, Source.AUTOPILOT)
        table, _ = accept(table, PlayerAction(0, _move(table, 0), Source.AUTOPILOT), 11.0, TIMERS)
    assert table.timed_out is None
