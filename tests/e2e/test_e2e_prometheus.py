"""A real Prometheus (Debian's package) against the session's running stack (issue 13): it
scrapes every service with deploy/prometheus's configuration and rules, and every query of
every dashboard returns data through its HTTP API; every alert rule evaluates without error.
Costs about 5 s beside the shared stack (Prometheus starts, two scrapes a second apart)."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
import yaml
from deploy_support import (
    DEPLOY,
    PROCESSES,
    SERVICES,
    dashboard_queries,
    metric_names,
    metrics_ports,
    prometheus,
)
from e2e_stack import Stack
from masa_platform.testing import free_port
from web_support import dev_token

WAIT_SECONDS = 60.0
# Counters whose label values are open-ended (an action's or a failure's name), so that their
# series start with the first such event: a panel over them alone may read "no data" on a
# stack that has not seen one yet (the other end-to-end tests of the session play games).
FIRST_EVENT_ONLY = {
    "masa_matchmaking_placement_failures_total",
    "masa_outbox_publishes_total",
    "masa_table_takeovers_total",
    "masa_table_actions_total",
    "masa_table_recovery_skipped_total",
}
# One call per service without a token: answered UNAUTHENTICATED, so errors-by-code has data.
UNAUTHENTICATED_CALLS = {
    "bot": "/masa.bot.v1.BotService/Decide",
    "ledger": "/masa.ledger.v1.LedgerService/GetBalance",
    "matchmaking": "/masa.matchmaking.v1.MatchmakingService/ListTickets",
    "table-engine": "/masa.table.v1.TableService/GetTable",
}


def query(base: str, expr: str) -> list[dict[str, Any]]:
    url = f"{base}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
    with urllib.request.urlopen(url, timeout=5) as response:
        answer = json.load(response)
    assert answer["status"] == "success", answer
    result: list[dict[str, Any]] = answer["data"]["result"]
    return result


@pytest.fixture(scope="module")
def prometheus_url(running_stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Prometheus with deploy/prometheus/prometheus.yml, its targets pointed at the stack."""
    ports = metrics_ports(running_stack.run_dir)
    folder = tmp_path_factory.mktemp("prometheus")
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    config["global"].update(scrape_interval="1s", evaluation_interval="1s")
    for job in config["scrape_configs"]:
        service = job["job_name"].removeprefix("masa-")
        job["static_configs"] = [{"targets": [f"127.0.0.1:{port}" for port in ports[service]]}]
    (folder / "prometheus.yml").write_text(yaml.safe_dump(config))
    shutil.copy(DEPLOY / "prometheus" / "alerts.yml", folder / "alerts.yml")
    port = free_port()
    with (folder / "prometheus.log").open("w") as log:
        process = subprocess.Popen(
            [
                prometheus(),
                f"--config.file={folder / 'prometheus.yml'}",
                f"--storage.tsdb.path={folder / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        print((folder / "prometheus.log").read_text()[-3000:])


def make_one_error_each(stack: dict[str, str]) -> None:
    for service, method in UNAUTHENTICATED_CALLS.items():
        with grpc.insecure_channel(stack[service]) as channel:
            call: grpc.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(method)
            with pytest.raises(grpc.RpcError) as refused:
                call(b"", timeout=5)
            assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED
    _through_the_gateway(stack["web-gateway"])


def _through_the_gateway(web: str) -> None:
    """A call refused, a call answered and a stream opened through the web gateway, as a
    browser makes them (Connect, JSON), so that its board has data of each kind."""
    player = dev_token(web, f"prometheus-{uuid.uuid4().hex[:6]}")
    lobbies = f"{web}/masa.matchmaking.v1.MatchmakingService/ListLobbies"
    json_call = {"content-type": "application/json"}
    assert _post(lobbies, b"{}", json_call)[0] == 401
    assert _post(lobbies, b"{}", {**json_call, "authorization": f"Bearer {player}"})[0] == 200
    # A server stream in the Connect protocol: one enveloped message; its end carries the
    # refusal of a ticket that does not exist.
    message = json.dumps({"ticket_id": "no-such-ticket"}).encode()
    status, body = _post(
        f"{web}/masa.matchmaking.v1.MatchmakingService/WatchTicket",
        struct.pack(">BI", 0, len(message)) + message,
        {"content-type": "application/connect+json", "authorization": f"Bearer {player}"},
    )
    assert status == 200 and b"not_found" in body


def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def wait_until(check: Any, what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not check():
        assert time.monotonic() < deadline, f"no {what} after {WAIT_SECONDS:.0f} s"
        time.sleep(0.5)


def test_every_dashboard_query_returns_data_from_a_real_prometheus(
    prometheus_url: str, stack: dict[str, str]
) -> None:
    base = prometheus_url

    def every_job_up() -> bool:
        try:
            jobs = {series["metric"]["job"] for series in query(base, "up == 1")}
        except OSError:
            return False
        return jobs == {f"masa-{service}" for service in PROCESSES}

    wait_until(every_job_up, "scrape of every service")
    make_one_error_each(stack)
    # rate() needs two samples of each job's error counter within its window.
    twice = 'count by (job) (count_over_time(grpc_server_handled_total{grpc_code="Unauthenticated"}[1m]) > 1)'
    wait_until(lambda: len(query(base, twice)) == len(SERVICES), "second scrape of the errors")
    empty: list[str] = []
    for board, panels in dashboard_queries().items():
        for title, expr in panels:
            names = metric_names(expr)
            if query(base, expr):
                continue
            if names <= FIRST_EVENT_ONLY:
                continue
            empty.append(f"{board} / {title}: {expr}")
    assert not empty, "queries without data:\n" + "\n".join(empty)


def test_every_alert_rule_evaluates_without_error_on_the_running_stack(
    prometheus_url: str,
) -> None:
    with urllib.request.urlopen(f"{prometheus_url}/api/v1/rules", timeout=5) as response:
        groups = json.load(response)["data"]["groups"]
    rules = [rule for group in groups for rule in group["rules"]]
    assert len(rules) == len(
        [
            rule
            for group in yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())[
                "groups"
            ]
            for rule in group["rules"]
        ]
    )
    wait_until(
        lambda: all(
            rule.get("lastEvaluation", "").startswith("20") for rule in _rules(prometheus_url)
        ),
        "evaluation of every rule",
    )
    broken = [
        (rule["name"], rule.get("lastError"))
        for rule in _rules(prometheus_url)
        if rule["health"] != "ok"
    ]
    assert not broken
    firing = [rule["name"] for rule in _rules(prometheus_url) if rule["state"] == "firing"]
    assert not firing, "a healthy stack fires no alert"


def _rules(base: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{base}/api/v1/rules", timeout=5) as response:
        groups = json.load(response)["data"]["groups"]
    return [rule for group in groups for rule in group["rules"]]
