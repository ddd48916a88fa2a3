"""JSON for Elevator rules, actions, events and states.

Cards are physical card codes (``8H``, ``8H#1`` for the second pack's copy, ``XR``). Enums are
their values. Malformed input raises :class:`ValueError` (a bad card code its subclass
:class:`~masa_rules.cards.CardError`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

from masa_rules.cards import PhysicalCard
from masa_rules.elevator.actions import Action, Give, Pass, Play
from masa_rules.elevator.events import Dealt, Event, Gave, Kopile, Passed, Played
from masa_rules.elevator.rules import ElevatorRules, JokerStart
from masa_rules.elevator.state import Direction, Phase, State, Tell

__all__ = [
    "action_from_json",
    "action_to_json",
    "event_to_json",
    "rules_from_json",
    "rules_to_json",
    "state_from_json",
    "state_to_json",
    "tells_from_json",
    "tells_to_json",
]

Json = dict[str, object]


def rules_to_json(rules: ElevatorRules) -> Json:
    return {
        "decks": rules.decks,
        "hand_size": rules.hand_size,
        "joker_start": rules.joker_start.value,
        "joker_on_joker_any_colour": rules.joker_on_joker_any_colour,
        "kopile_forces_round": rules.kopile_forces_round,
        "rank_by_sum": rules.rank_by_sum,
    }


def rules_from_json(data: Mapping[str, object]) -> ElevatorRules:
    """Options missing from ``data`` take their defaults; others are ignored (older logs wrote
    ``end_when_blocked``, which E-9's repeated Kopile made unnecessary)."""
    base = ElevatorRules()
    decks = data.get("decks", base.decks)
    return ElevatorRules(
        decks=None if decks is None else _int(decks),
        hand_size=_int(data.get("hand_size", base.hand_size)),
        joker_start=JokerStart(data.get("joker_start", base.joker_start.value)),
        joker_on_joker_any_colour=_bool(
            data.get("joker_on_joker_any_colour", base.joker_on_joker_any_colour)
        ),
        kopile_forces_round=_bool(data.get("kopile_forces_round", base.kopile_forces_round)),
        rank_by_sum=_bool(data.get("rank_by_sum", base.rank_by_sum)),
    )


def action_to_json(action: Action) -> Json:
    """``{"type": "play", "seat": 0, "cards": [...]}``, ``"pass"`` or ``"give"`` with ``card``.

    >>> from masa_rules.cards import PhysicalCard
    >>> action_to_json(Play(1, (PhysicalCard.parse("8H"), PhysicalCard.parse("8S#1"))))
    {'type': 'play', 'seat': 1, 'cards': ['8H', '8S#1']}
    """
    if isinstance(action, Play):
        return {"type": "play", "seat": action.seat, "cards": _codes(action.cards)}
    if isinstance(action, Pass):
        return {"type": "pass", "seat": action.seat}
    return {"type": "give", "seat": action.seat, "card": action.card.code}


def action_from_json(data: Mapping[str, object]) -> Action:
    kind, seat = data.get("type"), _int(data.get("seat"))
    if kind == "play":
        return Play(seat, _cards(data.get("cards")))
    if kind == "pass":
        return Pass(seat)
    if kind == "give":
        return Give(seat, _card(data.get("card")))
    raise ValueError(f"not an Elevator action type: {kind!r}")


def event_to_json(event: Event) -> Json:
    """An event as a JSON-able dict whose ``type`` names it."""
    if isinstance(event, Dealt):
        return {
            "type": "deal",
            "hand_no": event.hand_no,
            "players": event.players,
            "decks": event.decks,
            "leader": event.leader,
            "commitment": event.commitment,
            "hands": [_codes(hand) for hand in event.hands],
            "buried": _codes(event.buried),
            "starter": event.starter.code,
            "direction": event.direction.value,
            "stock_count": event.stock_count,
        }
    if isinstance(event, Played):
        return {
            "type": "play",
            "seat": event.seat,
            "cards": _codes(event.cards),
            "direction": event.direction.value,
        }
    if isinstance(event, Passed):
        return {
            "type": "pass",
            "seat": event.seat,
            "voluntary": event.voluntary,
            "drew": None if event.drew is None else event.drew.code,
        }
    if isinstance(event, Kopile):
        return {
            "type": "kopile",
            "seat": event.seat,
            "drew": _codes(event.drew),
            "givers": list(event.givers),
        }
    if isinstance(event, Gave):
        return {"type": "give", "seat": event.seat, "to": event.to, "card": event.card.code}
    return {
        "type": "hand_end",
        "reason": event.reason,
        "winner": event.winner,
        "ranking": [list(place) for place in event.ranking],
        "cards_left": list(event.cards_left),
        "rank_sums": list(event.rank_sums),
        "seed": event.seed,
    }


def state_to_json(state: State) -> Json:
    """The whole state, secrets included: for snapshots, never for a seat (see ``view``)."""
    return {
        "rules": rules_to_json(state.rules),
        "players": state.players,
        "hand_no": state.hand_no,
        "leader": state.leader,
        "decks": state.decks,
        "seed": state.seed.hex(),
        "hands": [_codes(hand) for hand in state.hands],
        "stock": _codes(state.stock),
        "pile": _codes(state.pile),
        "direction": state.direction.value,
        "phase": state.phase.value,
        "turn": state.turn,
        "open_play": state.open_play,
        "after_play": state.after_play,
        "forced_turns": state.forced_turns,
        "receiver": state.receiver,
        "givers": list(state.givers),
        "winner": state.winner,
        "ranking": [list(place) for place in state.ranking],
        "end_reason": state.end_reason,
        "action_count": state.action_count,
        "tells": tells_to_json(state.tells),
    }


def tells_to_json(tells: Sequence[Sequence[Tell]]) -> list[list[Json]]:
    """Each seat's tells (public), oldest first, or [] before any seat has one."""
    return [
        [
            {
                "top": tell.top.code,
                "direction": tell.direction.value,
                "may_pass": tell.may_pass,
                "played": _codes(tell.played),
                "hand": tell.hand,
                "held": tell.held,
                "exact": tell.exact,
            }
            for tell in seat
        ]
        for seat in tells
    ]


def tells_from_json(data: Mapping[str, object]) -> tuple[tuple[Tell, ...], ...]:
    """The tells of :func:`tells_to_json` in ``data`` (a state or a view). A state written
    before tells existed lists each seat's latest forced pass under ``voids`` (top, direction,
    held), read as a forced pass of that many cards; one older still has neither."""
    if data.get("tells") is not None:
        return tuple(
            tuple(
                Tell(
                    top=_card(tell.get("top")),
                    direction=Direction(tell.get("direction")),
                    may_pass=_bool(tell.get("may_pass")),
                    played=_cards(tell.get("played")),
                    hand=_int(tell.get("hand")),
                    held=_int(tell.get("held")),
                    exact=_bool(tell.get("exact")),
                )
                for tell in map(_map, _list(seat))
            )
            for seat in _list(data.get("tells"))
        )
    return tuple(
        () if raw is None else (_forced_pass(_map(raw)),) for raw in _list(data.get("voids") or [])
    )


def _forced_pass(void: Mapping[str, object]) -> Tell:
    """A void of a state written before tells (top, direction, held) as the forced pass it
    records: ``held`` cards then, none of which could go on ``top`` (E-8)."""
    held = _int(void.get("held"))
    return Tell(
        top=_card(void.get("top")),
        direction=Direction(void.get("direction")),
        may_pass=False,
        played=(),
        hand=held,
        held=held,
        exact=False,
    )


def state_from_json(data: Mapping[str, object]) -> State:
    rules = data.get("rules")
    if not isinstance(rules, Mapping):
        raise ValueError("a state needs its rules")
    return State(
        rules=rules_from_json(rules),
        players=_int(data.get("players")),
        hand_no=_int(data.get("hand_no")),
        leader=_int(data.get("leader")),
        decks=_int(data.get("decks")),
        seed=bytes.fromhex(_str(data.get("seed"))),
        hands=tuple(_cards(hand) for hand in _list(data.get("hands"))),
        stock=_cards(data.get("stock")),
        pile=_cards(data.get("pile")),
        direction=Direction(data.get("direction")),
        phase=Phase(data.get("phase")),
        turn=_int(data.get("turn")),
        open_play=_optional_int(data.get("open_play")),
        after_play=_bool(data.get("after_play")),
        forced_turns=_int(data.get("forced_turns")),
        receiver=_optional_int(data.get("receiver")),
        givers=tuple(_int(seat) for seat in _list(data.get("givers"))),
        winner=_optional_int(data.get("winner")),
        ranking=tuple(
            tuple(_int(seat) for seat in _list(place)) for place in _list(data.get("ranking"))
        ),
        end_reason=None if data.get("end_reason") is None else _str(data.get("end_reason")),
        action_count=_int(data.get("action_count")),
        tells=tells_from_json(data),
    )


def _codes(cards: Sequence[PhysicalCard]) -> list[str]:
    return [card.code for card in cards]


def _card(value: object) -> PhysicalCard:
    return PhysicalCard.parse(_str(value))


def _cards(value: object) -> tuple[PhysicalCard, ...]:
    return tuple(_card(code) for code in _list(value))


def _list(value: object) -> list[object]:
    if not isinstance(value, list):
        raise ValueError(f"expected a list, got {value!r}")
    return cast(list[object], value)


def _map(value: object) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise ValueError(f"expected an object, got {value!r}")
    return cast(Mapping[str, object], value)


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {value!r}")
    return value


def _int(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"expected an integer, got {value!r}")
    return value


def _optional_int(value: object) -> int | None:
    return None if value is None else _int(value)


def _bool(value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {value!r}")
    return value
