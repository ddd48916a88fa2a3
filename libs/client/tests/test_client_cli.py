"""The CLI's pure parts: typed commands become the right actions (or a clear complaint), the
board shows what a seat may see in colour or plain, and rejected moves name their rule."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest
from masa.common.v1 import card_pb2, game_pb2, meld_pb2
from masa.table.v1 import event_pb2, view_pb2
from masa_client.cli import main, table_config
from masa_client.commands import CommandError, parse_command
from masa_client.render import Style, board, describe
from masa_client.rulebook import meaning
from masa_platform.auth import Role, TokenVerifier
from masa_platform.keys import ISSUER
from masa_platform.testing import auth_settings, keyring
from masa_rules.cards import PhysicalCard
from masa_wire.cards import card_to_proto, face_from_proto


def codes(cards: Iterable[card_pb2.Card]) -> list[str]:
    return [face_from_proto(card).code for card in cards]


def test_an_opening_splits_melds_on_slashes_and_reads_joker_annotations() -> None:
    action = parse_command("open 7H 8H 9H / 10S 10D XR=10H", "fiftyone").action
    assert action is not None
    run, group = action.open.melds
    assert (run.kind, codes(c.card for c in run.cards)) == (
        meld_pb2.MELD_KIND_RUN,
        ["7H", "8H", "9H"],
    )
    assert group.kind == meld_pb2.MELD_KIND_SET
    assert face_from_proto(group.cards[2].stands_for).code == "10H"


def test_laying_off_names_the_meld_and_the_end() -> None:
    action = parse_command("lay XR=5H on #2 low", "fiftyone").action
    assert action is not None
    assert action.lay_off.meld_id == 2
    assert action.lay_off.end == meld_pb2.MELD_END_LOW
    assert codes(action.lay_off.cards) == ["XR"]


def test_take_names_the_discard_the_player_saw() -> None:
    view = view_pb2.SeatView(
        table=view_pb2.TableView(
            fiftyone=view_pb2.FiftyOneTable(discard_pile=[card_to_proto(PhysicalCard.parse("QS"))])
        )
    )
    action = parse_command("take", "fiftyone", view).action
    assert action is not None
    assert codes([action.take_discard.expected_card]) == ["QS"]


@pytest.mark.parametrize(
    ("line", "game", "kind"),
    [
        ("draw", "fiftyone", "draw_from_stock"),
        ("discard qs", "fiftyone", "discard"),
        ("pairs", "fiftyone", "declare_pairs"),
        ("down 4C 5C 6C", "fiftyone", "lay_down"),
        ("retrieve XR from 2 with 8H", "fiftyone", "retrieve_joker"),
        ("play 8H 8S", "elevator", "play"),
        ("pass", "elevator", "pass_turn"),
        ("give 7C", "elevator", "give_card"),
    ],
)
def test_every_command_becomes_its_action(line: str, game: str, kind: str) -> None:
    action = parse_command(line, game).action
    assert action is not None
    assert action.WhichOneof("kind") == kind


@pytest.mark.parametrize(
    ("line", "game", "complaint"),
    [
        ("", "elevator", "type a command"),
        ("play", "elevator", "play which cards"),
        ("play 1Z", "elevator", "not a card"),
        ("dance", "fiftyone", "unknown command"),
        ("lay 6H 2", "fiftyone", "lay 6H on 2"),
        ("lay 6H on two", "fiftyone", "not a meld number"),
        ("give", "fiftyone", "no query"),
        ("draw", "elevator", "Elevator knows"),
    ],
)
def test_a_malformed_command_says_how_to_write_it(line: str, game: str, complaint: str) -> None:
    with pytest.raises(CommandError, match=complaint):
        parse_command(line, game)


def test_help_look_resume_and_quit_are_not_moves() -> None:
    words = ("help", "look", "resume", "quit")
    assert [parse_command(word, "elevator").local for word in words] == list(words)


def seat_view() -> view_pb2.SeatView:
    cards = [card_to_proto(PhysicalCard.parse(code)) for code in ("9C", "2H", "XR", "KH")]
    table = view_pb2.TableView(
        table=view_pb2.Table(
            table_id="t1",
            config=game_pb2.TableConfig(
                game=game_pb2.GAME_KIND_FIFTYONE, preset=game_pb2.PRESET_SALON
            ),
        ),
        hand_no=1,
        seats=[
            view_pb2.SeatState(seat=0, display_name="alice", card_count=4),
            view_pb2.SeatState(
                seat=1, display_name="bot 1", kind=game_pb2.SEAT_KIND_BOT, card_count=14
            ),
        ],
        turn_seat=0,
        turn_phase=view_pb2.TURN_PHASE_DRAW,
        fiftyone=view_pb2.FiftyOneTable(
            melds=[
                meld_pb2.Meld(
                    meld_id=2,
                    kind=meld_pb2.MELD_KIND_RUN,
                    owner_seat=1,
                    cards=[
                        card_pb2.PlacedCard(card=card_to_proto(PhysicalCard.parse(code)))
                        for code in ("4S", "5S", "6S")
                    ],
                )
            ],
            discard_pile=[card_to_proto(PhysicalCard.parse("QS"))],
            stock_count=40,
            effective_threshold=51,
            pairs_needed=5,
        ),
    )
    return view_pb2.SeatView(table=table, seat=0, hand=cards)


def test_the_board_shows_the_sorted_hand_melds_discard_and_what_to_do() -> None:
    text = board(seat_view(), Style(colour=False))
    assert "your hand: 2H KH 9C XR" in text
    assert "#2   4S 5S 6S" in text
    assert "discard pile: QS" in text
    assert "your turn: 'draw' or 'take'" in text
    assert "\033[" not in text


def test_red_cards_are_red_when_colour_is_on() -> None:
    text = board(seat_view(), Style(colour=True))
    assert "\033[31m2H\033[0m" in text
    assert "\033[31mXR\033[0m" in text


def test_events_read_as_sentences() -> None:
    played = event_pb2.TableEvent(
        played=event_pb2.Played(seat=1, cards=[card_to_proto(PhysicalCard.parse("8H"))])
    )
    assert describe(played, seat_view().table, Style(colour=False)) == "bot 1 plays 8H"


def test_every_rule_in_the_glossary_has_a_meaning() -> None:
    assert meaning("F-30").startswith("unopened")
    assert meaning("X-99") == ""


def test_a_training_table_seats_the_player_and_bots() -> None:
    config = table_config("fiftyone", "salon", "alice", players=4, level="easy", turn_seconds=30)
    assert config.mode == game_pb2.MODE_TRAINING
    assert [seat.kind for seat in config.seats] == [game_pb2.SEAT_KIND_HUMAN] + [
        game_pb2.SEAT_KIND_BOT
    ] * 3
    assert config.seats[0].player_id == "alice"


def test_masa_token_prints_a_development_token_for_the_player(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Signed with the development issuer's key (make run's, or MASA_JWT_ISSUER_KEY_FILE); a
    server holding only the public keys accepts it."""
    monkeypatch.setenv("MASA_JWT_ISSUER_KEY_FILE", str(keyring().private(ISSUER)))
    main(["token", "--player", "alice"])
    principal = TokenVerifier(auth_settings()).verify(capsys.readouterr().out.strip())
    assert principal.subject == "alice"
    assert principal.roles == {Role.PLAYER}
    main(["token", "--player", "ops", "--role", "admin"])
    assert TokenVerifier(auth_settings()).verify(capsys.readouterr().out.strip()).roles == {
        Role.ADMIN
    }


def test_masa_token_without_an_issuer_key_says_how_to_get_one(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("MASA_JWT_ISSUER_KEY_FILE", raising=False)
    monkeypatch.setenv("MASA_RUN_DIR", str(tmp_path / "nothing"))
    with pytest.raises(SystemExit) as exited:
        main(["token", "--player", "alice"])
    assert exited.value.code == 2
    assert "make run" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (["balance", "--player", ""], "not a player id (1 to 128 characters"),
        (["token", "--player", "x" * 129], "not a player id (1 to 128 characters"),
        (["grant", "alice", "-5"], "the amount must be 1 to 1,000,000,000,000 chips"),
        (["grant", "alice", "5x"], "not a whole number of chips"),
        (["grant", "bad\tid", "5"], "not a player id"),
    ],
)
def test_bad_player_ids_and_amounts_are_refused_before_any_call(
    argv: list[str], complaint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Refused by the command itself, as `masa admin grant` does, not sent to be refused as
    an invalid token or a bad request."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert complaint in capsys.readouterr().err
