"""How an operator's command reaches NATS: the URL, the user and its password.

The registry of engine nodes, the table leases and the table log live in NATS, which lets no
client in but the services and the operators' ``admin`` user (:mod:`masa_platform.bus_access`).
``masa nodes`` and ``masa admin`` therefore log in as:

- ``--nats URL``, else the NATS server ``make run`` wrote into ``run.json``, else
  ``MASA_NATS_URL``;
- ``MASA_NATS_USER`` / ``MASA_NATS_PASSWORD`` when set (a deployment's operator account), else
  ``admin`` with the password ``make run`` left beside ``run.json`` in ``nats/admin-password``.

The connection gives up at once: an operator's command fails with a clear message when NATS
cannot be reached, instead of waiting for it.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import nats
import nats.errors
from masa_platform.bus_access import ADMIN, inbox_prefix
from nats.aio.client import Client

__all__ = ["BusLogin", "BusUnreachable", "bus_login", "connect_operator"]

_CONNECT_SECONDS: Final = 2.0


class BusUnreachable(Exception):
    """NATS cannot be reached, or refused the login."""


@dataclass(frozen=True, slots=True)
class BusLogin:
    url: str
    user: str
    password: str = ""

    def __repr__(self) -> str:
        return f"BusLogin(url={self.url!r}, user={self.user!r})"


def bus_login(given_url: str | None, run_file: Path | None) -> BusLogin:
    """Where and as whom an operator's command logs into NATS (see the module docstring)."""
    state = json.loads(run_file.read_text()) if run_file is not None else {}
    url = given_url or _run_nats_url(state) or os.environ.get("MASA_NATS_URL", "")
    if not url:
        raise BusUnreachable(
            "no NATS server named: start the stack with `make run`, or pass --nats URL"
        )
    user = os.environ.get("MASA_NATS_USER", "")
    if user:
        return BusLogin(url, user, os.environ.get("MASA_NATS_PASSWORD", ""))
    if run_file is None:
        return BusLogin(url, "")
    secret = run_file.parent / "nats" / "admin-password"
    password = secret.read_text().strip() if secret.is_file() else ""
    return BusLogin(url, ADMIN if password else "", password)


def _run_nats_url(state: dict[str, object]) -> str:
    services = state.get("services")
    nats_entry = services.get("nats") if isinstance(services, dict) else None
    address = nats_entry.get("nats") if isinstance(nats_entry, dict) else None
    return f"nats://{address}" if isinstance(address, str) and address else ""


async def connect_operator(login: BusLogin) -> Client:
    """One connection that gives up at once; :class:`BusUnreachable` when it cannot be made."""
    credentials = {"user": login.user, "password": login.password} if login.user else {}

    async def quiet(error: Exception) -> None:
        """The failure is reported once, below, not as nats-py's traceback on stderr."""

    try:
        # nats-py retries a refused first connection for ever when reconnection is off, so it
        # is on, for one attempt, and the whole connect is bounded besides.
        async with asyncio.timeout(3 * _CONNECT_SECONDS):
            return await nats.connect(
                servers=[login.url],
                name="masa-operator",
                inbox_prefix=inbox_prefix(login.user),
                connect_timeout=_CONNECT_SECONDS,
                allow_reconnect=True,
                max_reconnect_attempts=1,
                reconnect_time_wait=0.1,
                error_cb=quiet,
                **credentials,
            )
    except (nats.errors.Error, OSError, TimeoutError) as error:
        raise BusUnreachable(
            f"cannot reach NATS at {login.url} as {login.user or 'nobody'} ({error!r}); "
            "is the stack running? Start it with `make run`"
        ) from error
