"""Fixtures of the table-engine tests: a real nats-server per module, with the masa users
(each service its own NATS user and permissions, as in make run and the deployment)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from masa_platform.testing import NatsServer


@pytest.fixture(scope="module")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    with NatsServer(tmp_path_factory.mktemp("nats"), secure=True) as server:
        yield server


@pytest.fixture
def nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    """A NATS of its own per test: no table another test left is taken over here."""
    with NatsServer(tmp_path_factory.mktemp("nats"), secure=True) as server:
        yield server
