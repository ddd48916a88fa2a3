"""Write the bus users of masa_platform.bus_access into the deployment files that carry them.

``deploy/nats/nats-server.conf`` (compose, a plain server) ends with their ``authorization``
block, and ``deploy/k8s/nats/values.yaml`` (the NATS Helm chart) holds them as
``config.merge.authorization.users`` with each password read from the masa-nats Secret. Both
are generated from the one list, so that a user or a permission changes in one place; the
tests (test_platform_bus_access.py, test_deploy_manifests.py) fail until this has run.

    uv run python scripts/render_bus_users.py [--check]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from masa_platform.bus_access import bus_users, deployment_authorization, password_variable

ROOT = Path(__file__).resolve().parents[1]
SERVER_CONF = ROOT / "deploy" / "nats" / "nats-server.conf"
HELM_VALUES = ROOT / "deploy" / "k8s" / "nats" / "values.yaml"
_USERS_START = "    authorization:\n      users:\n"
_USERS_END = "\ncontainer:\n  env:\n"
_ENV_END = "\npodTemplate:\n"


def _yaml_text(text: str) -> str:
    """A YAML scalar for a subject: plain where YAML reads it back as the same string."""
    return json.dumps(text) if text[0] in "'\">*&!|%@`{[,#?:-" or ": " in text else text


def server_conf(current: str) -> str:
    head, found, _ = current.partition("authorization {")
    if not found:
        raise SystemExit(f"{SERVER_CONF}: no authorization block to replace")
    return head + deployment_authorization()


def helm_values(current: str) -> str:
    head, found, rest = current.partition(_USERS_START)
    _, ended, tail = rest.partition(_USERS_END)
    _, env_ended, after_env = tail.partition(_ENV_END)
    if not (found and ended and env_ended):
        raise SystemExit(f"{HELM_VALUES}: the users or container env block is not where it was")
    users: list[str] = []
    env: list[str] = []
    for user in bus_users():
        users += [
            f"      - user: {user.name}",
            f"        password: << ${password_variable(user.name)} >>",
            "        permissions:",
            "          publish:",
            "            allow:",
            *(f"            - {_yaml_text(subject)}" for subject in user.publish),
            "          subscribe:",
            "            allow:",
            *(f"            - {_yaml_text(subject)}" for subject in user.subscribe),
        ]
        env += [
            f"    {password_variable(user.name)}:",
            "      valueFrom:",
            "        secretKeyRef:",
            "          name: masa-nats",
            f"          key: {user.name}",
        ]
    return (
        head + _USERS_START + "\n".join(users) + _USERS_END + "\n".join(env) + _ENV_END + after_env
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a file is out of date")
    args = parser.parse_args()
    stale = []
    for path, render in ((SERVER_CONF, server_conf), (HELM_VALUES, helm_values)):
        current = path.read_text()
        wanted = render(current)
        if wanted != current:
            stale.append(str(path.relative_to(ROOT)))
            if not args.check:
                path.write_text(wanted)
    if stale:
        print(("out of date: " if args.check else "rewrote: ") + ", ".join(stale))
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
