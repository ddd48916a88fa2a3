"""``masa endpoints``: where the stack ``make run`` started listens, read from its ``run.json``.

Without options, a table of every process: its address (a gRPC service's ``host:port``, the
bus's ``nats://host:port``, the web gateway's ``http://host:port``), its ``/metrics`` address
and its pid. ``--get NAME`` prints one
address alone, for scripts and shells::

    grpcurl -plaintext "$(masa endpoints --get table-engine)" list

Exit codes: 0; 1 when no stack runs (no ``run.json`` is found); 2 for a name the stack has no
address of.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import IO, Any

__all__ = ["add_endpoints_parser", "print_endpoints"]

_NO_STACK = (
    "no stack is running: no run.json in the run folder (MASA_RUN_DIR, default .masa) here or "
    "in a folder above; start one with `make run`"
)


def add_endpoints_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    endpoints = commands.add_parser(
        "endpoints",
        help="print where the stack of `make run` listens",
        description="Print the addresses of the stack `make run` started, from its run.json "
        "(found here or in a folder above): each process with its address, /metrics and pid.",
    )
    endpoints.add_argument(
        "--get",
        metavar="NAME",
        help="print only this process's address, e.g. table-engine, ledger, matchmaking "
        "(host:port), nats (nats://host:port) or web-gateway (http://host:port), for scripts: "
        'grpcurl -plaintext "$(masa endpoints --get matchmaking)" list',
    )


def print_endpoints(found: Path | None, name: str | None, out: IO[str] = sys.stdout) -> int:
    """The table, or the one address of ``name``, of the run.json at ``found``; the exit code."""
    if found is None:
        print(f"masa endpoints: {_NO_STACK}", file=sys.stderr)
        return 1
    state = json.loads(found.read_text())
    services: dict[str, dict[str, Any]] = state.get("services", {})
    addresses = {process: _address(entry) for process, entry in services.items()}
    if name is not None:
        address = addresses.get(name)
        if address is None:
            known = ", ".join(process for process, where in addresses.items() if where)
            print(
                f"masa endpoints: the stack has no address for {name!r}; one of: {known}",
                file=sys.stderr,
            )
            return 2
        print(address, file=out)
        return 0
    rows = [("SERVICE", "ADDRESS", "METRICS", "PID")]
    for process, entry in services.items():
        metrics = entry.get("metrics_port")
        host = str(entry.get("grpc") or "127.0.0.1").rsplit(":", 1)[0]
        rows.append(
            (
                process,
                addresses[process] or "-",
                f"http://{host}:{metrics}/metrics" if metrics else "-",
                str(entry.get("pid", "-")),
            )
        )
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    launcher = state.get("launcher_pid", "?")
    print(f"the stack of {found.parent} (launcher pid {launcher})", file=out)
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True)]
        print("  ".join([*cells, row[3]]), file=out)
    return 0


def _address(entry: dict[str, Any]) -> str | None:
    if entry.get("grpc"):
        return str(entry["grpc"])
    if entry.get("nats"):
        return f"nats://{entry['nats']}"
    if entry.get("http"):
        return f"http://{entry['http']}"
    return None
