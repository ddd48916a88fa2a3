"""The whole local stack for end-to-end tests, started once for the session and shared by the
end-to-end modules (each test makes its own tables): ``make run`` itself, on free ports and on
a PATH without ``uv``, as the README tells a newcomer to start it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from e2e_stack import Stack, launch_stack


@pytest.fixture(scope="session")
def running_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with launch_stack(tmp_path_factory.mktemp("stack")) as started:
        yield started


@pytest.fixture
def stack(running_stack: Stack) -> dict[str, str]:
    """Addresses of the running services by name ("table-engine", "bot", "ledger",
    "matchmaking", "nats"),
    and the run directory under "run_dir"."""
    return {**running_stack.addresses, "run_dir": str(running_stack.run_dir)}
