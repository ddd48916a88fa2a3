"""51 tables over real gRPC and a real nats-server: bot games of every preset and in team mode,
a human seat with an illegal move, hidden information on the wire (P-20), the F-80 query
window timing out as GIVE, and the turn timer, autopilot and seat protection (P-10..P-12)."""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable

import grpc
import grpc.aio
import pytest
from engine_support import (
    PRESETS as _PRESETS,
)
from engine_support import (
    create_table,
    fiftyone_config,
    game_finished,
    get_view,
    log_entries,
    metadata,
    results,
    running_node,
    seat,
    settings,
    table_stub,
    wait_until,
)
from masa.common.v1 import card_pb2, game_pb2
from masa.table.v1 import action_pb2, table_pb2, table_pb2_grpc, view_pb2
from masa_platform.errors import rpc_error_info
from masa_platform.testing import NatsServer
from masa_rules.fiftyone import Action, Discard, Draw, State, legal_actions
from masa_rules.fiftyone.policies import greedy_policy
from masa_rules.shuffle import DrawStream
from masa_table_engine.adapters.convert import input_from_log
from masa_table_engine.domain.table import TimerPolicy, replay
from masa_wire.cards import card_from_proto
from masa_wire.fiftyone import action_to_proto, state_from_seat_view

Chooser = Callable[[State, int], Action | None]


async def _finished(server: NatsServer, table_id: str) -> bool:
    return await game_finished(server, table_id) is not None


@pytest.mark.parametrize(
    ("preset", "players", "hands"), [("classic", 4, 1), ("salon", 4, 2), ("remi", 3, 1)]
)
async def test_a_bot_only_51_game_of_each_preset_finishes_with_game_finished_in_jetstream(
    nats_server: NatsServer, preset: str, players: int, hands: int
) -> None:
    """F-90..F-97: HandFinished after every hand, then GameFinished with the ranking."""
    async with (
        running_node(settings(nats_server, f"bots-51-{preset}")) as node,
        table_stub(node.address) as stub,
    ):
        config = fiftyone_config(preset, [seat(s) for s in range(players)], hands=hands)
        table_id = await create_table(stub, config)
        await wait_until(lambda: _finished(nats_server, table_id), what="GameFinished")
        published = await results(nats_server, table_id)
        kinds = [r.WhichOneof("result") for r in published]
        assert kinds[-1] == "game_finished" and kinds.count("game_finished") == 1
        hand_results = [r.hand_finished for r in published if r.HasField("hand_finished")]
        assert hand_results and all(h.preset == _PRESETS[preset] for h in hand_results)
        last = hand_results[-1].hand
        finished = published[-1].game_finished
        assert finished.hands_played == hands
        assert sorted(s.seat for s in finished.ranking) == list(range(players))
        # F-97: the ranking is by total, lowest first; ties share a place (1, 1, 3).
        totals = {score.seat: score.total for score in last.scores}
        for standing in finished.ranking:
            assert standing.total == totals[standing.seat]
            assert standing.place == 1 + sum(t < standing.total for t in totals.values())
        if preset == "salon":
            assert last.elimination_limit == 111 + 10 * (hands - 1)
        for hand in hand_results:
            assert len(hand.hand.seed) == 32
            assert hand.hand.shuffle_algorithm


async def test_a_team_game_ranks_partners_together(nats_server: NatsServer) -> None:
    """F-2, F-93, P-1: seats 0+2 and 1+3 are partners and share their place."""
    async with (
        running_node(settings(nats_server, "bots-51-teams")) as node,
        table_stub(node.address) as stub,
    ):
        config = fiftyone_config("salon", [seat(s) for s in range(4)], hands=2, teams=True)
        table_id = await create_table(stub, config)
        await wait_until(lambda: _finished(nats_server, table_id), what="GameFinished")
        finished = await game_finished(nats_server, table_id)
        assert finished is not None and finished.mode == game_pb2.MODE_TEAMS
        by_seat = {s.seat: s for s in finished.ranking}
        assert by_seat[0].place == by_seat[2].place and by_seat[1].place == by_seat[3].place
        # F-97: teams rank by their partners' sum, and two equal sums share a place.
        team_sums = [by_seat[0].total + by_seat[2].total, by_seat[1].total + by_seat[3].total]
        leader = 0 if team_sums[0] <= team_sums[1] else 1
        assert by_seat[leader].place == 1
        assert (by_seat[0].place == by_seat[1].place) == (team_sums[0] == team_sums[1])
        assert {s.team for s in finished.ranking if s.seat in (0, 2)} == {0}
        assert {s.team for s in finished.ranking if s.seat in (1, 3)} == {1}
        # architecture.md: the log alone rebuilds the table, as a restarted node replays it.
        entries = await log_entries(nats_server, table_id)
        inputs = [input_from_log(entry, 30.0) for entry in entries]
        times = [entry.occurred_at.ToNanoseconds() / 1e9 for entry in entries]
        replayed = replay(inputs, times, TimerPolicy())
        assert replayed.finished and replayed.sequence == len(entries)
        assert [(s.seat, s.place, s.total) for s in replayed.ranking] == [
            (s.seat, s.place, s.total) for s in finished.ranking
        ]


async def _status(error: grpc.aio.AioRpcError) -> tuple[grpc.StatusCode, str]:
    info = rpc_error_info(error)
    return error.code(), info.reason if info is not None else ""


async def _play(
    stub: table_pb2_grpc.TableServiceAsyncStub,
    table_id: str,
    player: str,
    own: int,
    choose: Chooser,
    *,
    on_turn: Callable[[view_pb2.SeatView], Awaitable[None]] | None = None,
) -> list[table_pb2.WatchTableResponse]:
    """Watch as ``player`` and play ``own`` seat with ``choose`` until the game finishes."""
    received: list[table_pb2.WatchTableResponse] = []
    watch = stub.WatchTable(
        table_pb2.WatchTableRequest(table_id=table_id), metadata=metadata(player)
    )
    async for message in watch:
        received.append(message)
        if message.WhichOneof("payload") == "update" and any(
            e.WhichOneof("kind") == "game_finished" for e in message.update.events
        ):
            break
        view = (await get_view(stub, table_id, player)).seat_view
        table = view.table
        if not table.HasField("turn_seat") or table.turn_seat != own:
            continue
        if table.turn_phase == view_pb2.TURN_PHASE_QUERY:
            continue
        if on_turn is not None:
            await on_turn(view)
        action = choose(state_from_seat_view(view), own)
        if action is None:
            continue
        try:
            await stub.SubmitAction(
                table_pb2.SubmitActionRequest(
                    request_id=f"{player}-{table_id}-{table.table.sequence}",
                    table_id=table_id,
                    expected_sequence=table.table.sequence,
                    action=action_to_proto(action),
                ),
                metadata=metadata(player),
            )
        except grpc.aio.AioRpcError as error:
            # The view may be one update old; the next update brings a fresh one.
            if error.code() != grpc.StatusCode.ABORTED:
                raise
    return received


def _greedy(rng: DrawStream) -> Chooser:
    def choose(state: State, own: int) -> Action | None:
        return greedy_policy(state, own, rng) if legal_actions(state, own) else None

    return choose


def _draw_and_discard(state: State, own: int) -> Action | None:
    """A player who only draws and discards: never opens, takes or answers a query."""
    actions = legal_actions(state, own)
    for action in actions:
        if isinstance(action, Draw):
            return action
    discards = [a for a in actions if isinstance(a, Discard) and a.twin is None]
    return discards[0] if discards else (actions[0] if actions else None)


def _cards(cards: list[card_pb2.Card]) -> set[tuple[int, int]]:
    return {(card_from_proto(c).face_index, c.copy) for c in cards}


async def test_a_human_51_seat_plays_through_grpc_and_never_sees_hidden_cards(
    nats_server: NatsServer,
) -> None:
    """F-21, F-22, P-20: draw, meld and discard over gRPC; an illegal move changes nothing;
    the seat and a spectator never receive another seat's cards, the stock or an early seed."""
    async with (
        running_node(settings(nats_server, "human-51")) as node,
        table_stub(node.address) as stub,
    ):
        config = fiftyone_config("classic", [seat(0, "ayse"), seat(1), seat(2), seat(3)])
        table_id = await create_table(stub, config)
        spectator = stub.WatchTable(
            table_pb2.WatchTableRequest(table_id=table_id), metadata=metadata("kibitzer")
        )
        refused: list[tuple[grpc.StatusCode, str, bool]] = []

        async def illegal_once(view: view_pb2.SeatView) -> None:
            if refused or view.table.turn_phase != view_pb2.TURN_PHASE_DRAW:
                return
            # F-21: a discard before taking a card is refused with the rule id.
            discard = action_pb2.Action(discard=action_pb2.Discard(card=view.hand[0]))
            sequence = view.table.table.sequence
            with pytest.raises(grpc.aio.AioRpcError) as error:
                await stub.SubmitAction(
                    table_pb2.SubmitActionRequest(
                        request_id="illegal",
                        table_id=table_id,
                        expected_sequence=sequence,
                        action=discard,
                    ),
                    metadata=metadata("ayse"),
                )
            code, reason = await _status(error.value)
            after = (await get_view(stub, table_id, "ayse")).seat_view
            unchanged = after.table.table.sequence == sequence and list(after.hand) == list(
                view.hand
            )
            refused.append((code, reason, unchanged))

        received = await _play(
            stub, table_id, "ayse", 0, _greedy(DrawStream(b"5")), on_turn=illegal_once
        )
        watched = [message async for message in spectator]
        assert refused == [(grpc.StatusCode.FAILED_PRECONDITION, "F-21", True)]
        kinds = {e.WhichOneof("kind") for m in received for e in m.update.events}
        # The deal came before the watch, so the stream opens with the seat's view of it.
        assert received[0].WhichOneof("payload") == "seat_view"
        assert {"drew", "discarded", "hand_finished", "game_finished"} <= kinds
        own = await _own_cards(nats_server, table_id, 0)
        _assert_hidden(received, own_seat=0, own_cards=own)
        _assert_hidden(watched, own_seat=None, own_cards=set())
        assert watched[0].WhichOneof("payload") == "spectator_view"


async def _own_cards(server: NatsServer, table_id: str, own: int) -> set[tuple[int, int]]:
    """Every card that was ever in ``own``'s hand, read from the log (which holds all)."""
    cards: set[tuple[int, int]] = set()
    for entry in await log_entries(server, table_id):
        for event in entry.events:
            kind = event.WhichOneof("kind")
            if kind == "drew" and event.drew.seat == own:
                cards |= _cards([event.drew.card])
            elif kind == "took_discard" and event.took_discard.seat == own:
                cards |= _cards([event.took_discard.card])
            elif kind == "hand_finished":
                cards |= _cards(list(event.hand_finished.scores[own].remaining))
    for entry in await log_entries(server, table_id):
        for event in entry.events:
            if event.WhichOneof("kind") == "hand_dealt":
                # The log records the deal for no seat; the dealt hand is in the seat's stream.
                assert not event.hand_dealt.hand
    return cards


def _assert_hidden(
    messages: list[table_pb2.WatchTableResponse],
    own_seat: int | None,
    own_cards: set[tuple[int, int]],
) -> None:
    """P-20 on every message one receiver got; ``own_cards`` are the cards its own hand held."""
    commitments: list[bytes] = []
    dealt: set[tuple[int, int]] = set()
    for message in messages:
        payload = message.WhichOneof("payload")
        if payload == "spectator_view":
            assert own_seat is None
            commitments.append(message.spectator_view.seed_commitment)
            continue
        if payload == "seat_view":
            assert message.seat_view.seat == own_seat
            dealt |= _cards(list(message.seat_view.hand))
            commitments.append(message.seat_view.table.seed_commitment)
            continue
        for event in message.update.events:
            kind = event.WhichOneof("kind")
            if kind == "hand_dealt":
                assert bool(event.hand_dealt.hand) == (own_seat is not None)
                assert len(event.hand_dealt.hand) == event.hand_dealt.card_counts[
                    own_seat or 0
                ] or (own_seat is None)
                dealt |= _cards(list(event.hand_dealt.hand))
                commitments.append(event.hand_dealt.seed_commitment)
            elif kind == "drew":
                assert event.drew.HasField("card") == (event.drew.seat == own_seat)
            elif kind == "hand_finished":
                # F-5: the seed is revealed only now, and it matches the commitment.
                seed = event.hand_finished.seed
                assert hashlib.sha256(seed).digest() in commitments
    if own_seat is not None:
        drawn = {
            (card_from_proto(e.drew.card).face_index, e.drew.card.copy)
            for m in messages
            if m.WhichOneof("payload") == "update"
            for e in m.update.events
            if e.WhichOneof("kind") == "drew" and e.drew.HasField("card")
        }
        assert drawn <= own_cards
        assert dealt


async def test_an_unanswered_51_query_gives_when_the_short_window_closes(
    nats_server: NatsServer,
) -> None:
    """F-80: an asked human who does not answer within query_seconds gives the card."""
    async with (
        running_node(settings(nats_server, "query-51", query_seconds=0.3)) as node,
        table_stub(node.address) as stub,
    ):
        for _attempt in range(4):
            config = fiftyone_config("salon", [seat(0, "ayse"), seat(1), seat(2), seat(3)], hands=3)
            table_id = await create_table(stub, config)
            received = await _play(stub, table_id, "ayse", 0, _draw_and_discard)
            updates = [m.update for m in received if m.WhichOneof("payload") == "update"]
            asked = [
                (u, e.query_started)
                for u in updates
                for e in u.events
                if e.WhichOneof("kind") == "query_started" and 0 in e.query_started.asked_seats
            ]
            if asked:
                break
        else:
            pytest.fail("no query asked the human seat in four salon games")
        started_update, started = asked[0]
        answers = [
            (u, e.query_answered)
            for u in updates
            for e in u.events
            if e.WhichOneof("kind") == "query_answered"
            and e.query_answered.query_id == started.query_id
            and e.query_answered.seat == 0
        ]
        answer_update, answer = answers[0]
        assert answer.timed_out and answer.answer == action_pb2.QUERY_ANSWER_GIVE
        waited = (
            answer_update.occurred_at.ToNanoseconds() - started_update.occurred_at.ToNanoseconds()
        ) / 1e9
        assert 0.3 <= waited < 5.0
        window = started.deadline.ToNanoseconds() - started_update.occurred_at.ToNanoseconds()
        assert abs(window - 300_000_000) < 1_000
        ended = [
            e.query_ended for e in answer_update.events if e.WhichOneof("kind") == "query_ended"
        ]
        assert ended and 0 not in ended[0].refused_seats
        assert await game_finished(nats_server, table_id) is not None


async def test_a_silent_51_player_times_out_into_the_autopilot_forfeits_and_ends_the_table(
    nats_server: NatsServer,
) -> None:
    """P-10..P-12: turns time out, the autopilot plays whole 51 turns, and the seat forfeits;
    it was the only player, so the game ends at once, finished with the forfeit ranked last,
    instead of bots playing on alone."""
    engine = settings(nats_server, "silent-51", seat_protection_seconds=0.25)
    async with running_node(engine) as node, table_stub(node.address) as stub:
        config = fiftyone_config("classic", [seat(0, "ayse"), seat(1)], turn_seconds=0.1, hands=3)
        table_id = await create_table(stub, config)

        async def finished() -> bool:
            return await game_finished(nats_server, table_id) is not None

        await wait_until(finished, what="GameFinished")
        result = await game_finished(nats_server, table_id)
        assert result is not None
        assert [(s.seat, s.forfeited) for s in result.ranking] == [(1, False), (0, True)]
        assert not any(
            r.WhichOneof("result") == "game_abandoned" for r in await results(nats_server, table_id)
        )
        kinds = [
            e.WhichOneof("kind")
            for entry in await log_entries(nats_server, table_id)
            for e in entry.events
        ]
        assert "turn_timed_out" in kinds and "seat_forfeited" in kinds
        assert "autopilot_changed" in kinds
        assert kinds[-1] == "game_finished"
