"""How the suite is spread over pytest-xdist workers (``make test`` runs ``pytest -n``).

The suite mostly waits (services starting, NATS, timers, bots), so ``make test`` runs it on
more workers than the machine has cores. A worker is handed whole groups of tests:

- each test of a module in ``ALONE`` (the chaos runs, minutes each) is a group of its own,
  handed out before anything else, so that each runs on a worker of its own from the start
  while the rest of the suite goes by on the others;
- the end-to-end modules (``tests/e2e/test_e2e_*``) that use the session's shared stack
  (``make run``) are two groups (``SECOND_STACK`` the other), so that two workers each start
  a stack once, not every worker, and the modules, several minutes end to end, run in two
  halves at once; those that start what they need themselves (``OWN_STACK``) are groups of
  their own, handed out among the first, so that they run beside the others, not after;
- any other test is grouped with its module, whose module-scoped fixtures (a NATS server, a
  stack of its own) then start once.

Groups are handed out in the order of the items, which the collection hook sorts in that
order (the rest as collected). The groups are read off node ids, which is all the controller
sees of a test; xdist's own ``xdist_group`` marker cannot serve, as pytest 9.2 no longer lets
xdist rename node ids. This scheduler replaces ``--dist load``, the default of ``-n``.

Each worker also gets a range of TCP ports of its own for the servers its tests start
(``MASA_TEST_PORTS``, read by ``masa_platform.testing.free_port``): a port probed free by one
worker is then never bound by another before the server that was meant to have it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadScopeScheduling

ALONE = frozenset({"services/table_engine/tests/test_engine_chaos.py"})
E2E_STACK = "tests/e2e/test_e2e_"
# The shared-stack modules that run on a second worker with a stack of its own (about half of
# the end-to-end time).
SECOND_STACK = frozenset(
    {
        "tests/e2e/test_e2e_masa_play.py",
        "tests/e2e/test_e2e_masa_watch.py",
        "tests/e2e/test_e2e_newcomer.py",
        "tests/e2e/test_e2e_nodes.py",
        "tests/e2e/test_e2e_load.py",
        "tests/e2e/test_e2e_browser.py",
    }
)
# End-to-end modules that never touch the shared stack: a stack, or servers, of their own.
OWN_STACK = frozenset(
    {
        "tests/e2e/test_e2e_matchmaking.py",
        "tests/e2e/test_e2e_traces.py",
        "tests/e2e/test_e2e_bot_requests.py",
        "tests/e2e/test_e2e_engine_capacity.py",
    }
)
# The workers' port ranges lie between this and the kernel's ephemeral ports (bind to port 0,
# outgoing connections), above the machine's usual services.
PORTS_LOW = 10000
EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _group(nodeid: str) -> str:
    module = _module(nodeid)
    if module in ALONE:
        return nodeid
    if module.startswith(E2E_STACK) and module not in OWN_STACK:
        return E2E_STACK + ("2" if module in SECOND_STACK else "1")
    return module


def _rank(nodeid: str) -> int:
    module = _module(nodeid)
    if module in ALONE:
        return 0
    return 1 if module.startswith(E2E_STACK) else 2


class GroupScheduling(LoadScopeScheduling):
    """Whole groups (see the module's docstring) in the order of the collection."""

    def __init__(self, config: pytest.Config, log: Producer | None = None) -> None:
        super().__init__(config, log)
        # The collection is already sorted longest first; xdist would sort by group size.
        config.option.loadscopereorder = False

    def _split_scope(self, nodeid: str) -> str:
        return _group(nodeid)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> GroupScheduling | None:
    return GroupScheduling(config, log) if config.getvalue("dist") == "load" else None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: _rank(item.nodeid))


def pytest_configure(config: pytest.Config) -> None:
    worker = getattr(config, "workerinput", None)
    if worker is None:
        return
    index = int(worker["workerid"].removeprefix("gw"))
    ephemeral = int(EPHEMERAL.read_text().split()[0]) if EPHEMERAL.exists() else 32768
    width = (ephemeral - PORTS_LOW) // int(worker["workercount"])
    low = PORTS_LOW + index * width
    # Inherited by every process a test starts (make run, the services, nats-server).
    os.environ["MASA_TEST_PORTS"] = f"{low}-{low + width - 1}"
