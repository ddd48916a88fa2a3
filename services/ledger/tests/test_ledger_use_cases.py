"""The ledger's use cases on every store (SQLite always, PostgreSQL when configured).

Every refusal is a clear error with its reason, and leaves the database as it was (P-30,
P-31): a snapshot of every table before and after shows it.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import replace
from typing import TypeVar

import pytest
from ledger_support import (
    Clock,
    RecordedMetrics,
    assert_consistent,
    execute,
    hold_for,
    make_ledger,
    result,
    snapshot,
)
from masa.common.v1 import chips_pb2, error_pb2
from masa.events.v1 import ledger_event_pb2
from masa_ledger.adapters.convert import encode_event
from masa_ledger.adapters.sql import SqlStore
from masa_ledger.app.holds import HoldPolicy, StakeRequest
from masa_ledger.app.ledger import Ledger
from masa_ledger.app.ports import HoldFilter, InboxOutcome, TransferFilter
from masa_ledger.domain.errors import BadInput, LedgerError, NotFound, Refused, RequestIdReused
from masa_ledger.domain.model import (
    HOUSE,
    ISSUER,
    GameAbandonment,
    GameKey,
    HoldState,
    SettlementState,
    TransferKind,
    wallet_id,
)
from masa_ledger.domain.validation import MAX_AMOUNT
from masa_platform.errors import reason_name
from masa_rules.refusals import Reason
from masa_rules.table_config import PayoutRule


async def _funded(store: SqlStore, *players: str, chips: int = 1000) -> tuple[Ledger, Clock]:
    clock = Clock()
    ledger, _ = make_ledger(store, clock)
    for player in players:
        await ledger.grant(f"welcome-{player}", player, chips, "welcome")
    return ledger, clock


Error = TypeVar("Error", bound=LedgerError)


async def _refused(
    store: SqlStore, call: Awaitable[object], error: type[Error], reason: str | None = None
) -> Error:
    before = await snapshot(store)
    with pytest.raises(error) as refused:
        await call
    if reason is not None:
        assert refused.value.reason == reason
    assert await snapshot(store) == before
    return refused.value


async def test_p31_the_development_welcome_comes_before_an_operators_first_grant(
    store: SqlStore,
) -> None:
    """With the development welcome on (MASA_DEV_WELCOME_CHIPS), a player first seen through an
    operator's grant gets the welcome too, once; a grant refused for its input welcomes
    nobody, and a ledger process that has not seen the player welcomes it no second time."""
    clock = Clock()

    def ledger() -> Ledger:
        return Ledger(
            store, encode_event, RecordedMetrics(), clock=clock, policy=HoldPolicy(),
            welcome_chips=10_000,
        )  # fmt: skip

    first = ledger()
    await _refused(store, first.grant("g-carol", "carol", 0, "gift", welcome=True), BadInput)
    await first.grant("g-carol", "carol", 5, "gift", welcome=True)
    assert (await first.wallet("carol")).balance == 10_005
    await first.grant("g-carol", "carol", 5, "gift", welcome=True)
    again = ledger()
    await again.grant("g-carol-2", "carol", 7, "gift", welcome=True)
    assert (await again.wallet("carol")).balance == 10_012
    # Without welcome (the ledger's own grants), nothing but the grant.
    await again.grant("g-dave", "dave", 5, "gift")
    dave = await store.account(wallet_id("dave"))
    assert dave is not None and dave.balance == 5
    await assert_consistent(store)


async def test_p31_a_grant_moves_chips_from_the_issuer_and_a_retry_moves_nothing(
    store: SqlStore,
) -> None:
    ledger, _ = await _funded(store)
    first, granted = await ledger.grant("g1", "ayse", 500, "welcome")
    again, granted_again = await ledger.grant("g1", "ayse", 500, "welcome")
    assert (again, granted, granted_again) == (first, True, False)
    assert first.transfer_id == "grant:g1"
    assert (await ledger.wallet("ayse")).balance == 500
    assert (await ledger.account(ISSUER)).balance == -500
    await _refused(store, ledger.grant("g1", "ayse", 600, "welcome"), RequestIdReused)
    await _refused(store, ledger.grant("g1", "mehmet", 500, "welcome"), RequestIdReused)
    await assert_consistent(store)


@pytest.mark.parametrize(
    "amount", [0, -5, MAX_AMOUNT + 1, 2**63 - 1], ids=["zero", "negative", "too-big", "int64"]
)
async def test_p31_amounts_that_are_not_positive_or_overflow_are_refused(
    store: SqlStore, amount: int
) -> None:
    ledger, _ = await _funded(store, "ayse")
    await _refused(store, ledger.grant("g2", "ayse", amount, ""), BadInput, "BAD_REQUEST")
    await _refused(
        store,
        ledger.hold_stakes([StakeRequest(hold_id="h1", player_id="ayse", amount=amount)]),
        BadInput,
        "BAD_REQUEST",
    )
    await _refused(store, ledger.bind_holds("t1", 1, amount, ["h1"]), BadInput, "BAD_REQUEST")


@pytest.mark.parametrize(
    ("request_id", "player_id"),
    [("", "ayse"), ("has space", "ayse"), ("x" * 129, "ayse"), ("g3", ""), ("g3", "a\nb")],
)
async def test_malformed_ids_are_refused(store: SqlStore, request_id: str, player_id: str) -> None:
    ledger, _ = await _funded(store)
    await _refused(store, ledger.grant(request_id, player_id, 10, ""), BadInput, "BAD_REQUEST")


async def test_p30_a_hold_reserves_chips_and_a_retry_returns_the_same_hold(store: SqlStore) -> None:
    ledger, clock = await _funded(store, "ayse")
    stake = StakeRequest(
        hold_id="h1",
        player_id="ayse",
        amount=300,
        lobby_id="salon",
        ticket_id="ticket-1",
        ttl_seconds=60.0,
    )
    (hold,) = await ledger.hold_stakes([stake])
    assert (hold.state, hold.amount, hold.expire_at) == (HoldState.HELD, 300, clock.now + 60)
    wallet = await ledger.wallet("ayse")
    assert (wallet.balance, wallet.held, wallet.available) == (1000, 300, 700)
    clock.now += 5
    assert await ledger.hold_stakes([stake]) == [hold]
    assert (await ledger.wallet("ayse")).held == 300
    await _refused(
        store,
        ledger.hold_stakes([replace(stake, amount=301)]),
        RequestIdReused,
        "REQUEST_ID_REUSED",
    )
    await assert_consistent(store)


async def test_p30_missing_chips_is_insufficient_funds_naming_the_player(store: SqlStore) -> None:
    ledger, _ = await _funded(store, "ayse")
    await ledger.hold_stakes([StakeRequest(hold_id="h1", player_id="ayse", amount=800)])
    refused = await _refused(
        store,
        ledger.hold_stakes([StakeRequest(hold_id="h2", player_id="ayse", amount=201)]),
        Refused,
        "INSUFFICIENT_FUNDS",
    )
    assert refused.metadata["player_id"] == "ayse"
    assert (refused.metadata["available"], refused.metadata["required"]) == ("200", "201")
    # A player never granted anything has no chips either.
    await _refused(
        store,
        ledger.hold_stakes([StakeRequest(hold_id="h3", player_id="nobody", amount=1)]),
        Refused,
        "INSUFFICIENT_FUNDS",
    )


async def test_p30_a_stake_where_one_player_is_short_holds_nothing_for_anyone(
    store: SqlStore,
) -> None:
    ledger, _ = await _funded(store, "ayse", "mehmet", "zeynep")
    await ledger.grant("poor", "ali", 50, "")
    stakes = [
        StakeRequest(hold_id=f"t1-{p}", player_id=p, amount=100, lobby_id="salon")
        for p in ("ayse", "mehmet", "ali", "zeynep")
    ]
    refused = await _refused(store, ledger.hold_stakes(stakes), Refused, "INSUFFICIENT_FUNDS")
    assert refused.metadata["short_player_ids"] == '["ali"]'
    for player in ("ayse", "mehmet", "zeynep", "ali"):
        assert (await ledger.wallet(player)).held == 0
    with pytest.raises(NotFound):
        await ledger.hold("t1-ayse")
    # Without the short player the same stakes go through, all at once.
    holds = await ledger.hold_stakes([s for s in stakes if s.player_id != "ali"])
    assert [h.state for h in holds] == [HoldState.HELD] * 3
    await assert_consistent(store)


async def test_a_group_stake_must_name_each_player_and_id_once(store: SqlStore) -> None:
    ledger, _ = await _funded(store, "ayse")
    await _refused(
        store,
        ledger.hold_stakes(
            [
                StakeRequest(hold_id="a", player_id="ayse", amount=1),
                StakeRequest(hold_id="b", player_id="ayse", amount=1),
            ]
        ),
        BadInput,
    )
    await _refused(store, ledger.hold_stakes([]), BadInput)
    await _refused(
        store,
        ledger.hold_stakes([StakeRequest(hold_id="a", player_id="ayse", amount=1, ttl_seconds=0)]),
        BadInput,
    )
    await _refused(
        store,
        ledger.hold_stakes(
            [StakeRequest(hold_id="a", player_id="ayse", amount=1, ttl_seconds=10**9)]
        ),
        BadInput,
    )


async def test_p30_binding_checks_each_hold_against_the_stake(store: SqlStore) -> None:
    ledger, _ = await _funded(store, "ayse", "mehmet")
    await ledger.hold_stakes(
        [
            StakeRequest(hold_id="ha", player_id="ayse", amount=100),
            StakeRequest(hold_id="hm", player_id="mehmet", amount=90),
        ]
    )
    refused = await _refused(
        store, ledger.bind_holds("t1", 1, 100, ["ha", "hm"]), Refused, "STAKE_MISMATCH"
    )
    assert refused.metadata == {"hold_id": "hm", "amount": "90", "stake": "100"}
    await _refused(
        store, ledger.bind_holds("t1", 1, 100, ["ha", "nope"]), NotFound, "HOLD_NOT_FOUND"
    )
    await _refused(store, ledger.bind_holds("t1", 1, 100, ["ha", "ha"]), BadInput)
    await _refused(store, ledger.bind_holds("bad.table", 1, 100, ["ha"]), BadInput)
    await _refused(store, ledger.bind_holds("t1", 0, 100, ["ha"]), BadInput)
    await ledger.hold_stakes([StakeRequest(hold_id="ha2", player_id="ayse", amount=100)])
    await _refused(store, ledger.bind_holds("t1", 1, 100, ["ha", "ha2"]), BadInput)


async def test_p30_a_bound_hold_is_a_pending_stake_of_its_game(store: SqlStore) -> None:
    ledger, _ = await _funded(store, "ayse", "mehmet")
    await hold_for(ledger, ["ayse", "mehmet"], 100, "t1")
    escrow, holds = await ledger.bind_holds("t1", 1, 100, ["t1-ayse", "t1-mehmet"])
    assert (escrow.account_id, escrow.pending_stakes, escrow.balance) == ("escrow:t1:1", 200, 0)
    assert [(h.state, h.table_id, h.game_no) for h in holds] == [(HoldState.BOUND, "t1", 1)] * 2
    # The chips stay reserved in the wallets until the game is settled.
    assert (await ledger.wallet("ayse")).held == 100
    again = await ledger.bind_holds("t1", 1, 100, ["t1-mehmet", "t1-ayse"])
    assert again[0] == escrow
    await _refused(store, ledger.bind_holds("t1", 1, 100, ["t1-ayse"]), Refused, "ESCROW_MISMATCH")
    # A hold bound to one game cannot be bound to another, nor released.
    await _refused(
        store, ledger.bind_holds("t2", 1, 100, ["t1-ayse"]), Refused, "HOLD_ALREADY_BOUND"
    )
    await _refused(store, ledger.release_hold("t1-ayse", "cancel"), Refused, "HOLD_NOT_HELD")
    await assert_consistent(store)


async def test_p30_a_hold_binds_under_the_terms_it_was_placed_for_only(store: SqlStore) -> None:
    """Issue 19: matchmaking fixes a stake's terms (its lobby's rake and payout table) when it
    places the hold; a bind under any other (no rake, another split) is TERMS_MISMATCH and
    changes nothing, the same terms however spelt bind it, and the escrow pays by them. A
    retry of the hold with other terms is another request (REQUEST_ID_REUSED)."""
    ledger, _ = await _funded(store, "ayse", "mehmet")
    lobby = PayoutRule(rake_basis_points=500)
    await ledger.hold_stakes(
        [
            StakeRequest(hold_id=f"t1-{p}", player_id=p, amount=100, rule=lobby)
            for p in ("ayse", "mehmet")
        ]
    )
    holds = ["t1-ayse", "t1-mehmet"]
    assert (await ledger.hold("t1-ayse")).rule == PayoutRule(500, (10_000,))
    for other in (PayoutRule(), PayoutRule(500, (6000, 4000)), PayoutRule(400)):
        refused = await _refused(
            store, ledger.bind_holds("t1", 1, 100, holds, other), Refused, Reason.TERMS_MISMATCH
        )
        assert refused.metadata == {"hold_id": "t1-ayse"}
    await _refused(
        store,
        ledger.hold_stakes(
            [StakeRequest(hold_id="t1-ayse", player_id="ayse", amount=100, rule=PayoutRule())]
        ),
        RequestIdReused,
    )
    escrow, bound = await ledger.bind_holds("t1", 1, 100, holds, PayoutRule(500, (10_000,)))
    assert escrow.rule == PayoutRule(500, (10_000,))
    assert [h.state for h in bound] == [HoldState.BOUND] * 2
    await assert_consistent(store)
    # The ledger's events say which terms each stake was placed and bound under.
    events = {
        row.event_id: ledger_event_pb2.LedgerEvent.FromString(row.payload)
        for row in await store.outbox_batch(100)
    }
    terms = chips_pb2.PayoutRule(rake_basis_points=500, place_shares=[10_000])
    assert events["hold_placed:t1-ayse"].hold_placed.payout == terms
    assert events["holds_bound:t1:1"].holds_bound.payout == terms
    # masa-ledger check sees an escrow whose terms are not its holds' (written around the code).
    await execute(
        store,
        'UPDATE accounts SET rule = \'{"rake_basis_points": 0, "place_shares": [10000]}\' '
        "WHERE account_id = 'escrow:t1:1'",
    )
    report = await store.check()
    assert report.counts["holds_bound_under_their_terms"] == 2


async def test_p30_a_hold_placed_before_terms_were_kept_binds_under_the_tables(
    store: SqlStore,
) -> None:
    """A hold the ledger placed before it kept terms with holds (it spans the upgrade: the
    column is empty) binds under the terms the table gives, as it did then."""
    ledger, _ = await _funded(store, "ayse")
    # Placed with no terms: the empty column a hold of before the upgrade has.
    await ledger.hold_stakes([StakeRequest(hold_id="old-ayse", player_id="ayse", amount=100)])
    assert (await ledger.hold("old-ayse")).rule is None
    escrow, _ = await ledger.bind_holds("old", 1, 100, ["old-ayse"], PayoutRule(300))
    assert escrow.rule == PayoutRule(300, (10_000,))
    await assert_consistent(store)


async def test_p30_release_voids_an_unbound_hold_once(store: SqlStore) -> None:
    ledger, _ = await _funded(store, "ayse")
    await ledger.hold_stakes([StakeRequest(hold_id="h1", player_id="ayse", amount=100)])
    released = await ledger.release_hold("h1", "ticket cancelled")
    assert (released.state, released.reason) == (HoldState.RELEASED, "ticket cancelled")
    assert (await ledger.wallet("ayse")).held == 0
    assert await ledger.release_hold("h1", "ticket cancelled") == released
    await _refused(store, ledger.release_hold("nope", ""), NotFound, "HOLD_NOT_FOUND")
    await _refused(store, ledger.bind_holds("t1", 1, 100, ["h1"]), Refused, "HOLD_NOT_HELD")
    await assert_consistent(store)


async def test_p30_an_unbound_hold_expires_and_a_bound_one_does_not(store: SqlStore) -> None:
    clock = Clock()
    ledger, metrics = make_ledger(store, clock)
    for player in ("ayse", "mehmet", "ali"):
        await ledger.grant(f"w-{player}", player, 1000, "")
    await ledger.hold_stakes(
        [StakeRequest(hold_id="free", player_id="ayse", amount=100, ttl_seconds=30)]
    )
    await ledger.hold_stakes(
        [StakeRequest(hold_id="bound", player_id="mehmet", amount=100, ttl_seconds=30)]
    )
    await ledger.hold_stakes(
        [StakeRequest(hold_id="late", player_id="ali", amount=100, ttl_seconds=30)]
    )
    await ledger.bind_holds("t1", 1, 100, ["bound"])
    assert await ledger.expire_due() == 0
    clock.now += 30
    # Past its expiry a hold cannot be bound, even before the ledger voided it.
    await _refused(store, ledger.bind_holds("t2", 1, 100, ["late"]), Refused, "HOLD_NOT_HELD")
    assert await ledger.expire_due() == 2
    assert metrics.expired == 2
    assert (await ledger.hold("free")).state is HoldState.EXPIRED
    assert (await ledger.hold("bound")).state is HoldState.BOUND
    assert (await ledger.wallet("ayse")).held == 0
    assert (await ledger.wallet("mehmet")).held == 100
    assert await ledger.expire_due() == 0
    await assert_consistent(store)


async def test_p30_settling_pays_by_the_ranking_and_takes_the_rake(store: SqlStore) -> None:
    ledger, _ = await _funded(store, "a", "b", "c", "d")
    await hold_for(ledger, "abcd", 100, "t1")
    terms = PayoutRule(rake_basis_points=500, place_shares=(7000, 3000))
    await ledger.bind_holds("t1", 1, 100, [f"t1-{p}" for p in "abcd"], terms)
    finished = result(
        GameKey(table_id="t1", game_no=1),
        100,
        [(0, "a", 3, "t1-a"), (1, "b", 1, "t1-b"), (2, "c", 2, "t1-c"), (3, "d", 4, "t1-d")],
    )
    settlement, applied = await ledger.settle(finished, from_event=True)
    assert applied
    assert (settlement.state, settlement.pot, settlement.rake) == (SettlementState.SETTLED, 400, 20)
    assert [(p.player_id, p.place, p.amount) for p in settlement.payouts] == [
        ("b", 1, 266),
        ("c", 2, 114),
    ]
    balances = {p: (await ledger.wallet(p)).balance for p in "abcd"}
    assert balances == {"a": 900, "b": 1166, "c": 1014, "d": 900}
    assert (await ledger.account(HOUSE)).balance == 20
    assert {h.state for h in [await ledger.hold(f"t1-{p}") for p in "abcd"]} == {HoldState.POSTED}
    kinds = sorted(
        t.kind.value for t in (await ledger.settlement(GameKey(table_id="t1", game_no=1))).transfers
    )
    assert kinds == ["payout", "payout", "rake", "stake", "stake", "stake", "stake"]
    # The same result again, and a voiding after it: the first closing stands, and says so.
    assert await ledger.settle(finished, from_event=True) == (settlement, False)
    voided, applied = await ledger.void(GameKey(table_id="t1", game_no=1), "too late")
    assert (voided.state, applied) == (SettlementState.SETTLED, False)
    await _refused(store, ledger.bind_holds("t1", 1, 100, ["x"]), Refused, "GAME_CLOSED")
    await assert_consistent(store)


async def test_p30_an_escrow_bound_before_terms_were_recorded_pays_by_the_verified_result(
    store: SqlStore,
) -> None:
    """A game whose holds were bound before the ledger recorded terms (it spans the upgrade)
    is paid as it was then, by the payout table of its (verified) result, not as winner takes
    all; one bound with terms is paid by them, whatever its result says."""
    ledger, _ = await _funded(store, "a", "b", "c", "d")
    shares = PayoutRule(rake_basis_points=500, place_shares=(7000, 3000))
    for table in ("old", "new"):
        await hold_for(ledger, "abcd", 100, table)
        await ledger.bind_holds(table, 1, 100, [f"{table}-{p}" for p in "abcd"], shares)
    await execute(store, "UPDATE accounts SET rule = '' WHERE account_id = 'escrow:old:1'")
    ranking = [(0, "a", 3, "-a"), (1, "b", 1, "-b"), (2, "c", 2, "-c"), (3, "d", 4, "-d")]
    for table in ("old", "new"):
        finished = replace(
            result(
                GameKey(table_id=table, game_no=1),
                100,
                [(seat, p, place, f"{table}{hold}") for seat, p, place, hold in ranking],
            ),
            published_rule=PayoutRule(rake_basis_points=0, place_shares=(10_000,))
            if table == "new"
            else shares,
        )
        settlement, applied = await ledger.settle(finished, from_event=True)
        assert applied
        assert (settlement.rule, settlement.rake) == (shares, 20)
        assert [(p.player_id, p.amount) for p in settlement.payouts] == [("b", 266), ("c", 114)]
    await assert_consistent(store)


async def test_p30_voiding_first_makes_the_late_result_a_no_op(store: SqlStore) -> None:
    ledger, _ = await _funded(store, "a", "b")
    await hold_for(ledger, "ab", 100, "t1")
    await ledger.bind_holds("t1", 1, 100, ["t1-a", "t1-b"])
    voided, applied = await ledger.void(GameKey(table_id="t1", game_no=1), "engine lost the table")
    assert applied
    assert (voided.state, voided.pot, voided.hold_ids) == (
        SettlementState.VOIDED,
        200,
        ("t1-a", "t1-b"),
    )
    finished = result(
        GameKey(table_id="t1", game_no=1), 100, [(0, "a", 1, "t1-a"), (1, "b", 2, "t1-b")]
    )
    assert await ledger.settle(finished, from_event=True) == (voided, False)
    assert await ledger.on_result(finished) is InboxOutcome.ALREADY_CLOSED
    for player in "ab":
        wallet = await ledger.wallet(player)
        assert (wallet.balance, wallet.held) == (1000, 0)
    await assert_consistent(store)


async def test_p30_an_operators_void_of_a_game_never_seen_is_not_found_and_writes_nothing(
    store: SqlStore,
) -> None:
    """No escrow, no stake: VoidGame of such a game (a typo) is refused and leaves the game
    open; a table's GameAbandoned still closes any game it names (a training table's)."""
    ledger, _ = await _funded(store, "a", "b")
    with pytest.raises(NotFound) as unknown:
        await ledger.void(GameKey(table_id="typo", game_no=1), "operator")
    assert (unknown.value.reason, unknown.value.metadata) == (
        reason_name(error_pb2.ERROR_REASON_NOT_FOUND),
        {"table_id": "typo", "game_no": "1"},
    )
    with pytest.raises(NotFound):
        await ledger.account("escrow:typo:1")
    await hold_for(ledger, "ab", 10, "typo")
    await ledger.bind_holds("typo", 1, 10, ["typo-a", "typo-b"])
    voided, applied = await ledger.void(GameKey(table_id="typo", game_no=1), "operator")
    assert (applied, voided.hold_ids) == (True, ("typo-a", "typo-b"))
    training = GameAbandonment(
        event_id="train:1:abandoned", key=GameKey(table_id="train", game_no=1), reason="voided"
    )
    assert await ledger.on_result(training) is InboxOutcome.VOIDED
    await assert_consistent(store)


async def test_p30_a_result_that_does_not_match_the_holds_is_refused_and_recorded(
    store: SqlStore,
) -> None:
    ledger, _ = await _funded(store, "a", "b", "c")
    await hold_for(ledger, "abc", 100, "t1")
    await ledger.bind_holds("t1", 1, 100, ["t1-a", "t1-b"])
    key = GameKey(table_id="t1", game_no=1)
    unbound = result(key, 100, [(0, "a", 1, "t1-a"), (1, "c", 2, "t1-c")])
    await _refused(store, ledger.settle(unbound, from_event=True), Refused, "RESULT_MISMATCH")
    stolen = result(key, 100, [(0, "c", 1, "t1-a"), (1, "b", 2, "t1-b")])
    await _refused(store, ledger.settle(stolen, from_event=True), Refused, "RESULT_MISMATCH")
    wrong_stake = result(key, 50, [(0, "a", 1, "t1-a"), (1, "b", 2, "t1-b")])
    await _refused(store, ledger.settle(wrong_stake, from_event=True), Refused, "RESULT_MISMATCH")
    # From the bus the refusal is recorded once, and the game stays open for an operator.
    assert await ledger.on_result(unbound) is InboxOutcome.REJECTED
    assert await ledger.on_result(unbound) is InboxOutcome.REJECTED
    with pytest.raises(NotFound):
        await ledger.settlement(key)
    assert (await ledger.wallet("a")).held == 100
    await assert_consistent(store)


async def test_p1_a_training_game_stakes_nothing_and_closes_its_key(store: SqlStore) -> None:
    ledger, _ = await _funded(store)
    training = result(GameKey(table_id="train", game_no=1), 0, [(0, "a", 1, ""), (1, "", 2, "")])
    settlement, applied = await ledger.settle(training, from_event=True)
    assert (applied, settlement.pot, settlement.payouts, settlement.transfers) == (True, 0, (), ())
    assert await ledger.on_result(training) is InboxOutcome.ALREADY_CLOSED
    await assert_consistent(store)


async def test_p30_abandoned_game_from_the_bus_is_voided(store: SqlStore) -> None:
    ledger, _ = await _funded(store, "a", "b")
    await hold_for(ledger, "ab", 10, "t1")
    await ledger.bind_holds("t1", 1, 10, ["t1-a", "t1-b"])
    abandoned = GameAbandonment(
        event_id="t1:1:abandoned", key=GameKey(table_id="t1", game_no=1), reason="state lost"
    )
    assert await ledger.on_result(abandoned) is InboxOutcome.VOIDED
    assert await ledger.on_result(abandoned) is InboxOutcome.ALREADY_CLOSED
    assert (await ledger.hold("t1-a")).state is HoldState.VOIDED
    await assert_consistent(store)


async def test_reads_list_newest_first_page_by_page_with_filters(store: SqlStore) -> None:
    ledger, _ = await _funded(store, "a", "b")
    for n in range(5):
        await ledger.grant(f"extra-{n}", "a", 10 + n, "")
    await hold_for(ledger, "ab", 100, "t1")
    await ledger.bind_holds("t1", 1, 100, ["t1-a", "t1-b"])
    await ledger.settle(
        result(GameKey(table_id="t1", game_no=1), 100, [(0, "a", 1, "t1-a"), (1, "b", 2, "t1-b")]),
        from_event=False,
    )
    wallet = TransferFilter(account_id=wallet_id("a"))
    seen: list[str] = []
    below: int | None = None
    while True:
        page = await ledger.transfers(wallet, size=3, before_seq=below)
        seen += [t.transfer_id for t in page.items]
        below = page.next_before_seq
        if below is None:
            break
    assert seen[0] == "payout:t1:1:0"
    assert seen[-1] == "grant:welcome-a"
    assert len(seen) == 8
    stakes = await ledger.transfers(
        TransferFilter(account_id=wallet_id("a"), kind=TransferKind.STAKE), size=10
    )
    assert [t.transfer_id for t in stakes.items] == ["stake:t1-a"]
    assert stakes.next_before_seq is None
    game = await ledger.transfers(
        TransferFilter(account_id=wallet_id("b"), table_id="t1", game_no=1), size=10
    )
    assert [t.kind for t in game.items] == [TransferKind.STAKE]
    with pytest.raises(BadInput):
        await ledger.transfers(wallet, size=-1)
    holds = await ledger.holds(HoldFilter(player_id="a", state=HoldState.POSTED), size=10)
    assert [h.hold_id for h in holds.items] == ["t1-a"]
    assert (
        await ledger.holds(HoldFilter(player_id="a", state=HoldState.HELD), size=10)
    ).items == ()


async def test_unknown_and_malformed_accounts_are_clear_errors(store: SqlStore) -> None:
    ledger, _ = await _funded(store, "a")
    assert (await ledger.account("player:a")).balance == 1000
    assert (await ledger.account(ISSUER)).balance == -1000
    with pytest.raises(NotFound) as missing:
        await ledger.account("player:nobody")
    assert missing.value.reason == "ACCOUNT_NOT_FOUND"
    with pytest.raises(NotFound):
        await ledger.account("escrow:t9:1")
    for bad in ("bank", "player:", "escrow:t1", "escrow:t.1:1"):
        with pytest.raises(BadInput):
            await ledger.account(bad)
    # A wallet is implicit: a player never granted anything has one of 0 chips.
    assert (await ledger.wallet("nobody")).balance == 0
    with pytest.raises(NotFound) as no_settlement:
        await ledger.settlement(GameKey(table_id="t1", game_no=1))
    assert no_settlement.value.reason == "SETTLEMENT_NOT_FOUND"
