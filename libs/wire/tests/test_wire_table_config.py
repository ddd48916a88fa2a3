"""A table's configuration to and from ``masa.common.v1`` in one mapping (P-1, P-2, P-30):
every configuration reads back as it was written, unspecified enums read as the platform's
defaults, and values that name nothing are bad requests."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from masa.common.v1 import chips_pb2, game_pb2
from masa_rules.table_config import (
    BotLevel,
    GameKind,
    GameOptions,
    Mode,
    PayoutRule,
    SeatConfig,
    SeatKind,
    TableConfig,
)
from masa_wire import WireError
from masa_wire.table_config import (
    bot_level_from_proto,
    config_from_proto,
    config_to_proto,
    mode_from_proto,
    payout_from_proto,
    payout_to_proto,
)

_names = st.text("abcdefgh", min_size=1, max_size=8)
_optional_int = st.none() | st.integers(1, 200)


@st.composite
def _seats(draw: st.DrawFn) -> tuple[SeatConfig, ...]:
    count = draw(st.integers(1, 6))
    seats = []
    for n in range(count):
        if draw(st.booleans()):
            seats.append(
                SeatConfig(n, SeatKind.HUMAN, f"p{n}", draw(_names), BotLevel.NORMAL, f"h{n}")
            )
        else:
            seats.append(SeatConfig(n, SeatKind.BOT, bot_level=draw(st.sampled_from(BotLevel))))
    return tuple(seats)


@st.composite
def _configs(draw: st.DrawFn) -> TableConfig:
    game = draw(st.sampled_from(GameKind))
    if game is GameKind.ELEVATOR:
        preset = ""
        options = GameOptions(decks=draw(st.none() | st.sampled_from([1, 2])))
    else:
        preset = draw(st.sampled_from(["classic", "salon", "remi"]))
        options = GameOptions(
            open_threshold=draw(_optional_int),
            escalating_threshold=draw(st.none() | st.booleans()),
            hands_per_game=draw(_optional_int),
        )
    return TableConfig(
        game=game,
        seats=draw(_seats()),
        # Whole milliseconds: a Duration keeps nanoseconds, a float round-trips through them.
        turn_seconds=draw(st.integers(100, 3_600_000)) / 1000,
        preset=preset,
        mode=draw(st.sampled_from(Mode)),
        options=options,
        stake=draw(st.integers(0, 10**12)),
        lobby_id=draw(st.text("abc-", max_size=10)),
        payout=PayoutRule(
            draw(st.integers(0, 10_000)), tuple(draw(st.lists(st.integers(0, 10_000))))
        ),
    )


@given(_configs())
def test_p2_every_configuration_reads_back_as_written(config: TableConfig) -> None:
    message = config_to_proto(config)
    assert config_from_proto(game_pb2.TableConfig.FromString(message.SerializeToString()), 1) == (
        config
    )


def test_p1_p30_unspecified_values_are_the_platform_defaults() -> None:
    message = game_pb2.TableConfig(
        game=game_pb2.GAME_KIND_FIFTYONE,
        seats=[game_pb2.SeatAssignment(seat=0, kind=game_pb2.SEAT_KIND_BOT, player_id="x")],
    )
    config = config_from_proto(message, 20.0)
    assert (config.preset, config.mode, config.turn_seconds, config.payout) == (
        "salon",
        Mode.SINGLES,
        20.0,
        PayoutRule(),
    )
    # A bot names no player, and plays at the normal level unless told.
    assert config.seats == (SeatConfig(0, SeatKind.BOT, bot_level=BotLevel.NORMAL),)
    assert mode_from_proto(game_pb2.MODE_UNSPECIFIED) is Mode.SINGLES
    assert bot_level_from_proto(game_pb2.BOT_LEVEL_UNSPECIFIED) is BotLevel.NORMAL


def test_p30_a_payout_rule_crosses_the_wire_as_it_is() -> None:
    rule = PayoutRule(250, (7000, 3000))
    assert payout_from_proto(payout_to_proto(rule)) == rule
    assert payout_from_proto(chips_pb2.PayoutRule()).shares == (10_000,)


def _elevator(**fields: object) -> game_pb2.TableConfig:
    seat = game_pb2.SeatAssignment(seat=0, kind=game_pb2.SEAT_KIND_HUMAN, player_id="a")
    message = game_pb2.TableConfig(game=game_pb2.GAME_KIND_ELEVATOR, seats=[seat])
    for name, value in fields.items():
        setattr(message, name, value)
    return message


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (_elevator(game=game_pb2.GAME_KIND_UNSPECIFIED), "BAD_REQUEST"),
        (_elevator(game=9), "BAD_REQUEST"),
        (_elevator(preset=9), "BAD_REQUEST"),
        (_elevator(mode=9), "BAD_REQUEST"),
        (_elevator(preset=game_pb2.PRESET_SALON), "P-2"),
        (game_pb2.TableConfig(game=game_pb2.GAME_KIND_ELEVATOR), "BAD_REQUEST"),
        (
            game_pb2.TableConfig(
                game=game_pb2.GAME_KIND_ELEVATOR, seats=[game_pb2.SeatAssignment(seat=0)]
            ),
            "BAD_REQUEST",
        ),
        (
            game_pb2.TableConfig(
                game=game_pb2.GAME_KIND_ELEVATOR,
                seats=[
                    game_pb2.SeatAssignment(
                        seat=0,
                        kind=game_pb2.SEAT_KIND_BOT,
                        bot_level=game_pb2.BotLevel.ValueType(7),
                    )
                ],
            ),
            "BAD_REQUEST",
        ),
    ],
    ids=[
        "no-game",
        "unknown-game",
        "preset",
        "mode",
        "elevator-preset",
        "no-seats",
        "kind",
        "level",
    ],
)
def test_p2_a_configuration_that_names_nothing_is_a_bad_request(
    message: game_pb2.TableConfig, reason: str
) -> None:
    with pytest.raises(WireError) as refused:
        config_from_proto(message, 20.0)
    assert refused.value.reason == reason


def test_p2_options_of_the_other_game_are_a_bad_request() -> None:
    message = _elevator()
    message.options.fiftyone.open_threshold = 51
    with pytest.raises(WireError) as refused:
        config_from_proto(message, 20.0)
    assert refused.value.reason == "BAD_REQUEST"
