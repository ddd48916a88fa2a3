"""What a seat (or a spectator) may know about a 51 game (rules.md P-20).

A :class:`View` holds the seat's own hand and everything public: card counts, the table, the
discard pile, the face-up bottom card, scores, the commitment to the hand seed and the turn's
bookkeeping. It never holds another seat's hand, the stock order or any seed. It is lossless
for the seat: :func:`~masa_rules.fiftyone.observe.seat_state` rebuilds a playable state from it,
and :func:`~masa_rules.fiftyone.codec.view_json` writes it as JSON.
"""

from __future__ import annotations

from dataclasses import dataclass

from masa_rules.cards import PhysicalCard
from masa_rules.fiftyone.engine import pairs_needed, threshold
from masa_rules.fiftyone.state import Phase, Query, State, TableMeld, Turn
from masa_rules.frozen import evolve
from masa_rules.ruleset import RuleSet

__all__ = ["PublicSeat", "View", "view"]


@dataclass(frozen=True, slots=True)
class PublicSeat:
    """What everyone sees of one seat: its card count and its bookkeeping (F-34..F-71)."""

    active: bool
    cards: int
    opened: bool
    opened_with_pairs: bool
    opening_total: int
    pair_status: bool
    shown_pairs: bool
    shown_twins: tuple[PhysicalCard, ...]
    islek_penalty: int
    free_islek_used: int
    bottom_claim: int | None
    turns: int


@dataclass(frozen=True, slots=True)
class View:
    """A game as ``seat`` sees it; ``seat`` and ``hand`` are None for a spectator.

    ``series_threshold`` is what a seat not in pair status must reach to open now (F-40..F-42),
    ``pairs_needed`` what a pair opening needs (F-41, F-43; None without pair openings).
    ``turn`` is the public bookkeeping of the turn in progress (F-30..F-33r, F-55).
    """

    rules: RuleSet
    players: int
    teams: bool
    hands_limit: int | None
    hand_no: int
    hands_scored: int
    dealer: int
    phase: Phase
    turn: Turn
    commitment: str
    stock: int
    bottom_card: PhysicalCard | None
    discard: tuple[PhysicalCard, ...]
    last_discarder: int | None
    table: tuple[TableMeld, ...]
    seats: tuple[PublicSeat, ...]
    query: Query | None
    totals: tuple[int, ...]
    eliminated: tuple[tuple[int, ...], ...]
    ranking: tuple[tuple[int, ...], ...]
    reshuffles: int
    high_open: int
    high_pairs: int
    pair_opened: bool
    series_threshold: int
    pairs_needed: int | None
    turns_without_draw: int
    action_count: int
    seat: int | None = None
    hand: tuple[PhysicalCard, ...] | None = None

    @property
    def to_act(self) -> tuple[int, ...]:
        """The seats that must act now (see :attr:`State.to_act`)."""
        if self.phase is Phase.OVER:
            return ()
        if self.phase is Phase.QUERY and self.query is not None:
            return self.query.pending
        return (self.turn.seat,)

    @property
    def threshold(self) -> int | None:
        """The viewing seat's own threshold: None in pair status (it opens by pairs only)."""
        if self.seat is None or self.seats[self.seat].pair_status:
            return None
        return self.series_threshold


def view(state: State, seat: int | None) -> View:
    """What ``seat`` sees of ``state``; ``None`` is a spectator. Over, no seat holds a hand.

    >>> from masa_rules.ruleset import RuleSet
    >>> from masa_rules.fiftyone.engine import new_game
    >>> v = view(new_game(RuleSet.salon(), 4, "doc"), None)
    >>> v.phase.value, v.stock, v.hand, v.seats[0].cards
    ('play', 49, None, 15)
    """
    own = seat if seat is not None and state.phase is not Phase.OVER else None
    return View(
        rules=state.rules,
        players=state.players,
        teams=state.teams,
        hands_limit=state.hands_limit,
        hand_no=state.hand_no,
        hands_scored=state.hands_scored,
        dealer=state.dealer,
        phase=state.phase,
        turn=state.turn,
        commitment=state.commitment,
        stock=len(state.stock),
        bottom_card=state.bottom_card,
        discard=state.discard,
        last_discarder=state.last_discarder,
        table=state.table,
        seats=_public_seats(state),
        query=state.query,
        totals=state.totals,
        eliminated=state.eliminated,
        ranking=state.ranking,
        reshuffles=state.reshuffles,
        high_open=state.high_open,
        high_pairs=state.high_pairs,
        pair_opened=state.pair_opened,
        series_threshold=_series_threshold(state),
        pairs_needed=pairs_needed(state),
        turns_without_draw=state.turns_without_draw,
        action_count=state.action_count,
        seat=own,
        hand=None if own is None else state.seats[own].hand,
    )


def _public_seats(state: State) -> tuple[PublicSeat, ...]:
    return tuple(
        PublicSeat(
            active=state.active[i],
            cards=len(s.hand),
            opened=s.opened,
            opened_with_pairs=s.opened_with_pairs,
            opening_total=s.opening_total,
            pair_status=s.pair_status,
            shown_pairs=s.shown_pairs,
            shown_twins=s.locked,
            islek_penalty=s.islek_penalty,
            free_islek_used=s.free_islek_used,
            bottom_claim=s.bottom_claim,
            turns=s.turns,
        )
        for i, s in enumerate(state.seats)
    )


def _series_threshold(state: State) -> int:
    """F-40..F-42: the threshold of a seat not in pair status (seat 0 read without it)."""
    plain = evolve(state.seats[0], pair_status=False)
    return threshold(evolve(state, seats=(plain, *state.seats[1:])), 0) or 0
