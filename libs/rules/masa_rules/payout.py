"""The split of a pot by the final ranking (P-30, F-97, P-12): pure, exact, deterministic.

The ledger pays every chip game by it, and ``masa-rules tournament`` counts the chips bots
would win by it.

1. The rake is ``pot * rake_basis_points // 10000``, rounded down; the rest is the prize.
2. Only seats that staked and did not forfeit may be paid (P-12: forfeiting players never win
   chips; a bot seat stakes nothing). If none may, the whole prize goes to the house.
3. The units ranked are the paid seats, or in team mode the teams with a paid member, a
   team's place being its best paid member's. Units are ordered by place; the first group of
   equal places occupies positions 1..k, the next group the positions after it, and so on.
4. A position's share comes from the payout table; positions past its end get nothing. Shares
   of positions nobody occupies (fewer paid units than paid places) are shared out in
   proportion to the occupied ones, so the prize is always paid in full.
5. Tied units share the shares of the positions they occupy equally; a team's amount is split
   equally among its paid members.
6. Every amount is computed exactly and rounded down; the chips left over (fewer than the
   number of paid seats) go one each to the seats with a share, by place, then by seat number.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import groupby

from masa_rules.table_config import BASIS_POINTS, PayoutRule

__all__ = ["PotSplit", "SeatPayout", "Standing", "split_pot"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Standing:
    """One seat of a game's final ranking, as the table-engine published it."""

    seat: int
    player_id: str
    place: int
    forfeited: bool = False
    team: int = 0
    hold_id: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class SeatPayout:
    seat: int
    player_id: str
    place: int
    amount: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PotSplit:
    pot: int
    rake: int
    # The prize no seat may win, which goes to the house (every staking seat forfeited).
    forfeited: int
    # Every paid seat with a positive amount, best place first, then by seat.
    payouts: tuple[SeatPayout, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Unit:
    place: int
    members: tuple[Standing, ...]


def split_pot(
    pot: int, standings: Sequence[Standing], rule: PayoutRule, *, teams: bool
) -> PotSplit:
    """The rake and each paid seat's amount (see the module doc).

    >>> seats = [Standing(seat=s, player_id=f"p{s}", place=s + 1, hold_id=f"h{s}") for s in range(3)]
    >>> split = split_pot(300, seats, PayoutRule(500, (7000, 3000)), teams=False)
    >>> split.rake, [(p.seat, p.amount) for p in split.payouts]
    (15, [(0, 200), (1, 85)])
    """
    rake = pot * rule.rake_basis_points // BASIS_POINTS
    prize = pot - rake
    paid = [s for s in standings if s.hold_id and not s.forfeited]
    if not paid or prize == 0:
        return PotSplit(pot=pot, rake=rake, forfeited=prize if not paid else 0, payouts=())
    units = _units(paid, teams=teams)
    # Positions each group of equal places occupies, and the shares of those positions.
    groups: list[tuple[int, list[_Unit], int]] = []
    position = 0
    for _, tied in groupby(units, key=lambda unit: unit.place):
        members = list(tied)
        shares = sum(_share(rule, position + offset) for offset in range(len(members)))
        groups.append((position + 1, members, shares))
        position += len(members)
    occupied = sum(shares for _, _, shares in groups)
    exact: list[tuple[int, Standing, Fraction]] = []
    for paid_place, members, shares in groups:
        per_unit = Fraction(prize * shares, occupied * len(members))
        for unit in members:
            per_seat = per_unit / len(unit.members)
            exact.extend((paid_place, seat, per_seat) for seat in unit.members)
    exact.sort(key=lambda item: (item[0], item[1].seat))
    amounts = [int(value) for _, _, value in exact]
    left_over = prize - sum(amounts)
    # Fewer than the seats whose exact amount has a fraction, which all have a positive one.
    for index in [i for i, (_, _, value) in enumerate(exact) if value > 0][:left_over]:
        amounts[index] += 1
    payouts = tuple(
        SeatPayout(seat=seat.seat, player_id=seat.player_id, place=paid_place, amount=amount)
        for (paid_place, seat, _), amount in zip(exact, amounts, strict=True)
        if amount > 0
    )
    return PotSplit(pot=pot, rake=rake, forfeited=0, payouts=payouts)


def _units(paid: Sequence[Standing], *, teams: bool) -> list[_Unit]:
    if not teams:
        units = [_Unit(place=s.place, members=(s,)) for s in paid]
    else:
        by_team: dict[int, list[Standing]] = {}
        for standing in paid:
            by_team.setdefault(standing.team, []).append(standing)
        units = [
            _Unit(
                place=min(s.place for s in members),
                members=tuple(sorted(members, key=lambda s: s.seat)),
            )
            for members in by_team.values()
        ]
    return sorted(units, key=lambda unit: (unit.place, unit.members[0].seat))


def _share(rule: PayoutRule, position: int) -> int:
    shares = rule.shares
    return shares[position] if position < len(shares) else 0
