"""Wire the bot: the use case with its metrics recorder, behind the gRPC server."""

from __future__ import annotations

from masa_platform.metrics import GrpcMetrics
from masa_platform.plugins import load_game_plugins
from masa_platform.quotas import caller_quotas
from masa_platform.server import GrpcServer, create_server, standard_interceptors
from prometheus_client import REGISTRY, CollectorRegistry

from masa_bot.adapters.grpc_api import BotServicer, auth_policy, registration
from masa_bot.adapters.metrics import PrometheusRecorder
from masa_bot.app import DecideUseCase
from masa_bot.settings import BotSettings

__all__ = ["bootstrap"]


def bootstrap(settings: BotSettings, registry: CollectorRegistry = REGISTRY) -> GrpcServer:
    """A bound, not yet started server; tests pass their own ``registry``."""
    platform = settings.platform
    load_game_plugins(platform.game_plugins)
    use_case = DecideUseCase(
        PrometheusRecorder(registry),
        default_budget_seconds=settings.decide_budget_seconds,
        search_budget_seconds=settings.search_budget_seconds,
        search_slots=settings.search_slots,
        workers=settings.decide_workers,
    )
    return create_server(
        platform.server,
        [registration(BotServicer(use_case))],
        tls=platform.tls,
        interceptors=standard_interceptors(
            platform.auth,
            policy=auth_policy(),
            metrics=GrpcMetrics(registry),
            quotas=caller_quotas(platform.server.quotas, registry),
        ),
    )
