"""51 (Elli Bir), the Turkish rummy of RULES.md §2 (F-1..F-97), as a pure engine.

One engine plays the three presets (``classic``, ``salon``, ``remi``), 2–4 players and team
mode; every difference between them is an option of :class:`~masa_rules.ruleset.RuleSet`.

>>> from masa_rules.ruleset import RuleSet
>>> from masa_rules.fiftyone import apply, legal_actions, new_game, view
>>> state = new_game(RuleSet.classic(), 4, "readme")
>>> seat = state.turn.seat
>>> state, events = apply(state, legal_actions(state, seat)[-1])
>>> state.action_count, "hand" in view(state, seat), "hand" in view(state, None)
(1, True, False)

Modules: :mod:`.actions` and :mod:`.events` (what seats do and what happened), :mod:`.state`,
:mod:`.deal` (shuffle, cut, bottom card; how to verify a deal), :mod:`.engine` (apply and the
legal-actions contract), :mod:`.legal`, :mod:`.melding` (physical melds, işlek, feasibility),
:mod:`.scoring`, :mod:`.view`, :mod:`.codec` (JSON, logs, replay), :mod:`.policies` and
:mod:`.simulate`.

Readings this engine had to choose (RULES.md leaves them open; each says how it was decided):

1. F-30/F-70: taking the discard without opening declares pairs only when the seat says so
   (``TakeDiscard(pairs=True)``); a plain take by an unopened seat is a take to open (F-30).
   Both readings of F-31/F-70 stay possible this way, and the salon query (F-80) applies to the
   take to open only, as its text ("in order to open with it") says.
2. F-30: "part of the opening" means laid down in a meld or pair this turn; laying the taken
   card off does not count (the rule names melds and pairs only). For opened seats (F-33) a
   lay-off counts.
3. F-21/F-52: where ``last_card_layoff_allowed`` (classic, salon) a seat may lay down or off
   its last card; its turn then ends without a discard and it finishes later by drawing and
   discarding (F-21: "has not finished"). In remi the last card must stay for the discard.
4. F-61: a joker is not işlek (every joker fits somewhere, which would make the rule forbid
   every joker discard; seed 000 lists jokers as a finishing discard). A real table choice:
   ``RuleSet.islek_joker`` (default False in all presets). A classic seat whose every card is
   işlek (or a shown twin) may discard any of them: the rule cannot make a turn impossible.
5. F-61 salon: işlek penalties are paid by every seat, the finisher and partner included (it is
   a fine for an act, not a hand score). A table choice: ``RuleSet.islek_penalty_for_finisher``
   (default True).
6. F-41: a pair opening of four pairs and a meld counts as five pairs for escalation.
7. F-43/F-50: a seat that opened with melds may still lay a pair off on a pair opener's area
   (F-50 allows it to every opened seat; F-43 only forbids pairs "of their own").
8. F-46: a seat whose partner opened counts as opened for taking the discard, laying off and
   scoring, but lays down melds only after opening itself (threshold as usual); it may take a
   discard under F-33 only to lay it off.
9. F-55: retrieving a joker needs an opened seat, or an unopened one that can still open this
   turn (it must then open before discarding); a partner's opening does not count.
10. F-63: the stock is exhausted when a seat in its draw phase draws from an empty stock (it may
    still take the discard instead). A classic replayed hand is not counted toward
    ``hands_per_game``. A remi reshuffle needs at least two cards in the pile.
11. F-34: the claimant may take the claimed bottom card on any later turn (``TakeBottom``) or
    draw as usual; only one seat may hold a claim.
12. F-35: the remi bottom-card finish is one action (``TakeBottom`` with the melds and the
    discard), so it can never be left half done.
13. F-70/F-71: only an unopened seat goes pairs; remi has no pair openings and so no pair status.
14. F-96: when every remaining seat exceeds the limit in the same hand, all leave and are ranked
    by total; in team mode ranking places hold both partners.
15. F-80: a seat whose partner opened counts as opened (F-46) and is not asked.
16. F-5: the hand seed is revealed in a ``reveal`` event just before ``hand_end``, so that the
    ``hand_end`` object stays exactly the simulator contract.
"""

from masa_rules.fiftyone.actions import (
    Action,
    Answer,
    ClaimBottom,
    DeclarePairs,
    Discard,
    Draw,
    LayDown,
    LayOff,
    MeldSpec,
    RetrieveJoker,
    ShowPairs,
    TakeBottom,
    TakeDiscard,
)
from masa_rules.fiftyone.codec import (
    action_from_json,
    action_to_json,
    game_log,
    replay,
    replay_events,
    rules_from_json,
    rules_to_json,
    state_from_json,
    state_to_json,
)
from masa_rules.fiftyone.engine import (
    apply,
    is_legal,
    new_game,
    pairs_needed,
    start,
    threshold,
    timeout_action,
)
from masa_rules.fiftyone.events import ALL, Event, event_json
from masa_rules.fiftyone.legal import legal_actions
from masa_rules.fiftyone.observe import seat_state
from masa_rules.fiftyone.scoring import Finish, hand_scores, ranking
from masa_rules.fiftyone.state import Phase, Query, SeatState, State, TableMeld, Turn
from masa_rules.fiftyone.view import view

__all__ = [
    "ALL",
    "Action",
    "Answer",
    "ClaimBottom",
    "DeclarePairs",
    "Discard",
    "Draw",
    "Event",
    "Finish",
    "LayDown",
    "LayOff",
    "MeldSpec",
    "Phase",
    "Query",
    "RetrieveJoker",
    "SeatState",
    "ShowPairs",
    "State",
    "TableMeld",
    "TakeBottom",
    "TakeDiscard",
    "Turn",
    "action_from_json",
    "action_to_json",
    "apply",
    "event_json",
    "game_log",
    "hand_scores",
    "is_legal",
    "legal_actions",
    "new_game",
    "pairs_needed",
    "ranking",
    "replay",
    "replay_events",
    "rules_from_json",
    "rules_to_json",
    "seat_state",
    "start",
    "state_from_json",
    "state_to_json",
    "threshold",
    "timeout_action",
    "view",
]
