from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from masa_platform.settings import (
    AuthSettings,
    PageTokenSettings,
    PlatformSettings,
    ServerSettings,
    SettingsError,
    TlsSettings,
    load_settings,
)


def test_defaults_apply_when_nothing_is_set() -> None:
    settings = load_settings(PlatformSettings, {})
    assert settings == PlatformSettings()
    assert settings.server.grpc_port == 0
    # No public keys: no token is accepted until the deployment names its JWK set.
    assert settings.auth.jwt_jwks_file is None
    assert not settings.tls.enabled


def test_every_platform_setting_is_read_from_its_masa_variable(tmp_path: Path) -> None:
    (tmp_path / "jwks.json").write_text('{"keys": []}')
    (tmp_path / "me.pem").write_text("a key")
    env = {
        "MASA_SERVICE_NAME": "table-engine",
        "MASA_VERSION": "1.2.3",
        "MASA_LOG_LEVEL": "debug",
        "MASA_METRICS_PORT": "9100",
        "MASA_NATS_URL": "nats://nats:4222",
        "MASA_EVENT_LOOP": "asyncio",
        "MASA_GRPC_HOST": "0.0.0.0",
        "MASA_GRPC_PORT": "50051",
        "MASA_MAX_MESSAGE_BYTES": "1048576",
        "MASA_MAX_CONCURRENT_RPCS": "0",
        "MASA_GRACE_SECONDS": "2.5",
        "MASA_JWT_ISSUER": "issuer",
        "MASA_JWT_AUDIENCE": "audience",
        "MASA_JWT_LEEWAY_SECONDS": "5",
        "MASA_JWT_JWKS_FILE": str(tmp_path / "jwks.json"),
        "MASA_JWT_KEY_FILE": str(tmp_path / "me.pem"),
        "MASA_TLS_CERT": str(tmp_path / "c.pem"),
        "MASA_TLS_KEY": str(tmp_path / "k.pem"),
        "MASA_TLS_CA": str(tmp_path / "ca.pem"),
        "MASA_TLS_REQUIRE_CLIENT_CERT": "yes",
    }
    settings = load_settings(PlatformSettings, env)
    assert settings.service_name == "table-engine"
    assert settings.version == "1.2.3"
    assert settings.metrics_port == 9100
    assert settings.loop.event_loop == "asyncio"
    assert settings.server == ServerSettings("0.0.0.0", 50051, 1048576, 0, 2.5)
    assert settings.auth == AuthSettings(
        "issuer", "audience", 5.0, tmp_path / "jwks.json", tmp_path / "me.pem"
    )
    assert settings.tls == TlsSettings(
        tmp_path / "c.pem", tmp_path / "k.pem", tmp_path / "ca.pem", True
    )
    assert settings.tls.enabled


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"MASA_GRPC_PORT": "fifty"}, "MASA_GRPC_PORT: expected an integer, got 'fifty'"),
        ({"MASA_GRPC_PORT": "70000"}, "MASA_GRPC_PORT"),
        ({"MASA_GRACE_SECONDS": "soon"}, "MASA_GRACE_SECONDS: expected a number"),
        ({"MASA_TLS_REQUIRE_CLIENT_CERT": "maybe"}, "MASA_TLS_REQUIRE_CLIENT_CERT: expected a"),
        ({"MASA_LOG_LEVEL": "LOUD"}, "MASA_LOG_LEVEL"),
        ({"MASA_EVENT_LOOP": "trio"}, "MASA_EVENT_LOOP: 'trio' is not one of uvloop, asyncio"),
        ({"MASA_JWT_JWKS_FILE": "/no/such/jwks.json"}, "MASA_JWT_JWKS_FILE"),
        ({"MASA_JWT_KEY_FILE": "/no/such/key.pem"}, "MASA_JWT_KEY_FILE"),
        ({"MASA_JWT_LEEWAY_SECONDS": "-1"}, "MASA_JWT_LEEWAY_SECONDS"),
        ({"MASA_JWT_ISSUER": ""}, "MASA_JWT_ISSUER"),
        ({"MASA_TLS_CERT": "/c.pem"}, "MASA_TLS_KEY"),
        ({"MASA_TLS_REQUIRE_CLIENT_CERT": "true"}, "MASA_TLS_CA"),
    ],
)
def test_a_bad_value_names_the_variable(env: dict[str, str], named: str) -> None:
    with pytest.raises(SettingsError, match=named):
        load_settings(PlatformSettings, env)


@dataclass(frozen=True)
class EngineSettings:
    node_id: str
    turn_seconds: float = 30.0
    snapshot_every: int = 50
    data_dir: Path | None = None
    bot_levels: tuple[str, ...] = ("easy",)
    platform: PlatformSettings = field(default_factory=PlatformSettings)


def test_a_service_composes_its_own_settings_with_the_platform_ones() -> None:
    settings = load_settings(
        EngineSettings,
        {
            "MASA_NODE_ID": "engine-1",
            "MASA_TURN_SECONDS": "1.5",
            "MASA_DATA_DIR": "",
            "MASA_BOT_LEVELS": "easy,normal",
            "MASA_GRPC_PORT": "7000",
        },
    )
    assert settings.node_id == "engine-1"
    assert settings.turn_seconds == 1.5
    assert settings.snapshot_every == 50
    assert settings.data_dir is None
    assert settings.bot_levels == ("easy", "normal")
    assert settings.platform.server.grpc_port == 7000


def test_a_setting_without_default_is_required() -> None:
    with pytest.raises(SettingsError, match="MASA_NODE_ID is required"):
        load_settings(EngineSettings, {})


def test_settings_are_frozen() -> None:
    settings = PlatformSettings()
    with pytest.raises(AttributeError):
        # mypy refuses the assignment already; the test is that Python refuses it too.
        settings.service_name = "other"  # type: ignore[misc]


def test_the_process_environment_is_the_default_source(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASA_SERVICE_NAME", "bot")
    assert load_settings(PlatformSettings).service_name == "bot"


def test_the_page_token_key_is_hex_of_at_least_32_bytes_and_never_printed() -> None:
    key = "0123456789abcdef" * 4
    settings = load_settings(PageTokenSettings, {"MASA_PAGE_TOKEN_KEY": f" {key} "})
    assert settings.key() == bytes.fromhex(key)
    assert key not in repr(settings)
    for bad, named in (
        ("ab" * 31, "MASA_PAGE_TOKEN_KEY must be at least 32 bytes"),
        ("xy" * 32, "MASA_PAGE_TOKEN_KEY must be hex"),
    ):
        with pytest.raises(SettingsError, match=named):
            load_settings(PageTokenSettings, {"MASA_PAGE_TOKEN_KEY": bad})


def test_without_a_page_token_key_a_process_signs_with_its_own_and_warns_once() -> None:
    """Run in a fresh interpreter: the process's key is made once per process."""
    script = (
        "from masa_platform.settings import PageTokenSettings, load_settings\n"
        "first = load_settings(PageTokenSettings, {}).key()\n"
        "second = PageTokenSettings().key()\n"
        "print(first.hex(), second.hex())\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    first, second = ran.stdout.split()
    assert first == second and len(bytes.fromhex(first)) == 32
    assert ran.stderr.count("MASA_PAGE_TOKEN_KEY is unset") == 1
    assert "will not survive a restart or work on another instance" in ran.stderr
    again = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert again.stdout.split()[0] != first, "each process makes its own key"
