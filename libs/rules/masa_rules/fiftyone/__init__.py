"""51 (Elli Bir), the Turkish rummy of rules.md §2 (F-1..F-97), as a pure engine.

One engine plays the three presets (``classic``, ``salon``, ``remi``), 2–4 players and team
mode; every difference between them is an option of :class:`~masa_rules.ruleset.RuleSet`.

>>> from masa_rules.ruleset import RuleSet
>>> from masa_rules.fiftyone import apply, legal_actions, new_game, view
>>> state = new_game(RuleSet.classic(), 4, "readme")
>>> seat = state.turn.seat
>>> state, events = apply(state, legal_actions(state, seat)[-1])
>>> state.action_count, view(state, seat).hand is not None, view(state, None).hand
(1, True, None)

Modules: :mod:`.actions` and :mod:`.events` (what seats do and what happened, one frozen class
per event), :mod:`.state`, :mod:`.deal` (shuffle, cut, bottom card; how to verify a deal),
:mod:`.engine` (apply and the legal-actions contract), :mod:`.legal`, :mod:`.melding`
(physical melds, işlek, feasibility), :mod:`.scoring`, :mod:`.view` (what a seat sees),
:mod:`.observe` (a playable state from a view), :mod:`.codec` (all the JSON: actions, events,
views, states, logs and replay), :mod:`.policies` and :mod:`.simulate`. Lobby options become a
rule set in :mod:`masa_rules.lobby`.

Readings. The rule book (docs/rules.md) now settles some points this engine once chose itself;
the engine follows the book, and each reading below names the rule it applies. Those marked *(book)* are the
book's own words now; *(changed)* ones changed in issue 8, with the old behaviour; the rest are
still this engine's choices where the book is silent.

1. F-30/F-70: taking the discard without opening declares pairs only when the seat says so
   (``TakeDiscard(pairs=True)``); a plain take by an unopened seat is a take to open (F-30).
   Both readings of F-31/F-70 stay possible this way, and the salon query (F-80) applies to the
   take to open only, as its text ("in order to open with it") says.
2. F-30: "part of the opening" means laid down in a meld or pair this turn; laying the taken
   card off does not count (the rule names melds and pairs only). For opened seats (F-33) a
   lay-off counts.
3. F-52 *(changed; book)*: in every preset the last card is never laid down or laid off; it is
   the finishing discard. Was: classic and salon let a seat lay down or off its last card and
   sit at 0 cards until it drew again (``last_card_layoff_allowed``, now gone).
4. F-61 *(book)*: a joker is never işlek (every joker fits somewhere, which would make the rule
   forbid every joker discard; seed 000 lists jokers as a finishing discard);
   ``RuleSet.islek_joker`` stays a table choice (default False). When every card a seat may
   discard is işlek (or a shown twin), it may discard any of them; salon still fines it.
5. F-61/F-90 *(book)*: işlek fines are paid by whoever discarded, the finisher and partner
   included (a fine for an act, not a hand score); ``RuleSet.islek_penalty_for_finisher``
   stays a table choice (default True).
6. F-41: a pair opening of four pairs and a meld counts as five pairs for escalation.
7. F-43/F-50: a seat that opened with melds may still lay a pair off on a pair opener's area
   (F-50 allows it to every opened seat; F-43 only forbids pairs "of their own").
8. F-46: a seat whose partner opened counts as opened for taking the discard, laying off and
   scoring, but lays down melds only after opening itself (threshold as usual); it may take a
   discard under F-33 only to lay it off.
9. F-55: retrieving a joker needs an opened seat, or an unopened one that can still open this
   turn (it must then open before discarding); a partner's opening does not count. Whether a
   retrieved joker (or a taken discard, F-33) can still be used counts a taken discard left in
   hand as no card to keep (F-36), which can refuse a rare play where both would share a meld.
10. F-63: the stock is exhausted when a seat in its draw phase draws from an empty stock (it may
    still take the discard instead). A classic replayed hand is not counted toward
    ``hands_per_game``. A remi reshuffle needs at least two cards in the pile.
11. F-34 *(book)*: the claimant may take the claimed bottom card on any later turn
    (``TakeBottom``) or draw as usual; only one seat may hold a claim.
12. F-35: the remi bottom-card finish is one action (``TakeBottom`` with the melds and the
    discard), so it can never be left half done.
13. F-70/F-71: only an unopened seat goes pairs; remi has no pair openings and so no pair status.
14. F-96: when every remaining seat exceeds the limit in the same hand, all leave and are ranked
    by total; in team mode ranking places hold both partners.
15. F-80: a seat whose partner opened counts as opened (F-46) and is not asked.
16. F-5: the hand seed is revealed in a ``reveal`` event just before ``hand_end``, so that the
    ``hand_end`` object stays exactly the simulator contract (the typed
    :class:`~.events.HandEnded` carries the seed too, for the wire).
17. F-70 *(changed; book)*: opening with pairs puts the seat in pair status, so a losing pair
    opener pays double (F-91) and a salon pair opener has its free işlek. Was: only a
    declaration, a pair take or a refused query did.
18. F-36 *(changed; book)*: a card taken from the discard pile is never discarded in the same
    turn, in every preset; a seat must keep a card to discard besides it, so an F-33r opening
    either holds the taken card or leaves another. Was: a seat could take a card and throw it
    straight back.
19. F-64 *(changed; book)*: ``RuleSet.stall_rounds`` (10) full rounds of turns in a row that
    drew no card from the stock (a taken discard is not one; the claimed bottom card is) end
    the hand as F-63 does: no finisher, scored, and a classic hand nobody opened is replayed.
    Remi does not reshuffle for it (the stock is not empty). The hand-end reason is
    ``stalled``. Was: nothing ended such a hand.
20. F-13 *(changed; book)*: in the turn a seat opens, a meld it laid down keeps
    ``max_jokers_per_meld_at_opening`` jokers to the end of the turn: a joker (retrieved or
    not) is not laid off on it if that would exceed the limit. Was: only the lay-down itself
    was checked.
21. F-52/F-33r *(changed)*: the solver's "can open" keeps a card to discard in every preset
    (:func:`masa_rules.solver.can_open` defaults to ``keep=1``), and the legal actions always
    offer an opening that keeps one when any exists (:func:`masa_rules.solver.opening_keeping`).
    Was: the best arrangement was trimmed by one meld, which missed openings worth exactly the
    threshold.
22. F-63 *(changed; the book is silent on a bound)*: a classic game replays at most
    ``RuleSet.max_replays`` (11, as many as a default game has hands) hands nobody opened;
    after that such a hand is scored without a finisher (F-92: every unopened seat pays its
    100), so a game deals at most ``hands_per_game + max_replays`` hands. Was: a hand could
    be replayed without end.
23. F-96 *(changed; the book is silent on a bound)*: an elimination game also ends after
    ``RuleSet.elimination_max_hands`` (100) scored hands, the seats still in ranked by total
    ahead of those eliminated. The limit rises 10 a hand, so seats that keep their scores under
    it could otherwise play for ever (greedy seats have played 53 hands). Was: no bound.
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
    ALL,
    action_from_json,
    action_to_json,
    event_json,
    game_log,
    replay,
    replay_events,
    rules_from_json,
    rules_to_json,
    state_from_json,
    state_to_json,
    view_json,
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
from masa_rules.fiftyone.events import (
    Answered,
    ClaimedBottom,
    Deal,
    DeclaredPairs,
    Discarded,
    Drew,
    Event,
    Finish,
    GameEnded,
    HandEnded,
    HandEndReason,
    LaidDown,
    LaidOff,
    QueryEnded,
    QueryStarted,
    Reshuffled,
    RetrievedJoker,
    Revealed,
    ShowedPairs,
    TookBottom,
    TookDiscard,
)
from masa_rules.fiftyone.legal import legal_actions
from masa_rules.fiftyone.observe import seat_state
from masa_rules.fiftyone.scoring import hand_scores, ranking
from masa_rules.fiftyone.state import Phase, Query, SeatState, State, TableMeld, Turn
from masa_rules.fiftyone.view import PublicSeat, View, view

__all__ = [
    "ALL",
    "Action",
    "Answer",
    "Answered",
    "ClaimBottom",
    "ClaimedBottom",
    "Deal",
    "DeclarePairs",
    "DeclaredPairs",
    "Discard",
    "Discarded",
    "Draw",
    "Drew",
    "Event",
    "Finish",
    "GameEnded",
    "HandEndReason",
    "HandEnded",
    "LaidDown",
    "LaidOff",
    "LayDown",
    "LayOff",
    "MeldSpec",
    "Phase",
    "PublicSeat",
    "Query",
    "QueryEnded",
    "QueryStarted",
    "Reshuffled",
    "RetrieveJoker",
    "RetrievedJoker",
    "Revealed",
    "SeatState",
    "ShowPairs",
    "ShowedPairs",
    "State",
    "TableMeld",
    "TakeBottom",
    "TakeDiscard",
    "TookBottom",
    "TookDiscard",
    "Turn",
    "View",
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
    "view_json",
]
