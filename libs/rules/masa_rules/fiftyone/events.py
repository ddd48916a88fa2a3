"""What happened: the events :func:`~masa_rules.fiftyone.engine.apply` reports.

An event has a ``type``, public ``data`` every seat may see, and ``private`` data only ``to``
may see (the cards dealt to a seat, the card it drew). :func:`event_json` gives the form a
seat, a spectator or the log receives. All values are JSON-ready (strings, numbers, lists).

Types: ``deal`` (F-3..F-5: hand, dealer, starter, cutter, cutter_jokers, bottom_card,
commitment), ``dealt`` (one per seat, private hand), ``draw``, ``take_discard``, ``query``
(F-80: taker, card, asked), ``answer``, ``query_over``, ``take_bottom``, ``claim_bottom``,
``lay_down``, ``lay_off``, ``retrieve_joker``, ``declare_pairs``, ``show_pairs``, ``discard``,
``turn_passed`` (F-21: a hand emptied before the discard), ``reshuffle`` (F-63 remi),
``reveal`` (F-5: the hand seed and its commitment), ``hand_end`` and ``game_end``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["ALL", "Event", "event_json"]

JSON = object
# The log and the simulator see private data too; a seat number or None (spectator) does not.
ALL = -1


@dataclass(frozen=True, slots=True)
class Event:
    """One thing that happened. ``private`` is shown to seat ``to`` only."""

    type: str
    data: Mapping[str, JSON] = field(default_factory=dict)
    private: Mapping[str, JSON] | None = None
    to: int | None = None


def event_json(event: Event, seat: int | None = ALL) -> dict[str, JSON]:
    """The event as one JSON object, as ``seat`` (``ALL`` for the log, ``None`` spectator) sees it.

    >>> e = Event("draw", {"seat": 1}, {"card": "8H"}, to=1)
    >>> event_json(e, 1), event_json(e, 2)
    ({'type': 'draw', 'seat': 1, 'card': '8H'}, {'type': 'draw', 'seat': 1})
    """
    out: dict[str, JSON] = {"type": event.type, **event.data}
    if event.private is not None and (seat == ALL or (seat is not None and seat == event.to)):
        out.update(event.private)
    return out
