"""51 (rules.md §2) between ``masa_rules.fiftyone`` and ``masa.table.v1``, by concern:

- :mod:`.config`: a lobby's rule set from ``TableConfig`` (checked by ``masa_rules.lobby``);
- :mod:`.actions`: actions both ways;
- :mod:`.events`: events for one viewer;
- :mod:`.views`: table and seat views both ways, lossless for the seat;
- :mod:`.melds`: table melds and proposed melds, shared by the three above.

Hidden information (P-20) follows the engine's own view (:func:`masa_rules.fiftyone.view`), so
a seat learns over the wire exactly what the engine would show it:

- the deal lists only the viewer's own hand (the others see card counts);
- a draw shows the drawn card to the drawer only;
- everything else (discards, melds, lay-offs, retrieved jokers, shown twins and pairs, query
  answers) is played face up and is public;
- at the end of a hand the engine scores every hand face up, so the cards left are public
  then, and the hand's seed is revealed (F-5).

``LOG`` is the viewer of the internal table log, which records every hidden field an event
can carry except the dealt hands, which the seed in the log recomputes (as for Elevator).

Meld ids are positions on the table, as the engine's ``LayOff.meld`` names them; they start
at 0 in every hand. A query's id is the number of the turn it belongs to (one query per turn
at most, F-80).
"""

from masa_wire.elevator import LOG, SHUFFLE_ALGORITHM, Viewer
from masa_wire.fiftyone.actions import action_from_proto, action_to_proto
from masa_wire.fiftyone.config import rules_from_config
from masa_wire.fiftyone.events import events_to_proto
from masa_wire.fiftyone.views import (
    fill_table_view,
    seat_view,
    state_from_seat_view,
    view_from_seat_view,
)

__all__ = [
    "LOG",
    "SHUFFLE_ALGORITHM",
    "Viewer",
    "action_from_proto",
    "action_to_proto",
    "events_to_proto",
    "fill_table_view",
    "rules_from_config",
    "seat_view",
    "state_from_seat_view",
    "view_from_seat_view",
]
