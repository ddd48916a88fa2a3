"""The generated stubs of protos/masa/** import, round-trip and keep the rules of architecture.md.

These tests read the descriptors of the generated modules (``make proto``), so they check the
contracts as clients see them: every action of both engines is a typed oneof case, enums are
prefixed and start with ``*_UNSPECIFIED = 0``, every write RPC carries ``request_id``, lists
are paginated, and every event payload carries ``event_id`` and ``occurred_at``.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from types import ModuleType

import grpc
import masa
import pytest
from google.protobuf import descriptor, descriptor_pool
from google.protobuf.message import Message
from masa.bot.v1 import bot_pb2, bot_pb2_grpc
from masa.common.v1 import card_pb2, game_pb2, meld_pb2
from masa.events.v1 import result_pb2, table_log_pb2
from masa.ledger.v1 import ledger_pb2_grpc
from masa.matchmaking.v1 import matchmaking_pb2_grpc
from masa.table.v1 import action_pb2, event_pb2, table_pb2, table_pb2_grpc, view_pb2

PROTOS = Path(__file__).resolve().parents[2] / "protos"
PACKAGES = ("common", "table", "matchmaking", "ledger", "bot", "events")

FIFTYONE_ACTIONS = {
    "draw_from_stock",
    "take_discard",
    "open",
    "lay_down",
    "lay_off",
    "retrieve_joker",
    "discard",
    "declare_pairs",
    "show_gosterge",
    "answer_query",
    "claim_bottom_card",
    "take_bottom_card",
}
ELEVATOR_ACTIONS = {"play", "pass_turn", "give_card"}

SERVICES = {
    "masa.table.v1.TableService": {
        "CreateTable",
        "GetTable",
        "WatchTable",
        "SubmitAction",
        "SubmitActions",
        "ResumeControl",
        "LeaveTable",
    },
    "masa.matchmaking.v1.MatchmakingService": {
        "ListLobbies",
        "GetLobby",
        "CreateTicket",
        "GetTicket",
        "ListTickets",
        "WatchTicket",
        "CancelTicket",
        "GetRating",
    },
    "masa.ledger.v1.LedgerService": {
        "GetBalance",
        "ListTransfers",
        "GetHold",
        "ListHolds",
        "GetSettlement",
        "GetAccount",
        "HoldStake",
        "HoldStakes",
        "BindHolds",
        "ReleaseHold",
        "GrantChips",
        "SettleGame",
        "VoidGame",
    },
    "masa.bot.v1.BotService": {"Decide"},
}
# Reads and side-effect-free calls; every other RPC writes and must carry request_id.
READ_PREFIXES = ("Get", "List", "Watch")
SIDE_EFFECT_FREE = {"Decide"}


def _generated_modules() -> list[ModuleType]:
    names = [
        info.name
        for info in pkgutil.walk_packages(masa.__path__, prefix="masa.")
        if info.name.endswith("_pb2")
    ]
    return [importlib.import_module(name) for name in sorted(names)]


def _files() -> list[descriptor.FileDescriptor]:
    return [module.DESCRIPTOR for module in _generated_modules()]


def _messages(
    containers: list[descriptor.Descriptor] | None = None,
) -> list[descriptor.Descriptor]:
    if containers is None:
        containers = [m for f in _files() for m in f.message_types_by_name.values()]
    found: list[descriptor.Descriptor] = []
    for message in containers:
        if message.GetOptions().map_entry:
            continue
        found.append(message)
        found.extend(_messages(list(message.nested_types)))
    return found


def _enums() -> list[descriptor.EnumDescriptor]:
    enums = [e for f in _files() for e in f.enum_types_by_name.values()]
    enums += [e for m in _messages() for e in m.enum_types]
    return enums


def _upper_snake(name: str) -> str:
    out = "".join(f"_{c}" if c.isupper() and i else c for i, c in enumerate(name))
    return out.upper()


def test_every_proto_file_has_a_generated_module() -> None:
    sources = {p.relative_to(PROTOS).as_posix() for p in PROTOS.glob("masa/**/*.proto")}
    generated = {f.name for f in _files()}
    assert sources == generated
    assert {name.split("/")[1] for name in generated} == set(PACKAGES)


def test_packages_are_versioned_and_match_their_directories() -> None:
    for file in _files():
        directory = file.name.rsplit("/", 1)[0]
        assert file.package == directory.replace("/", ".")
        assert file.package.endswith(".v1")


def test_every_action_of_51_and_elevator_is_a_typed_oneof_case() -> None:
    """Every shipped game's action is a typed case; a plugin's game has one extension case
    (docs/architecture.md, "Adding a game"), a google.protobuf.Any of its own package."""
    oneof = action_pb2.Action.DESCRIPTOR.oneofs_by_name["kind"]
    cases = {field.name for field in oneof.fields}
    assert cases == FIFTYONE_ACTIONS | ELEVATOR_ACTIONS | {"other_game"}
    for field in oneof.fields:
        assert field.message_type is not None, f"{field.name} is not a message"
    extension = action_pb2.Action.DESCRIPTOR.fields_by_name["other_game"]
    assert extension.message_type is not None
    assert extension.message_type.full_name == "google.protobuf.Any"


def test_every_enum_starts_with_unspecified_zero_and_is_prefixed() -> None:
    enums = _enums()
    assert len(enums) > 20
    for enum in enums:
        prefix = _upper_snake(enum.name) + "_"
        first = enum.values[0]
        assert (first.name, first.number) == (f"{prefix}UNSPECIFIED", 0), enum.full_name
        for value in enum.values:
            assert value.name.startswith(prefix), value.name


def test_lifecycle_enums_are_named_state() -> None:
    owners = {m.full_name for m in _messages() for e in m.enum_types if e.name == "State"}
    assert {
        "masa.table.v1.Table",
        "masa.matchmaking.v1.Ticket",
        "masa.ledger.v1.StakeHold",
        "masa.ledger.v1.Settlement",
    } <= owners


def test_services_have_their_rpcs_with_own_request_and_response_messages() -> None:
    pool = descriptor_pool.Default()
    for service_name, rpcs in SERVICES.items():
        service = pool.FindServiceByName(service_name)
        assert service.name.endswith("Service")
        assert {method.name for method in service.methods} == rpcs
        for method in service.methods:
            assert method.input_type.name == f"{method.name}Request"
            assert method.output_type.name == f"{method.name}Response"


def test_every_write_rpc_carries_a_request_id() -> None:
    pool = descriptor_pool.Default()
    for service_name in SERVICES:
        for method in pool.FindServiceByName(service_name).methods:
            fields = method.input_type.fields_by_name
            if method.client_streaming:
                # A stream of writes: each message wraps one write request, with its own id.
                (wrapped,) = method.input_type.fields
                assert wrapped.message_type is not None, method.full_name
                fields = wrapped.message_type.fields_by_name
            is_read = method.name.startswith(READ_PREFIXES) or method.name in SIDE_EFFECT_FREE
            assert ("request_id" in fields) is not is_read, method.full_name


def test_list_rpcs_are_paginated() -> None:
    pool = descriptor_pool.Default()
    for service_name in SERVICES:
        for method in pool.FindServiceByName(service_name).methods:
            if not method.name.startswith("List"):
                continue
            assert {"page_size", "page_token"} <= set(method.input_type.fields_by_name)
            assert "next_page_token" in method.output_type.fields_by_name


def test_streaming_rpcs_are_the_watch_calls_and_the_stream_of_moves() -> None:
    pool = descriptor_pool.Default()
    streaming = {
        method.full_name
        for service_name in SERVICES
        for method in pool.FindServiceByName(service_name).methods
        if method.server_streaming or method.client_streaming
    }
    assert streaming == {
        "masa.table.v1.TableService.WatchTable",
        "masa.table.v1.TableService.SubmitActions",
        "masa.matchmaking.v1.MatchmakingService.WatchTicket",
    }


def test_every_bus_payload_carries_event_id_and_occurred_at() -> None:
    envelopes_and_parts = {"TableResult", "LedgerEvent", "TableCreated", "HandStarted"}
    envelopes_and_parts |= {"ActionApplied", "TimerFired", "SeatChanged", "TableVoided", "Payout"}
    # The matchmaking envelope, and the engine-node registry's record, which is a KV value
    # rewritten in place rather than an event.
    envelopes_and_parts |= {"MatchmakingEvent", "EngineNode"}
    payloads = [
        m
        for f in _files()
        if f.package == "masa.events.v1"
        for m in f.message_types_by_name.values()
        if m.name not in envelopes_and_parts
    ]
    assert {m.name for m in payloads} >= {
        "TableLogEntry",
        "HandFinished",
        "GameFinished",
        "GameAbandoned",
        "HoldPlaced",
        "HoldVoided",
        "ChipsGranted",
        "HoldsBound",
        "GameSettled",
        "GameVoided",
        "TicketMatched",
        "GameStarted",
        "RatingChanged",
    }
    for message in payloads:
        event_id = message.fields_by_name["event_id"]
        occurred_at = message.fields_by_name["occurred_at"]
        assert (event_id.number, occurred_at.number) == (1, 2), message.full_name
        assert occurred_at.message_type is not None, message.full_name
        assert occurred_at.message_type.full_name == "google.protobuf.Timestamp"


def test_game_finished_holds_everything_the_ledger_settles_on() -> None:
    fields = set(result_pb2.GameFinished.DESCRIPTOR.fields_by_name)
    assert {"table_id", "game_no", "stake", "ranking", "mode", "payout"} <= fields
    standing = set(game_pb2.Standing.DESCRIPTOR.fields_by_name)
    assert {"player_id", "place", "total", "forfeited", "hold_id", "team"} <= standing


def _card(code: str) -> card_pb2.Card:
    if code in ("XR", "XB"):
        colour = card_pb2.COLOUR_RED if code == "XR" else card_pb2.COLOUR_BLACK
        return card_pb2.Card(joker_colour=colour)
    ranks = {"J": 11, "Q": 12, "K": 13, "A": 14}
    suits = {"S": card_pb2.SUIT_SPADES, "H": card_pb2.SUIT_HEARTS}
    suits |= {"D": card_pb2.SUIT_DIAMONDS, "C": card_pb2.SUIT_CLUBS}
    rank = ranks.get(code[:-1]) or int(code[:-1])
    return card_pb2.Card(rank=card_pb2.Rank.ValueType(rank), suit=suits[code[-1]])


def _round_trip(message: Message) -> None:
    again = type(message).FromString(message.SerializeToString())
    assert again == message


def test_an_opening_with_an_annotated_joker_round_trips() -> None:
    run = meld_pb2.ProposedMeld(
        kind=meld_pb2.MELD_KIND_RUN,
        cards=[
            card_pb2.PlacedCard(card=_card("7H")),
            card_pb2.PlacedCard(card=_card("XR"), stands_for=_card("8H")),
            card_pb2.PlacedCard(card=_card("9H")),
        ],
    )
    pair = meld_pb2.ProposedMeld(
        cards=[card_pb2.PlacedCard(card=_card("10S")), card_pb2.PlacedCard(card=_card("XB"))]
    )
    request = table_pb2.SubmitActionRequest(
        request_id="r-1",
        table_id="t-1",
        expected_sequence=42,
        action=action_pb2.Action(open=action_pb2.Open(melds=[run, pair])),
    )
    _round_trip(request)
    assert request.action.WhichOneof("kind") == "open"
    joker = request.action.open.melds[0].cards[1]
    assert joker.card.rank == card_pb2.RANK_UNSPECIFIED
    assert joker.stands_for.rank == card_pb2.RANK_EIGHT


@pytest.mark.parametrize(
    "action",
    [
        action_pb2.Action(draw_from_stock=action_pb2.DrawFromStock()),
        action_pb2.Action(lay_off=action_pb2.LayOff(meld_id=3, cards=[_card("JH")])),
        action_pb2.Action(
            answer_query=action_pb2.AnswerQuery(query_id=1, answer=action_pb2.QUERY_ANSWER_REFUSE)
        ),
        action_pb2.Action(play=action_pb2.Play(cards=[_card("8H"), _card("8S")])),
        action_pb2.Action(pass_turn=action_pb2.Pass()),
        action_pb2.Action(give_card=action_pb2.GiveCard(card=_card("2C"))),
    ],
    ids=lambda action: action.WhichOneof("kind"),
)
def test_actions_of_both_games_round_trip(action: action_pb2.Action) -> None:
    _round_trip(action)
    _round_trip(bot_pb2.DecideResponse(action=action, explanation="why"))


def test_a_table_log_entry_with_hand_and_game_results_round_trips() -> None:
    hand = event_pb2.HandFinished(
        hand_no=1,
        finisher_seat=2,
        finish_kinds=[event_pb2.FINISH_KIND_WITH_JOKER],
        scores=[event_pb2.HandScore(seat=0, score=200, remaining=[_card("AS")])],
        seed=b"\x01" * 32,
    )
    entry = table_log_pb2.TableLogEntry(
        event_id="e-1",
        table_id="t-1",
        sequence=7,
        action_applied=table_log_pb2.ActionApplied(
            seat=2,
            action=action_pb2.Action(discard=action_pb2.Discard(card=_card("XR"))),
            request_id="r-9",
            source=table_log_pb2.INPUT_SOURCE_PLAYER,
        ),
        events=[
            event_pb2.TableEvent(discarded=event_pb2.Discarded(seat=2, finishing=True)),
            event_pb2.TableEvent(hand_finished=hand),
        ],
    )
    entry.occurred_at.GetCurrentTime()
    _round_trip(entry)
    result = result_pb2.TableResult(
        game_finished=result_pb2.GameFinished(
            event_id="e-2",
            table_id="t-1",
            game_no=1,
            stake=100,
            ranking=[
                game_pb2.Standing(seat=2, player_id="ayse", place=1),
                game_pb2.Standing(seat=0, player_id="mehmet", place=2, forfeited=True),
            ],
        )
    )
    _round_trip(result)
    assert hand.HasField("finisher_seat")


class _FakeTableService(table_pb2_grpc.TableServiceServicer):
    """Answers GetTable and streams a snapshot then one update, as a real engine would."""

    def GetTable(
        self, request: table_pb2.GetTableRequest, context: grpc.ServicerContext
    ) -> table_pb2.GetTableResponse:
        table = view_pb2.Table(table_id=request.table_id, state=view_pb2.Table.STATE_PLAYING)
        return table_pb2.GetTableResponse(spectator_view=view_pb2.TableView(table=table))

    def WatchTable(
        self, request: table_pb2.WatchTableRequest, context: grpc.ServicerContext
    ) -> Iterator[table_pb2.WatchTableResponse]:
        table = view_pb2.Table(table_id=request.table_id, sequence=5)
        yield table_pb2.WatchTableResponse(
            seat_view=view_pb2.SeatView(table=view_pb2.TableView(table=table), seat=1)
        )
        update = event_pb2.TableUpdate(
            sequence=6,
            events=[event_pb2.TableEvent(drew=event_pb2.Drew(seat=1, stock_count=40))],
        )
        yield table_pb2.WatchTableResponse(update=update)


def test_generated_stubs_serve_and_call_over_a_real_grpc_channel() -> None:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    # The generated servicer answers UNIMPLEMENTED for the methods the fake leaves out (the
    # test calls one); only mypy-protobuf's stub declares them abstract.
    fake = _FakeTableService()  # type: ignore[abstract]
    table_pb2_grpc.add_TableServiceServicer_to_server(fake, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = table_pb2_grpc.TableServiceStub(channel)
            got = stub.GetTable(table_pb2.GetTableRequest(table_id="t-1"), timeout=10)
            assert got.spectator_view.table.table_id == "t-1"
            stream = list(stub.WatchTable(table_pb2.WatchTableRequest(table_id="t-1"), timeout=10))
            assert [m.WhichOneof("payload") for m in stream] == ["seat_view", "update"]
            assert stream[1].update.events[0].drew.stock_count == 40
            with pytest.raises(grpc.RpcError) as failure:
                stub.SubmitAction(table_pb2.SubmitActionRequest(), timeout=10)
            assert failure.value.code() is grpc.StatusCode.UNIMPLEMENTED
    finally:
        server.stop(grace=None)


def test_every_service_has_sync_and_registration_stubs() -> None:
    for module, service in [
        (table_pb2_grpc, "TableService"),
        (matchmaking_pb2_grpc, "MatchmakingService"),
        (ledger_pb2_grpc, "LedgerService"),
        (bot_pb2_grpc, "BotService"),
    ]:
        assert hasattr(module, f"{service}Stub")
        assert hasattr(module, f"{service}Servicer")
        assert hasattr(module, f"add_{service}Servicer_to_server")
