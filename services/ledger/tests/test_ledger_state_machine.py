"""A Hypothesis state machine of grants, holds, binds, posts, voids, expiries and retries
(P-30, P-31): after every step each balance is what a plain model says, and the database's
invariant check is clean."""

from __future__ import annotations

import asyncio
import random
import shutil
import tempfile
from collections.abc import Awaitable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Literal, TypeVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    MultipleResults,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    multiple,
    rule,
)
from ledger_support import BACKENDS, Clock, make_ledger, open_store, result
from masa_ledger.app.holds import StakeRequest
from masa_ledger.domain.errors import LedgerError, RequestIdReused
from masa_ledger.domain.model import GameKey, HoldState
from masa_rules.payout import split_pot
from masa_rules.table_config import PayoutRule

PLAYERS = ("ayse", "mehmet", "zeynep", "ali")
STAKES = (10, 25, 100)

T = TypeVar("T")
# A hold's id and amount; a game's table and hold ids.
HeldStake = tuple[str, int]
Game = tuple[str, tuple[str, ...]]
# A request sent, with its arguments, to be sent again.
Request = (
    tuple[Literal["grant"], tuple[str, str, int, str]]
    | tuple[Literal["hold"], tuple[StakeRequest, ...]]
    | tuple[Literal["bind"], tuple[str, int, int, list[str], PayoutRule]]
)


class LedgerMachine(RuleBasedStateMachine):
    backend = "sqlite"

    holds = Bundle("holds")
    games = Bundle("games")

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.directory = Path(tempfile.mkdtemp(prefix="ledger-machine-"))
        self.stack = AsyncExitStack()
        self.store = self.run(
            self.stack.enter_async_context(open_store(self.backend, self.directory))
        )
        self.clock = Clock()
        self.ledger, _ = make_ledger(self.store, self.clock)
        self.balance = dict.fromkeys(PLAYERS, 0)
        self.held = dict.fromkeys(PLAYERS, 0)
        self.house = 0
        self.issued = 0
        # hold id -> (player, amount, state, expire_at)
        self.hold_state: dict[str, tuple[str, int, HoldState, float]] = {}
        self.requests: list[Request] = []
        self.counter = 0
        # table id -> the terms its stakes were bound under
        self.terms: dict[str, PayoutRule] = {}

    def run(self, awaitable: Awaitable[T]) -> T:
        return self.loop.run_until_complete(awaitable)

    def attempt(self, awaitable: Awaitable[T]) -> tuple[T | None, LedgerError | None]:
        """(answer, None), or (None, the ledger's refusal)."""
        try:
            return self.run(awaitable), None
        except LedgerError as error:
            return None, error

    def teardown(self) -> None:
        self.run(self.stack.aclose())
        self.loop.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def next_id(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    @initialize()
    def fund(self) -> None:
        for player in PLAYERS:
            self.grant_chips(player, 200)

    def grant_chips(self, player: str, amount: int) -> None:
        request_id = self.next_id("g")
        self.run(self.ledger.grant(request_id, player, amount, "test"))
        self.balance[player] += amount
        self.issued += amount
        self.requests.append(("grant", (request_id, player, amount, "test")))

    @rule(player=st.sampled_from(PLAYERS), amount=st.integers(1, 300))
    def grant(self, player: str, amount: int) -> None:
        self.grant_chips(player, amount)

    @rule(
        target=holds,
        players=st.lists(st.sampled_from(PLAYERS), min_size=1, max_size=4, unique=True),
        amount=st.sampled_from(STAKES),
        ttl=st.sampled_from((5.0, 60.0)),
    )
    def hold(self, players: list[str], amount: int, ttl: float) -> MultipleResults[HeldStake]:
        stakes = [
            StakeRequest(
                hold_id=self.next_id("h"),
                player_id=p,
                amount=amount,
                lobby_id="lobby",
                ticket_id="",
                ttl_seconds=ttl,
            )
            for p in players
        ]
        short = [p for p in players if self.balance[p] - self.held[p] < amount]
        placed, error = self.attempt(self.ledger.hold_stakes(stakes))
        if error is not None:
            assert short, error
            assert error.reason == "INSUFFICIENT_FUNDS"
            return multiple()
        assert not short and placed is not None
        self.requests.append(("hold", tuple(stakes)))
        for hold in placed:
            self.held[hold.player_id] += amount
            self.hold_state[hold.hold_id] = (hold.player_id, amount, HoldState.HELD, hold.expire_at)
        return multiple(*[(h.hold_id, amount) for h in placed])

    @rule(
        target=games,
        chosen=st.lists(holds, min_size=1, max_size=4, unique_by=lambda h: h[0]),
        rake=st.sampled_from((0, 500)),
        shares=st.sampled_from(((10_000,), (7000, 3000))),
    )
    def bind(
        self, chosen: list[HeldStake], rake: int, shares: tuple[int, ...]
    ) -> MultipleResults[Game] | Game:
        table_id = self.next_id("t")
        terms = PayoutRule(rake, shares)
        stake = chosen[0][1]
        states = [self.hold_state[hold_id] for hold_id, _ in chosen]
        players = [state[0] for state in states]
        bindable = (
            all(s[2] is HoldState.HELD and s[3] > self.clock.now for s in states)
            and all(amount == stake for _, amount in chosen)
            and len(set(players)) == len(players)
        )
        _, error = self.attempt(
            self.ledger.bind_holds(table_id, 1, stake, [h for h, _ in chosen], terms)
        )
        if error is not None:
            assert not bindable, error
            return multiple()
        assert bindable
        for hold_id, _ in chosen:
            player, amount, _, expire = self.hold_state[hold_id]
            self.hold_state[hold_id] = (player, amount, HoldState.BOUND, expire)
        self.requests.append(("bind", (table_id, 1, stake, [h for h, _ in chosen], terms)))
        self.terms[table_id] = terms
        return (table_id, tuple(hold_id for hold_id, _ in chosen))

    @rule(chosen=holds)
    def release(self, chosen: HeldStake) -> None:
        hold_id, _ = chosen
        player, amount, state, expire = self.hold_state[hold_id]
        _, error = self.attempt(self.ledger.release_hold(hold_id, "cancelled"))
        if error is not None:
            assert state not in (HoldState.HELD, HoldState.RELEASED), error
            assert error.reason == "HOLD_NOT_HELD"
            return
        assert state in (HoldState.HELD, HoldState.RELEASED)
        if state is HoldState.HELD:
            self.held[player] -= amount
            self.hold_state[hold_id] = (player, amount, HoldState.RELEASED, expire)

    @rule(seconds=st.sampled_from((1.0, 10.0, 100.0)))
    def time_passes(self, seconds: float) -> None:
        self.clock.now += seconds
        self.run(self.ledger.expire_due())
        for hold_id, (player, amount, state, expire) in list(self.hold_state.items()):
            if state is HoldState.HELD and expire <= self.clock.now:
                self.held[player] -= amount
                self.hold_state[hold_id] = (player, amount, HoldState.EXPIRED, expire)

    @rule(
        game=consumes(games),
        order=st.randoms(use_true_random=False),
        forfeits=st.sets(st.integers(0, 3)),
    )
    def settle(self, game: Game, order: random.Random, forfeits: set[int]) -> None:
        table_id, hold_ids = game
        places = list(range(1, len(hold_ids) + 1))
        order.shuffle(places)
        ranking = [
            (seat, self.hold_state[hold_id][0], places[seat], hold_id)
            for seat, hold_id in enumerate(hold_ids)
        ]
        stake = self.hold_state[hold_ids[0]][1]
        # Paid by the terms the stakes were bound under, whatever the result says.
        rule_ = self.terms[table_id]
        finished = result(
            GameKey(table_id=table_id, game_no=1), stake, ranking, forfeited=sorted(forfeits)
        )
        settlement, applied = self.run(self.ledger.settle(finished, from_event=True))
        assert applied
        split = split_pot(stake * len(hold_ids), finished.standings, rule_, teams=False)
        assert settlement.payouts == split.payouts
        for hold_id in hold_ids:
            player, amount, _, expire = self.hold_state[hold_id]
            self.balance[player] -= amount
            self.held[player] -= amount
            self.hold_state[hold_id] = (player, amount, HoldState.POSTED, expire)
        for payout in split.payouts:
            self.balance[payout.player_id] += payout.amount
        self.house += split.rake + split.forfeited
        # Delivered again, and voided late: nothing changes.
        assert self.run(self.ledger.settle(finished, from_event=True))[1] is False
        assert self.run(self.ledger.void(GameKey(table_id=table_id, game_no=1), "late"))[1] is False

    @rule(game=consumes(games))
    def void(self, game: Game) -> None:
        table_id, hold_ids = game
        _, applied = self.run(self.ledger.void(GameKey(table_id=table_id, game_no=1), "lost"))
        assert applied
        for hold_id in hold_ids:
            player, amount, _, expire = self.hold_state[hold_id]
            self.held[player] -= amount
            self.hold_state[hold_id] = (player, amount, HoldState.VOIDED, expire)

    @rule(data=st.data())
    def retry(self, data: st.DataObject) -> None:
        """A request sent again answers as the first time and moves nothing."""
        if not self.requests:
            return
        request = data.draw(st.sampled_from(self.requests))
        if request[0] == "grant":
            self.run(self.ledger.grant(*request[1]))
        elif request[0] == "hold":
            self.run(self.ledger.hold_stakes(list(request[1])))
        else:
            _, error = self.attempt(self.ledger.bind_holds(*request[1]))
            # Bound again after the game closed: refused, and nothing moves.
            assert error is None or error.reason == "GAME_CLOSED", error

    @rule(data=st.data())
    def reuse(self, data: st.DataObject) -> None:
        """A request id sent again with other content is refused."""
        grants = [request[1] for request in self.requests if request[0] == "grant"]
        if not grants:
            return
        request_id, player, amount, reason = data.draw(st.sampled_from(grants))
        try:
            self.run(self.ledger.grant(request_id, player, amount + 1, reason))
        except RequestIdReused:
            return
        raise AssertionError("a reused request id was accepted")

    @invariant()
    def balances_match_the_model(self) -> None:
        for player in PLAYERS:
            wallet = self.run(self.ledger.wallet(player))
            assert (wallet.balance, wallet.held) == (self.balance[player], self.held[player])
        facts = self.run(self.store.check())
        assert not any(facts.counts.values()), facts.examples
        assert facts.totals["chips_issued"] == self.issued
        assert facts.totals["chips_of_the_house"] == self.house


@pytest.mark.parametrize("backend", BACKENDS)
def test_p31_the_ledger_keeps_every_invariant_through_any_history(backend: str) -> None:
    machine = type(f"LedgerMachine_{backend}", (LedgerMachine,), {"backend": backend})
    assert issubclass(machine, LedgerMachine)
    machine.TestCase.settings = settings(
        max_examples=25 if backend == "sqlite" else 10,
        stateful_step_count=30,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    machine.TestCase().runTest()
