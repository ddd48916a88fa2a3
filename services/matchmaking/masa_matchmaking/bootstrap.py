"""Wire matchmaking: NATS and its buckets, the ledger and the engines, the use cases, gRPC and
the background tasks.

:func:`start_matchmaking` is what ``python -m masa_matchmaking`` runs and what integration
tests start in-process; a test hands its own ledger, engines or node registry through
:class:`Overrides`. The tasks: the lobby leases and rounds, the results consumer (ratings and
tables in play), the pruning of the ticket mirror, and a health probe that reports
NOT_SERVING while NATS is unreachable or the ticket mirror is not current.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from dataclasses import dataclass, field
from importlib.resources import files
from typing import Final, Protocol

from masa_platform import tracing
from masa_platform.acks import AckedPublisher
from masa_platform.auth import Role, ServiceTokens, TokenSigner
from masa_platform.bus import connect
from masa_platform.keys import KeyFileError, load_signing_key
from masa_platform.lifecycle import Lifecycle
from masa_platform.loops import supervise
from masa_platform.metrics import ConsumerMetrics, GrpcMetrics, LoopMetrics
from masa_platform.page_tokens import PageTokens
from masa_platform.plugins import load_game_plugins
from masa_platform.quotas import caller_quotas
from masa_platform.server import GrpcServer, create_server, standard_interceptors
from masa_platform.settings import SettingsError
from masa_platform.signing import ResultVerifier
from masa_platform.tls import open_channel
from nats.aio.client import Client
from prometheus_client import REGISTRY, CollectorRegistry

from masa_matchmaking.adapters.engines import GrpcEngines, KvEngineNodes
from masa_matchmaking.adapters.events import JetStreamEvents
from masa_matchmaking.adapters.grpc_api import MatchmakingServicer, auth_policy, registration
from masa_matchmaking.adapters.kv_store import KvLeaseStore, KvRatingStore, KvTicketStore
from masa_matchmaking.adapters.ledger_client import GrpcLedger
from masa_matchmaking.adapters.metrics import PrometheusMetrics
from masa_matchmaking.adapters.results import KvLiveTables, ResultsConsumer
from masa_matchmaking.app.matcher import MatcherSettings, Matchmaker
from masa_matchmaking.app.placement import PlacementSettings, Placer
from masa_matchmaking.app.ports import EngineNodes, Engines, Ledger, Unreachable
from masa_matchmaking.app.ratings import Ratings
from masa_matchmaking.app.tickets import TicketDesk
from masa_matchmaking.domain.catalog import parse_lobbies
from masa_matchmaking.domain.errors import InvalidLobby
from masa_matchmaking.domain.lobby import Lobby
from masa_matchmaking.settings import MatchmakingSettings

__all__ = ["MatchmakingService", "Overrides", "load_lobbies", "start_matchmaking"]

_log = logging.getLogger(__name__)
_PROBE_SECONDS: Final = 2.0
_PRUNE_SECONDS: Final = 60.0
_MIRROR_READY_SECONDS: Final = 30.0
# How long the tasks have to end on their own once stopping is set, before they are cancelled.
_TASK_PATIENCE_SECONDS: Final = 10.0


def load_lobbies(settings: MatchmakingSettings) -> tuple[Lobby, ...]:
    """The lobbies of MASA_LOBBIES_FILE, else the shipped set; a bad file stops the start."""
    if settings.lobbies_file is None:
        text = (files("masa_matchmaking") / "lobbies.toml").read_text()
    else:
        try:
            text = settings.lobbies_file.read_text()
        except OSError as error:
            raise SettingsError(f"MASA_LOBBIES_FILE: {error}") from None
    try:
        lobbies = parse_lobbies(text)
    except InvalidLobby as error:
        raise SettingsError(f"MASA_LOBBIES_FILE: {error} ({error.rule})") from None
    if any(lobby.chips for lobby in lobbies) and not settings.ledger_address:
        raise SettingsError("chip lobbies need the ledger: set MASA_LEDGER_ADDRESS")
    return lobbies


class _Closable(Protocol):
    async def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Overrides:
    """Ports a test provides instead of the real ones."""

    ledger: Ledger | None = None
    engines: Engines | None = None
    nodes: EngineNodes | None = None


@dataclass(slots=True)
class MatchmakingService:
    """A running instance; :meth:`stop` shuts it down in order (its :class:`Lifecycle`)."""

    settings: MatchmakingSettings
    server: GrpcServer
    nats: Client
    matchmaker: Matchmaker
    tickets: KvTicketStore
    lifecycle: Lifecycle
    closers: list[_Closable] = field(default_factory=list)

    @property
    def address(self) -> str:
        return self.server.address

    @property
    def stopping(self) -> asyncio.Event:
        return self.lifecycle.stopping

    @property
    def tasks(self) -> tuple[asyncio.Task[None], ...]:
        return self.lifecycle.tasks

    async def stop(self, grace_seconds: float | None = None) -> None:
        """Stop serving (calls in flight have ``grace_seconds``), let the tasks end (the
        matchmaker gives its leases up as it ends), close the stores and clients, drain NATS."""
        await self.lifecycle.stop(grace_seconds)


def _result_verifier(settings: MatchmakingSettings) -> ResultVerifier:
    """The engines' results keys: ratings move only on results they verify."""
    path = settings.result_keys_file
    if path is None:
        raise SettingsError(
            "MASA_RESULT_KEYS_FILE is unset: matchmaking rates no unverified result"
        )
    try:
        return ResultVerifier(path)
    except KeyFileError as error:
        raise SettingsError(f"MASA_RESULT_KEYS_FILE: {error}") from None


def _service_tokens(settings: MatchmakingSettings) -> ServiceTokens:
    """Matchmaking's own token for the ledger and the engines, signed with its identity key."""
    auth = settings.platform.auth
    if auth.jwt_key_file is None:
        raise SettingsError(
            "MASA_JWT_KEY_FILE is unset: matchmaking needs its identity key to call the ledger "
            "and the table-engines"
        )
    return ServiceTokens(
        TokenSigner(load_signing_key(auth.jwt_key_file, Role.MATCHMAKING.value), auth)
    )


def _clients(
    settings: MatchmakingSettings, given: Overrides, closers: list[_Closable]
) -> tuple[Ledger | None, Engines]:
    """The ledger (none without an address) and the table-engines, unless ``given``; the gRPC
    clients made here join ``closers``."""
    platform = settings.platform
    ledger: Ledger | None = given.ledger
    if ledger is None and settings.ledger_address:
        grpc_ledger = GrpcLedger(
            open_channel(settings.ledger_address, platform.tls),
            _service_tokens(settings),
            timeout_seconds=settings.ledger_timeout_seconds,
        )
        closers.append(grpc_ledger)
        ledger = grpc_ledger
    engines: Engines | None = given.engines
    if engines is None:
        grpc_engines = GrpcEngines(
            _service_tokens(settings),
            lambda address: open_channel(address, platform.tls),
            timeout_seconds=settings.engine_timeout_seconds,
        )
        closers.append(grpc_engines)
        engines = grpc_engines
    return ledger, engines


async def _followed_stores(
    nc: Client, publisher: AckedPublisher
) -> tuple[KvTicketStore, KvLiveTables]:
    """The two stores every instance mirrors, their watches started."""
    tickets = await KvTicketStore.open(nc, publisher)
    tickets.start()
    live_tables = await KvLiveTables.open(nc)
    live_tables.start()
    return tickets, live_tables


async def start_matchmaking(
    settings: MatchmakingSettings,
    registry: CollectorRegistry = REGISTRY,
    *,
    overrides: Overrides | None = None,
) -> MatchmakingService:
    given = overrides or Overrides()
    platform = settings.platform
    # Before the lobbies, which may be of a plugin's game.
    load_game_plugins(platform.game_plugins)
    lobbies = load_lobbies(settings)
    instance = settings.instance
    life = Lifecycle(platform.service_name, task_patience_seconds=_TASK_PATIENCE_SECONDS)
    async with life:
        service = await _start(settings, registry, given, life, lobbies)
        life.detach()
    _log.info(
        "matchmaking serving",
        extra={"grpc_address": service.address, "instance": instance, "lobbies": len(lobbies)},
    )
    return service


@dataclass(frozen=True, slots=True)
class _Stores:
    """What matchmaking keeps on the bus, and its one ack inbox."""

    tickets: KvTicketStore
    live_tables: KvLiveTables
    ratings: KvRatingStore
    leases: KvLeaseStore
    publisher: AckedPublisher


async def _start(
    settings: MatchmakingSettings,
    registry: CollectorRegistry,
    given: Overrides,
    life: Lifecycle,
    lobbies: tuple[Lobby, ...],
) -> MatchmakingService:
    platform = settings.platform
    verifier = _result_verifier(settings)
    by_id = {lobby.lobby_id: lobby for lobby in lobbies}
    nc = await connect(
        platform.nats_url,
        name=f"matchmaking-{settings.instance}",
        user=platform.nats_user,
        password=platform.nats_password,
    )
    life.closing("nats", nc.drain)
    closers: list[_Closable] = []
    life.closing("stores and clients", functools.partial(_close_all, closers))
    stores = await _stores(nc, settings.instance, closers)
    metrics = PrometheusMetrics(registry, list(by_id))
    events = JetStreamEvents(stores.publisher, stores.live_tables.started)
    matchmaker = _matchmaker(
        settings, given, nc, stores, events=events, metrics=metrics, by_id=by_id, closers=closers
    )
    ratings = Ratings(stores.ratings, events, time.time)
    desk = TicketDesk(
        by_id, stores.tickets, stores.ratings, time.time, trace_parent=tracing.current_traceparent
    )
    server = create_server(
        platform.server,
        [
            registration(
                MatchmakingServicer(
                    lobbies,
                    desk,
                    ratings,
                    queue_length=stores.tickets.open_count,
                    tables_in_play=stores.live_tables.count,
                    page_tokens=PageTokens(settings.page_tokens.key()),
                )
            )
        ],
        tls=platform.tls,
        interceptors=standard_interceptors(
            platform.auth,
            policy=auth_policy(),
            metrics=GrpcMetrics(registry),
            quotas=caller_quotas(platform.server.quotas, registry),
        ),
    )
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stores.tickets.ready.wait(), _MIRROR_READY_SECONDS)
    consumer = ResultsConsumer(
        nc.jetstream(), ratings, stores.live_tables, verifier, metrics=ConsumerMetrics(registry)
    )
    await server.start()
    life.draining("grpc", server.stop)
    await server.set_serving(stores.tickets.ready.is_set())
    _run_loops(life, matchmaker, consumer, server, nc, stores, LoopMetrics(registry))
    return MatchmakingService(settings, server, nc, matchmaker, stores.tickets, life, closers)


async def _stores(nc: Client, instance: str, closers: list[_Closable]) -> _Stores:
    """The stores, opened and (the two every instance mirrors) followed; they join
    ``closers``, the publisher after them, whose last writes may still await their acks."""
    publisher = await AckedPublisher.started(nc, unavailable=Unreachable)
    tickets, live_tables = await _followed_stores(nc, publisher)
    stores = _Stores(
        tickets=tickets,
        live_tables=live_tables,
        ratings=await KvRatingStore.open(nc, publisher),
        leases=await KvLeaseStore.open(nc, holder=instance),
        publisher=publisher,
    )
    closers.extend([tickets, live_tables, publisher])
    return stores


def _matchmaker(  # noqa: PLR0913 - the parts a matchmaker is made of, by name
    settings: MatchmakingSettings,
    given: Overrides,
    nc: Client,
    stores: _Stores,
    *,
    events: JetStreamEvents,
    metrics: PrometheusMetrics,
    by_id: dict[str, Lobby],
    closers: list[_Closable],
) -> Matchmaker:
    """The matcher of every lobby, and the placer it seats its groups by."""
    ledger, engines = _clients(settings, given, closers)
    placer = Placer(
        stores.tickets,
        ledger,
        given.nodes or KvEngineNodes(nc),
        engines,
        events=events,
        metrics=metrics,
        clock=time.time,
        instance_id=settings.instance,
        settings=PlacementSettings(
            hold_ttl_seconds=settings.hold_ttl_seconds,
            max_requeues=settings.max_requeues,
            placement_timeout_seconds=settings.placement_timeout_seconds,
        ),
    )
    return Matchmaker(
        by_id,
        stores.tickets,
        stores.leases,
        placer,
        metrics=metrics,
        clock=time.time,
        settings=MatcherSettings(
            round_seconds=settings.round_seconds,
            lease_ttl_seconds=stores.leases.ttl_seconds,
            backoff_seconds=settings.placement_backoff_seconds,
            backoff_max_seconds=settings.placement_backoff_max_seconds,
        ),
        traced=tracing.continued,
    )


def _run_loops(
    life: Lifecycle,
    matchmaker: Matchmaker,
    consumer: ResultsConsumer,
    server: GrpcServer,
    nc: Client,
    stores: _Stores,
    loops: LoopMetrics,
) -> None:
    """The background loops, each ended by the lifecycle's stop: the matcher, the results
    consumer, the health probe and the pruning of the mirrors."""

    async def probe() -> None:
        await server.set_serving(nc.is_connected and stores.tickets.ready.is_set())

    async def prune() -> None:
        stores.tickets.prune(time.time())
        stores.live_tables.prune()

    stopping = life.stopping
    life.spawn(matchmaker.run(stopping), name="matchmaking-leases")
    life.spawn(consumer.run(stopping), name="matchmaking-results")
    life.spawn(
        supervise(
            "health_probe", probe, interval_seconds=_PROBE_SECONDS, stop=stopping, metrics=loops
        ),
        name="matchmaking-health",
    )
    life.spawn(
        supervise(
            "prune",
            prune,
            interval_seconds=_PRUNE_SECONDS,
            stop=stopping,
            metrics=loops,
            wait_first=True,
        ),
        name="matchmaking-prune",
    )


async def _close_all(closers: list[_Closable]) -> None:
    """Close ``closers`` in order; one that fails does not keep the next open."""
    for closer in closers:
        try:
            await closer.close()
        except Exception:
            _log.warning("closing %r failed", closer, exc_info=True)
