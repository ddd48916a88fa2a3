"""Wire the gateway: channels to the services, the calls, the web client's files, development
tokens and health, behind one ASGI application."""

from __future__ import annotations

from dataclasses import dataclass

from masa_platform.auth import TokenSigner
from masa_platform.keys import ISSUER, load_signing_key
from prometheus_client import REGISTRY, CollectorRegistry

from masa_web_gateway.api import routes
from masa_web_gateway.dev_tokens import DevTokens
from masa_web_gateway.health import Health
from masa_web_gateway.metrics import GatewayMetrics
from masa_web_gateway.rpc import rpc_application
from masa_web_gateway.settings import GatewaySettings
from masa_web_gateway.static import load_assets
from masa_web_gateway.upstreams import Upstreams
from masa_web_gateway.web import Gateway

__all__ = ["Wired", "bootstrap"]


@dataclass(frozen=True, slots=True)
class Wired:
    app: Gateway
    health: Health
    upstreams: Upstreams


def bootstrap(settings: GatewaySettings, registry: CollectorRegistry = REGISTRY) -> Wired:
    """The application and what its owner starts and stops; tests pass their own registry."""
    platform = settings.platform
    metrics = GatewayMetrics(registry)
    upstreams = Upstreams(
        matchmaking=settings.matchmaking_address,
        ledger=settings.ledger_address,
        tables=settings.table_addresses,
        tls=platform.tls,
        max_message_bytes=platform.server.max_message_bytes,
        table_pattern=settings.table_address_pattern,
    )
    health = Health(
        upstreams.channels,
        required=(settings.matchmaking_address, settings.ledger_address),
        tables=upstreams.tables,
        metrics=metrics,
    )
    tokens = None
    if settings.dev_issuer_key_file is not None:
        signer = TokenSigner(load_signing_key(settings.dev_issuer_key_file, ISSUER), platform.auth)
        tokens = DevTokens(signer, rate=settings.dev_token_rate)
    app = Gateway(
        rpc_application(
            routes(),
            upstreams,
            metrics,
            call_timeout_seconds=settings.call_timeout_seconds,
            max_request_bytes=settings.max_request_bytes,
            max_streams=settings.max_streams,
        ),
        health=health,
        metrics=metrics,
        static=load_assets(settings.web_root) if settings.web_root is not None else None,
        tokens=tokens,
        cors_origins=settings.cors_origins,
    )
    return Wired(app, health, upstreams)
