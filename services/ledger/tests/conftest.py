"""Fixtures of the ledger tests: a store on every backend (see ledger_support)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from ledger_support import BACKENDS, database_url, open_store
from masa_ledger.adapters.sql import SqlStore
from masa_platform.testing import NatsServer


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SqlStore]:
    async with open_store(request.param, tmp_path) as opened:
        yield opened


@pytest.fixture
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    # With the masa users: the ledger connects as its own, with only its subjects. One per
    # test: the ledger's durable consumer is the one the bus plan provisions, so a test must
    # not find results another test left on it.
    with NatsServer(tmp_path_factory.mktemp("nats"), secure=True) as server:
        yield server


@pytest.fixture(params=BACKENDS)
async def database(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A MASA_DATABASE_URL for a whole ledger service, on every backend."""
    async with database_url(request.param, tmp_path) as url:
        yield url


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)
