"""Development tokens: the ``masa`` command as the token issuer of a development stack.

In a deployment players get their tokens from the identity provider that holds the issuer's
key, and no masa service holds it. ``make run`` makes a development keyring in its run folder
(``.masa/keys``), and the ``masa`` command (``masa token``, ``masa play``, ``masa admin``,
``masa-load``) signs with that keyring's issuer key, found here or in a folder above, like
run.json; ``MASA_JWT_ISSUER_KEY_FILE`` names another (with ``MASA_JWT_ISSUER`` and
``MASA_JWT_AUDIENCE`` as the servers have them).

An operator of a deployment holds no issuer key: ``masa admin`` then sends the admin token of
``MASA_ADMIN_TOKEN``, one the identity provider gave the operator (:func:`admin_token`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

from masa_platform.auth import Role, TokenSigner
from masa_platform.keys import ISSUER, KeyFileError, load_signing_key
from masa_platform.settings import AuthSettings, load_settings

from masa_client.launcher import RunSettings

__all__ = [
    "IssuerMissing",
    "IssuerSettings",
    "admin_token",
    "development_issuer",
    "issuer_key_file",
]

_KEYS_FOLDER: Final = "keys"


class IssuerMissing(Exception):
    """No issuer key to sign development tokens with."""


@dataclass(frozen=True, slots=True)
class IssuerSettings:
    jwt_issuer: str = "masa"
    jwt_audience: str = "masa"
    jwt_issuer_key_file: Path | None = None
    # An operator's token from the deployment's identity provider, sent as it is.
    admin_token: str = ""


def issuer_key_file(start: Path | None = None) -> Path | None:
    """``MASA_JWT_ISSUER_KEY_FILE``, else the issuer key of ``make run``'s run folder, here or
    in a folder above; None when there is neither."""
    given = load_settings(IssuerSettings).jwt_issuer_key_file
    if given is not None:
        return given
    run_dir = load_settings(RunSettings).run_dir
    name = Path(_KEYS_FOLDER) / f"{ISSUER}.pem"
    if run_dir.is_absolute():
        candidates = [run_dir / name]
    else:
        here = (start or Path.cwd()).resolve()
        candidates = [folder / run_dir / name for folder in (here, *here.parents)]
    return next((candidate for candidate in candidates if candidate.is_file()), None)


def development_issuer(start: Path | None = None) -> TokenSigner:
    """A signer with the development issuer's key; raises :class:`IssuerMissing` without one."""
    settings = load_settings(IssuerSettings)
    path = issuer_key_file(start)
    if path is None:
        raise IssuerMissing(
            "no issuer key to sign a token with in the run folder (MASA_RUN_DIR, default .masa) "
            "here or in a folder above: `make run` keeps one in .masa/keys of its checkout, so "
            "start it, or run masa from a folder of that checkout, or point MASA_RUN_DIR at its "
            ".masa; else set MASA_JWT_ISSUER_KEY_FILE, or give an operator's token in "
            "MASA_ADMIN_TOKEN"
        )
    try:
        key = load_signing_key(path, ISSUER)
    except KeyFileError as error:
        raise IssuerMissing(str(error)) from None
    return TokenSigner(
        key, AuthSettings(jwt_issuer=settings.jwt_issuer, jwt_audience=settings.jwt_audience)
    )


def admin_token(subject: str, *, ttl_seconds: float) -> str:
    """``MASA_ADMIN_TOKEN`` when set (a deployment's operator), else a development admin token
    for ``subject`` signed with the issuer key (raises :class:`IssuerMissing` without one)."""
    given = load_settings(IssuerSettings).admin_token.strip()
    if given:
        return given
    return development_issuer().mint(subject, [Role.ADMIN], ttl_seconds=ttl_seconds)
