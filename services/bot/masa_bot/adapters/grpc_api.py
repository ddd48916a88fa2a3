"""``masa.bot.v1.BotService`` over gRPC: protobuf in, domain decision, protobuf out.

The observation's seat view is turned into an engine state by ``masa_wire`` (the one
conversion of the system), so the bot reads exactly what the seat may know (P-20). The
history is not needed: every rule a decision depends on is in the view.
"""

from __future__ import annotations

import os
from typing import Final

import grpc
from masa.bot.v1 import bot_pb2, bot_pb2_grpc
from masa_platform.auth import AuthPolicy, Role
from masa_platform.errors import BadRequest, PreconditionFailed
from masa_platform.server import ServiceRegistration
from masa_rules.table_config import BotLevel, bot_levels
from masa_wire import WireError
from masa_wire.games import view_game_name, wire_for
from masa_wire.table_config import bot_level_from_proto

from masa_bot.app import DecideUseCase, Job
from masa_bot.domain import NothingToDecide
from masa_bot.domain.games import decider_for

__all__ = ["SERVICE_NAME", "BotServicer", "auth_policy", "registration"]

SERVICE_NAME: Final = "masa.bot.v1.BotService"


def auth_policy() -> AuthPolicy:
    """Decide is the table-engine's: it asks for its bot seats' and autopilot's moves, and no one
    else may (a view holds a seat's hand)."""
    return AuthPolicy(allowed={SERVICE_NAME: frozenset({Role.TABLE_ENGINE})})


class BotServicer(bot_pb2_grpc.BotServiceServicer):
    """Stateless: every call decides from its own request only."""

    def __init__(self, use_case: DecideUseCase) -> None:
        self._use_case = use_case

    async def Decide(  # noqa: N802 - the generated servicer names the method
        self,
        request: bot_pb2.DecideRequest,
        context: grpc.aio.ServicerContext[bot_pb2.DecideRequest, bot_pb2.DecideResponse],
    ) -> bot_pb2.DecideResponse:
        observation = request.observation
        # 0 asks the bot to pick a seed; a fixed one makes the decision replayable.
        seed = request.seed.to_bytes(8, "big") if request.seed else os.urandom(8)
        budget = request.time_budget.ToTimedelta().total_seconds()
        try:
            level = bot_level_from_proto(request.level)
            game, job = _job(observation, seed, level)
            decision = await self._use_case.decide(game, level, job, budget_seconds=budget)
            action = wire_for(game).action_to_proto(decision.action)
        except WireError as error:
            raise BadRequest(error.message, reason=error.reason) from error
        except NothingToDecide as error:
            raise PreconditionFailed(str(error), reason="NOTHING_TO_DECIDE") from error
        return bot_pb2.DecideResponse(action=action, explanation=decision.explanation)


def _job(observation: bot_pb2.Observation, seed: bytes, level: BotLevel) -> tuple[str, Job]:
    """The game's name (a metric label) and the decision to make: the game's registered
    decider (``masa_bot.domain.games``) on the state its wire rebuilds from the observation."""
    view = observation.view
    game = view_game_name(view.table)
    decide = decider_for(game)
    if decide is None:
        raise BadRequest(f"the bot plays no {game[:32] or 'unnamed game'} (P-2)", reason="P-2")
    if level not in bot_levels(game):
        raise BadRequest(f"the bot plays {game} at no {level.value} level (P-2)", reason="P-2")
    state = wire_for(game).state_from_observation(observation)
    return game, Job(decide, state, view.seat, seed)


def registration(servicer: BotServicer) -> ServiceRegistration:
    return ServiceRegistration(
        SERVICE_NAME, lambda server: bot_pb2_grpc.add_BotServiceServicer_to_server(servicer, server)
    )
