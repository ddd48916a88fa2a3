"""The alert rules of deploy/prometheus (issue 13): promtool accepts them, every alert fires and
stays quiet on the synthetic series of alerts.test.yml, each has a runbook section, and each
uses catalogued metrics only. Costs about a second (two promtool runs)."""

from __future__ import annotations

import subprocess
from typing import Any

import yaml
from deploy_support import DEPLOY, PROCESSES, catalogue, promtool, uncatalogued

RULES = DEPLOY / "prometheus" / "alerts.yml"
TESTS = DEPLOY / "prometheus" / "alerts.test.yml"
RUNBOOK = DEPLOY / "prometheus" / "runbook.md"

# The alerts issue 13 asks for, in its words.
ASKED = {
    "a service down": "MasaServiceDown",
    "the gRPC error rate": "MasaGrpcErrorRate",
    "p99 action latency": "MasaActionLatencyHigh",
    "matchmaking wait time": "MasaMatchmakingWaitHigh",
    "a ledger invariant violation (page at once)": "MasaLedgerInvariantViolated",
    "outbox lag": "MasaOutboxLag",
    "JetStream consumer lag": "MasaJetStreamConsumerLag",
    "tables stuck without an action for longer than the turn timer allows": "MasaTablesStuck",
    "autopilot overuse": "MasaAutopilotOveruse",
}


def alerts() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def test_promtool_accepts_the_rules() -> None:
    checked = subprocess.run(
        [promtool(), "check", "rules", RULES], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_every_alert_fires_and_stays_quiet_as_its_unit_tests_expect() -> None:
    tested = subprocess.run(
        [promtool(), "test", "rules", TESTS.name],
        cwd=TESTS.parent,
        capture_output=True,
        text=True,
        check=False,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    cases = yaml.safe_load(TESTS.read_text())["tests"]
    firing = {
        expected["alertname"]
        for case in cases
        for expected in case["alert_rule_test"]
        if expected["exp_alerts"]
    }
    assert firing == {rule["alert"] for rule in alerts()}, "every alert has a firing case"


def test_every_alert_the_issue_lists_exists_with_a_runbook_section() -> None:
    names = {rule["alert"] for rule in alerts()}
    assert set(ASKED.values()) <= names
    assert alerts()[0]["labels"]["severity"] == "page"
    invariant = next(rule for rule in alerts() if rule["alert"] == "MasaLedgerInvariantViolated")
    assert "for" not in invariant, "a ledger invariant violation pages at once"
    runbook = RUNBOOK.read_text()
    for rule in alerts():
        assert rule["labels"]["severity"] in ("page", "ticket")
        anchor = rule["alert"].lower()
        assert rule["annotations"]["runbook_url"] == f"deploy/prometheus/runbook.md#{anchor}"
        section = runbook.split(f"## {rule['alert']}\n", 1)
        assert len(section) == 2, f"runbook.md has no section for {rule['alert']}"
        assert len(section[1].split("\n## ", 1)[0].strip()) > 100, f"{rule['alert']}: say more"


def test_every_alert_uses_catalogued_metrics_only() -> None:
    rows = catalogue()
    for rule in alerts():
        assert not uncatalogued(rule["expr"], rows), rule["alert"]


def test_promtool_accepts_the_scrape_configuration_of_one_host() -> None:
    config = DEPLOY / "prometheus" / "prometheus.yml"
    checked = subprocess.run(
        [promtool(), "check", "config", config], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    jobs = {job["job_name"] for job in yaml.safe_load(config.read_text())["scrape_configs"]}
    assert jobs == {f"masa-{service}" for service in PROCESSES}


def test_the_kubernetes_scrape_configuration_names_jobs_as_on_one_host() -> None:
    """Debian's promtool is built without Kubernetes discovery, so this one is read here: pods
    of the masa namespace opted in by annotation, job masa-<app name>, instance the pod."""
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus-kubernetes.yml").read_text())
    assert config["rule_files"] == ["alerts.yml"]
    (job,) = config["scrape_configs"]
    assert job["kubernetes_sd_configs"] == [{"role": "pod", "namespaces": {"names": ["masa"]}}]
    targets = {rule.get("target_label"): rule for rule in job["relabel_configs"]}
    assert targets["job"]["replacement"] == "masa-$1"
    assert targets["job"]["source_labels"] == ["__meta_kubernetes_pod_label_app_kubernetes_io_name"]
    assert targets["instance"]["source_labels"] == ["__meta_kubernetes_pod_name"]
