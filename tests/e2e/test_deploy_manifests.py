"""The deployment files of deploy/ (issue 13), checked without a cluster or a container:

- every Kubernetes manifest kustomize renders (base and production) validates against the
  Kubernetes schemas (kubernetes-validate, strict), with everything the issue lists;
- each service's ports, environment and probes agree with its settings: the environment loads
  with the service's own ``load_settings`` and names only settings it has;
- the compose file does the same for one host, building every service from the one
  Dockerfile (``deploy/Dockerfile``, the service a build argument), which is multi-stage,
  non-root, built from the uv lock, and keeps the hadolint rules that can be checked by
  reading it (no Docker daemon here);
- the NATS Helm values run three JetStream replicas, fsync every write, and carry exactly the
  users of masa_platform.bus_access.

Costs about two seconds (two kustomize renders)."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
import tomllib
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
from masa_platform.bus_access import ADMIN, RETENTION, bus_users, password_variable
from masa_platform.bus_cli import OperatorBusSettings
from masa_platform.settings import ENV_PREFIX, load_settings
from masa_platform.testing import keyring
from masa_table_engine.settings import EngineSettings
from masa_web_gateway.settings import GatewaySettings

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
DOCKERFILE = DEPLOY / "Dockerfile"
# Values a secret or the pod's name would give, valid for each setting that reads one.
SECRET_VALUES = {
    "MASA_DATABASE_URL": "postgresql://masa:secret@postgres:5432/masa",
    "MASA_NATS_PASSWORD": "secret",
    "MASA_NODE_ID": "table-engine-0",
    "MASA_PAGE_TOKEN_KEY": "5a" * 32,
    "MASA_LEDGER_PAGE_TOKEN_KEY": "6b" * 32,
    "MASA_MATCHMAKING_PAGE_TOKEN_KEY": "7c" * 32,
}
# The services whose List calls hand out page tokens: each needs its key from a Secret (one
# per service), shared by its instances.
PAGING = ("ledger", "matchmaking")


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
    in with valid values, $(VAR) references expanded, key files found in the tests' keyring."""
    env: dict[str, str] = {}
    for entry in container["env"]:
        value = entry.get("value")
        if value is None:
            value = SECRET_VALUES[entry["name"]]
        env[entry["name"]] = re.sub(r"\$\((\w+)\)", lambda m: env[m[1]], value)
    return with_test_keys(env)


def with_test_keys(env: dict[str, str]) -> dict[str, str]:
    """``env`` with each key file (mounted under /etc/masa) replaced by the same file of the
    tests' keyring, which the settings can read."""
    folder = str(keyring().directory)
    return {
        name: re.sub(r"^/etc/masa/(public|keys)", folder, value)
        if name.endswith("_FILE")
        else value
        for name, value in env.items()
    }


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
    # Production brings real Secrets; the password placeholders stay in the base only, and no
    # key has one anywhere (docs/security.md).
    expected = {"masa-database", "masa-nats"}
    assert secrets == (expected if overlay == "base" else set())


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


@pytest.mark.parametrize("overlay", ["base", "overlays/production"])
def test_the_services_that_page_read_their_page_token_key_from_a_secret(overlay: str) -> None:
    docs = rendered(overlay)
    for service in PAGING:
        (container,) = find(docs, "Deployment", service)["spec"]["template"]["spec"]["containers"]
        (entry,) = [e for e in container["env"] if e["name"] == "MASA_PAGE_TOKEN_KEY"]
        assert entry["valueFrom"]["secretKeyRef"] == {"name": "masa-page-tokens", "key": service}
    # A page-token key known from git would let anyone forge page tokens: the Secret is made
    # in the cluster only, never rendered from the repository.
    assert not [
        d for d in docs if d["kind"] == "Secret" and d["metadata"]["name"] == "masa-page-tokens"
    ]
    services = compose()["services"]
    for service in PAGING:
        assert (
            services[service]["environment"]["MASA_PAGE_TOKEN_KEY"]
            == SECRET_VALUES[f"MASA_{service.upper()}_PAGE_TOKEN_KEY"]
        )


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


@dataclasses.dataclass(frozen=True)
class Instruction:
    stage: int
    keyword: str
    arguments: str


def dockerfile() -> list[Instruction]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n(\s*#[^\n]*\n)*", " ", DOCKERFILE.read_text())
    found: list[Instruction] = []
    stage = -1
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        keyword, _, arguments = line.strip().partition(" ")
        if keyword == "FROM":
            stage += 1
        found.append(Instruction(stage, keyword, " ".join(arguments.split())))
    return found


def dockerfile_env() -> dict[str, str]:
    """The ``MASA_*`` defaults the images carry (the final stage's ENV)."""
    instructions = dockerfile()
    last = instructions[-1].stage
    env: dict[str, str] = {}
    for instruction in instructions:
        if instruction.stage == last and instruction.keyword == "ENV":
            for pair in instruction.arguments.split():
                key, value = pair.split("=", 1)
                env[key] = value
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
    steps = one_shot_steps(services)
    assert steps == {"keys", "bus-provision"}
    for name, spec in services.items():
        if name in steps:
            continue
        assert "healthcheck" in spec, f"{name} has no health check"
        service = re.sub(r"-\d+$", "", name)
        if service not in SETTINGS:
            continue
        env = with_test_keys({**dockerfile_env(), **spec["environment"]})
        assert set(env) <= setting_variables(SETTINGS[service]), name
        settings = load_settings(SETTINGS[service], env)
        assert f"{name}:{settings.platform.metrics_port}" in targets
        assert f"127.0.0.1:{settings.platform.server.grpc_port}" in " ".join(
            spec["healthcheck"]["test"]
        )
        if service == "table-engine":
            assert settings.node_id == name
            assert settings.advertise_address == f"{name}:{settings.platform.server.grpc_port}"


def one_shot_steps(services: dict[str, Any]) -> set[str]:
    """The services that run once and exit (restart "no"); every masa service waits for each
    to have completed."""
    steps = {name for name, spec in services.items() if spec.get("restart") == "no"}
    for name in services:
        if re.sub(r"-\d+$", "", name) in SETTINGS:
            waits = services[name]["depends_on"]
            for step in steps:
                assert waits[step] == {"condition": "service_completed_successfully"}, name
    return steps


def test_compose_builds_every_service_from_the_one_dockerfile_by_its_package() -> None:
    assert not list((ROOT / "services").glob("*/Dockerfile")), "one Dockerfile, in deploy/"
    for name, spec in compose()["services"].items():
        service = re.sub(r"-\d+$", "", name)
        if service not in PACKAGES:
            continue
        build = spec["build"]
        assert (build["context"], build["dockerfile"]) == ("../..", "deploy/Dockerfile"), name
        package = build["args"]["SERVICE"]
        module = PACKAGES[service]
        project = tomllib.loads(
            (ROOT / "services" / module.removeprefix("masa_") / "pyproject.toml").read_text()
        )["project"]
        # The image runs the console script named after the package: the service's main.
        assert project["name"] == package, name
        assert project["scripts"][package] == f"{module}.__main__:main", name
        assert spec["image"] == package, name


def test_the_dockerfile_is_multi_stage_non_root_built_from_the_lock_and_lint_clean() -> None:
    """What hadolint would say, checked by reading (DL rule ids in the messages)."""
    instructions = dockerfile()
    stages = [i for i in instructions if i.keyword == "FROM"]
    assert len(stages) >= 2, "multi-stage"
    for stage in stages:
        image = stage.arguments.split()[0]
        assert ":" in image and not image.endswith(":latest"), f"DL3006/DL3007: tag {image}"
    names = {i.arguments.split()[-1] for i in stages if " AS " in i.arguments}
    for instruction in instructions:
        text = instruction.arguments
        if instruction.keyword == "COPY" and text.startswith("--from="):
            assert text.split()[0].removeprefix("--from=") in names, "DL3022: a named stage"
        if instruction.keyword == "RUN":
            assert not re.search(r"(^|&&|;)\s*cd ", text), "DL3003: WORKDIR, not cd"
            assert "sudo" not in text.split(), "DL3004: no sudo"
            assert "upgrade" not in text.split(), "DL3005: no apt-get upgrade"
            # SC2086: a variable is double-quoted wherever a shell sees it.
            for used in re.finditer(r"\$\{?\w+", text):
                assert text[: used.start()].count('"') % 2 == 1, f"SC2086: quote {used[0]}"
        assert instruction.keyword in {
            "FROM",
            "ARG",
            "ENV",
            "WORKDIR",
            "COPY",
            "RUN",
            "LABEL",
            "USER",
            "EXPOSE",
            "ENTRYPOINT",
        }, f"unexpected {instruction.keyword}"
    # Build arguments live in the stage that declares them (after its FROM), and the service
    # has no default: a build must name one.
    for instruction in instructions:
        for used in re.findall(r"\$\{?(\w+)", instruction.arguments):
            if used in {"PATH"} or instruction.keyword == "ENV":
                continue
            declared = [
                i
                for i in instructions
                if i.stage == instruction.stage and i.keyword == "ARG" and i.arguments == used
            ]
            assert declared, f"${used} used in stage {instruction.stage} without its ARG"
    final = [i for i in instructions if i.stage == stages[-1].stage]
    users = [i for i in final if i.keyword == "USER"]
    assert len(users) == 1 and users[0].arguments.isdigit() and users[0].arguments != "0"
    assert final.index(users[0]) > max(
        n for n, i in enumerate(final) if i.keyword in {"RUN", "COPY"}
    ), "DL3002: the last user is not root, and nothing runs as root after it"
    (entrypoint,) = [i for i in final if i.keyword == "ENTRYPOINT"]
    assert entrypoint.arguments == '["/app/.venv/bin/masa-service"]', "DL3025: exec form"
    run = " ".join(i.arguments for i in instructions if i.keyword == "RUN")
    assert 'uv sync --frozen --no-dev --no-editable --package "${SERVICE}"' in run
    assert 'ln -s "/app/.venv/bin/${SERVICE}" /app/.venv/bin/masa-service' in run
    assert {i.arguments for i in instructions if i.keyword == "EXPOSE"} == {"50051 8080 9102"}
    # The web client is built from its lockfile and lands where the gateway serves it from.
    assert "npm ci --no-audit --no-fund" in run and "npm run build" in run
    copies = [i.arguments for i in final if i.keyword == "COPY"]
    assert "--from=web /src/clients/web/dist /app/web" in copies


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
    ], "run scripts/render_bus_users.py"
    env = values["container"]["env"]
    for user in bus_users():
        assert env[password_variable(user.name)]["valueFrom"]["secretKeyRef"] == {
            "name": "masa-nats",
            "key": user.name,
        }


# The files of a keyring (masa_platform.keys.Keyring) each holder may have: the public sets
# for everyone, the private keys for their one holder, the issuer's for nobody deployed.
PUBLIC_KEYS = {"jwks.json", "results.jwks.json"}
PRIVATE_KEYS = {
    "table-engine": {"table-engine.pem", "results.pem", "log-mac.key"},
    "matchmaking": {"matchmaking.pem"},
    "ledger": set(),
    "bot": set(),
}


def test_no_manifest_holds_a_shared_signing_secret_and_each_key_reaches_its_holder_only() -> None:
    """docs/security.md: tokens and results are signed with keys of their own, each held by
    the one service that signs; every other service holds public keys only, and the issuer's
    key is in no deployed service at all."""
    for text in [p.read_text() for p in (DEPLOY / "k8s").rglob("*.yaml")] + [
        (DEPLOY / "compose" / "compose.yaml").read_text(),
        (DEPLOY / "compose" / "example.env").read_text(),
    ]:
        assert "JWT_SECRET" not in text and "masa-jwt" not in text
        assert "issuer.pem" not in text
    docs = rendered("overlays/production")
    mounted: dict[str, set[str]] = {}
    for service in SERVICES:
        kind = "StatefulSet" if service == "table-engine" else "Deployment"
        pod = find(docs, kind, service)["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        volumes = {volume["name"]: volume for volume in pod.get("volumes", [])}
        paths = {mount["mountPath"]: volumes[mount["name"]] for mount in container["volumeMounts"]}
        secrets = {v["secret"]["secretName"] for v in paths.values() if "secret" in v}
        for secret in secrets:
            mounted.setdefault(secret, set()).add(service)
        files = {
            entry["name"]: entry["value"]
            for entry in container["env"]
            if entry["name"].endswith("_FILE")
        }
        names = {path.rsplit("/", 1)[1] for path in files.values()}
        assert names - PUBLIC_KEYS == PRIVATE_KEYS[service], service
        for name, path in files.items():
            assert path.rsplit("/", 1)[0] in paths, f"{service}: {name} is not in a mounted folder"
        env = container_env(container)
        settings = load_settings(SETTINGS[service], env)
        assert settings.platform.auth.jwt_jwks_file is not None
    assert mounted == {
        "masa-engine-keys": {"table-engine"},
        "masa-matchmaking-keys": {"matchmaking"},
    }
    volumes = compose()["services"]
    for name, spec in volumes.items():
        service = re.sub(r"-\d+$", "", name)
        if service not in SETTINGS:
            continue
        held = {entry.split(":")[0] for entry in spec.get("volumes", [])}
        own = {"table-engine": {"engine-keys"}, "matchmaking": {"matchmaking-keys"}}
        assert held == {"public-keys", *own.get(service, set())}, name


def test_the_bus_is_provisioned_by_a_job_as_the_operators_user_before_the_services() -> None:
    docs = rendered("overlays/production")
    job = find(docs, "Job", "bus-provision")
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["/app/.venv/bin/masa-bus", "provision"]
    env = container_env(container)
    settings = load_settings(OperatorBusSettings, env)
    assert settings.nats_user == ADMIN
    assert (
        settings.bus.bus_replicas
        == yaml.safe_load((DEPLOY / "k8s" / "nats" / "values.yaml").read_text())["config"][
            "cluster"
        ]["replicas"]
    )
    step = compose()["services"]["bus-provision"]
    assert step["entrypoint"] == ["/app/.venv/bin/masa-bus", "provision"]
    assert load_settings(OperatorBusSettings, step["environment"]).nats_user == ADMIN


def test_finished_tables_are_swept_hourly_as_the_retention_user_one_run_at_a_time() -> None:
    docs = rendered("overlays/production")
    cron = find(docs, "CronJob", "bus-sweep")["spec"]
    assert cron["concurrencyPolicy"] == "Forbid"
    (container,) = cron["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["/app/.venv/bin/masa-bus", "sweep"]
    settings = load_settings(OperatorBusSettings, container_env(container))
    assert settings.nats_user == RETENTION
    step = compose()["services"]["sweep"]
    assert step["entrypoint"][:3] == ["/app/.venv/bin/masa-bus", "sweep", "--every"]
    env = {name: str(value) for name, value in step["environment"].items()}
    assert load_settings(OperatorBusSettings, env).nats_user == RETENTION


@pytest.mark.parametrize("overlay", ["base", "overlays/production"])
def test_the_web_gateway_runs_with_its_settings_and_holds_no_secret(overlay: str) -> None:
    """Issue 24: the gateway in Kubernetes and compose reads only its own settings, each valid;
    it is probed on /healthz, reaches the table-engine pods by their StatefulSet names (the
    pattern admits the autoscaled ones, nothing else), and holds no key, no NATS password and
    no development issuer."""
    docs = rendered(overlay)
    pod = find(docs, "Deployment", "web-gateway")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert "volumes" not in pod and "volumeMounts" not in container
    assert all("valueFrom" not in entry for entry in container["env"])
    env = container_env(container)
    assert set(env) <= setting_variables(GatewaySettings)
    settings = load_settings(GatewaySettings, env)
    assert settings.dev_issuer_key_file is None
    assert settings.platform.nats_password == "" and settings.web_root is not None
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    assert ports == {"http": settings.http_port, "metrics": settings.platform.metrics_port}
    assert container["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    pattern = re.compile(settings.table_address_pattern)
    engines = find(docs, "StatefulSet", "table-engine")["spec"]["template"]["spec"]
    (engine,) = engines["containers"]
    advertised = {entry["name"]: entry.get("value", "") for entry in engine["env"]}
    for pod_name in ("table-engine-0", "table-engine-17"):
        address = advertised["MASA_ADVERTISE_ADDRESS"].replace("$(MASA_NODE_ID)", pod_name)
        assert pattern.fullmatch(address), address
    assert not pattern.fullmatch("evil.example:50051")
    assert not pattern.fullmatch("ledger.masa.svc.cluster.local:50051")
    public = [
        doc
        for doc in docs
        if doc["kind"] == "NetworkPolicy"
        and doc["spec"]["podSelector"].get("matchLabels")
        == {"app.kubernetes.io/name": "web-gateway"}
    ]
    assert [rule["ports"] for doc in public for rule in doc["spec"]["ingress"]] == [
        [{"port": 8080}]
    ]
    spec = compose()["services"]["web-gateway"]
    assert spec["build"]["args"]["SERVICE"] == "masa-web-gateway"
    compose_env = {**dockerfile_env(), **spec["environment"]}
    assert set(compose_env) <= setting_variables(GatewaySettings)
    on_one_host = load_settings(GatewaySettings, {k: v for k, v in compose_env.items() if v})
    assert on_one_host.dev_issuer_key_file is None
    assert "/healthz" in " ".join(spec["healthcheck"]["test"])
    assert "volumes" not in spec
