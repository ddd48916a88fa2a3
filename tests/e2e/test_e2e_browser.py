"""The reference web client in a real browser (issue 24): headless Chromium from Debian's
packages, driven by Selenium, against ``make run``'s stack through its web gateway.

- A browser player and two SDK players play an Elevator chip game to its end: the browser
  player sees the chips paid, as the ledger has them, and an illegal play refused with its
  rule (E-4).
- A browser player and three SDK players share a 51 salon table for several turns: sorgus
  answered, three cards that are no meld which the page itself will not send (its rule id on
  the page), a gösterge the engine refuses (its rule id on the page), and a reload that comes
  back to the same seat with the same hand.

The browser's moves are the greedy policy's, read from the player's own seat view over native
gRPC and made with the page's own controls. The screenshots of every step are kept under
``.masa/test/browser/<test>/``.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager

import pytest
from browser_support import SHOTS, Browser, SdkPlayers, SeatReader, browser
from masa.table.v1 import action_pb2, view_pb2
from masa_client.load.moves import move_from_view, salt
from masa_client.matchmaking import LedgerClient
from masa_platform.testing import token
from masa_rules import elevator
from masa_wire import elevator as elevator_wire
from masa_wire.cards import face_from_proto
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

pytestmark = pytest.mark.timeout(420)

ELEVATOR_STAKE = 20


def _code(card: object) -> str:
    return face_from_proto(card).code  # type: ignore[arg-type]


def _sign_in(page: Browser, web: str, name: str) -> int:
    """The name screen, then the lobbies; the balance the page shows."""
    page.driver.get(f"{web}/")
    page.find("name-input").send_keys(name)
    page.shot("name")
    page.click("name-submit")
    shown = page.until(
        lambda: re.search(r"(\d+) chips", page.find("balance").text), "the balance in chips"
    )
    page.find(f"lobby-{'elevator'}")
    page.shot("lobbies")
    return int(shown.group(1))


def _seated(page: Browser, lobby: str) -> str:
    page.click(f"play-{lobby}")
    # With the other players searching already, the table may come before the queue shows.
    page.until(lambda: page.all("ticket-status") or page.all("table"), "the queue or the table")
    if page.all("ticket-status"):
        page.shot("queue")
    table = page.find("table", timeout=120)
    table_id = page.until(lambda: table.get_attribute("data-table-id"), "the table id")
    page.until(lambda: page.all("hand"), "the hand")
    page.shot("seated")
    return table_id


def _my_turn_or_over(page: Browser, timeout: float = 90.0, seat: str | None = None) -> bool:
    """Wait until the player must act (True), or the game is over or ``seat`` is out of it
    (F-96: the others play on without it) (False)."""

    def ready() -> str:
        if page.all("game-over"):
            return "over"
        if seat is not None and page.attribute(f"seat-{seat}", "data-eliminated") == "true":
            return "out"
        return "move" if page.attribute("table", "data-my-move") == "true" else ""

    return page.until(ready, "the player's turn or the game's end", timeout) == "move"


def _view_in_sync(page: Browser, seats: SeatReader, table_id: str) -> view_pb2.SeatView | None:
    """The seat view over native gRPC, once it is the one the page shows."""
    view = seats.view(table_id)
    return (
        view if str(view.table.table.sequence) == page.attribute("table", "data-sequence") else None
    )


def _select(page: Browser, cards: list[str]) -> None:
    for code in cards:
        page.click(f"card-{code}")
        testid = f"card-{code}"

        def selected(testid: str = testid) -> bool:
            return page.attribute(testid, "aria-pressed") == "true"

        page.until(selected, f"{code} selected")


def _after_move(page: Browser, sequence: str) -> None:
    page.until(
        lambda: page.all("game-over") or page.attribute("table", "data-sequence") != sequence,
        "the table to move on",
        20,
    )


def _refusal(page: Browser, rule: str) -> re.Match[str] | None:
    """The rule a refusal on show cites; a prompt may cite a rule too (E-9, F-80), so only the
    error tone counts."""
    if page.attribute("status", "data-tone") != "error":
        return None
    return re.search(rule, page.find("status").text)


def _elevator_refusal(page: Browser, view: view_pb2.SeatView) -> bool:
    """Play one card the rules refuse now, if the hand has one: the page shows E-4's refusal."""
    state = elevator_wire.state_from_seat_view(view)
    legal = elevator.legal_actions(state, view.seat)
    playable = {
        action.cards[0].card.code
        for action in legal
        if isinstance(action, elevator.Play) and len(action.cards) == 1
    }
    if not any(isinstance(action, elevator.Play) for action in legal):
        return False
    wrong = next((_code(card) for card in view.hand if _code(card) not in playable), None)
    if wrong is None:
        return False
    _select(page, [wrong])
    page.click("action-play")
    status = page.until(lambda: _refusal(page, r"\(E-\d+\)"), "a refusal with its rule")
    page.shot("refused-E-4")
    assert status.group(0) in ("(E-4)", "(E-5)", "(E-7)")
    page.click(f"card-{wrong}")
    return True


def _play_elevator(page: Browser, action: action_pb2.Action) -> None:
    """The move from the keyboard alone: arrow keys to each card, Space to select it, Enter
    on the move's button."""
    kind = action.WhichOneof("kind")
    if kind == "play":
        for card in action.play.cards:
            _select_by_keyboard(page, _code(card))
        page.find("action-play").send_keys(Keys.ENTER)
    elif kind == "give_card":
        _select_by_keyboard(page, _code(action.give_card.card))
        page.find("action-give_card").send_keys(Keys.ENTER)
    else:
        page.find("action-pass_turn").send_keys(Keys.ENTER)


def _select_by_keyboard(page: Browser, code: str) -> None:
    cards = page.find("hand").find_elements(By.CSS_SELECTOR, "button.card")
    cards[-1].send_keys(Keys.HOME)
    for _ in cards:
        focused = page.driver.switch_to.active_element
        if focused.get_attribute("data-testid") == f"card-{code}":
            focused.send_keys(Keys.SPACE)
            page.until(
                lambda: page.attribute(f"card-{code}", "aria-pressed") == "true", f"{code} selected"
            )
            return
        focused.send_keys(Keys.ARROW_RIGHT)
    raise AssertionError(f"the arrow keys never reached {code}")


def test_a_browser_player_plays_an_elevator_chip_game_to_the_payout(stack: dict[str, str]) -> None:
    """E-1..E-11 at a chip table of three (P-13: no bots), the browser seat played from the
    page's keyboard; the payout the page shows is the one the ledger paid (P-30)."""
    web = stack["web-gateway"]
    run = uuid.uuid4().hex[:6]
    name = f"ada-{run}"
    engines = [stack["table-engine"], stack["table-engine-1"]]
    with browser(SHOTS / "elevator-chip-game") as page, closing(SeatReader(engines, name)) as seats:
        before = _sign_in(page, web, name)
        with SdkPlayers(stack, "elevator", [f"sdk-{run}-1", f"sdk-{run}-2"]) as sdk:
            table_id = _seated(page, "elevator")
            refused = False
            moves = 0
            while _my_turn_or_over(page):
                view = _view_in_sync(page, seats, table_id)
                if view is None:
                    time.sleep(0.05)
                    continue
                sequence = str(view.table.table.sequence)
                if not refused and view.table.turn_phase != view_pb2.TURN_PHASE_GIVE:
                    refused = _elevator_refusal(page, view)
                action = move_from_view(view, salt(table_id, view.table.table.sequence, moves))
                if action is None:
                    time.sleep(0.05)
                    continue
                _play_elevator(page, action)
                moves += 1
                if moves == 1:
                    page.shot("first-move")
                _after_move(page, sequence)
                # The move went through: a refusal before it is no longer on show (a prompt such
                # as E-9's "give a card" may cite a rule too, so the tone tells them apart), and
                # the keyboard focus is back in the hand, a Tab from the moves.
                page.until(
                    lambda: page.attribute("status", "data-tone") != "error",
                    "the refusal cleared",
                )
                if not page.all("game-over"):
                    page.until(
                        lambda: (
                            (
                                page.driver.switch_to.active_element.get_attribute("data-testid")
                                or ""
                            ).startswith("card-")
                            or not page.all("hand")
                        ),
                        "the focus back in the hand",
                    )
            assert not sdk.errors, sdk.errors

        # The ledger settles from the game's result moments after the table ends.
        def settled() -> str:
            text: str = page.find("payout").text
            return text if "staked" in text else ""

        payout = page.until(settled, "the chips paid", 60)
        page.shot("game-over")
        assert refused, "no hand of the game held a card to refuse"
        assert f"staked {ELEVATOR_STAKE} chips" in payout
        paid_match = re.search(r"paid (\d+)", payout)
        assert paid_match is not None, payout
        paid = int(paid_match.group(1))

        async def balance() -> int:
            async with LedgerClient(stack["ledger"], token(name)) as ledger:
                return (await ledger.balance()).balance

        assert asyncio.run(balance()) == before - ELEVATOR_STAKE + paid
        page.click("back-home")
        page.until(
            lambda: f"{before - ELEVATOR_STAKE + paid} chips" in page.find("balance").text,
            "the new balance",
        )
        page.shot("balance-after")


def _fiftyone_turn(page: Browser, view: view_pb2.SeatView, *, refuse: bool) -> bool:
    """Answer a sorgu (give: F-80), or draw from the stock and discard a card the rules let
    go; first, when asked, two moves that are refused: three cards that are no meld, which the
    page will not send (F-10, named beside the moves), and four "pairs" of eight different
    cards, which the engine refuses by rule. Whether both were refused.

    Refusing a sorgu would put the seat in pair status (F-70), where a hand it ends unopened
    costs it 200 (F-91): salon's elimination (F-96) then takes it out of the game at the
    first hand another seat finishes quickly, before its four turns."""
    phase = page.attribute("table", "data-phase")
    if phase == "QUERY":
        page.click("action-query_give")
        page.shot("sorgu-given")
        return False
    if phase == "DRAW":
        page.click("action-draw_from_stock")
        return False
    codes = [_code(card) for card in view.hand]
    faces = list(dict.fromkeys(code for code in codes if not code.startswith("X")))
    refused = refuse and len(faces) >= 8
    if refused:
        no_meld = _no_meld(codes)
        _select(page, no_meld)
        checked = page.until(
            lambda: re.search(r"\((F-\d+)\)", page.find("meld-check").text), "the meld check"
        )
        assert checked.group(1) == "F-10" and not page.find("action-open").is_enabled()
        page.shot("meld-check-F-10")
        # The gösterge's eight: the three above and five more different faces.
        eight = [*no_meld, *[face for face in faces if face not in no_meld][:5]]
        _select(page, eight[3:])
        page.click("action-show_gosterge")
        status = page.until(lambda: _refusal(page, r"\((F-\d+\w?)\)"), "the refusal's rule")
        page.shot(f"refused-{status.group(1)}")
        for code in eight:
            page.click(f"card-{code}")
    _discard(page, view)
    return refused


def _discard(page: Browser, view: view_pb2.SeatView) -> None:
    """Discard the last card of the hand the rules let go (F-36, the cards it must use)."""
    blocked = {_code(card) for card in (*view.undiscardable, *view.must_use)}
    codes = [_code(card) for card in view.hand]
    _select(page, [next(code for code in reversed(codes) if code not in blocked)])
    page.click("action-discard")


def _no_meld(codes: list[str]) -> list[str]:
    """Three cards of the hand that are neither a run nor a set: two suits, three ranks."""
    naturals = [code for code in codes if not code.startswith("X")]
    for first in naturals:
        for second in naturals:
            for third in naturals:
                ranks = {first[:-1], second[:-1], third[:-1]}
                suits = {first[-1], second[-1], third[-1]}
                if len(ranks) == 3 and len(suits) == 2 and len({first, second, third}) == 3:
                    return [first, second, third]
    raise AssertionError(f"no three unrelated cards in {codes}")


def test_a_browser_player_and_sdk_players_share_a_fiftyone_table(stack: dict[str, str]) -> None:
    """Several turns of 51 salon (F-21, F-80) between a browser seat and three SDK seats: a
    selection that is no meld and a gösterge of no pairs are refused with their rule ids
    (F-10 on the page, F-15/F-71 by the engine), and a reload comes back to the same seat and
    hand."""
    with _with_three_sdk_players(stack, "salon-51", "bora", "fiftyone-shared-table") as (
        page,
        seats,
        sdk,
        table_id,
    ):
        assert page.attribute("table", "data-game") == "fiftyone"
        seat = page.attribute("table", "data-seat")
        turns = 0
        refused = False
        reloaded = False
        while turns < 4 and _my_turn_or_over(page, seat=seat):
            view = _view_in_sync(page, seats, table_id)
            if view is None:
                time.sleep(0.05)
                continue
            sequence = str(view.table.table.sequence)
            phase = page.attribute("table", "data-phase")
            refused = _fiftyone_turn(page, view, refuse=not refused) or refused
            _after_move(page, sequence)
            if phase not in ("DRAW", "QUERY"):
                turns += 1
                page.shot(f"turn-{turns}")
            if turns == 2 and not reloaded:
                reloaded = True
                hand = page.attribute("hand", "data-count")
                page.driver.refresh()
                page.until(lambda: page.all("hand"), "the hand after the reload")
                assert page.attribute("table", "data-table-id") == table_id
                assert page.attribute("table", "data-seat") == seat
                assert page.attribute("hand", "data-count") == hand
                page.shot("reloaded")
        # Two SDK seats may finish two salon hands before the browser seat's fourth turn; it
        # is then out (F-96: 100 for a hand unopened, over the 121 of hand 2). The refusals
        # and the reload come in its first two turns.
        assert turns == 4 or bool(page.all("game-over")) or _out(page, seat), turns
        assert refused and reloaded
        assert not sdk.errors, sdk.errors
        assert set(sdk.tables.values()) == {table_id}
        _play_while_seated(page, seats, table_id, "salon-51")
        _spectate(page, stack["web-gateway"], f"cem-{uuid.uuid4().hex[:6]}", table_id)


def test_a_remi_seat_selects_the_bottom_card_to_finish_with_it(stack: dict[str, str]) -> None:
    """F-35 in the page: on its draw, a remi seat that never opened may finish the hand with
    the face-up bottom card, so the card is selectable like one of the hand, melds are put
    together on the draw, and the finish waits for them; after the draw it is a card to look
    at only. (A deal to finish with cannot be arranged: the finish itself is the engine's,
    tested there.)"""
    with _with_three_sdk_players(stack, "remi", "dara", "remi-bottom-card") as (
        page,
        seats,
        sdk,
        table_id,
    ):
        view = _remi_draw(page, seats, table_id)
        # Remi has no pair openings (F-43), so nobody goes pairs there (F-70).
        assert not page.all("action-declare_pairs") and not page.all("action-take_discard_pairs")
        if view.table.fiftyone.HasField("bottom_card"):
            _select_the_bottom_card(page)
        else:
            # The cut card was a joker, which the cutter keeps (F-4): none to finish with.
            assert not page.all("bottom-card") and not page.all("action-take_bottom_card")
        page.click("action-draw_from_stock")
        page.until(lambda: page.attribute("table", "data-phase") != "DRAW", "the draw taken")
        assert all(element.tag_name == "span" for element in page.all("bottom-card"))
        page.shot("drew")
        assert not sdk.errors, sdk.errors


@contextmanager
def _with_three_sdk_players(
    stack: dict[str, str], lobby: str, player: str, shots: str
) -> Iterator[tuple[Browser, SeatReader, SdkPlayers, str]]:
    """A browser player (``player`` and a run id) and three SDK players seated at one table of
    ``lobby``: the page, the player's own seat view over native gRPC, the SDK players and the
    table id. Screenshots go to ``shots`` under SHOTS."""
    run = uuid.uuid4().hex[:6]
    name = f"{player}-{run}"
    engines = [stack["table-engine"], stack["table-engine-1"]]
    with browser(SHOTS / shots) as page, closing(SeatReader(engines, name)) as seats:
        _sign_in(page, stack["web-gateway"], name)
        with SdkPlayers(stack, lobby, [f"sdk-{run}-{index}" for index in range(3)]) as sdk:
            yield page, seats, sdk, _seated(page, lobby)


def _remi_draw(page: Browser, seats: SeatReader, table_id: str) -> view_pb2.SeatView:
    """Play on (discarding) until the browser seat's turn begins with a draw: the starter's
    first turn has none (F-20), and a hand another seat ends may make the seat a starter."""
    for _ in range(6):
        assert _my_turn_or_over(page), "the game ended before the browser seat's draw"
        view = page.until(lambda: _view_in_sync(page, seats, table_id), "the page's view")
        if page.attribute("table", "data-phase") == "DRAW":
            return view
        _discard(page, view)
        _after_move(page, str(view.table.table.sequence))
    raise AssertionError("six turns of the browser seat without a draw")


def _select_the_bottom_card(page: Browser) -> None:
    """On the draw the bottom card is selected like a card of the hand, and the finish waits
    for melds put together."""
    bottom = page.find("bottom-card")
    assert bottom.tag_name == "button" and bottom.get_attribute("aria-pressed") == "false"
    finish = page.find("action-take_bottom_card")
    assert not finish.is_enabled() and "melds" in (finish.get_attribute("title") or "")
    page.click("bottom-card")
    page.until(lambda: page.attribute("bottom-card", "aria-pressed") == "true", "it selected")
    assert page.find("action-stage")
    page.shot("bottom-card-selected")
    page.click("bottom-card")
    page.until(lambda: page.attribute("bottom-card", "aria-pressed") == "false", "it let go")


def _out(page: Browser, seat: str) -> bool:
    return page.attribute(f"seat-{seat}", "data-eliminated") == "true"


def _play_while_seated(page: Browser, seats: SeatReader, table_id: str, lobby: str) -> None:
    """One seat at a time: Play on the lobbies while the player still holds a seat asks
    first, and "Back to that seat" returns to it; no ticket is made meanwhile."""
    page.click("home")

    def over() -> bool:
        view = seats.view(table_id)
        mine = next(seat for seat in view.table.seats if seat.seat == view.seat)
        return view.table.table.state != view_pb2.Table.STATE_PLAYING or mine.eliminated

    page.until(
        lambda: page.all(f"open-table-{table_id}") or over(),
        "the way back to the seat, or the game's end",
    )
    if not page.all(f"open-table-{table_id}"):
        # The game ended meanwhile, or the seat is out of it (F-96): no seat to go back to.
        assert over()
        return
    page.click(f"play-{lobby}")
    asked = page.find(f"seated-elsewhere-{lobby}")
    assert table_id in asked.text
    page.shot("asked-before-a-second-table")
    page.click(f"back-to-seat-{lobby}")
    page.until(lambda: page.attribute("table", "data-table-id") == table_id, "the same seat")


def _spectate(page: Browser, web: str, name: str, table_id: str) -> None:
    """P-20: another player watches the table by its id: the seats' card counts, no hand."""
    page.click("sign-out")
    _sign_in(page, web, name)
    page.find("spectate-input").send_keys(table_id)
    page.click("spectate-submit")
    table = page.find("table")
    page.until(lambda: table.get_attribute("data-table-id") == table_id, "the watched table")
    assert page.attribute("table", "data-seat") == ""
    counts = [int(page.attribute(f"seat-{seat}", "data-cards")) for seat in range(4)]
    assert sum(counts) > 0
    # No hand on the page, and no card face among the seats: counts only.
    assert not page.all("hand")
    for seat in range(4):
        assert not page.find(f"seat-{seat}").find_elements(By.CSS_SELECTOR, "[data-code]")
    page.shot("spectating")
