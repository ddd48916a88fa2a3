"""One line per rule id of docs/rules.md, so a client can say what a rejected move broke.

The server's error names the rule (the ``ErrorInfo`` reason) and says what went wrong in this
case; this glossary adds what the rule is about, for players who do not know the book by id.
"""

from __future__ import annotations

from typing import Final

__all__ = ["RULES", "meaning"]

RULES: Final[dict[str, str]] = {
    "C-1": "card codes are a rank 2-10/J/Q/K/A and a suit S/H/D/C, or XR/XB for the jokers",
    "C-2": "a joker in a meld stands for one card, written XR=8H",
    "C-4": "each physical card is in exactly one place: you play and give only cards in your "
    "own hand",
    "F-10": "a meld has at least 3 cards and is a run or a set",
    "F-11": "a run is one suit in consecutive ranks; the ace is high, K A 2 never runs",
    "F-12": "a set is 3 or 4 cards of one rank, all suits different",
    "F-13": "a joker stands for any card; a meld needs one natural card (remi: one joker per "
    "meld in the opening turn)",
    "F-15": "a pair is two identical cards, or a card and a joker",
    "F-20": "the starter's first turn has no draw: it only discards",
    "F-21": "a turn is: take a card, optionally open or lay off, then discard one card",
    "F-22": "only the seat on turn acts, and only after the previous discard",
    "F-30": "unopened, you may take the discard only to open with it this turn",
    "F-31": "going pairs lets you take the discard without opening",
    "F-32": "after a pair-goer you may not take discards unless you also go pairs",
    "F-33": "opened, you may take the discard only to lay it down or off this turn",
    "F-33r": "remi: an unopened player who takes the discard must open this turn",
    "F-34": "classic: the bottom card is claimed by showing its twin, taken a round later",
    "F-35": "remi: the bottom card goes only to a player finishing by hand this turn",
    "F-36": "a card taken from the discard pile cannot be discarded again in the same turn",
    "F-40": "an opening must reach the threshold in meld value",
    "F-41": "escalating table: an opening must beat the highest opening so far",
    "F-42": "salon: after a pair opening the series threshold is 101",
    "F-43": "a pair opening is 5 pairs, or 4 pairs and a meld; pair openers lay pairs only",
    "F-44": "while opening you may lay off, but laid-off cards do not count",
    "F-47": "once opened you may lay down more melds of any value",
    "F-50": "only an opened player lays off, extending a run or completing a set",
    "F-51": "a set of four is closed",
    "F-52": "the last card is never laid down or laid off: it is the finishing discard",
    "F-55": "a joker on the table is retrieved with the card it stands for, and used this turn",
    "F-60": "a hand is finished by discarding the last card",
    "F-61": "işlek: a card that could be laid off on the table (its discard is limited or costly)",
    "F-62": "remi hand finish: everything laid down in one turn, nothing laid off",
    "F-63": "the stock ran out",
    "F-64": "rounds without a draw from the stock end the hand as if the stock ran out",
    "F-70": "going pairs: you can then open only with pairs and pay double if you lose",
    "F-71": "salon gösterge: show four pairs to go into pair status",
    "F-80": "salon query: unopened players are asked to give the discard first",
    "E-1": "Elevator is for 3-6 players with one pack (two for six)",
    "E-2": "each player gets 7 cards; the next card starts the pile",
    "E-3": "play goes round in seat order; only the seat on turn acts",
    "E-4": "play the opposite colour, strictly higher going up or strictly lower going down",
    "E-5": "more cards of the same rank may follow in one play, alternating colour",
    "E-6": "an ace turns the pile downwards, a 2 turns it upwards",
    "E-7": "a joker goes on the other colour as a play of its own; anything may follow it",
    "E-8": "if you do not play you pass and draw; you may pass while able only after a play",
    "E-9": "kopile: when everyone passes on your play you draw one card per opponent, and "
    "again each time it comes back to you so",
    "E-10": "with an empty stock play goes on without drawing",
    "E-11": "the first player out of cards wins the hand",
    "P-10": "each turn has a timer; when it runs out the server plays for you",
    "P-11": "after 3 timeouts the autopilot plays until you take control back",
    "P-1": "a training table is against bots, with no chips",
    "P-2": "the table's configuration decides the game, seats and options",
    "P-12": "a disconnected player keeps the seat for 180 s, then forfeits",
    "P-20": "nobody sees another player's cards",
}


def meaning(rule: str) -> str:
    """What ``rule`` is about, or ``""`` for an id the glossary does not know.

    >>> meaning("E-4")
    'play the opposite colour, strictly higher going up or strictly lower going down'
    """
    return RULES.get(rule, "")
