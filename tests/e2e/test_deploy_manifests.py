"""The deployment files of deploy/ (issue 13), checked without a cluster or a container:

- every Kubernetes manifest kustomize renders (base and production) validates against the
  Kubernetes schemas (kubernetes-validate, strict), with everything the issue lists;
- each service's ports, environment and probes agree with its settings: the environment loads
  with the service's own ``load_settings`` and names only settings it has;
- the compose file does the same for one host, and every Dockerfile is multi-stage, non-root
  and built from the uv lock;
- the NATS Helm values run three JetStream replicas, fsync every write, and carry exactly the
  users of masa_platform.bus_access.

Costs about two seconds (two kustomize renders)."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
import typing
from functools import cache
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from deploy_support import DEPLOY, SERVICES
from e2e_terminal import ROOT
from masa_bot.settings import BotSettings
from masa_ledger.settings import LedgerSettings
from masa_matchmaking.settings import MatchmakingSettings
from masa_platform.bus_access import bus_users, password_variable
from masa_platform.settings import ENV_PREFIX, load_settings
from masa_table_engine.settings import EngineSettings

KUBECTL = Path(sys.executable).parent / "kubectl"
SETTINGS: dict[str, type[Any]] = {
    "bot": BotSettings,
    "ledger": LedgerSettings,
    "matchmaking": MatchmakingSettings,
    "table-engine": EngineSettings,
}
PACKAGES = {
    "bot": "masa_bot",
    "ledger": "masa_ledger",
    "matchmaking": "masa_matchmaking",
    "table-engine": "masa_table_engine",
}
# Values a secret or the pod's name would give, valid for each setting that reads one.
SECRET_VALUES = {
    "MASA_JWT_SECRET": "a-jwt-secret-long-enough-for-hs256-0123456789",
    "MASA_DATABASE_URL": "postgresql://masa:secret@postgres:5432/masa",
    "MASA_NATS_PASSWORD": "secret",
    "MASA_NODE_ID": "table-engine-0",
}


def setting_variables(cls: type[Any]) -> set[str]:
    """Every ``MASA_*`` variable ``load_settings(cls)`` reads."""
    names: set[str] = set()
    hints = typing.get_type_hints(cls)
    for spec in dataclasses.fields(cls):
        kind = hints[spec.name]
        if isinstance(kind, type) and dataclasses.is_dataclass(kind):
            names |= setting_variables(kind)
        else:
            names.add(ENV_PREFIX + spec.name.upper())
    return names


@cache
def rendered(overlay: str) -> tuple[dict[str, Any], ...]:
    built = subprocess.run(
        [KUBECTL, "kustomize", DEPLOY / "k8s" / overlay], capture_output=True, text=True, check=True
    )
    return tuple(doc for doc in yaml.safe_load_all(built.stdout) if doc)


def find(docs: tuple[dict[str, Any], ...], kind: str, name: str) -> dict[str, Any]:
    (found,) = [doc for doc in docs if doc["kind"] == kind and doc["metadata"]["name"] == name]
    return found


def container_env(container: dict[str, Any]) -> dict[str, str]:
    """The container's environment as the pod would see it: secrets and the pod's name filled
    in with valid values, $(VAR) references expanded."""
    env: dict[str, str] = {}
    for entry in container["env"]:
        value = entry.get("value")
        if value is None:
            value = SECRET_VALUES[entry["name"]]
        env[entry["name"]] = re.sub(r"\$\((\w+)\)", lambda m: env[m[1]], value)
    return env


@pytest.mark.parametrize("overlay", ["base", "overlays/production"])
def test_every_rendered_manifest_validates_against_the_kubernetes_schemas(overlay: str) -> None:
    docs = rendered(overlay)
    assert docs
    for doc in docs:
        kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)


@pytest.mark.parametrize("overlay", ["base", "overlays/production"])
def test_the_manifests_have_everything_the_issue_lists(overlay: str) -> None:
    docs = rendered(overlay)
    for name in ("matchmaking", "bot", "ledger"):
        find(docs, "Deployment", name)
    engine = find(docs, "StatefulSet", "table-engine")
    headless = find(docs, "Service", engine["spec"]["serviceName"])
    assert headless["spec"]["clusterIP"] == "None"
    for name, kind in (("bot", "Deployment"), ("table-engine", "StatefulSet")):
        target = find(docs, "HorizontalPodAutoscaler", name)["spec"]["scaleTargetRef"]
        assert (target["kind"], target["name"]) == (kind, name)
    for name in SERVICES:
        find(docs, "PodDisruptionBudget", name)
    assert [doc for doc in docs if doc["kind"] == "NetworkPolicy"]
    secrets = {doc["metadata"]["name"] for doc in docs if doc["kind"] == "Secret"}
    # Production brings real Secrets; the placeholders stay in the base only.
    assert secrets == ({"masa-jwt", "masa-database", "masa-nats"} if overlay == "base" else set())


@pytest.mark.parametrize("service", SERVICES)
def test_kubernetes_ports_env_and_probes_match_the_service_settings(service: str) -> None:
    docs = rendered("overlays/production")
    kind = "StatefulSet" if service == "table-engine" else "Deployment"
    pod = find(docs, kind, service)["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    env = container_env(container)
    assert set(env) <= setting_variables(SETTINGS[service]), "only settings the service reads"
    settings = load_settings(SETTINGS[service], env)
    platform = settings.platform
    assert platform.service_name == service
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    assert ports == {"grpc": platform.server.grpc_port, "metrics": platform.metrics_port}
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == str(platform.metrics_port)
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert container[probe]["grpc"]["port"] == platform.server.grpc_port, probe
    assert {"requests", "limits"} <= set(container["resources"])
    service_ports = {
        port["name"]: port["targetPort"] for port in find(docs, "Service", service)["spec"]["ports"]
    }
    assert set(service_ports.values()) <= set(ports)
    if service == "table-engine":
        assert (
            settings.advertise_address == "table-engine-0.table-engine.masa.svc.cluster.local:50051"
        )
        assert settings.bot_address and settings.ledger_address


def compose() -> dict[str, Any]:
    text = (DEPLOY / "compose" / "compose.yaml").read_text()
    # Compose fills ${VAR:-default} and ${VAR:?error} from .env: the default, or a valid value.
    text = re.sub(
        r"\$\{(\w+)(?::-([^}]*))?[^}]*\}",
        lambda m: m[2] if m[2] is not None else SECRET_VALUES.get(m[1], "secret"),
        text,
    )
    loaded: dict[str, Any] = yaml.safe_load(text)
    return loaded


def dockerfile_env(service: str) -> dict[str, str]:
    text = (ROOT / "services" / PACKAGES[service].removeprefix("masa_") / "Dockerfile").read_text()
    final = text.rsplit("\nFROM ", 1)[1].replace("\\\n", " ")
    env: dict[str, str] = {}
    for line in final.splitlines():
        if line.startswith("ENV "):
            env.update(pair.split("=", 1) for pair in line.split()[1:])
    return {key: value for key, value in env.items() if key.startswith(ENV_PREFIX)}


def test_compose_runs_every_service_with_its_settings_and_a_health_check() -> None:
    services = compose()["services"]
    assert {"nats", "postgres", "prometheus", "grafana", "ledger", "matchmaking"} <= set(services)
    assert {"table-engine-0", "table-engine-1", "bot-0", "bot-1"} <= set(services)
    targets = {
        target
        for job in yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())[
            "scrape_configs"
        ]
        for group in job["static_configs"]
        for target in group["targets"]
    }
    for name, spec in services.items():
        assert "healthcheck" in spec, f"{name} has no health check"
        service = re.sub(r"-\d+$", "", name)
        if service not in SETTINGS:
            continue
        env = {**dockerfile_env(service), **spec["environment"]}
        assert set(env) <= setting_variables(SETTINGS[service]), name
        settings = load_settings(SETTINGS[service], env)
        assert f"{name}:{settings.platform.metrics_port}" in targets
        assert f"127.0.0.1:{settings.platform.server.grpc_port}" in " ".join(
            spec["healthcheck"]["test"]
        )
        if service == "table-engine":
            assert settings.node_id == name
            assert settings.advertise_address == f"{name}:{settings.platform.server.grpc_port}"


@pytest.mark.parametrize("service", SERVICES)
def test_every_dockerfile_is_multi_stage_non_root_and_built_from_the_lock(service: str) -> None:
    text = (ROOT / "services" / PACKAGES[service].removeprefix("masa_") / "Dockerfile").read_text()
    assert len(re.findall(r"^FROM ", text, re.MULTILINE)) >= 2
    final = text.rsplit("\nFROM ", 1)[1]
    (user,) = re.findall(r"^USER (\S+)$", final, re.MULTILINE)
    assert user not in ("0", "root")
    assert "uv sync --frozen --no-dev" in text
    assert f'ENTRYPOINT ["python", "-m", "{PACKAGES[service]}"]' in final


def test_the_nats_helm_values_run_three_fsynced_replicas_with_the_bus_users() -> None:
    values = yaml.safe_load((DEPLOY / "k8s" / "nats" / "values.yaml").read_text())
    config = values["config"]
    assert config["cluster"] == {"enabled": True, "replicas": 3}
    assert config["jetstream"]["enabled"] is True
    assert config["jetstream"]["merge"]["sync_interval"] == "always"
    users = config["merge"]["authorization"]["users"]
    assert [
        (
            user["user"],
            user["password"],
            user["permissions"]["publish"]["allow"],
            user["permissions"]["subscribe"]["allow"],
        )
        for user in users
    ] == [
        (
            user.name,
            f"<< ${password_variable(user.name)} >>",
            list(user.publish),
            list(user.subscribe),
        )
        for user in bus_users()
    ]
    env = values["container"]["env"]
    for user in bus_users():
        assert env[password_variable(user.name)]["valueFrom"]["secretKeyRef"] == {
            "name": "masa-nats",
            "key": user.name,
        }
