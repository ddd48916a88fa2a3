"""What a player types at ``masa play``, turned into ``masa.table.v1.Action`` messages.

51: ``draw``, ``take``, ``take pairs``, ``open 7H 8H 9H / 10S 10D XR``, ``down ...`` (more melds
once opened), ``lay 6H on 2`` (``lay XR=5H on 2 low``), ``retrieve XR from 2 with 8H``,
``discard QS``, ``pairs``, ``show 7H 7H 9C 9C ...`` (gösterge), ``claim 8H`` (bottom card),
``give`` / ``refuse`` (a query).
Elevator: ``play 8H 8S``, ``pass``, ``give 7C``.
Everywhere: ``help`` (the game's core rules, by their docs/rules.md ids, then these commands),
``look``, ``resume`` (take the seat back from the autopilot), ``quit`` (leave the table).

Cards may name either physical copy: the server reads ``8H`` as the copy the hand holds. A
joker in a meld may carry what it stands for, ``XR=8H`` (C-2); without it the engine chooses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from masa.common.v1 import card_pb2, meld_pb2
from masa.table.v1 import action_pb2, view_pb2
from masa_rules.cards import Card, CardError, parse_card
from masa_wire.cards import face_to_proto

from masa_client.rulebook import meaning

__all__ = ["CORE_RULES", "HELP", "LOCAL", "CommandError", "Parsed", "parse_command"]

# Commands that are not moves: the CLI answers them itself or with a call of its own.
LOCAL: Final = frozenset({"help", "look", "resume", "quit"})

_EVERYWHERE: Final = """\
  look                          show the board again
  resume                        take your seat back from the autopilot (P-11)
  help                          the rules above and this list
  quit                          leave the table (at a training table it ends)"""

# What may be played in each game, by rule id: what `help` says before the commands.
CORE_RULES: Final = {
    "fiftyone": ("F-21", "F-10", "F-11", "F-12", "F-13", "F-40", "F-30", "F-50", "F-60"),
    "elevator": ("E-4", "E-5", "E-6", "E-7", "E-8", "E-9", "E-11"),
}


def _rules(game: str) -> str:
    lines = [f"  {rule:<5} {meaning(rule)}" for rule in CORE_RULES[game]]
    return "what may be played (docs/rules.md):\n" + "\n".join(lines) + "\ncommands:\n"


HELP: Final = {
    "fiftyone": _rules("fiftyone")
    + """\
  draw                          take the top card of the stock
  take  |  take pairs           take the previous discard (to open with it / going pairs)
  open 7H 8H 9H / 10S 10D XR    open with melds, separated by '/' (a joker may say XR=8H)
  down 4C 5C 6C                 lay down more melds once opened
  lay 6H on 2  |  lay XR=5H on 2 low    lay off onto meld #2 (end: low or high)
  retrieve XR from 2 with 8H    take a joker back from meld #2 with its card
  discard QS                    discard a card, ending the turn
  pairs                         declare going pairs
  show 7H 7D 9C 9C ...          salon: show four pairs (gösterge)
  claim 8H                      classic: claim the bottom card by showing its twin
  give  |  refuse               answer a query for the discard (salon)
"""
    + _EVERYWHERE,
    "elevator": _rules("elevator")
    + """\
  play 8H 8S                    play one card, or several of one rank alternating colour
  pass                          pass and draw a card
  give 7C                       give a card to the player owed one (kopile)
"""
    + _EVERYWHERE,
}


class CommandError(ValueError):
    """A line that is not a command; the message says how to write it."""


@dataclass(frozen=True, slots=True)
class Parsed:
    """Either a command that is not a move (``help``, ``look``, ``resume``, ``quit``) or an
    action to submit."""

    local: str | None = None
    action: action_pb2.Action | None = None


def parse_command(line: str, game: str, view: view_pb2.SeatView | None = None) -> Parsed:
    """Read one line typed at the prompt (``game`` is ``fiftyone`` or ``elevator``).

    ``view`` supplies what a command refers to implicitly: the discard to take, the query to
    answer.

    >>> parse_command("play 8h 8s", "elevator").action.play.cards[1].suit
    1
    >>> parse_command("discard XR", "fiftyone").action.discard.card.joker_colour
    1
    """
    words = line.strip().split()
    if not words:
        raise CommandError("type a command, or 'help'")
    verb, args = words[0].lower(), words[1:]
    if verb in LOCAL:
        return Parsed(local=verb)
    if game == "elevator":
        return Parsed(action=_elevator(verb, args))
    return Parsed(action=_fiftyone(verb, args, view))


def _elevator(verb: str, args: list[str]) -> action_pb2.Action:
    if verb == "play":
        if not args:
            raise CommandError("play which cards? e.g. 'play 8H' or 'play 8H 8S'")
        return action_pb2.Action(play=action_pb2.Play(cards=[_card(arg) for arg in args]))
    if verb == "pass":
        return action_pb2.Action(pass_turn=action_pb2.Pass())
    if verb == "give":
        if len(args) != 1:
            raise CommandError("give one card, e.g. 'give 7C'")
        return action_pb2.Action(give_card=action_pb2.GiveCard(card=_card(args[0])))
    raise CommandError(f"unknown command {verb!r}; Elevator knows play, pass, give (try 'help')")


def _fiftyone(  # noqa: C901, PLR0911, PLR0912 - one arm per 51 command verb, as `help` lists them
    verb: str, args: list[str], view: view_pb2.SeatView | None
) -> action_pb2.Action:
    if verb == "draw":
        return action_pb2.Action(draw_from_stock=action_pb2.DrawFromStock())
    if verb == "take":
        take = action_pb2.TakeDiscard(pairs=args[:1] == ["pairs"])
        pile = view.table.fiftyone.discard_pile if view is not None else []
        if pile:
            take.expected_card.CopyFrom(pile[-1])
        return action_pb2.Action(take_discard=take)
    if verb == "open":
        return action_pb2.Action(open=action_pb2.Open(melds=_melds(args)))
    if verb == "down":
        return action_pb2.Action(lay_down=action_pb2.LayDown(melds=_melds(args)))
    if verb == "lay":
        return action_pb2.Action(lay_off=_lay_off(args))
    if verb == "retrieve":
        # retrieve XR from 2 with 8H
        if len(args) != 5 or args[1].lower() != "from" or args[3].lower() != "with":
            raise CommandError("write 'retrieve XR from 2 with 8H'")
        return action_pb2.Action(
            retrieve_joker=action_pb2.RetrieveJoker(
                meld_id=_meld_id(args[2]), joker=_card(args[0]), natural=_card(args[4])
            )
        )
    if verb == "discard":
        if len(args) != 1:
            raise CommandError("discard one card, e.g. 'discard QS'")
        return action_pb2.Action(discard=action_pb2.Discard(card=_card(args[0])))
    if verb == "pairs":
        return action_pb2.Action(declare_pairs=action_pb2.DeclarePairs())
    if verb == "show":
        return action_pb2.Action(
            show_gosterge=action_pb2.ShowGosterge(cards=[_card(arg) for arg in args])
        )
    if verb == "claim":
        if len(args) != 1:
            raise CommandError("claim the bottom card by showing its twin, e.g. 'claim 8H'")
        return action_pb2.Action(claim_bottom_card=action_pb2.ClaimBottomCard(shown=_card(args[0])))
    if verb in ("give", "refuse"):
        query = view.table.fiftyone.query if view is not None else None
        if query is None or not query.asked_seats:
            raise CommandError("there is no query to answer")
        answer = action_pb2.QUERY_ANSWER_GIVE if verb == "give" else action_pb2.QUERY_ANSWER_REFUSE
        return action_pb2.Action(
            answer_query=action_pb2.AnswerQuery(query_id=query.query_id, answer=answer)
        )
    raise CommandError(f"unknown command {verb!r} (try 'help')")


def _lay_off(args: list[str]) -> action_pb2.LayOff:
    # lay 6H on 2 [low|high]
    if "on" not in [arg.lower() for arg in args]:
        raise CommandError("write 'lay 6H on 2' (the meld number is shown as #2)")
    split = [arg.lower() for arg in args].index("on")
    cards, rest = args[:split], args[split + 1 :]
    if not cards or not rest or len(rest) > 2:
        raise CommandError("write 'lay 6H on 2', optionally ending with 'low' or 'high'")
    lay = action_pb2.LayOff(meld_id=_meld_id(rest[0]))
    for text in cards:
        face, stands_for = _placed(text)
        lay.cards.append(face)
        if stands_for is not None:
            lay.stands_for.CopyFrom(stands_for)
    if len(rest) == 2:
        end = {"low": meld_pb2.MELD_END_LOW, "high": meld_pb2.MELD_END_HIGH}.get(rest[1].lower())
        if end is None:
            raise CommandError("the end is 'low' or 'high'")
        lay.end = end
    return lay


def _melds(args: Sequence[str]) -> list[meld_pb2.ProposedMeld]:
    groups: list[list[str]] = [[]]
    for arg in args:
        for part in arg.replace("/", " / ").split():
            if part == "/":
                groups.append([])
            else:
                groups[-1].append(part)
    melds = [group for group in groups if group]
    if not melds:
        raise CommandError("name the melds, e.g. 'open 7H 8H 9H / 10S 10D XR'")
    return [_meld(group) for group in melds]


def _meld(codes: list[str]) -> meld_pb2.ProposedMeld:
    placed = []
    faces: list[Card] = []
    for code in codes:
        card, stands_for = _placed(code)
        entry = card_pb2.PlacedCard(card=card)
        if stands_for is not None:
            entry.stands_for.CopyFrom(stands_for)
        placed.append(entry)
        faces.append(_face(code.split("=")[0]))
    naturals = [face for face in faces if not face.is_joker]
    if len(codes) == 2:
        kind = meld_pb2.MELD_KIND_PAIR
    elif naturals and len({face.rank for face in naturals}) == 1:
        kind = meld_pb2.MELD_KIND_SET
    else:
        kind = meld_pb2.MELD_KIND_RUN
    return meld_pb2.ProposedMeld(kind=kind, cards=placed)


def _placed(text: str) -> tuple[card_pb2.Card, card_pb2.Card | None]:
    """``XR=8H`` is a joker standing for 8H (C-2); anything else is a plain card."""
    face, _, stands = text.partition("=")
    return _card(face), (_card(stands) if stands else None)


def _card(text: str) -> card_pb2.Card:
    return face_to_proto(_face(text))


def _face(text: str) -> Card:
    try:
        return parse_card(text)
    except CardError:
        raise CommandError(f"{text!r} is not a card: write e.g. 8H, 10S, QD, XR") from None


def _meld_id(text: str) -> int:
    digits = text.lstrip("#")
    if not digits.isdigit():
        raise CommandError(f"{text!r} is not a meld number (they are shown as #1, #2 ...)")
    return int(digits)
