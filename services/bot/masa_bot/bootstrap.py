"""Wire the bot: the use case with its metrics recorder and its search processes, behind the
gRPC server."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

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

    def searchers() -> ProcessPoolExecutor:
        # Spawned, not forked: a fork of a process running gRPC's threads is not safe. Each
        # worker loads the game plugins too, so that a plugin's decider can search there. The
        # workers start now rather than on the first hard decision, which would otherwise
        # spend its budget on an interpreter's start.
        pool = ProcessPoolExecutor(
            max_workers=settings.search_slots,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=load_game_plugins,
            initargs=(platform.game_plugins,),
        )
        for _ in range(settings.search_slots):
            pool.submit(_started)
        return pool

    use_case = DecideUseCase(
        PrometheusRecorder(registry),
        default_budget_seconds=settings.decide_budget_seconds,
        searchers=searchers,
        search_slots=settings.search_slots,
        search_budget_seconds=settings.search_budget_seconds,
        workers=settings.decide_workers,
    )
    server = create_server(
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
    server.after_stop(use_case.close)
    return server


def _started() -> bool:
    return True
