"""JSON for 51: rule sets, actions, states and game logs, and :func:`replay`.

A *game log* is ``{"game": {"rules", "players", "seed_hex", "teams", "hands"}, "actions": [...]}``;
it holds the secret game seed, so it stays with the table service. :func:`replay` rebuilds the
exact state from it (the engine is deterministic).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any

from masa_rules.cards import Card, PhysicalCard, parse_card
from masa_rules.errors import RuleViolation
from masa_rules.melds import Meld, MeldKind, Placed
from masa_rules.ruleset import RuleSet

from .actions import (
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
from .engine import apply, meld_codes, start
from .events import (
    Answered,
    ClaimedBottom,
    Deal,
    DeclaredPairs,
    Discarded,
    Drew,
    Event,
    GameEnded,
    HandEnded,
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
from .state import Phase, Query, SeatState, State, TableMeld, Turn
from .view import PublicSeat, View

__all__ = [
    "ALL",
    "action_from_json",
    "action_to_json",
    "event_json",
    "game_log",
    "replay",
    "replay_events",
    "rules_from_json",
    "rules_to_json",
    "state_from_json",
    "state_to_json",
    "view_json",
]

JSON = Any
# The log and the simulator see private data too; a seat number or None (spectator) does not.
ALL = -1


def rules_to_json(rules: RuleSet) -> dict[str, JSON]:
    """The preset name and every option that differs from it."""
    base = RuleSet.preset_named(rules.preset)
    out: dict[str, JSON] = {"preset": rules.preset}
    for f in fields(rules):
        value = getattr(rules, f.name)
        if value != getattr(base, f.name):
            out[f.name] = _plain(value)
    return out


def _plain(value: JSON) -> JSON:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple):
        return list(value)
    return value


def rules_from_json(data: Mapping[str, JSON]) -> RuleSet:
    base = RuleSet.preset_named(str(data["preset"]))
    changes: dict[str, JSON] = {}
    for name, value in data.items():
        if name == "preset":
            continue
        current = getattr(base, name)
        if isinstance(current, enum.Enum):
            changes[name] = type(current)(value)
        elif isinstance(current, tuple):
            changes[name] = tuple(value)
        else:
            changes[name] = value
    return base.with_options(**changes)


def _pc(code: str) -> PhysicalCard:
    return PhysicalCard.parse(code)


def _spec_to_json(spec: MeldSpec) -> list[str]:
    return [f"{c.code}={note.code}" if note is not None else c.code for c, note in spec]


def _spec_from_json(codes: Sequence[str]) -> MeldSpec:
    out: list[tuple[PhysicalCard, Card | None]] = []
    for code in codes:
        face, _, note = code.partition("=")
        out.append((_pc(face), parse_card(note) if note else None))
    return tuple(out)


def action_to_json(action: Action) -> dict[str, JSON]:  # noqa: C901, PLR0911 - one arm per action kind
    """An action as JSON: ``{"type": "draw", "seat": 0}`` and so on.

    >>> action_to_json(Discard(1, PhysicalCard.parse("8H#1")))
    {'type': 'discard', 'seat': 1, 'card': '8H#1', 'twin': None}
    """
    seat = action.seat
    if isinstance(action, Draw):
        return {"type": "draw", "seat": seat}
    if isinstance(action, TakeDiscard):
        return {"type": "take_discard", "seat": seat, "pairs": action.pairs}
    if isinstance(action, TakeBottom):
        return {
            "type": "take_bottom",
            "seat": seat,
            "melds": [_spec_to_json(m) for m in action.melds],
            "discard": action.discard.code if action.discard else None,
        }
    if isinstance(action, LayDown):
        return {
            "type": "lay_down",
            "seat": seat,
            "melds": [_spec_to_json(m) for m in action.melds],
            "pairs": [[a.code, b.code] for a, b in action.pairs],
        }
    if isinstance(action, LayOff):
        return {
            "type": "lay_off",
            "seat": seat,
            "meld": action.meld,
            "cards": [c.code for c in action.cards],
            "stands_for": action.stands_for.code if action.stands_for else None,
            "at_end": action.at_end,
        }
    if isinstance(action, RetrieveJoker):
        return {
            "type": "retrieve_joker",
            "seat": seat,
            "meld": action.meld,
            "card": action.card.code,
        }
    if isinstance(action, Discard):
        return {
            "type": "discard",
            "seat": seat,
            "card": action.card.code,
            "twin": action.twin.code if action.twin else None,
        }
    if isinstance(action, DeclarePairs):
        return {"type": "declare_pairs", "seat": seat}
    if isinstance(action, ShowPairs):
        return {
            "type": "show_pairs",
            "seat": seat,
            "pairs": [[a.code, b.code] for a, b in action.pairs],
        }
    if isinstance(action, ClaimBottom):
        return {"type": "claim_bottom", "seat": seat, "shown": action.shown.code}
    return {"type": "answer", "seat": seat, "give": action.give}


def action_from_json(data: Mapping[str, JSON]) -> Action:
    """Parse an action; unknown types or bad cards raise :class:`RuleViolation` (``C-1``)."""
    try:
        return _action_from_json(data)
    except (KeyError, ValueError, TypeError) as exc:
        raise RuleViolation("C-1", f"not a 51 action: {data!r} ({exc})") from None


def _pairs(items: Sequence[Sequence[str]]) -> tuple[tuple[PhysicalCard, PhysicalCard], ...]:
    return tuple((_pc(a), _pc(b)) for a, b in items)


def _action_from_json(data: Mapping[str, JSON]) -> Action:  # noqa: C901, PLR0911 - one arm per action kind
    kind = data["type"]
    seat = int(data["seat"])
    if kind == "draw":
        return Draw(seat)
    if kind == "take_discard":
        return TakeDiscard(seat, bool(data.get("pairs", False)))
    if kind == "take_bottom":
        discard = data.get("discard")
        return TakeBottom(
            seat,
            tuple(_spec_from_json(m) for m in data.get("melds", [])),
            _pc(discard) if discard else None,
        )
    if kind == "lay_down":
        return LayDown(
            seat,
            tuple(_spec_from_json(m) for m in data.get("melds", [])),
            _pairs(data.get("pairs", [])),
        )
    if kind == "lay_off":
        stands_for = data.get("stands_for")
        at_end = data.get("at_end")
        return LayOff(
            seat,
            int(data["meld"]),
            tuple(_pc(c) for c in data["cards"]),
            parse_card(stands_for) if stands_for else None,
            bool(at_end) if at_end is not None else None,
        )
    if kind == "retrieve_joker":
        return RetrieveJoker(seat, int(data["meld"]), _pc(data["card"]))
    if kind == "discard":
        twin = data.get("twin")
        return Discard(seat, _pc(data["card"]), _pc(twin) if twin else None)
    if kind == "declare_pairs":
        return DeclarePairs(seat)
    if kind == "show_pairs":
        return ShowPairs(seat, _pairs(data["pairs"]))
    if kind == "claim_bottom":
        return ClaimBottom(seat, _pc(data["shown"]))
    if kind == "answer":
        return Answer(seat, bool(data["give"]))
    raise ValueError(f"unknown action type {kind!r}")


def _cards(cards: Sequence[PhysicalCard]) -> list[str]:
    return [c.code for c in cards]


def _meld_to_json(entry: TableMeld) -> dict[str, JSON]:
    return {
        "owner": entry.owner,
        "kind": entry.meld.kind.value,
        "start": entry.meld.start,
        "cards": [
            [c.code, p.stands_for.code] for c, p in zip(entry.cards, entry.meld.cards, strict=True)
        ],
    }


def _meld_from_json(data: Mapping[str, JSON]) -> TableMeld:
    cards = tuple(_pc(c) for c, _ in data["cards"])
    placed = tuple(
        Placed(c.card, parse_card(s)) for c, (_, s) in zip(cards, data["cards"], strict=True)
    )
    return TableMeld(
        int(data["owner"]), Meld(MeldKind(data["kind"]), placed, int(data["start"])), cards
    )


def state_to_json(state: State) -> dict[str, JSON]:
    """The whole state, secrets included (for snapshots; never send it to a seat)."""
    turn = state.turn
    query = state.query
    return {
        "rules": rules_to_json(state.rules),
        "players": state.players,
        "teams": state.teams,
        "game_seed_hex": state.game_seed.hex(),
        "hands_limit": state.hands_limit,
        "hand_no": state.hand_no,
        "hands_scored": state.hands_scored,
        "dealer": state.dealer,
        "active": list(state.active),
        "totals": list(state.totals),
        "eliminated": [list(g) for g in state.eliminated],
        "phase": state.phase.value,
        "seats": [
            {
                "hand": _cards(s.hand),
                "opened": s.opened,
                "opened_with_pairs": s.opened_with_pairs,
                "opening_total": s.opening_total,
                "pair_status": s.pair_status,
                "shown_pairs": s.shown_pairs,
                "locked": _cards(s.locked),
                "islek_penalty": s.islek_penalty,
                "free_islek_used": s.free_islek_used,
                "bottom_claim": s.bottom_claim,
                "turns": s.turns,
            }
            for s in state.seats
        ],
        "stock": _cards(state.stock),
        "bottom_card": state.bottom_card.code if state.bottom_card else None,
        "discard": _cards(state.discard),
        "last_discarder": state.last_discarder,
        "table": [_meld_to_json(m) for m in state.table],
        "turn": {
            "seat": turn.seat,
            "number": turn.number,
            "took": turn.took.code if turn.took else None,
            "took_rule": turn.took_rule,
            "took_used": turn.took_used,
            "must_open": turn.must_open,
            "jokers": _cards(turn.jokers),
            "opened_now": turn.opened_now,
            "laid_off_others": turn.laid_off_others,
        },
        "query": None if query is None else _query_json(query),
        "hand_seed_hex": state.hand_seed.hex(),
        "commitment": state.commitment,
        "reshuffles": state.reshuffles,
        "high_open": state.high_open,
        "high_pairs": state.high_pairs,
        "pair_opened": state.pair_opened,
        "action_count": state.action_count,
        "ranking": [list(p) for p in state.ranking],
        "turns_without_draw": state.turns_without_draw,
    }


def _opt(code: str | None) -> PhysicalCard | None:
    return _pc(code) if code else None


def state_from_json(data: Mapping[str, JSON]) -> State:
    """The inverse of :func:`state_to_json`."""
    t = data["turn"]
    q = data["query"]
    return State(
        rules=rules_from_json(data["rules"]),
        players=int(data["players"]),
        teams=bool(data["teams"]),
        game_seed=bytes.fromhex(data["game_seed_hex"]),
        hands_limit=data["hands_limit"],
        hand_no=int(data["hand_no"]),
        hands_scored=int(data["hands_scored"]),
        dealer=int(data["dealer"]),
        active=tuple(bool(a) for a in data["active"]),
        totals=tuple(int(x) for x in data["totals"]),
        eliminated=tuple(tuple(g) for g in data["eliminated"]),
        phase=Phase(data["phase"]),
        seats=tuple(
            SeatState(
                hand=tuple(_pc(c) for c in s["hand"]),
                opened=s["opened"],
                opened_with_pairs=s["opened_with_pairs"],
                opening_total=s["opening_total"],
                pair_status=s["pair_status"],
                shown_pairs=s["shown_pairs"],
                locked=tuple(_pc(c) for c in s["locked"]),
                islek_penalty=s["islek_penalty"],
                free_islek_used=s["free_islek_used"],
                bottom_claim=s["bottom_claim"],
                turns=s["turns"],
            )
            for s in data["seats"]
        ),
        stock=tuple(_pc(c) for c in data["stock"]),
        bottom_card=_opt(data["bottom_card"]),
        discard=tuple(_pc(c) for c in data["discard"]),
        last_discarder=data["last_discarder"],
        table=tuple(_meld_from_json(m) for m in data["table"]),
        turn=Turn(
            seat=t["seat"],
            number=t["number"],
            took=_opt(t["took"]),
            took_rule=t["took_rule"],
            took_used=t["took_used"],
            must_open=t["must_open"],
            jokers=tuple(_pc(c) for c in t["jokers"]),
            opened_now=t["opened_now"],
            laid_off_others=t["laid_off_others"],
        ),
        query=None
        if q is None
        else Query(q["taker"], _pc(q["card"]), tuple(q["pending"]), tuple(q["refused"])),
        hand_seed=bytes.fromhex(data["hand_seed_hex"]),
        commitment=data["commitment"],
        reshuffles=data["reshuffles"],
        high_open=data["high_open"],
        high_pairs=data["high_pairs"],
        pair_opened=data["pair_opened"],
        action_count=data["action_count"],
        ranking=tuple(tuple(p) for p in data["ranking"]),
        # Snapshots written before F-64 have no count: the guard starts from zero.
        turns_without_draw=int(data.get("turns_without_draw", 0)),
    )


def game_log(
    rules: RuleSet,
    players: int,
    seed: bytes,
    actions: Sequence[Action],
    *,
    teams: bool = False,
    hands: int | None = None,
) -> dict[str, JSON]:
    """The log of a game: how it was created and every accepted action, in order."""
    return {
        "game": {
            "rules": rules_to_json(rules),
            "players": players,
            "seed_hex": seed.hex(),
            "teams": teams,
            "hands": hands,
        },
        "actions": [action_to_json(a) for a in actions],
    }


def replay_events(log: Mapping[str, JSON]) -> tuple[State, list[Event]]:
    """Rebuild a game from its log; the state and every event, the first deal's included."""
    game = log["game"]
    state, events = start(
        rules_from_json(game["rules"]),
        int(game["players"]),
        bytes.fromhex(game["seed_hex"]),
        teams=bool(game["teams"]),
        hands=game["hands"],
    )
    for data in log["actions"]:
        state, more = apply(state, action_from_json(data))
        events += more
    return state, events


def replay(log: Mapping[str, JSON]) -> State:
    """Rebuild the exact state of a game from its log."""
    return replay_events(log)[0]


# --------------------------------------------------------------------------- events


def event_json(event: Event, seat: int | None = ALL) -> dict[str, JSON]:
    """The event as one JSON object, as ``seat`` (``ALL`` for the log, ``None`` spectator) sees it.

    A dealt hand and a drawn card are shown to their seat (and the log) only (P-20); the deal
    lists ``None`` for each hand the viewer may not see.

    >>> e = Drew(1, 40, PhysicalCard.parse("8H"))
    >>> event_json(e, 1), event_json(e, 2)
    ({'type': 'draw', 'seat': 1, 'stock': 40, 'card': '8H'}, {'type': 'draw', 'seat': 1, 'stock': 40})
    """
    if isinstance(event, Deal):
        return _deal_json(event, seat)
    if isinstance(event, Drew):
        drew: dict[str, JSON] = {"type": "draw", "seat": event.seat, "stock": event.stock}
        if _sees(seat, event.seat):
            drew["card"] = event.card.code
        return drew
    return _public_json(event)


def _sees(viewer: int | None, owner: int) -> bool:
    return viewer == ALL or (viewer is not None and viewer == owner)


_HandEvent = Reshuffled | Revealed | HandEnded | GameEnded
_TakeEvent = TookDiscard | TookBottom | ClaimedBottom | QueryStarted | Answered | QueryEnded
_MeldEvent = LaidDown | LaidOff | RetrievedJoker | DeclaredPairs | ShowedPairs | Discarded
_PublicEvent = _HandEvent | _TakeEvent | _MeldEvent


def _public_json(event: _PublicEvent) -> dict[str, JSON]:
    if isinstance(event, _HandEvent):
        return _hand_json(event)
    if isinstance(event, _TakeEvent):
        return _take_json(event)
    return _meld_json(event)


def _hand_json(event: _HandEvent) -> dict[str, JSON]:
    match event:
        case Reshuffled(number=number, stock=stock):
            return {"type": "reshuffle", "number": number, "stock": stock}
        case Revealed(hand=hand, seed=seed, commitment=committed):
            return {"type": "reveal", "hand": hand, "seed": seed.hex(), "commitment": committed}
        case HandEnded():
            return _hand_end_json(event)
        case GameEnded(totals=totals, ranking=places):
            return {
                "type": "game_end",
                "totals": list(totals),
                "ranking": [list(p) for p in places],
            }


def _take_json(event: _TakeEvent) -> dict[str, JSON]:
    match event:
        case TookDiscard(seat=seat, card=card):
            return {"type": "take_discard", "seat": seat, "card": card.code}
        case TookBottom(seat=seat, card=card):
            return {"type": "take_bottom", "seat": seat, "card": card.code}
        case ClaimedBottom(seat=seat, shown=shown):
            return {"type": "claim_bottom", "seat": seat, "shown": shown.code}
        case QueryStarted(taker=taker, card=card, asked=asked):
            return {"type": "query", "taker": taker, "card": card.code, "asked": list(asked)}
        case Answered(seat=seat, give=give):
            return {"type": "answer", "seat": seat, "give": give}
        case QueryEnded(taker=taker, refused=refused):
            return {"type": "query_over", "taker": taker, "refused": list(refused)}


def _meld_json(event: _MeldEvent) -> dict[str, JSON]:
    match event:
        case LaidDown():
            return _laid_down_json(event)
        case LaidOff(seat=seat, meld=meld, cards=cards, result=result):
            return {
                "type": "lay_off",
                "seat": seat,
                "meld": meld,
                "cards": _cards(cards),
                "result": meld_codes(result),
            }
        case RetrievedJoker():
            return _retrieved_json(event)
        case DeclaredPairs(seat=seat):
            return {"type": "declare_pairs", "seat": seat}
        case ShowedPairs(seat=seat, pairs=pairs):
            return {"type": "show_pairs", "seat": seat, "pairs": [_cards(p) for p in pairs]}
        case Discarded():
            return _discarded_json(event)


def _deal_json(event: Deal, seat: int | None) -> dict[str, JSON]:
    return {
        "type": "deal",
        "hand": event.hand,
        "dealer": event.dealer,
        "starter": event.starter,
        "cutter": event.cutter,
        "cutter_jokers": _cards(event.cutter_jokers),
        "bottom_card": event.bottom_card.code if event.bottom_card else None,
        "stock": event.stock,
        "commitment": event.commitment,
        "hands": [
            _cards(hand) if _sees(seat, owner) else None for owner, hand in enumerate(event.hands)
        ],
    }


def _laid_down_json(event: LaidDown) -> dict[str, JSON]:
    return {
        "type": "lay_down",
        "seat": event.seat,
        "melds": [meld_codes(m) for m in event.melds if m.meld.kind is not MeldKind.PAIR],
        "pairs": [meld_codes(m) for m in event.melds if m.meld.kind is MeldKind.PAIR],
        "opening": event.opening,
        "value": event.value,
    }


def _retrieved_json(event: RetrievedJoker) -> dict[str, JSON]:
    return {
        "type": "retrieve_joker",
        "seat": event.seat,
        "meld": event.meld,
        "card": event.card.code,
        "joker": event.joker.code,
        "result": meld_codes(event.result),
    }


def _discarded_json(event: Discarded) -> dict[str, JSON]:
    out: dict[str, JSON] = {
        "type": "discard",
        "seat": event.seat,
        "card": event.card.code,
        "islek": event.islek,
        "penalty": event.penalty,
    }
    if event.twin is not None:
        out["twin"] = event.twin.code
    return out


def _hand_end_json(event: HandEnded) -> dict[str, JSON]:
    finish = event.finish
    return {
        "type": "hand_end",
        "hand": event.hand,
        "finisher": event.finisher,
        "finish": {
            "by_hand": finish.by_hand,
            "joker": finish.joker,
            "pairs": finish.pairs,
            "bottom_card": finish.bottom_card,
        },
        "kafa": event.kafa,
        "opened": list(event.opened),
        "opened_with_pairs": list(event.opened_with_pairs),
        "pair_status": list(event.pair_status),
        "islek_penalties": list(event.islek_penalties),
        "hands_left": [[c.card.code for c in hand] for hand in event.hands_left],
        "scores": list(event.scores),
        "totals": list(event.totals),
        "eliminated": list(event.eliminated),
    }


# --------------------------------------------------------------------------- views


def view_json(seen: View) -> dict[str, JSON]:
    """A view as one JSON object; the viewing seat's hand and thresholds only when it has one.

    >>> from masa_rules.fiftyone.engine import new_game
    >>> from masa_rules.fiftyone.view import view
    >>> seen = view_json(view(new_game(RuleSet.salon(), 4, "doc"), 0))
    >>> seen["phase"], seen["stock"], len(seen["hand"]), seen["threshold"]
    ('play', 49, 15, 51)
    """
    turn = seen.turn
    query = seen.query
    out: dict[str, JSON] = {
        "preset": seen.rules.preset,
        "rules": rules_to_json(seen.rules),
        "hands_limit": seen.hands_limit,
        "players": seen.players,
        "teams": seen.teams,
        "hand_no": seen.hand_no,
        "dealer": seen.dealer,
        "phase": seen.phase.value,
        "turn": turn.seat,
        "to_act": list(seen.to_act),
        "commitment": seen.commitment,
        "stock": seen.stock,
        "bottom_card": seen.bottom_card.code if seen.bottom_card else None,
        "discard": _cards(seen.discard),
        "last_discarder": seen.last_discarder,
        "table": [
            {
                "owner": m.owner,
                "kind": m.meld.kind.value,
                "start": m.meld.start,
                "cards": meld_codes(m),
            }
            for m in seen.table
        ],
        "seats": [_public_seat_json(i, s) for i, s in enumerate(seen.seats)],
        "taken_discard": turn.took.code if turn.took else None,
        "opened_this_turn": turn.opened_now,
        "turn_state": {
            "number": turn.number,
            "took_rule": turn.took_rule,
            "took_used": turn.took_used,
            "must_open": turn.must_open,
            "jokers": _cards(turn.jokers),
            "laid_off_others": turn.laid_off_others,
        },
        "query": None if query is None else _query_json(query),
        "totals": list(seen.totals),
        "hands_scored": seen.hands_scored,
        "ranking": [list(p) for p in seen.ranking],
        "eliminated": [list(g) for g in seen.eliminated],
        "reshuffles": seen.reshuffles,
        "high_open": seen.high_open,
        "high_pairs": seen.high_pairs,
        "pair_opened": seen.pair_opened,
        "turns_without_draw": seen.turns_without_draw,
        "action_count": seen.action_count,
    }
    if seen.seat is not None and seen.hand is not None:
        out["seat"] = seen.seat
        out["hand"] = _cards(seen.hand)
        out["threshold"] = seen.threshold
        out["pairs_needed"] = seen.pairs_needed
    return out


def _public_seat_json(index: int, seat: PublicSeat) -> dict[str, JSON]:
    return {
        "seat": index,
        "active": seat.active,
        "cards": seat.cards,
        "opened": seat.opened,
        "opened_with_pairs": seat.opened_with_pairs,
        "opening_total": seat.opening_total,
        "pair_status": seat.pair_status,
        "shown_pairs": seat.shown_pairs,
        "shown_twins": _cards(seat.shown_twins),
        "islek_penalty": seat.islek_penalty,
        "bottom_claim": seat.bottom_claim,
        "free_islek_used": seat.free_islek_used,
        "turns": seat.turns,
    }


def _query_json(query: Query) -> dict[str, JSON]:
    return {
        "taker": query.taker,
        "card": query.card.code,
        "pending": list(query.pending),
        "refused": list(query.refused),
    }
