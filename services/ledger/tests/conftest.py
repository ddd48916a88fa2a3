"""Fixtures of the ledger tests: a store on every backend (see ledger_support)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from ledger_support import BACKENDS, open_store
from masa_ledger.adapters.sql import SqlStore


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SqlStore]:
    async with open_store(request.param, tmp_path) as opened:
        yield opened
