"""What the tests of ``deploy/`` share: the metrics catalogue as ``deploy/README.md`` writes it,
the files under ``deploy/``, and ``promtool`` (installed from Debian's ``prometheus`` package
when the machine lacks it)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import promql_parser
from e2e_terminal import ROOT

DEPLOY = ROOT / "deploy"
# The gRPC services ("all" in the catalogue), and every process with /metrics: the web gateway
# serves HTTP, and exports what it names.
SERVICES = ("bot", "ledger", "matchmaking", "table-engine")
GATEWAY = "web-gateway"
PROCESSES = (*SERVICES, GATEWAY)

_ROW = re.compile(
    r"^\| `(?P<name>[a-z_:]+)` \| (?P<type>\w+) \| (?P<labels>[^|]*) \|[^|]*\| (?P<services>[^|]+) \| (?P<meaning>.+) \|$"
)


@dataclass(frozen=True)
class Catalogued:
    """One row of the catalogue."""

    name: str
    type: str
    labels: frozenset[str]
    services: frozenset[str]


def service_of(name: str) -> str:
    """The service a process of run.json runs: ``table-engine-1`` is a ``table-engine``."""
    return re.sub(r"-\d+$", "", name)


def metrics_ports(run_dir: Path) -> dict[str, list[int]]:
    """Every service's ``/metrics`` ports in a running stack (one per process), by service."""
    services = json.loads((run_dir / "run.json").read_text())["services"]
    ports: dict[str, list[int]] = {}
    for name, entry in services.items():
        if entry.get("metrics_port"):
            ports.setdefault(service_of(name), []).append(entry["metrics_port"])
    return ports


def catalogue() -> dict[str, Catalogued]:
    """The rows between the catalogue markers of deploy/README.md, by metric name."""
    text = (DEPLOY / "README.md").read_text()
    block = text.split("<!-- catalogue:start -->", 1)[1].split("<!-- catalogue:end -->", 1)[0]
    rows: dict[str, Catalogued] = {}
    for line in block.strip().splitlines()[2:]:
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        assert len(cells) == 6, f"a catalogue row that does not have six cells: {line}"
        name, kind, labels, _unit, services, _meaning = cells
        name = name.strip("`")
        rows[name] = Catalogued(
            name=name,
            type=kind,
            labels=frozenset(re.findall(r"`(\w+)`", labels)),
            services=_services(services.split(", ")),
        )
    return rows


def _services(named: list[str]) -> frozenset[str]:
    """A row's services: ``all`` is every gRPC service, other names are themselves."""
    return frozenset(
        service for name in named for service in (SERVICES if name == "all" else (name,))
    )


def promtool() -> Path:
    """``promtool``, installed with Debian's ``prometheus`` package when it is missing.

    Only a missing binary triggers apt, so a machine that has it (or has it elsewhere on PATH)
    is left alone; apt needs root, directly or through a password-less sudo.
    """
    found = shutil.which("promtool")
    if found is None:
        _apt_install("prometheus")
        found = shutil.which("promtool")
        assert found is not None, "apt installed prometheus but promtool is not on PATH"
    return Path(found)


def prometheus() -> Path:
    """The ``prometheus`` server binary from the same package."""
    promtool()
    found = shutil.which("prometheus")
    assert found is not None, "promtool is here but the prometheus server binary is not"
    return Path(found)


def _apt_install(package: str) -> None:
    if os.geteuid() == 0:
        prefix: list[str] = []
    elif (
        shutil.which("sudo") and subprocess.run(["sudo", "-n", "true"], check=False).returncode == 0
    ):
        prefix = ["sudo", "-n"]
    else:
        raise AssertionError(f"{package} is missing and apt needs root: apt-get install {package}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = [*prefix, "apt-get", "install", "-y", "-q", "--no-install-recommends", package]
    if subprocess.run(install, env=env, check=False, capture_output=True).returncode != 0:
        # A fresh machine's package lists may predate the package: refresh them once.
        subprocess.run(
            [*prefix, "apt-get", "update", "-q"], env=env, check=True, capture_output=True
        )
        subprocess.run(install, env=env, check=True, capture_output=True)


def metric_names(expr: str) -> set[str]:
    """The metric names ``expr`` selects (it must parse as PromQL)."""
    names: set[str] = set()
    pending: list[object] = [promql_parser.parse(expr)]
    while pending:
        node = pending.pop()
        if isinstance(node, promql_parser.VectorSelector):
            assert node.name, f"a selector without a metric name in {expr}"
            names.add(node.name)
            continue
        for child in ("lhs", "rhs", "expr", "param", "vector_selector"):
            found = getattr(node, child, None)
            if found is not None:
                pending.append(found)
        pending.extend(getattr(node, "args", None) or ())
    return names


def uncatalogued(expr: str, rows: dict[str, Catalogued]) -> set[str]:
    """The metrics of ``expr`` missing from the catalogue (a histogram's ``_bucket``, ``_sum``
    and ``_count`` series count as the histogram; ``up`` is Prometheus' own)."""
    missing: set[str] = set()
    for name in metric_names(expr) - {"up"}:
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        if name in rows or (base in rows and rows[base].type == "histogram"):
            continue
        missing.add(name)
    return missing


def dashboard_queries() -> dict[str, list[tuple[str, str]]]:
    """Every checked-in dashboard's panels as (panel title, PromQL), by file name."""
    found: dict[str, list[tuple[str, str]]] = {}
    for path in sorted((DEPLOY / "grafana" / "dashboards").glob("*.json")):
        model = json.loads(path.read_text())
        found[path.name] = [
            (panel["title"], target["expr"])
            for panel in model["panels"]
            for target in panel["targets"]
        ]
    return found
