"""Wire the bot: the use case with its metrics recorder and its search processes, behind the
gRPC server."""

from __future__ import annotations

import logging
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from typing import Final

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

# How long the service waits for its search workers before it serves without them.
_READY_SECONDS: Final = 30.0

_log = logging.getLogger(__name__)


def bootstrap(settings: BotSettings, registry: CollectorRegistry = REGISTRY) -> GrpcServer:
    """A bound, not yet started server; tests pass their own ``registry``."""
    platform = settings.platform
    load_game_plugins(platform.game_plugins)

    def searchers() -> ProcessPoolExecutor:
        # Spawned, not forked: a fork of a process running gRPC's threads is not safe. Each
        # worker loads the game plugins too, so that a plugin's decider can search there. The
        # workers start now rather than on the first hard decision (the server says SERVING
        # once they answer, DecideUseCase.ready).
        pool = ProcessPoolExecutor(
            max_workers=settings.search_slots,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=load_game_plugins,
            initargs=(platform.game_plugins,),
        )
        for _ in range(settings.search_slots):
            pool.submit(bool)
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
    server.before_serving(lambda: _searchers_ready(use_case))
    return server


async def _searchers_ready(use_case: DecideUseCase) -> None:
    if not await use_case.ready(_READY_SECONDS):
        _log.error(
            "search workers not ready; serving, hard plays normal until they are",
            extra={"waited_seconds": _READY_SECONDS},
        )
