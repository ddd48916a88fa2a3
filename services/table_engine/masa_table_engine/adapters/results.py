"""The results of a table's entry, as the ledger and matchmaking read them (events.v1
``TableResult``), with their ids: one conversion for every result store, so that the bus and
the in-memory store name a hand's result alike."""

from __future__ import annotations

from typing import Final

from masa.events.v1 import result_pb2
from masa_wire.table_config import config_to_proto, payout_to_proto

from masa_table_engine.adapters.convert import game_finished_to_proto, timestamp, update_for
from masa_table_engine.domain.model import AbandonReason, Entry, GameAbandoned, GameFinished
from masa_table_engine.domain.table import Table

__all__ = ["result_event_id", "table_results"]

# GameAbandoned.reason in words, for the ledger's records.
_ABANDONED_BECAUSE: Final = {
    AbandonReason.VOIDED: "voided by an operator",
    AbandonReason.UNRECOVERABLE: "the table's state could not be rebuilt on takeover",
}


def table_results(table: Table, entry: Entry) -> list[result_pb2.TableResult]:
    """The results ``entry`` makes public, in the order they are published: each hand ended,
    the game finished or abandoned. Every result store names them by these ids."""
    config = table.config
    game = config_to_proto(config)
    player_ids = [seat.player_id for seat in config.seats]
    results: list[result_pb2.TableResult] = []
    for event in update_for(entry, None).events:
        if event.WhichOneof("kind") != "hand_finished":
            continue
        hand = event.hand_finished
        results.append(
            result_pb2.TableResult(
                hand_finished=result_pb2.HandFinished(
                    event_id=f"{table.table_id}:1:hand:{hand.hand_no}",
                    occurred_at=timestamp(entry.at),
                    table_id=table.table_id,
                    game_no=1,
                    game=game.game,
                    game_name=game.game_name,
                    preset=game.preset,
                    hand=hand,
                    player_ids=player_ids,
                )
            )
        )
    for finished in entry.events:
        if not isinstance(finished, GameFinished):
            continue
        results.append(
            result_pb2.TableResult(
                game_finished=result_pb2.GameFinished(
                    event_id=f"{table.table_id}:{finished.game_no}:game",
                    occurred_at=timestamp(entry.at),
                    table_id=table.table_id,
                    game_no=finished.game_no,
                    game=game.game,
                    game_name=game.game_name,
                    preset=game.preset,
                    mode=game.mode,
                    stake=config.stake,
                    ranking=game_finished_to_proto(finished).ranking,
                    hands_played=finished.hands_played,
                    lobby_id=config.lobby_id,
                    started_at=timestamp(table.created_at),
                    payout=payout_to_proto(config.payout),
                )
            )
        )
    for abandoned in entry.events:
        if not isinstance(abandoned, GameAbandoned):
            continue
        results.append(
            result_pb2.TableResult(
                game_abandoned=result_pb2.GameAbandoned(
                    event_id=f"{table.table_id}:{abandoned.game_no}:abandoned",
                    occurred_at=timestamp(entry.at),
                    table_id=table.table_id,
                    game_no=abandoned.game_no,
                    hold_ids=[seat.hold_id for seat in config.seats if seat.hold_id],
                    reason=_ABANDONED_BECAUSE[abandoned.reason],
                )
            )
        )
    return results


def result_event_id(result: result_pb2.TableResult) -> str:
    return str(getattr(result, result.WhichOneof("result") or "").event_id)
