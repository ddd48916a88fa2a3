"""The parts of ``masa-load`` that need no server: the game mix, the rate cap, the latency
histogram and the token file. (Runs against a real stack are in tests/e2e/test_e2e_load.py.)"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
from pathlib import Path

import pytest
from masa_client.load.credentials import CredentialsError, from_file, from_issuer, subject_of
from masa_client.load.pacing import RateCap
from masa_client.load.report import LatencyHistogram
from masa_client.load.tables import GameMix, MixError, TablePlan
from masa_platform.auth import Role, TokenSigner, TokenVerifier
from masa_platform.keys import ISSUER
from masa_platform.runner import run
from masa_platform.settings import AuthSettings
from masa_platform.testing import auth_settings, keyring, token


def test_a_mix_follows_its_weights_in_every_run_of_slots() -> None:
    mix = GameMix.parse("elevator=3,fiftyone=1")
    assert [mix.game_of(slot) for slot in range(8)] == ["elevator"] * 3 + ["fiftyone"] + [
        "elevator"
    ] * 3 + ["fiftyone"]
    assert GameMix.parse("fiftyone").game_of(5) == "fiftyone"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("poker", "unknown game"),
        ("elevator=x", "whole number"),
        ("elevator=0", "positive weight"),
        ("elevator,elevator", "named twice"),
    ],
)
def test_a_bad_mix_is_refused(text: str, message: str) -> None:
    with pytest.raises(MixError, match=message):
        GameMix.parse(text)


def test_51_tables_seat_four() -> None:
    with pytest.raises(MixError, match="seat four"):
        TablePlan(seats=5).check(GameMix.parse("elevator,fiftyone"))


async def _capped_sends(rate: float) -> list[float]:
    cap = RateCap(rate)
    sent: list[float] = []

    async def caller() -> None:
        for _ in range(5):
            sent.append(await cap.slot())

    await asyncio.gather(*(caller() for _ in range(20)))
    return sent


@pytest.mark.parametrize("event_loop", ["uvloop", "asyncio"])
def test_the_rate_cap_holds_across_concurrent_callers(event_loop: str) -> None:
    """masa-load runs on uvloop, whose clock moves in whole milliseconds: the cap holds by the
    real clock on it as on asyncio's loop."""
    rate = 200.0
    sent = run(_capped_sends(rate), event_loop=event_loop)
    # Turns are granted in order, at most half a gap closer than the rate's (a late one caught
    # up on).
    gaps = [later - earlier for earlier, later in itertools.pairwise(sent)]
    assert min(gaps) >= 0.5 / rate - 1e-6
    # However they bunch, n sends span at least (n - 1.5) gaps: no second holds more than
    # rate + 1 of them.
    assert all(
        later - earlier >= (n - 1.5) / rate - 1e-6
        for n in range(2, len(sent) + 1)
        for earlier, later in zip(sent, sent[n - 1 :], strict=False)
    )
    assert all(sum(1 for t in sent if start <= t < start + 1.0) <= rate + 1 for start in sent)


def test_the_histogram_reads_percentiles_within_its_bucket_width() -> None:
    histogram = LatencyHistogram()
    for ms in range(1, 1001):
        histogram.add(ms / 1000)
    summary = histogram.summary()
    assert summary["count"] == 1000
    assert 500 <= summary["p50"] <= 500 * 1.02
    assert 990 <= summary["p99"] <= 990 * 1.02
    assert summary["max"] == 1000
    assert summary["histogram_ms"]["le_1"] == 1
    assert summary["histogram_ms"]["le_10"] == 5
    assert sum(summary["histogram_ms"].values()) == 1000


def test_a_token_file_gives_the_players_their_subjects(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    players = [token(f"p{n}") for n in range(6)]
    path.write_text(json.dumps({"service": token("lobby", "admin"), "players": players}))
    credentials = from_file(path)
    assert [player.name for player in credentials.seat_players(1, 4)] == ["p4", "p5", "p0", "p1"]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("[]", "expected an object"),
        ('{"service": "", "players": []}', "service must be a token"),
        ('{"service": "a.b.c", "players": [1]}', "list of tokens"),
        ('{"service": "a.b.c", "players": ["not-a-jwt"]}', "three dot-separated"),
    ],
)
def test_a_bad_token_file_is_refused(tmp_path: Path, document: str, message: str) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(document)
    with pytest.raises(CredentialsError, match=message):
        from_file(path)


def test_a_token_without_a_subject_is_refused() -> None:
    claims = base64.urlsafe_b64encode(b'{"aud": "masa"}').decode().rstrip("=")
    with pytest.raises(CredentialsError, match="no subject"):
        subject_of(f"e30.{claims}.sig")


def test_minted_players_are_valid_and_distinct() -> None:
    issuer = TokenSigner(keyring().signer(ISSUER), AuthSettings())
    credentials = from_issuer(issuer, players=8, prefix="run", ttl_seconds=60)
    seated = credentials.seat_players(0, 6)
    assert len({player.name for player in seated}) == 6
    verifier = TokenVerifier(auth_settings())
    minted = seated[0].metadata[0][1].removeprefix("Bearer ")
    assert verifier.verify(minted).subject == "run-0"
    # The tables are created with an operator's token: CreateTable is no player's.
    service = credentials.service[0][1].removeprefix("Bearer ")
    assert verifier.verify(service).roles == {Role.ADMIN}
