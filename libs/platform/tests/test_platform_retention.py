"""``masa-bus sweep``'s settings, its reading of result subjects and its command line (issue 19).

The sweep over tables a real node played is in services/table_engine/tests/
test_engine_retention.py; here, its settings are range-checked by name, only a well-formed
result subject yields a table id (a purge filter is built from it), and the command, as the
retention user of a real nats-server, prints a JSON document per run, stops on SIGTERM, and
refuses to run on a bus without the result consumers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from masa_platform.bus_access import RETENTION
from masa_platform.bus_cli import OperatorBusSettings, main
from masa_platform.retention import SweepSettings, table_of
from masa_platform.settings import SettingsError, load_settings
from masa_platform.testing import NatsServer

_EMPTY_RUN = {
    "swept": 0,
    "kept_unsettled": 0,
    "kept_set_aside": 0,
    "kept_young": 0,
    "purged_messages": 0,
    "more": False,
    "settled_through": 0,
}


def test_the_sweep_settings_are_read_from_their_variables_with_a_week_by_default() -> None:
    assert load_settings(OperatorBusSettings, {}).sweep == SweepSettings(604_800.0, 10_000)
    settings = load_settings(
        OperatorBusSettings,
        {"MASA_TABLE_RETENTION_SECONDS": "30", "MASA_SWEEP_TABLES_LIMIT": "500"},
    )
    assert settings.sweep == SweepSettings(table_retention_seconds=30.0, sweep_tables_limit=500)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("MASA_TABLE_RETENTION_SECONDS", "0.5"),
        ("MASA_TABLE_RETENTION_SECONDS", "-1"),
        ("MASA_TABLE_RETENTION_SECONDS", "nan"),
        ("MASA_TABLE_RETENTION_SECONDS", "inf"),
        ("MASA_TABLE_RETENTION_SECONDS", "316224001"),
        ("MASA_SWEEP_TABLES_LIMIT", "0"),
        ("MASA_SWEEP_TABLES_LIMIT", "1000001"),
    ],
)
def test_a_sweep_setting_out_of_range_is_refused_by_name(variable: str, value: str) -> None:
    with pytest.raises(SettingsError, match=variable):
        load_settings(OperatorBusSettings, {variable: value})


@pytest.mark.parametrize(
    ("subject", "table_id"),
    [
        ("masa.table.v1.t-1_A.result", "t-1_A"),
        ("masa.table.v1.t1.log", None),
        ("masa.table.v1.*.result", None),
        ("masa.table.v1.>.result", None),
        ("masa.table.v1.a.b.result", None),
        (f"masa.table.v1.{'x' * 65}.result", None),
        ("masa.table.v2.t1.result", None),
        ("", None),
    ],
)
def test_only_a_result_subject_of_a_valid_table_id_names_a_table(
    subject: str, table_id: str | None
) -> None:
    """The id goes into the purge filter masa.table.v1.<id>.>: a wildcard or a dot in it
    would purge other tables."""
    assert table_of(subject) == table_id


def test_the_command_refuses_a_bad_interval_or_setting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sweep", "--every", "0.5"]) == 2
    assert "--every" in capsys.readouterr().err
    monkeypatch.setenv("MASA_TABLE_RETENTION_SECONDS", "0")
    assert main(["sweep"]) == 2
    assert "MASA_TABLE_RETENTION_SECONDS" in capsys.readouterr().err


@pytest.fixture
def secure_bus(tmp_path: Path) -> Iterator[NatsServer]:
    with NatsServer(tmp_path / "nats", secure=True) as server:
        yield server


def _command(server: NatsServer, *args: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "MASA_NATS_URL": server.url,
        "MASA_NATS_USER": RETENTION,
        "MASA_NATS_PASSWORD": server.password(RETENTION),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "masa_platform.bus_cli", "sweep", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_the_periodic_sweep_prints_a_document_a_run_and_stops_on_sigterm(
    secure_bus: NatsServer,
) -> None:
    process = _command(secure_bus, "--every", "1")
    try:
        assert process.stdout is not None
        runs = [json.loads(process.stdout.readline()) for _ in range(2)]
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert runs == [_EMPTY_RUN, _EMPTY_RUN]
    assert all(json.loads(line) == _EMPTY_RUN for line in out.splitlines())


def test_the_sweep_refuses_to_run_without_the_result_consumers(tmp_path: Path) -> None:
    """An unprovisioned bus has no ack floor to go by: nothing is swept, exit 1."""
    with NatsServer(tmp_path / "nats", secure=True, bus=None) as server:
        process = _command(server)
        out, err = process.communicate(timeout=30)
    assert process.returncode == 1
    assert out == ""
    assert "run masa-bus provision" in err
