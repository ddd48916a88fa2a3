"""Fixtures for masa_platform tests: real nats-server, real grpc.aio servers, test certificates."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import grpc
import grpc.aio
import pytest
from masa_platform.server import GrpcServer, create_server, generic_service
from masa_platform.settings import ServerSettings, TlsSettings
from masa_platform.testing import NatsServer
from platform_support import TEST_SERVICE, Certificates, ServeFactory, make_certificates


@pytest.fixture(scope="module")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    with NatsServer(tmp_path_factory.mktemp("nats")) as server:
        yield server


@pytest.fixture
def serve() -> ServeFactory:
    """``async with serve(handlers, ...) as server``: a started server on a free port."""

    @asynccontextmanager
    async def running(
        handlers: Mapping[str, grpc.RpcMethodHandler[Any, Any]],
        *,
        settings: ServerSettings | None = None,
        tls: TlsSettings | None = None,
        interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    ) -> AsyncIterator[GrpcServer]:
        server = create_server(
            settings or ServerSettings(grace_seconds=0.5),
            [generic_service(TEST_SERVICE, handlers)],
            tls=tls,
            interceptors=interceptors,
        )
        await server.start()
        try:
            yield server
        finally:
            await server.stop(0)

    return running


@pytest.fixture(scope="session")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))
