"""Text pictures of a table for the terminal: the board, the hand, one line per event, and
the result of a game with the reason it ended.

Players are always named (a bot without a name gets one, never "seat 3"), counts agree with
their number ("1 card"), and every number in a result says what it counts. Colour is ANSI
and optional (``Style(colour=False)``; the CLI turns it off when ``NO_COLOR`` is set or the
output is not a terminal). Hearts and diamonds and the red joker are red.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Final

from masa.common.v1 import card_pb2, game_pb2, meld_pb2
from masa.table.v1 import action_pb2, event_pb2, view_pb2
from masa_rules.cards import Colour
from masa_rules.table_config import GameKind
from masa_wire.cards import face_from_proto
from masa_wire.games import game_name, view_game_name

__all__ = [
    "BOT_NAMES",
    "GameBoard",
    "Style",
    "board",
    "count",
    "describe",
    "game_over",
    "game_title",
    "register_board",
    "seat_name",
    "style_for",
    "use_colour",
    "with_names",
]

_RESET: Final = "\033[0m"
_CODES: Final = {"red": "31", "bold": "1", "dim": "2", "green": "32", "yellow": "33", "cyan": "36"}
# Names for bot seats created without one, so that every player has a name.
BOT_NAMES: Final = ("Ayla", "Deniz", "Kerem", "Selin", "Emre", "Zeynep")
# "seat 3" in a server's message, where the player's name belongs.
_SEAT: Final = re.compile(r"\bseat (\d+)")
_FINISH: Final = {
    event_pb2.FINISH_KIND_BY_HAND: "by hand",
    event_pb2.FINISH_KIND_WITH_JOKER: "with a joker",
    event_pb2.FINISH_KIND_FROM_PAIRS: "from pairs",
    event_pb2.FINISH_KIND_WITH_BOTTOM_CARD: "with the bottom card",
}
_KIND: Final = {
    meld_pb2.MELD_KIND_RUN: "run",
    meld_pb2.MELD_KIND_SET: "set",
    meld_pb2.MELD_KIND_PAIR: "pair",
}


def use_colour(stream: IO[str]) -> bool:
    """ANSI colour unless ``NO_COLOR`` is set (https://no-color.org) or ``stream`` is no tty."""
    return not os.environ.get("NO_COLOR") and stream.isatty()


@dataclass(frozen=True, slots=True)
class Style:
    colour: bool = True

    def paint(self, text: str, *styles: str) -> str:
        if not self.colour or not styles:
            return text
        return "\033[" + ";".join(_CODES[style] for style in styles) + "m" + text + _RESET

    def card(self, message: card_pb2.Card) -> str:
        face = face_from_proto(message)
        return self.paint(face.code, "red") if face.colour is Colour.RED else face.code

    def cards(self, messages: Iterable[card_pb2.Card]) -> str:
        return " ".join(self.card(message) for message in messages) or "-"

    def placed(self, placed: card_pb2.PlacedCard) -> str:
        shown = self.card(placed.card)
        if placed.HasField("stands_for"):
            shown += self.paint("=" + face_from_proto(placed.stands_for).code, "dim")
        return shown


def style_for(stream: IO[str] = sys.stdout) -> Style:
    return Style(colour=use_colour(stream))


def board(
    view: view_pb2.SeatView | view_pb2.TableView, style: Style, *, now: datetime | None = None
) -> str:
    """The whole table as the viewer sees it; a seat view adds the hand and what to do."""
    table = view.table if isinstance(view, view_pb2.SeatView) else view
    me = view.seat if isinstance(view, view_pb2.SeatView) else None
    lines = [_header(table, style, now or datetime.now(UTC))]
    lines.extend(_seat_line(seat, table, me, style) for seat in table.seats)
    drawing = _BOARDS.get(view_game_name(table))
    if drawing is not None:
        lines.extend(drawing.lines(table, style))
    if isinstance(view, view_pb2.SeatView):
        hand = sorted(view.hand, key=lambda card: face_from_proto(card).sort_key())
        lines.append(style.paint("your hand: ", "bold") + style.cards(hand))
        if view.must_use:
            lines.append("must use this turn: " + style.cards(view.must_use))
        hint = _hint(view)
        if hint:
            lines.append(style.paint(hint, "yellow"))
    if _over(table):
        lines.extend(game_over(table, style))
    return "\n".join(lines)


def seat_name(table: view_pb2.TableView, seat: int, me: int | None = None) -> str:
    """A player's name as the board shows it: ``Ayla [bot]``, ``Kerem [hard bot]`` (a level
    other than normal is named), ``alice (you)``."""
    for state in table.seats:
        if state.seat == seat:
            name = state.display_name or state.player_id or BOT_NAMES[seat % len(BOT_NAMES)]
            if state.kind == game_pb2.SEAT_KIND_BOT and "bot" not in name.lower():
                name += f" [{_LEVEL_NAMES.get(state.bot_level, '')}bot]"
            return name + (" (you)" if seat == me else "")
    return "a player"


# The bot levels a name mentions; normal (and unspecified, which is normal) goes unsaid.
_LEVEL_NAMES: Final = {game_pb2.BOT_LEVEL_EASY: "easy ", game_pb2.BOT_LEVEL_HARD: "hard "}


def with_names(text: str, table: view_pb2.TableView) -> str:
    """A server message with its players named: "seat 2's turn" -> "Ayla [bot]'s turn"."""
    return _SEAT.sub(lambda found: seat_name(table, int(found[1])), text)


def count(number: int, noun: str) -> str:
    """``1 card``, ``2 cards``, ``0 cards``."""
    return f"{number} {noun}" + ("" if number == 1 else "s")


def _over(table: view_pb2.TableView) -> bool:
    return table.table.state in (view_pb2.Table.STATE_FINISHED, view_pb2.Table.STATE_VOIDED)


def _header(table: view_pb2.TableView, style: Style, now: datetime) -> str:
    game = game_title(table.table.config, view_game_name(table))
    parts = [style.paint(game, "bold"), f"table {table.table.table_id}", f"hand {table.hand_no}"]
    if _over(table):
        parts.append("game over")
    elif table.HasField("turn_seat"):
        turn = f"turn: {seat_name(table, table.turn_seat)}"
        if table.HasField("turn_deadline"):
            left = (table.turn_deadline.ToDatetime(UTC) - now).total_seconds()
            turn += f" ({max(0, round(left))}s left)"
        parts.append(turn)
    return " · ".join(parts)


def _seat_line(
    seat: view_pb2.SeatState, table: view_pb2.TableView, me: int | None, style: Style
) -> str:
    marker = "▶" if table.HasField("turn_seat") and table.turn_seat == seat.seat else " "
    name = seat_name(table, seat.seat, me)
    notes = [count(seat.card_count, "card")]
    if table.WhichOneof("game") == "fiftyone":
        notes.append(f"total {seat.total}")
        if seat.opening == view_pb2.OPENING_MELDS:
            notes.append("opened")
        elif seat.opening == view_pb2.OPENING_PAIRS:
            notes.append("opened with pairs")
        elif seat.opening == view_pb2.OPENING_PARTNER:
            notes.append("partner opened")
        if seat.pair_status:
            notes.append("going pairs")
    for flag, label in (
        (seat.left, "left the table"),
        (seat.forfeited, "forfeited, a bot plays"),
        (seat.autopilot and not seat.forfeited, "autopilot"),
        (seat.eliminated, "out"),
    ):
        if flag:
            notes.append(label)
    line = f" {marker} {name:<22} " + ", ".join(notes)
    return style.paint(line, "bold") if seat.seat == me else line


@dataclass(frozen=True, slots=True)
class GameBoard:
    """How the board draws one game: its title in the header (from the table's configuration),
    and the lines of its public state under the seats."""

    title: Callable[[game_pb2.TableConfig], str]
    lines: Callable[[view_pb2.TableView, Style], list[str]]


def game_title(config: game_pb2.TableConfig, name: str | None = None) -> str:
    """What the client calls the game of ``config`` (``51 salon``, ``Elevator``, a plugin's
    title): its board's title, else its name (``name`` when the caller knows it better)."""
    name = game_name(config) if name is None else name
    drawing = _BOARDS.get(name)
    if drawing is not None:
        return drawing.title(config)
    return name or "a game this client cannot show"


def register_board(name: str, drawing: GameBoard) -> None:
    """Draw the game ``name`` (its registered name) with ``drawing``; once. The client's one
    registry of games (docs/architecture.md, "Adding a game")."""
    if name in _BOARDS:
        raise ValueError(f"the board draws {name} already")
    _BOARDS[name] = drawing


def _fiftyone_title(config: game_pb2.TableConfig) -> str:
    return "51 " + game_pb2.Preset.Name(config.preset).removeprefix("PRESET_").lower()


def _fiftyone(game: view_pb2.FiftyOneTable, table: view_pb2.TableView, style: Style) -> list[str]:
    lines = []
    for meld in game.melds:
        cards = " ".join(style.placed(placed) for placed in meld.cards)
        owner = seat_name(table, meld.owner_seat)
        kind = _KIND.get(meld.kind, "meld")
        lines.append(f"   #{meld.meld_id:<3} {cards}   {style.paint(f'{kind}, {owner}', 'dim')}")
    if not lines:
        lines.append(style.paint("   (no melds on the table yet)", "dim"))
    pile = list(game.discard_pile)
    shown = style.cards(pile[-6:]) if pile else "-"
    lines.append(f"discard pile: {shown}" + (" (top last)" if pile else ""))
    stock = f"stock: {count(game.stock_count, 'card')}"
    if game.HasField("bottom_card"):
        stock += f" · bottom card {style.card(game.bottom_card)}"
    stock += f" · to open: {game.effective_threshold} points"
    if game.pairs_needed:
        stock += f" or {count(game.pairs_needed, 'pair')}"
    lines.append(stock)
    if game.HasField("query"):
        query = game.query
        lines.append(
            style.paint(
                f"query: {seat_name(table, query.taker_seat)} wants {style.card(query.card)}; "
                f"asked: {', '.join(seat_name(table, s) for s in query.asked_seats)}",
                "yellow",
            )
        )
    return lines


def _elevator(game: view_pb2.ElevatorTable, table: view_pb2.TableView, style: Style) -> list[str]:
    pile = list(game.pile)
    way = "↑ up" if game.direction == view_pb2.DIRECTION_ASCENDING else "↓ down"
    top = style.card(pile[-1]) if pile else "-"
    line = f"pile: {style.cards(pile[-6:])} · top {style.paint(top, 'bold')} · {way}"
    if game.free_play:
        line += " · any card may follow (joker)"
    lines = [line, f"stock: {count(game.stock_count, 'card')}"]
    if game.HasField("kopile_seat"):
        owed = count(game.kopile_owed, "card")
        lines.append(
            style.paint(f"kopile: {seat_name(table, game.kopile_seat)} is owed {owed}", "yellow")
        )
    return lines


def _hint(view: view_pb2.SeatView) -> str:
    table = view.table
    if _over(table):
        # Its result says the rest (game_over).
        return ""
    mine = next((seat for seat in table.seats if seat.seat == view.seat), None)
    if mine is not None and mine.forfeited:
        return "your seat is forfeited (P-12): a bot plays it to the end"
    if mine is not None and mine.autopilot:
        return "the autopilot is playing for you (P-11): type 'resume' to take your seat back"
    return _turn_hint(view)


def _turn_hint(view: view_pb2.SeatView) -> str:
    table = view.table
    phase = table.turn_phase
    if phase == view_pb2.TURN_PHASE_QUERY and table.fiftyone.query.asked_seats:
        if view.seat in table.fiftyone.query.asked_seats:
            return "you are asked: 'give' or 'refuse' the discard"
        return ""
    if not table.HasField("turn_seat") or table.turn_seat != view.seat:
        return ""
    return {
        view_pb2.TURN_PHASE_DRAW: "your turn: 'draw' or 'take' (then open, lay, discard)",
        view_pb2.TURN_PHASE_MELD: "your turn: 'open', 'down', 'lay', then 'discard'",
        view_pb2.TURN_PHASE_PLAY: "your turn: 'play CARDS' or 'pass'",
        view_pb2.TURN_PHASE_GIVE: "you owe a card: 'give CARD'",
    }.get(phase, "your turn")


def game_over(table: view_pb2.TableView, style: Style, me: int | None = None) -> list[str]:
    """The result of a finished table: why it ended, then each place with labelled numbers.

    It reads the final view only, so a spectator who arrives after the end sees it too.
    """
    if table.table.state == view_pb2.Table.STATE_VOIDED:
        return [
            style.paint(
                "game voided: it could not be completed, so it ended without a result and "
                "every stake went back (P-30)",
                "yellow",
                "bold",
            )
        ]
    ranking = sorted(table.ranking, key=lambda standing: standing.place)
    elevator = table.table.config.game == game_pb2.GAME_KIND_ELEVATOR
    players = [standing for standing in ranking if standing.player_id]
    if players and all(standing.forfeited for standing in players):
        reason = "every player left the table, so it ended at once, ranked as it stood (P-12)"
    elif elevator:
        counts = {seat.seat: seat.card_count for seat in table.seats}
        out = [s for s in ranking if s.place == 1 and counts.get(s.seat, 1) == 0]
        if out:
            reason = f"{seat_name(table, out[0].seat, me)} went out: no cards left (E-11)"
        else:
            reason = (
                "nobody could play on with the stock empty: ranked by cards left, then by "
                "the sum of their ranks (E-9, E-11)"
            )
    elif table.table.config.preset == game_pb2.PRESET_SALON:
        hands = count(table.fiftyone.hands_scored, "hand")
        reason = f"after {hands}, the last player under the elimination limit wins (F-96)"
    else:
        hands = count(table.fiftyone.hands_scored, "hand")
        reason = f"after {hands}, the lowest total wins (F-95)"
    lines = [style.paint(f"game over: {reason}", "green", "bold")]
    for standing in ranking:
        number = (
            f"{count(standing.total, 'card')} left"
            if elevator
            else f"total {standing.total} points"
        )
        forfeited = ", forfeited (P-12)" if standing.forfeited else ""
        name = seat_name(table, standing.seat, me)
        lines.append(f"  {standing.place}. {name:<22} {number}{forfeited}")
    return lines


def _scores(
    hand: event_pb2.HandFinished, table: view_pb2.TableView, elevator: bool, me: int | None
) -> str:
    parts = []
    for score in hand.scores:
        name = seat_name(table, score.seat, me)
        if elevator:
            left = count(score.score, "card") + " left"
            parts.append(
                f"{name} {left}" + (f" (rank sum {score.rank_sum})" if score.score else "")
            )
        else:
            parts.append(f"{name} {score.score:+d} points (total {score.total})")
    return "; ".join(parts)


def _hand_over(
    hand: event_pb2.HandFinished, table: view_pb2.TableView, me: int | None, style: Style
) -> str:
    elevator = table.table.config.game == game_pb2.GAME_KIND_ELEVATOR
    finisher = seat_name(table, hand.finisher_seat, me) if hand.HasField("finisher_seat") else ""
    if hand.end_reason == event_pb2.HAND_END_REASON_BLOCKED:
        why = "nobody could play on: ranked by cards left, then rank sum (E-11)"
    elif hand.end_reason == event_pb2.HAND_END_REASON_STOCK_EXHAUSTED:
        why = "the stock ran out and nobody finished (F-63)"
        if hand.replayed:
            why = "the stock ran out before anyone opened: the hand is replayed (F-63)"
    elif hand.end_reason == event_pb2.HAND_END_REASON_STALLED:
        why = "rounds went by without a draw from the stock (stall guard): nobody finished (F-64)"
    elif not finisher:
        why = "the hand ended without a finisher (F-63, F-64)"
    elif elevator:
        why = f"{finisher} went out"
    else:
        kinds = [_FINISH[kind] for kind in hand.finish_kinds if kind in _FINISH]
        why = f"{finisher} finished" + (" " + " and ".join(kinds) if kinds else "")
        if hand.kafa:
            why += " (kafa)"
    heading = f"— hand {hand.hand_no} over: {why} —"
    return style.paint(heading, "cyan") + "\n  " + _scores(hand, table, elevator, me)


def describe(  # noqa: C901, PLR0911, PLR0912 - one line per event kind, read as a table
    event: event_pb2.TableEvent,
    table: view_pb2.TableView,
    style: Style,
    me: int | None = None,
) -> str:
    """Lines for one event, or ``""`` for events not worth a line (timers, connections).

    ``table`` is the latest view the receiver holds; it names the players.
    """
    kind = event.WhichOneof("kind")
    if kind is None:
        return ""
    body = getattr(event, kind)
    who = seat_name(table, body.seat, me) if hasattr(body, "seat") else ""
    mine = me is not None and getattr(body, "seat", None) == me
    if kind == "hand_dealt":
        return style.paint(f"— hand {body.hand_no} dealt —", "cyan")
    if kind == "drew":
        return f"{who} draws" + (f" {style.card(body.card)}" if body.HasField("card") else "")
    if kind == "took_discard":
        return f"{who} takes the discard {style.card(body.card)}"
    if kind in ("opened", "laid_down"):
        melds = " / ".join(" ".join(style.placed(p) for p in meld.cards) for meld in body.melds)
        verb = "opens" + (" with pairs" if kind == "opened" and body.with_pairs else "")
        return f"{who} {verb if kind == 'opened' else 'lays down'}: {melds}"
    if kind == "laid_off":
        return f"{who} lays {style.placed(body.card)} on #{body.meld.meld_id}"
    if kind == "joker_retrieved":
        return f"{who} takes {style.card(body.joker)} back from #{body.meld.meld_id}"
    if kind == "discarded":
        extra = " (işlek)" if body.islek else ""
        return f"{who} discards {style.card(body.card)}{extra}"
    if kind == "pairs_declared":
        return f"{who} goes pairs"
    if kind == "query_started":
        taker = seat_name(table, body.taker_seat, me)
        return style.paint(f"{taker} asks for {style.card(body.card)}", "yellow")
    if kind == "query_answered":
        answer = "gives" if body.answer == action_pb2.QUERY_ANSWER_GIVE else "refuses"
        return f"{who} {answer}"
    if kind == "played":
        return f"{who} plays {style.cards(body.cards)}"
    if kind == "passed":
        return f"{who} passes" + (
            f", draws {style.card(body.drawn)}" if body.HasField("drawn") else ""
        )
    if kind == "kopile_started":
        return style.paint(f"kopile! {who} is owed {count(body.owed, 'card')}", "yellow")
    if kind == "card_given":
        card = f" {style.card(body.card)}" if body.HasField("card") else " a card"
        giver, taker = seat_name(table, body.from_seat, me), seat_name(table, body.to_seat, me)
        return f"{giver} gives{card} to {taker}"
    if kind == "turn_timed_out":
        return style.paint(f"{who} ran out of time; the autopilot plays this turn (P-10)", "dim")
    if kind == "autopilot_changed":
        return _autopilot(body, who, mine, style)
    if kind == "seat_connection_changed" and body.left:
        return style.paint(f"{who} left the table", "dim")
    if kind == "seat_forfeited":
        return style.paint(f"{who} forfeited (P-12): a bot plays the seat to the end", "dim")
    if kind == "hand_finished":
        return _hand_over(body, table, me, style)
    # The game's end (game_finished, game_abandoned) is told by game_over(), from the final view.
    return ""


def _autopilot(change: event_pb2.AutopilotChanged, who: str, mine: bool, style: Style) -> str:
    if change.reason == event_pb2.AUTOPILOT_REASON_FORFEIT:
        return ""
    if not change.on:
        return style.paint(f"{who} plays again; the autopilot is off", "dim")
    if mine:
        return style.paint(
            "the autopilot plays for you after 3 timeouts (P-11): type 'resume' to take your "
            "seat back",
            "yellow",
        )
    return style.paint(f"{who}: the autopilot plays after 3 timeouts (P-11)", "dim")


_BOARDS: dict[str, GameBoard] = {
    GameKind.FIFTYONE: GameBoard(
        title=_fiftyone_title, lines=lambda table, style: _fiftyone(table.fiftyone, table, style)
    ),
    GameKind.ELEVATOR: GameBoard(
        title=lambda _: "Elevator",
        lines=lambda table, style: _elevator(table.elevator, table, style),
    ),
}
