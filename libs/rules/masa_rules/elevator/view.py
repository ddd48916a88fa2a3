"""What one seat, or a spectator, may know about a hand.

A seat sees its own hand; everyone sees the rules, the pile, the direction, how many cards each
seat and the stock hold, whose move it is and the commitment to the seed. Nobody sees another seat's
hand or the order of the stock, and the seed itself only once the hand is over (F-5).
"""

from __future__ import annotations

from masa_rules.cards import PhysicalCard
from masa_rules.elevator.codec import action_to_json, rules_to_json, tells_to_json
from masa_rules.elevator.engine import legal_actions, may_pass_voluntarily
from masa_rules.elevator.state import Phase, State

__all__ = ["view"]


def view(state: State, seat: int | None) -> dict[str, object]:
    """The JSON-able picture of ``state`` for ``seat`` (None: a spectator).

    >>> from masa_rules.elevator.engine import new_game
    >>> from masa_rules.elevator.rules import ElevatorRules
    >>> seen = view(new_game(ElevatorRules(), 3, "doc"), None)
    >>> seen["hand_sizes"], "hand" in seen, seen["seed"]
    ([7, 7, 7], False, None)
    """
    over = state.phase is Phase.OVER
    seen: dict[str, object] = {
        "rules": rules_to_json(state.rules),
        "hand_no": state.hand_no,
        "players": state.players,
        "decks": state.decks,
        "leader": state.leader,
        "commitment": state.commitment,
        "phase": state.phase.value,
        "turn": None if over else state.turn,
        "pile": _codes(state.pile),
        "direction": state.direction.value,
        "free": state.free,
        "stock_count": len(state.stock),
        "hand_sizes": [len(hand) for hand in state.hands],
        "open_play": state.open_play,
        "may_pass_voluntarily": may_pass_voluntarily(state),
        # Public too, so that a seat can rebuild a playable state (observe.seat_state).
        "after_play": state.after_play,
        "forced_turns": state.forced_turns,
        # Public: every seat's moves while they may still tell of its hand, for a search's
        # sampling.
        "tells": tells_to_json(state.tells),
        "action_count": state.action_count,
        "receiver": state.receiver,
        "givers": list(state.givers),
        "winner": state.winner,
        "ranking": [list(place) for place in state.ranking],
        "end_reason": state.end_reason,
        "seed": state.seed.hex() if over else None,
    }
    if seat is not None:
        seen["seat"] = seat
        seen["hand"] = _codes(state.hands[seat])
        seen["legal_actions"] = [action_to_json(action) for action in legal_actions(state, seat)]
    return seen


def _codes(cards: tuple[PhysicalCard, ...]) -> list[str]:
    return [card.code for card in cards]
