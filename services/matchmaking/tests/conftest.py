"""Fixtures of the matchmaking tests: a real nats-server per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from masa_platform.testing import NatsServer


@pytest.fixture(scope="module")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    with NatsServer(tmp_path_factory.mktemp("nats")) as server:
        yield server
