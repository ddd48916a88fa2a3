"""Fixtures of the matchmaking tests: a real nats-server per module, with the masa users, so
that matchmaking runs with exactly the permissions of its own NATS user."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from masa_platform.testing import NatsServer


@pytest.fixture(scope="module")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    with NatsServer(tmp_path_factory.mktemp("nats"), secure=True) as server:
        yield server
