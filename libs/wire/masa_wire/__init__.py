"""The one conversion between ``masa_rules`` domain objects and the masa protobuf contracts.

Services, bots and clients convert here and nowhere else, so that a card, an action or an
event means the same on both sides of every wire, and so that hidden information (P-20) is
filtered in one place: every event is converted for a viewer (a seat, or ``None`` for a
spectator).

- :mod:`masa_wire.cards`: cards and faces (C-1..C-4);
- :mod:`masa_wire.elevator`: Elevator actions, events per viewer and views (rules.md §3);
- :mod:`masa_wire.fiftyone`: 51 actions, events per viewer, lossless seat views and lobby rules
  (rules.md §2);
- :mod:`masa_wire.games`: the registry of games' conversions, by game name, which services and
  clients convert a game's states, actions and events through;
- :mod:`masa_wire.table_config`: a table's configuration (``masa_rules.table_config``): game,
  preset, mode, seats, bot levels, options and payout rule (P-1, P-2, P-30);
- :class:`WireError`: input that is not a valid message (a bad request, never a rule).
"""

from masa_wire.errors import WireError

__all__ = ["WireError"]
