"""The metrics catalogue of deploy/README.md against what every service of a running stack
exports, in both directions (issue 13): nothing exported is missing from the catalogue, nothing
catalogued is missing from the services, types and label names agree, and no label value is an
id. Costs one scrape per service on the session's stack (well under a second)."""

from __future__ import annotations

import re
import urllib.request

from deploy_support import PROCESSES, Catalogued, catalogue, metrics_ports
from e2e_stack import Stack
from prometheus_client.parser import text_string_to_metric_families

# What an id looks like: a UUID, a long hex number, a long number.
_ID = re.compile(r"^([0-9a-f]{8}-[0-9a-f]{4}-|[0-9a-f]{12,}$|\d{6,}$)")


def looks_like_an_id(value: str) -> bool:
    """A UUID, a hex or decimal number, or a random token (long, with many digits)."""
    return bool(_ID.match(value)) or (len(value) >= 16 and sum(map(str.isdigit, value)) >= 4)


def scrape(port: int) -> dict[str, tuple[str, list[dict[str, str]]]]:
    """Exported metric name -> (type, the label sets of its samples, ``le`` left out)."""
    url = f"http://127.0.0.1:{port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    found: dict[str, tuple[str, list[dict[str, str]]]] = {}
    for family in text_string_to_metric_families(text):
        name = f"{family.name}_total" if family.type == "counter" else family.name
        found[name] = (
            family.type,
            [{k: v for k, v in sample.labels.items() if k != "le"} for sample in family.samples],
        )
    return found


def test_every_service_exports_exactly_the_catalogued_metrics_and_no_id_labels(
    running_stack: Stack,
) -> None:
    rows = catalogue()
    ports = metrics_ports(running_stack.run_dir)
    assert set(ports) == set(PROCESSES), "the stack runs every service the catalogue names"
    problems: list[str] = []
    for service, service_ports in ports.items():
        for port in service_ports:
            exported = scrape(port)
            for name, (kind, samples) in exported.items():
                problems += exported_problems(service, name, kind, samples, rows)
            problems += [
                f"the catalogue lists {name} for {service}, which does not export it"
                for name, row in rows.items()
                if service in row.services and name not in exported
            ]
    assert not problems, "\n".join(problems)


def exported_problems(
    service: str,
    name: str,
    kind: str,
    samples: list[dict[str, str]],
    rows: dict[str, Catalogued],
) -> list[str]:
    """What is wrong with one metric a service exports, against its catalogue row."""
    row = rows.get(name)
    if row is None or service not in row.services:
        return [f"{service} exports {name}, which the catalogue does not list"]
    problems: list[str] = []
    if kind != row.type:
        problems.append(f"{service}: {name} is a {kind}, catalogued as a {row.type}")
    if any(set(labels) != row.labels for labels in samples):
        problems.append(f"{service}: {name} has labels other than {sorted(row.labels)}")
    problems += [
        f"{service}: {name} has an id as a label: {key}={value}"
        for labels in samples
        for key, value in labels.items()
        if key.endswith("_id") or (key != "version" and looks_like_an_id(value))
    ]
    return problems
