"""What a seat (or a spectator) may know about a 51 game (RULES.md P-20).

A view holds the seat's own hand and everything public: card counts, the table, the discard
pile, the face-up bottom card, scores, the commitment to the hand seed. It never holds another
seat's hand, the stock order or any seed.
"""

from __future__ import annotations

from masa_rules.fiftyone.codec import rules_to_json
from masa_rules.fiftyone.engine import meld_codes, pairs_needed, threshold
from masa_rules.fiftyone.state import Phase, State

__all__ = ["view"]

JSON = object


def view(state: State, seat: int | None) -> dict[str, JSON]:
    """The JSON-ready view of ``seat``; ``None`` is a spectator.

    >>> from masa_rules.ruleset import RuleSet
    >>> from masa_rules.fiftyone.engine import new_game
    >>> v = view(new_game(RuleSet.salon(), 4, "doc"), None)
    >>> v["phase"], v["stock"], "hand" in v
    ('play', 49, False)
    """
    turn = state.turn
    query = state.query
    out: dict[str, JSON] = {
        "preset": state.rules.preset,
        "rules": rules_to_json(state.rules),
        "hands_limit": state.hands_limit,
        "players": state.players,
        "teams": state.teams,
        "hand_no": state.hand_no,
        "dealer": state.dealer,
        "phase": state.phase.value,
        "turn": turn.seat,
        "to_act": list(state.to_act),
        "commitment": state.commitment,
        "stock": len(state.stock),
        "bottom_card": state.bottom_card.code if state.bottom_card else None,
        "discard": [c.code for c in state.discard],
        "last_discarder": state.last_discarder,
        "table": [
            {
                "owner": m.owner,
                "kind": m.meld.kind.value,
                "start": m.meld.start,
                "cards": meld_codes(m),
            }
            for m in state.table
        ],
        "seats": [
            {
                "seat": i,
                "active": state.active[i],
                "cards": len(s.hand),
                "opened": s.opened,
                "opened_with_pairs": s.opened_with_pairs,
                "opening_total": s.opening_total,
                "pair_status": s.pair_status,
                "shown_pairs": s.shown_pairs,
                "shown_twins": [c.code for c in s.locked],
                "islek_penalty": s.islek_penalty,
                "bottom_claim": s.bottom_claim,
                "free_islek_used": s.free_islek_used,
                "turns": s.turns,
            }
            for i, s in enumerate(state.seats)
        ],
        "taken_discard": turn.took.code if turn.took else None,
        "opened_this_turn": turn.opened_now,
        # The rest of the turn's public bookkeeping, so that a seat can rebuild a playable
        # state from its view alone (observe.seat_state).
        "turn_state": {
            "number": turn.number,
            "took_rule": turn.took_rule,
            "took_used": turn.took_used,
            "must_open": turn.must_open,
            "jokers": [c.code for c in turn.jokers],
            "laid_off_others": turn.laid_off_others,
        },
        "query": {
            "taker": query.taker,
            "card": query.card.code,
            "pending": list(query.pending),
            "refused": list(query.refused),
        }
        if query
        else None,
        "totals": list(state.totals),
        "hands_scored": state.hands_scored,
        "ranking": [list(p) for p in state.ranking],
        "eliminated": [list(g) for g in state.eliminated],
        "reshuffles": state.reshuffles,
        "high_open": state.high_open,
        "high_pairs": state.high_pairs,
        "pair_opened": state.pair_opened,
        "action_count": state.action_count,
    }
    if seat is not None and state.phase is not Phase.OVER:
        out["seat"] = seat
        out["hand"] = [c.code for c in state.seats[seat].hand]
        out["threshold"] = threshold(state, seat)
        out["pairs_needed"] = pairs_needed(state)
    return out
