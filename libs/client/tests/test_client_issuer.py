"""Where the ``masa`` command's tokens come from: the development issuer key of ``make run``'s
run folder, or, for a deployment's operator who holds no issuer key, ``MASA_ADMIN_TOKEN``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from masa_client.issuer import IssuerMissing, admin_token, development_issuer
from masa_platform.auth import Role, TokenVerifier
from masa_platform.settings import AuthSettings
from masa_platform.testing import keyring


def test_an_operators_token_is_sent_as_given_and_needs_no_issuer_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MASA_JWT_ISSUER_KEY_FILE", raising=False)
    monkeypatch.setenv("MASA_RUN_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(IssuerMissing, match="MASA_ADMIN_TOKEN") as missing:
        admin_token("ops", ttl_seconds=60)
    # Run outside the checkout, the stack may well be running: the message says where it
    # looked and how to point at the checkout's run folder.
    assert "run masa from a folder of that checkout" in str(missing.value)
    assert "MASA_RUN_DIR" in str(missing.value)
    monkeypatch.setenv("MASA_ADMIN_TOKEN", " from-the-identity-provider\n")
    assert admin_token("ops", ttl_seconds=60) == "from-the-identity-provider"


def test_without_one_an_admin_token_is_signed_with_the_run_folders_issuer_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = tmp_path / ".masa"
    shutil.copytree(keyring().directory, run_dir / "keys")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MASA_ADMIN_TOKEN", raising=False)
    monkeypatch.delenv("MASA_JWT_ISSUER_KEY_FILE", raising=False)
    monkeypatch.setenv("MASA_RUN_DIR", ".masa")
    token = admin_token("ops", ttl_seconds=60)
    principal = TokenVerifier(AuthSettings(jwt_jwks_file=keyring().jwks)).verify(token)
    assert (principal.subject, principal.roles) == ("ops", frozenset({Role.ADMIN}))
    assert development_issuer().identity == "issuer"
