"""A lobby that loads is a lobby whose tables the engine accepts (P-1, P-2, P-10, P-13, P-30).

A lobby and the table engine read one model of a table (``masa_rules.table_config``), checked
by one function and carried by one protobuf mapping (``masa_wire.table_config``). Before,
the lobby had its own payout check, which let increasing shares and a zero winner share load
for lobbies whose every CreateTable the engine then refused. Here lobbies generated over the
valid ranges, written as a lobby file, load; the tables they make (as matchmaking seats them,
at their fewest and most seats) pass the engine's API limits and its pure creation, and a
sample of them, like every shipped lobby, is created by a real engine node binding the stakes
in the real ledger, through matchmaking's own engine and ledger clients.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator, Iterator
from importlib.resources import files
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from masa.ledger.v1 import ledger_pb2, ledger_pb2_grpc
from masa_matchmaking.adapters.ledger_client import GrpcLedger
from masa_matchmaking.app.ports import HoldRequest
from masa_matchmaking.domain.catalog import parse_lobbies
from masa_matchmaking.domain.errors import InvalidLobby
from masa_matchmaking.domain.lobby import MAX_LOBBY_STAKE, MAX_LOBBY_TURN_SECONDS, Lobby
from masa_platform.testing import token
from masa_platform.tls import open_channel
from masa_rules.lobby import MAX_HANDS_PER_GAME
from masa_rules.ruleset import GameLength, RuleSet
from masa_rules.table_config import (
    BASIS_POINTS,
    MIN_TURN_SECONDS,
    BotLevel,
    Mode,
    SeatConfig,
    SeatKind,
    TableConfig,
    bot_levels,
    hosted_games,
    register_game,
)
from masa_table_engine.adapters.convert import config_from_proto
from masa_table_engine.adapters.limits import check_config
from masa_table_engine.domain.model import Created
from masa_table_engine.domain.table import TimerPolicy, accept
from masa_wire.table_config import config_to_proto
from real_services import Stack, grpc_engines, holds_of, matchmaking_tokens, real_stack

SHIPPED = parse_lobbies((files("masa_matchmaking") / "lobbies.toml").read_text())
_tables = itertools.count()
_ADMIN = (("authorization", f"Bearer {token('ops', 'admin')}"),)
# A lobby of four Elevator seats that the changes of the refusal tests make invalid.
BAD_LOBBY = '[[lobby]]\nid = "bad"\nname = "Bad"\ngame = "elevator"\nseats = 4\n'


# --- lobbies over the valid ranges -----------------------------------------------------------


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return f"[{', '.join(_toml(item) for item in value)}]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{key} = {_toml(item)}" for key, item in value.items()) + " }"
    return repr(value)


@st.composite
def _payout_tables(draw: st.DrawFn, places: int) -> list[int]:
    """No shares, or 1 to ``places`` shares summing to 10000, never growing, the winner's
    positive."""
    if draw(st.booleans()):
        return []
    cuts = sorted(draw(st.lists(st.integers(0, BASIS_POINTS), max_size=places - 1)))
    shares = [b - a for a, b in zip([0, *cuts], [*cuts, BASIS_POINTS], strict=True)]
    return sorted(shares, reverse=True)


@st.composite
def _fiftyone(draw: st.DrawFn) -> dict[str, object]:
    preset = draw(st.sampled_from(["classic", "salon", "remi"]))
    rules = RuleSet.preset_named(preset)
    counts = rules.player_counts
    modes = [Mode.SINGLES, Mode.TRAINING]
    if rules.teams_allowed and 4 in counts:
        modes.append(Mode.TEAMS)
    mode = draw(st.sampled_from(modes))
    low, high = (
        (4, 4)
        if mode is Mode.TEAMS
        else sorted(draw(st.lists(st.sampled_from(counts), min_size=2, max_size=2)))
    )
    entry: dict[str, object] = {"game": "fiftyone", "preset": preset, "mode": mode.value}
    entry |= {"min_seats": low, "max_seats": high}
    if draw(st.booleans()):
        entry["open_threshold"] = draw(st.sampled_from(rules.allowed_thresholds))
    escalating = draw(st.none() | st.booleans())
    if escalating is not None and not (escalating and preset == "remi"):
        entry["escalating_threshold"] = escalating
    if draw(st.booleans()):
        # F-95: an odd number of hands; F-96: a cap on an elimination, any number.
        odd = rules.game_length is GameLength.HANDS
        most = MAX_HANDS_PER_GAME
        hands = st.integers(0, most // 2).map(lambda n: 2 * n + 1) if odd else st.integers(1, most)
        entry["hands_per_game"] = draw(hands)
    return entry


@st.composite
def _elevator(draw: st.DrawFn) -> dict[str, object]:
    low, high = sorted(draw(st.lists(st.integers(3, 6), min_size=2, max_size=2)))
    mode = draw(st.sampled_from([Mode.SINGLES, Mode.TRAINING]))
    entry: dict[str, object] = {"game": "elevator", "mode": mode.value}
    entry |= {"seats": low} if low == high else {"min_seats": low, "max_seats": high}
    decks = draw(st.none() | st.sampled_from([1, 2]))
    if decks is not None:
        entry["decks"] = decks
    return entry


@st.composite
def lobby_files(draw: st.DrawFn) -> str:
    """A lobby file of one lobby, any value in its valid range."""
    entry: dict[str, object] = {
        "id": draw(st.from_regex(r"[a-z0-9][a-z0-9-]{0,39}", fullmatch=True)),
        "name": draw(st.text("abcçğıöşü ABC51-", min_size=1, max_size=80)),
    }
    entry |= draw(st.one_of(_fiftyone(), _elevator()))
    training = entry["mode"] == Mode.TRAINING.value
    stake = 0 if training else draw(st.just(0) | st.integers(1, MAX_LOBBY_STAKE))
    entry["stake"] = stake
    fewest = entry.get("seats", entry.get("min_seats"))
    most = entry.get("seats", entry.get("max_seats"))
    assert isinstance(fewest, int) and isinstance(most, int)
    entry["rake_basis_points"] = draw(st.integers(0, BASIS_POINTS))
    entry["place_shares"] = draw(_payout_tables(fewest))
    # Whole milliseconds, as a Duration carries them back.
    turn = st.integers(round(MIN_TURN_SECONDS * 1000), round(MAX_LOBBY_TURN_SECONDS * 1000))
    entry["turn_seconds"] = draw(turn) / 1000
    entry["ticket_ttl_seconds"] = draw(st.integers(1, 3600))
    entry["short_table_after_seconds"] = draw(st.integers(0, 600))
    entry["bot_fill"] = {
        "enabled": stake == 0 and draw(st.booleans()),
        "fill_after_seconds": draw(st.integers(0, 600)),
        "min_players": draw(st.integers(1, most)),
        "level": draw(st.sampled_from(bot_levels(str(entry["game"])))).value,
    }
    entry["autopilot_level"] = draw(st.sampled_from(bot_levels(str(entry["game"])))).value
    entry["matching"] = {
        "base_spread": draw(st.floats(0, 50)),
        "spread_per_second": draw(st.floats(0, 5)),
        "open_after_seconds": draw(st.integers(0, 600)),
    }
    return "[[lobby]]\n" + "".join(f"{key} = {_toml(value)}\n" for key, value in entry.items())


def _seats(lobby: Lobby, count: int, players: int, table_id: str) -> tuple[SeatConfig, ...]:
    """A table of the lobby as matchmaking seats it: ``players`` players, each with the hold
    of the stake at a chip table, and bots of the lobby's level on the other seats."""
    return tuple(
        SeatConfig(
            seat,
            SeatKind.HUMAN,
            f"p-{table_id}-{seat}",
            f"p{seat}",
            bot_level=lobby.autopilot_level,
            hold_id=f"{table_id}-s{seat}" if lobby.chips else "",
        )
        if seat < players
        else SeatConfig(seat, SeatKind.BOT, bot_level=lobby.bot_fill.level)
        for seat in range(count)
    )


def _tables_of(lobby: Lobby, players: int = 1) -> Iterator[tuple[str, TableConfig]]:
    """The lobby's table (its id and configuration) at its fewest and at its most seats, with
    up to ``players`` players where it seats bots beside them."""
    for count in sorted({lobby.min_seats, lobby.max_seats}):
        bots = lobby.training or lobby.bot_fill.enabled
        table_id = f"lt{next(_tables)}"
        seated = min(players, count) if bots else count
        yield table_id, lobby.table_config(_seats(lobby, count, seated, table_id))


def _engine_accepts(config: TableConfig) -> None:
    """What the engine does with a CreateTable before anything is written: its API limits, its
    reading of the configuration (which must be the lobby's), and the table's pure creation."""
    message = config_to_proto(config)
    check_config(message)
    read = config_from_proto(message, 20.0)
    assert read == config
    accept(None, Created("lt", read, bytes(32)), 0.0, TimerPolicy())


@given(lobby_files(), st.integers(1, 6))
@settings(max_examples=300, deadline=None)
def test_p2_p30_every_lobby_that_loads_makes_tables_the_engine_accepts(
    text: str, players: int
) -> None:
    (lobby,) = parse_lobbies(text)
    for _, config in _tables_of(lobby, players):
        _engine_accepts(config)


def _hardless() -> str:
    """A game registered with the basic levels only, as a plugin's game is by default."""
    if "hardless" not in hosted_games():
        register_game("hardless", lambda config: None)
    return "hardless"


@pytest.mark.parametrize("key", ["bot_fill", "autopilot_level"])
def test_p2_a_lobby_of_a_level_its_game_has_no_bot_for_does_not_load(key: str) -> None:
    """A game's bots play the levels it registered: a lobby whose bots or autopilot would be
    hard in a game without a hard bot is refused when the file loads, naming P-2. 51 and
    Elevator both have one."""
    level = '{ enabled = true, level = "hard" }' if key == "bot_fill" else '"hard"'
    text = (
        f'[[lobby]]\nid = "t"\nname = "T"\ngame = "{_hardless()}"\nmode = "singles"\n'
        f"seats = 4\n{key} = {level}\n"
    )
    with pytest.raises(InvalidLobby) as refused:
        parse_lobbies(text)
    assert refused.value.rule == "P-2"
    assert "hard" in str(refused.value)
    for game in ("fiftyone", "elevator"):
        (lobby,) = parse_lobbies(text.replace('"hardless"', f'"{game}"'))
        assert BotLevel.HARD in (lobby.bot_fill.level, lobby.autopilot_level)


def test_p2_every_shipped_lobby_makes_tables_the_engine_accepts() -> None:
    for lobby in SHIPPED:
        for _, config in _tables_of(lobby):
            _engine_accepts(config)


@pytest.mark.parametrize(
    "shares",
    [[3000, 7000], [5000, 2000, 3000], [0, 10000], [0, 5000, 5000]],
    ids=["increasing", "increasing-after-the-second", "zero-winner", "zero-winner-tied-after"],
)
def test_p30_a_lobby_with_increasing_shares_or_no_winner_share_is_refused_at_load(
    shares: list[int],
) -> None:
    text = f"{BAD_LOBBY}stake = 10\nplace_shares = {shares}\n"
    with pytest.raises(InvalidLobby) as refused:
        parse_lobbies(text)
    assert refused.value.rule == "P-30"


@pytest.mark.parametrize(
    ("change", "rule"),
    [
        ("turn_seconds = 0.05", "P-10"),
        ("turn_seconds = 601", "P-10"),
        ("stake = 1_000_000_001", "P-30"),
        ("rake_basis_points = 10001", "P-30"),
        ("place_shares = [4000, 3000, 2000, 1000, 0]", "P-30"),
    ],
)
def test_p10_p30_a_lobby_outside_the_table_model_is_refused_at_load(change: str, rule: str) -> None:
    text = f"{BAD_LOBBY}{change}\n"
    with pytest.raises(InvalidLobby) as refused:
        parse_lobbies(text)
    assert refused.value.rule == rule


# --- a real engine node and ledger ----------------------------------------------------------


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    async with real_stack(tmp_path) as running:
        yield running


async def _create(stack: Stack, table_id: str, config: TableConfig) -> str:
    """CreateTable on the real node through matchmaking's engine client, the players' stakes
    first granted and held in the real ledger through its ledger client, as placement does."""
    if config.stake:
        async with open_channel(stack.ledger_address, None) as channel:
            admin = ledger_pb2_grpc.LedgerServiceStub(channel)
            for seat in config.seats:
                await admin.GrantChips(
                    ledger_pb2.GrantChipsRequest(
                        request_id=f"grant-{seat.player_id}",
                        player_id=seat.player_id,
                        amount=config.stake,
                        reason="a stake to hold",
                    ),
                    metadata=_ADMIN,
                )
            holds = [
                HoldRequest(
                    seat.hold_id,
                    seat.player_id,
                    config.stake,
                    config.lobby_id,
                    table_id,
                    config.payout,
                )
                for seat in config.seats
            ]
            ledger = GrpcLedger(channel, matchmaking_tokens(), timeout_seconds=5.0)
            await ledger.hold_stakes(f"{table_id}-holds", holds, 120.0)
    engines = grpc_engines()
    try:
        address = await engines.create_table(stack.node.address, table_id, table_id, config)
    finally:
        await engines.close()
    for seat in config.seats if config.stake else ():
        # The ledger took every stake for the table's game, under the lobby's payout rule.
        (hold,) = await holds_of(stack.ledger_address, seat.player_id)
        assert hold.state == ledger_pb2.StakeHold.STATE_BOUND
    return address


async def test_p2_p13_p30_every_shipped_lobby_creates_tables_on_a_real_engine(stack: Stack) -> None:
    for lobby in SHIPPED:
        for table_id, config in _tables_of(lobby):
            assert await _create(stack, table_id, config), lobby.lobby_id


@given(text=lobby_files(), players=st.integers(1, 6))
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
async def test_p2_p30_a_sample_of_lobbies_that_load_creates_tables_on_a_real_engine(
    stack: Stack, text: str, players: int
) -> None:
    (lobby,) = parse_lobbies(text)
    for table_id, config in _tables_of(lobby, players):
        assert await _create(stack, table_id, config)
