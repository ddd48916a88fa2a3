"""A compact, mutable Elevator hand for the search's play-outs (issue 23).

The engine's :class:`~masa_rules.elevator.state.State` is an immutable value of physical cards,
replaced by every action: right for a table, too slow for a search that plays thousands of
moves per decision (55 µs a move). :class:`Sim` holds the same hand as lists of face indexes
(0..51 naturals, 52 XR, 53 XB) and is changed in place by :meth:`Sim.step`; a copy of the
deck's second copies is not needed, because no rule reads it (C-4 only tells them apart).

It follows E-4..E-11 exactly as the engine does: ``tests/test_elevator_rollout.py`` plays
thousands of random positions through both and checks that they list the same legal moves and
reach the same hand after each. What it leaves out is what a play-out never reads: events,
the seed, the ranking of the losers.

A move is ``(PLAY, faces)``, ``(PASS, ())`` or ``(GIVE, (face,))``.

>>> from masa_rules.elevator import ElevatorRules, new_game
>>> sim = Sim.of(new_game(ElevatorRules(), 3, "doc"))
>>> sim.turn, [len(hand) for hand in sim.hands], len(sim.stock)
(0, [7, 7, 7], 32)
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Final

from masa_rules.elevator.moves import POINTS, RANK, RED
from masa_rules.elevator.state import Direction, Phase, State

__all__ = [
    "GIVE",
    "JOKER",
    "PASS",
    "PLAY",
    "SPECIAL",
    "Move",
    "Sim",
    "greedy_kind",
    "move_kind",
    "starting_on",
]

PLAY: Final = 0
PASS: Final = 1
GIVE: Final = 2

Move = tuple[int, tuple[int, ...]]

JOKER: Final = 52
_ACE: Final = 14
_TWO: Final = 2
# The greedy play-out policy spends jokers, aces and 2s freely with this few cards left, as
# masa_rules.elevator.policies.greedy_policy does.
ENDGAME_HAND: Final = 2
SPECIAL: Final[tuple[bool, ...]] = tuple(rank in (0, _ACE, _TWO) for rank in RANK)
# What a card left in hand costs a play-out the seat did not win (measured: docs/bots.md).
_CARD_WEIGHT: Final = 0.02
# greedy_kind of a pass.
_PASS_KIND: Final = (2, 0, 0)


def _starts(face: int, below: int, up: bool, joker_any: bool) -> bool:
    """E-4, E-7: whether ``face`` may begin a play on ``below`` (moves.can_start on faces)."""
    if face >= JOKER:
        return RED[face] != RED[below] or (joker_any and below >= JOKER)
    if below >= JOKER:
        return True
    if RED[face] == RED[below]:
        return False
    return RANK[face] > RANK[below] if up else RANK[face] < RANK[below]


# _STARTS[joker_any][up][below][face], every answer of _starts looked up once: legality is most
# of a play-out's work.
_STARTS: Final[tuple[tuple[tuple[tuple[bool, ...], ...], ...], ...]] = tuple(
    tuple(
        tuple(
            tuple(_starts(face, below, up, joker_any) for face in range(54)) for below in range(54)
        )
        for up in (False, True)
    )
    for joker_any in (False, True)
)


def starting_on(top: int, up: bool, joker_any: bool) -> tuple[bool, ...]:
    """By face index, whether a card may begin a play on ``top`` going up (or down) (E-4,
    E-7): one row of the table every play-out reads."""
    return _STARTS[joker_any][up][top]


@dataclass(slots=True, kw_only=True)
class Sim:
    """One Elevator hand as plain lists, changed in place (see the module doc)."""

    hands: list[list[int]]
    # Drawn from the end: list.pop() is the cheap end.
    stock: list[int]
    top: int
    up: bool
    turn: int
    # -1 for none, as for receiver and winner.
    open_play: int
    after_play: bool
    forced: int
    receiver: int
    givers: list[int]
    over: bool
    winner: int
    joker_any: bool
    forces_round: bool
    rank_by_sum: bool
    players: int = field(init=False)

    def __post_init__(self) -> None:
        self.players = len(self.hands)

    @staticmethod
    def of(state: State) -> Sim:
        """The hand of ``state``, compact."""
        return Sim(
            hands=[[card.face_index for card in hand] for hand in state.hands],
            stock=[card.face_index for card in reversed(state.stock)],
            top=state.pile[-1].face_index,
            up=state.direction is Direction.ASCENDING,
            turn=state.turn,
            open_play=-1 if state.open_play is None else state.open_play,
            after_play=state.after_play,
            forced=state.forced_turns,
            receiver=-1 if state.receiver is None else state.receiver,
            givers=list(state.givers),
            over=state.phase is Phase.OVER,
            winner=-1 if state.winner is None else state.winner,
            joker_any=state.rules.joker_on_joker_any_colour,
            forces_round=state.rules.kopile_forces_round,
            rank_by_sum=state.rules.rank_by_sum,
        )

    def copy(self) -> Sim:
        """A copy whose lists are its own."""
        return replace(
            self,
            hands=[list(hand) for hand in self.hands],
            stock=list(self.stock),
            givers=list(self.givers),
        )

    @property
    def giving(self) -> bool:
        return self.receiver >= 0

    # --- what may be played ------------------------------------------------------------------

    def can_start(self, face: int) -> bool:
        """E-4, E-7: whether ``face`` may begin a play on the top of the pile."""
        return _STARTS[self.joker_any][self.up][self.top][face]

    def can_play(self, seat: int) -> bool:
        starts = _STARTS[self.joker_any][self.up][self.top]
        return any(starts[face] for face in self.hands[seat])

    def may_pass_voluntarily(self) -> bool:
        """E-8: only right after a play; E-9: never in the round after a Kopile."""
        return self.after_play and self.forced == 0

    def legal_moves(self) -> list[Move]:
        """Every move of the seat on turn, as the engine's ``legal_actions`` lists them."""
        if self.over:
            return []
        hand = self.hands[self.turn]
        if self.giving:
            return [(GIVE, (face,)) for face in hand]
        starts = _STARTS[self.joker_any][self.up][self.top]
        moves: list[Move] = []
        for i, face in enumerate(hand):
            if not starts[face]:
                continue
            if face >= JOKER:
                moves.append((PLAY, (face,)))
                continue
            rank = RANK[face]
            mates = tuple(other for j, other in enumerate(hand) if j != i and RANK[other] == rank)
            _runs((face,), mates, moves)
        if not moves or self.may_pass_voluntarily():
            moves.append((PASS, ()))
        return moves

    # --- changing the hand ---------------------------------------------------------------------

    def step(self, move: Move) -> None:
        """Apply a legal ``move`` of the seat on turn (the caller checked it is legal)."""
        kind, faces = move
        if kind == PLAY:
            self._play(faces)
        elif kind == PASS:
            self._pass()
        else:
            self._give(faces[0])

    def _play(self, faces: tuple[int, ...]) -> None:
        seat = self.turn
        hand = self.hands[seat]
        for face in faces:
            hand.remove(face)
        self.top = faces[-1]
        rank = RANK[faces[0]]
        if rank == _ACE:
            self.up = False
        elif rank == _TWO:
            self.up = True
        self.turn = (seat + 1) % self.players
        self.open_play = seat
        self.after_play = True
        if self.forced:
            self.forced -= 1
        if not hand:
            self.over, self.winner, self.turn = True, seat, seat

    def _pass(self) -> None:
        seat = self.turn
        if self.stock:
            self.hands[seat].append(self.stock.pop())
        following = (seat + 1) % self.players
        self.turn = following
        self.after_play = False
        if self.forced:
            self.forced -= 1
        if self.open_play == following:
            self._kopile(following)
        elif (
            not self.stock
            and self.open_play < 0
            and not any(self.can_play(other) for other in range(self.players))
        ):
            # E-9: nobody has played since the starting card and nobody can: ranked by E-11.
            self.over, self.winner = True, _leader(self.hands, self.rank_by_sum)

    def _kopile(self, seat: int) -> None:
        owed = self.players - 1
        hand, stock = self.hands[seat], self.stock
        drawn = 0
        while drawn < owed and stock:
            hand.append(stock.pop())
            drawn += 1
        self.givers = [(seat + k) % self.players for k in range(1, owed - drawn + 1)]
        self.after_play = False
        self.forced = self.players if self.forces_round else 0
        if self.givers:
            self.receiver, self.turn = seat, self.givers[0]
        else:
            self.turn = seat

    def _give(self, face: int) -> None:
        seat, receiver = self.turn, self.receiver
        hand = self.hands[seat]
        hand.remove(face)
        self.hands[receiver].append(face)
        del self.givers[0]
        if self.givers:
            self.turn = self.givers[0]
        else:
            self.turn, self.receiver = receiver, -1
        if not hand:
            # E-9: a giver who gives away their last card wins at once.
            self.over, self.winner, self.turn = True, seat, seat
            self.receiver, self.givers = -1, []

    # --- the play-out policy -------------------------------------------------------------------

    def greedy_move(self) -> Move:
        """The ``normal`` policy's move, on the compact hand (ties may break otherwise).

        Shed the longest ordinary run with the smallest step from the top; jokers, aces and 2s
        only when nothing else goes and a pass is not allowed or the hand is nearly empty; a
        giver parts with its highest-ranking ordinary card.
        """
        hand = self.hands[self.turn]
        if self.giving:
            return (GIVE, (min(hand, key=_give_order),))
        best, special = _candidates(hand, _STARTS[self.joker_any][self.up][self.top], self.top)
        if best is not None:
            return (PLAY, _run(hand, best[2], best[0]))
        if special is None:
            return (PASS, ())
        if self.may_pass_voluntarily() and len(hand) > ENDGAME_HAND:
            return (PASS, ())
        return (PLAY, _run(hand, special[2], -special[1]))

    def play_out(self, seat: int, horizon: int) -> float:
        """Play greedy for everyone for at most ``horizon`` moves; what that was worth to
        ``seat``: 1 for finishing first, otherwise ``-0.02`` per card it still holds (so a
        lost hand with few cards left is worth more than one with many)."""
        moves = 0
        while not self.over and moves < horizon:
            self.step(self.greedy_move())
            moves += 1
        if self.over and self.winner == seat:
            return 1.0
        return -_CARD_WEIGHT * len(self.hands[seat])


def greedy_kind(
    hand: list[int], top: int, up: bool, joker_any: bool, may_pass: bool
) -> tuple[int, int, int]:
    """What the ``normal`` policy does with ``hand`` on ``top`` (a voluntary pass open to it
    or not), up to the faces it picks: ``(0, length, step)`` for an ordinary run, ``(1, is a
    joker, length)`` for a joker, an ace or a 2, ``(2, 0, 0)`` for a pass. A seat that plays
    like ``normal`` made a move of this kind (:func:`move_kind`)."""
    best, special = _candidates(hand, _STARTS[joker_any][up][top], top)
    if best is not None:
        return (0, best[0], best[1])
    if special is None or (may_pass and len(hand) > ENDGAME_HAND):
        return _PASS_KIND
    return (1, special[0], -special[1])


def move_kind(played: tuple[int, ...], top: int) -> tuple[int, int, int]:
    """The kind (as :func:`greedy_kind` gives it) of playing ``played`` on ``top``, () a pass."""
    if not played:
        return _PASS_KIND
    first = played[0]
    if SPECIAL[first]:
        return (1, int(first >= JOKER), len(played))
    return (0, len(played), abs(RANK[first] - RANK[top]))


def _candidates(
    hand: list[int], starts: tuple[bool, ...], top: int
) -> tuple[tuple[int, int, int] | None, tuple[int, int, int] | None]:
    """The best ordinary play as (length, step, first card), and the best special one as
    (is a joker, -length, first card): an ace or a 2, the longest, before a joker."""
    top_rank = RANK[top]
    best: tuple[int, int, int] | None = None
    special: tuple[int, int, int] | None = None
    for face in hand:
        if not starts[face]:
            continue
        if SPECIAL[face]:
            key = (1, -1, face) if face >= JOKER else (0, -_run_length(hand, face), face)
            if special is None or key[:2] < special[:2]:
                special = key
            continue
        length = _run_length(hand, face)
        step = abs(RANK[face] - top_rank)
        if best is None or (-length, step) < (-best[0], best[1]):
            best = (length, step, face)
    return best, special


def _runs(run: tuple[int, ...], mates: tuple[int, ...], moves: list[Move]) -> None:
    """E-5: ``run`` and every longer run made by alternating colour with ``mates``."""
    moves.append((PLAY, run))
    last_red = RED[run[-1]]
    for i, mate in enumerate(mates):
        if RED[mate] != last_red:
            _runs((*run, mate), mates[:i] + mates[i + 1 :], moves)


def _run_length(hand: list[int], first: int) -> int:
    """The longest E-5 run ``hand`` makes starting with ``first``."""
    rank, red = RANK[first], RED[first]
    same = other = 0
    for face in hand:
        if RANK[face] == rank and face < JOKER:
            if RED[face] == red:
                same += 1
            else:
                other += 1
    return 2 * min(same - 1, other) + 1 + (1 if other > same - 1 else 0)


def _run(hand: list[int], first: int, length: int) -> tuple[int, ...]:
    """A run of ``length`` cards from ``hand`` starting with ``first``, colours alternating."""
    rank = RANK[first]
    pools: dict[bool, list[int]] = {True: [], False: []}
    skipped = False
    for face in hand:
        if face == first and not skipped:
            skipped = True
        elif RANK[face] == rank and face < JOKER:
            pools[RED[face]].append(face)
    run = [first]
    red = RED[first]
    while len(run) < length:
        red = not red
        run.append(pools[red].pop())
    return tuple(run)


def _give_order(face: int) -> tuple[bool, int]:
    return (SPECIAL[face], -POINTS[face])


def _leader(hands: list[list[int]], rank_by_sum: bool) -> int:
    """E-11 for a blocked hand: the one seat ranked first, or -1 when the place is shared."""

    def standing(hand: list[int]) -> tuple[int, int]:
        return (len(hand), sum(POINTS[face] for face in hand) if rank_by_sum else 0)

    first = min(standing(hand) for hand in hands)
    holders = [seat for seat, hand in enumerate(hands) if standing(hand) == first]
    return holders[0] if len(holders) == 1 else -1
