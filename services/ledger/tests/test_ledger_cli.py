"""``masa-ledger check``: JSON on stdout, exit 0 when every invariant holds, 1 on any
violation, 2 when the database cannot be read (P-31)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from ledger_support import Clock, database_url, execute, hold_for, make_ledger, result
from masa_ledger.adapters.postgres_store import PostgresStore
from masa_ledger.adapters.sql import SqlStore
from masa_ledger.adapters.sqlite_store import SqliteStore
from masa_ledger.domain.model import GameKey
from masa_ledger.settings import sqlite_path


async def _check(url: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "masa_ledger",
        "check",
        "--database-url",
        url,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def _open(url: str) -> SqlStore:
    path = sqlite_path(url)
    if path is not None:
        return await SqliteStore.open(path)
    return await PostgresStore.open(url, max_size=2)


async def test_p31_check_passes_then_finds_a_chip_made_from_nothing(
    tmp_path: Path, backend: str
) -> None:
    async with database_url(backend, tmp_path) as url:
        store = await _open(url)
        try:
            ledger, _ = make_ledger(store, Clock())
            for player in "ab":
                await ledger.grant(f"w-{player}", player, 100, "")
            await hold_for(ledger, "ab", 10, "t1")
            await ledger.bind_holds("t1", 1, 10, ["t1-a", "t1-b"])
            await ledger.settle(
                result(
                    GameKey(table_id="t1", game_no=1),
                    10,
                    [(0, "a", 1, "t1-a"), (1, "b", 2, "t1-b")],
                ),
                from_event=False,
            )
            code, out, _ = await _check(url)
            report = json.loads(out)
            assert code == 0
            assert report["ok"] is True
            assert report["totals"]["chips_issued"] == 200
            assert set(report["checks"]) >= {
                "balances_sum_to_zero",
                "escrow_matches_bound_holds",
                "games_settled_once",
                "holds_posted_or_voided_once",
            }
            # Five chips that no transfer explains.
            await execute(
                store, "UPDATE accounts SET balance = balance + 5 WHERE account_id = 'player:a'"
            )
        finally:
            await store.close()
        code, out, _ = await _check(url)
        report = json.loads(out)
        assert code == 1
        assert report["ok"] is False
        assert report["checks"]["balances_sum_to_zero"]["violations"] == 1
        assert report["checks"]["balances_match_transfers"]["examples"] == ["player:a 115 110"]


@pytest.mark.parametrize("folder_exists", [False, True], ids=["missing-folder", "existing-folder"])
async def test_check_refuses_a_sqlite_file_that_is_not_there_and_does_not_make_it(
    tmp_path: Path, folder_exists: bool
) -> None:
    """P-31: a SQLite file that is not there (a typo, or the wrong folder) exits 2 and says so,
    whether its folder exists or not, and is not made: an empty database would pass every
    check."""
    folder = tmp_path if folder_exists else tmp_path / "nowhere"
    missing = folder / "ledger.sqlite3"
    code, out, err = await _check(f"sqlite:///{missing}")
    assert (code, out) == (2, "")
    assert f"masa-ledger check: cannot open the database: no SQLite database at {missing}" in err
    assert "Traceback" not in err
    assert not missing.exists()
    # Nothing else is made on the way: no journal beside it, and no missing folder.
    if folder_exists:
        assert list(folder.iterdir()) == []
    else:
        assert not folder.exists()


async def test_check_says_when_it_cannot_read_the_database(tmp_path: Path) -> None:
    code, out, err = await _check("postgresql://nobody@127.0.0.1:1/none?connect_timeout=1")
    assert (code, out) == (2, "")
    assert "cannot open the database" in err
    code, _, err = await _check("mysql://elsewhere")
    assert code == 2
    assert "MASA_DATABASE_URL" in err
    # Nor is a file that is not a database read as one.
    other = tmp_path / "notes.txt"
    other.write_text("not a ledger\n" * 100)
    code, out, err = await _check(f"sqlite:///{other}")
    assert (code, out) == (2, "")
    assert "cannot open the database" in err
    assert "Traceback" not in err
    assert other.read_text() == "not a ledger\n" * 100
