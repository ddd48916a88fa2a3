"""Text pictures of a table for the terminal: the board, the hand, and one line per event.

Colour is ANSI and optional (``Style(colour=False)``; the CLI turns it off when ``NO_COLOR``
is set or the output is not a terminal). Hearts and diamonds and the red joker are red.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Final

from masa.common.v1 import card_pb2, game_pb2, meld_pb2
from masa.table.v1 import action_pb2, event_pb2, view_pb2
from masa_rules.cards import Colour
from masa_wire.cards import face_from_proto

__all__ = ["Style", "board", "describe", "style_for", "use_colour"]

_RESET: Final = "\033[0m"
_CODES: Final = {"red": "31", "bold": "1", "dim": "2", "green": "32", "yellow": "33", "cyan": "36"}
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
    game = table.WhichOneof("game")
    if game == "fiftyone":
        lines.extend(_fiftyone(table.fiftyone, table, style))
    elif game == "elevator":
        lines.extend(_elevator(table.elevator, style))
    if isinstance(view, view_pb2.SeatView):
        hand = sorted(view.hand, key=lambda card: face_from_proto(card).sort_key())
        lines.append(style.paint("your hand: ", "bold") + style.cards(hand))
        if view.must_use:
            lines.append("must use this turn: " + style.cards(view.must_use))
        hint = _hint(view)
        if hint:
            lines.append(style.paint(hint, "yellow"))
    if table.ranking:
        lines.append(style.paint("final ranking: ", "bold") + _ranking(table.ranking, table))
    return "\n".join(lines)


def _header(table: view_pb2.TableView, style: Style, now: datetime) -> str:
    config = table.table.config
    game = "51 " + game_pb2.Preset.Name(config.preset).removeprefix("PRESET_").lower()
    if config.game == game_pb2.GAME_KIND_ELEVATOR:
        game = "Elevator"
    parts = [style.paint(game, "bold"), f"table {table.table.table_id}", f"hand {table.hand_no}"]
    if table.HasField("turn_seat"):
        turn = f"turn: {_name(table, table.turn_seat)}"
        if table.HasField("turn_deadline"):
            left = (table.turn_deadline.ToDatetime(UTC) - now).total_seconds()
            turn += f" ({max(0, round(left))}s left)"
        parts.append(turn)
    return " · ".join(parts)


def _seat_line(
    seat: view_pb2.SeatState, table: view_pb2.TableView, me: int | None, style: Style
) -> str:
    marker = "▶" if table.HasField("turn_seat") and table.turn_seat == seat.seat else " "
    name = _name(table, seat.seat) + (" (you)" if seat.seat == me else "")
    notes = [f"{seat.card_count} cards"]
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
        (seat.autopilot, "autopilot"),
        (seat.forfeited, "forfeited"),
        (seat.eliminated, "out"),
    ):
        if flag:
            notes.append(label)
    line = f" {marker} {name:<22} " + ", ".join(notes)
    return style.paint(line, "bold") if seat.seat == me else line


def _fiftyone(game: view_pb2.FiftyOneTable, table: view_pb2.TableView, style: Style) -> list[str]:
    lines = []
    for meld in game.melds:
        cards = " ".join(style.placed(placed) for placed in meld.cards)
        owner = _name(table, meld.owner_seat)
        kind = _KIND.get(meld.kind, "meld")
        lines.append(f"   #{meld.meld_id:<3} {cards}   {style.paint(f'{kind}, {owner}', 'dim')}")
    if not lines:
        lines.append(style.paint("   (no melds on the table yet)", "dim"))
    pile = list(game.discard_pile)
    shown = style.cards(pile[-6:]) if pile else "-"
    lines.append(f"discard pile: {shown}" + (" (top last)" if pile else ""))
    stock = f"stock: {game.stock_count}"
    if game.HasField("bottom_card"):
        stock += f" · bottom card {style.card(game.bottom_card)}"
    stock += f" · to open: {game.effective_threshold} points or {game.pairs_needed} pairs"
    lines.append(stock)
    if game.HasField("query"):
        query = game.query
        lines.append(
            style.paint(
                f"query: {_name(table, query.taker_seat)} wants {style.card(query.card)}; "
                f"asked: {', '.join(_name(table, s) for s in query.asked_seats)}",
                "yellow",
            )
        )
    return lines


def _elevator(game: view_pb2.ElevatorTable, style: Style) -> list[str]:
    pile = list(game.pile)
    way = "↑ up" if game.direction == view_pb2.DIRECTION_ASCENDING else "↓ down"
    top = style.card(pile[-1]) if pile else "-"
    line = f"pile: {style.cards(pile[-6:])} · top {style.paint(top, 'bold')} · {way}"
    if game.free_play:
        line += " · any card may follow (joker)"
    lines = [line, f"stock: {game.stock_count}"]
    if game.HasField("kopile_seat"):
        lines.append(
            style.paint(f"kopile: seat {game.kopile_seat} is owed {game.kopile_owed}", "yellow")
        )
    return lines


def _hint(view: view_pb2.SeatView) -> str:
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


def _ranking(ranking: Sequence[game_pb2.Standing], table: view_pb2.TableView) -> str:
    ordered = sorted(ranking, key=lambda standing: standing.place)
    return ", ".join(f"{s.place}. {_name(table, s.seat)} ({s.total})" for s in ordered)


def _name(table: view_pb2.TableView, seat: int) -> str:
    for state in table.seats:
        if state.seat == seat:
            name = state.display_name or state.player_id or f"seat {seat}"
            bot = state.kind == game_pb2.SEAT_KIND_BOT
            return f"{name} [bot]" if bot and "bot" not in name.lower() else name
    return f"seat {seat}"


def describe(event: event_pb2.TableEvent, names: Mapping[int, str], style: Style) -> str:
    """One line for one event, or ``""`` for events not worth a line (timers, connections)."""
    kind = event.WhichOneof("kind")
    if kind is None:
        return ""
    body = getattr(event, kind)
    who = names.get(getattr(body, "seat", -1), f"seat {getattr(body, 'seat', '?')}")
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
        return style.paint(
            f"{names.get(body.taker_seat, 'a seat')} asks for {style.card(body.card)}", "yellow"
        )
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
        return style.paint(f"kopile! {who} is owed {body.owed} cards", "yellow")
    if kind == "card_given":
        card = f" {style.card(body.card)}" if body.HasField("card") else " a card"
        return f"{names.get(body.from_seat, 'a seat')} gives{card} to {names.get(body.to_seat, 'a seat')}"
    if kind == "turn_timed_out":
        return style.paint(f"{who} ran out of time", "dim")
    if kind == "autopilot_changed":
        return style.paint(f"{who}: autopilot {'on' if body.on else 'off'}", "dim")
    if kind == "hand_finished":
        scores = ", ".join(f"{names.get(s.seat, s.seat)} {s.score:+d}" for s in body.scores)
        return style.paint(f"— hand {body.hand_no} over — {scores}", "cyan")
    if kind == "game_finished":
        ordered = sorted(body.ranking, key=lambda standing: standing.place)
        ranking = ", ".join(f"{s.place}. {names.get(s.seat, s.seat)}" for s in ordered)
        return style.paint(f"game over: {ranking}", "green", "bold")
    return ""
