"""A deployment's keys (masa_platform.keys, ``masa-keys``): results and seals that name their
key and cover their subject, and rotations that add a key beside the old one, so that nothing
signed before the rotation is refused until the old key is retired on purpose."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from masa_platform.auth import Principal, Role, TokenSigner, TokenVerifier, VerifiedTokens
from masa_platform.errors import Unauthenticated
from masa_platform.keys import ISSUER, RESULTS, Keyring, load_jwks, load_mac_keys
from masa_platform.keys_cli import main
from masa_platform.settings import AuthSettings, SettingsError, load_settings
from masa_platform.signing import ResultSigner, ResultVerifier, Sealer, UnknownKey, Unverified

SUBJECT = "masa.table.v1.t1.result"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, object]]:
    code = main(list(argv))
    out = capsys.readouterr().out
    return code, json.loads(out) if out else {}


@pytest.fixture
def ring(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Keyring:
    code, done = _run(capsys, "generate", str(tmp_path / "keys"))
    assert code == 0
    kids = done["kids"]
    assert isinstance(kids, dict) and set(kids) == {ISSUER, "table-engine", "matchmaking", RESULTS}
    return Keyring(tmp_path / "keys")


def test_generate_refuses_to_overwrite_a_keyring(
    ring: Keyring, capsys: pytest.CaptureFixture[str]
) -> None:
    before = ring.private(ISSUER).read_bytes()
    assert main(["generate", str(ring.directory)]) == 2
    assert "already holds a keyring" in capsys.readouterr().err
    assert ring.private(ISSUER).read_bytes() == before
    assert all(ring.private(who).stat().st_mode & 0o077 == 0 for who in (ISSUER, RESULTS))


def test_a_result_verifies_only_as_signed_on_its_own_subject(ring: Keyring) -> None:
    header = ResultSigner(ring.signer(RESULTS)).header(SUBJECT, b"finished")
    verifier = ResultVerifier(ring.results_jwks)
    verifier.verify(SUBJECT, b"finished", header)
    for subject, payload, signature in (
        ("masa.table.v1.t2.result", b"finished", header),  # moved to another table
        (SUBJECT, b"finishee", header),  # one byte changed
        (SUBJECT, b"finished", None),
        (SUBJECT, b"finished", header[:-4] + "AAAA"),
        (SUBJECT, b"finished", "x" * 400),
    ):
        with pytest.raises(Unverified):
            verifier.verify(subject, payload, signature)
    # The issuer's key is no results key, though both are the deployment's.
    forged = f"{ring.signer(ISSUER).kid}.{header.partition('.')[2]}"
    with pytest.raises(Unverified):
        verifier.verify(SUBJECT, b"finished", forged)


class Clock:
    """A monotonic clock the test moves on."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def test_rotating_the_issuer_keeps_old_tokens_good_until_the_old_key_is_retired(
    ring: Keyring, capsys: pytest.CaptureFixture[str]
) -> None:
    """And once retired, the old key's tokens are refused by the running server within 30 s,
    those it had verified and kept included."""
    settings = AuthSettings(jwt_jwks_file=ring.jwks)
    clock = Clock()
    verifier = TokenVerifier(settings, clock=clock)
    kept = VerifiedTokens(verifier)
    old_kid = ring.signer(ISSUER).kid
    old = TokenSigner(ring.signer(ISSUER), settings).mint("ayse", (Role.ADMIN,))
    assert kept.principal(old).subject == "ayse"

    code, done = _run(capsys, "rotate", str(ring.directory), ISSUER)
    assert code == 0 and done["kid"] != old_kid
    new = TokenSigner(ring.signer(ISSUER), settings).mint("bora", (Role.PLAYER,))
    # The running verifier reads the set again for the key it does not hold.
    assert kept.principal(new).subject == "bora"
    assert kept.principal(old).subject == "ayse"

    assert main(["retire", str(ring.directory), str(done["kid"])]) == 2
    assert "signs now" in capsys.readouterr().err
    code, _ = _run(capsys, "retire", str(ring.directory), old_kid)
    assert code == 0
    clock.now += 31
    assert kept.principal(new).subject == "bora"
    with pytest.raises(Unauthenticated):
        kept.principal(old)


def test_kept_tokens_are_checked_once_each_and_no_more_are_kept_than_the_bound(
    ring: Keyring, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = AuthSettings(jwt_jwks_file=ring.jwks)
    verifier = TokenVerifier(settings)
    checks: Counter[str] = Counter()
    check = verifier.verify_until

    def counted(token: str) -> tuple[Principal, float]:
        checks[token] += 1
        return check(token)

    monkeypatch.setattr(verifier, "verify_until", counted)
    signer = TokenSigner(ring.signer(ISSUER), settings)
    tokens = [signer.mint(f"p{n}", (Role.PLAYER,)) for n in range(30)]
    kept = VerifiedTokens(verifier, max_entries=20)
    assert VerifiedTokens(verifier).max_entries == AuthSettings().verified_tokens == 50_000
    for _ in range(3):
        for number, token in enumerate(tokens[:20]):
            assert kept.principal(token).subject == f"p{number}"
    assert [checks[token] for token in tokens[:20]] == [1] * 20
    assert len(kept) == 20
    # Beyond the bound the oldest verifications go first.
    for token in tokens[20:]:
        kept.principal(token)
    assert len(kept) == 20
    assert kept.principal(tokens[0]).subject == "p0"
    assert checks[tokens[0]] == 2
    assert kept.principal(tokens[29]).subject == "p29"
    assert checks[tokens[29]] == 1
    # A token kept is still refused once changed, though it differs by one character only.
    with pytest.raises(Unauthenticated):
        kept.principal(tokens[29][:-2] + ("A" if tokens[29][-2] != "A" else "B") + tokens[29][-1])
    for value in ("0", "10000001", "many"):
        with pytest.raises(SettingsError, match="MASA_VERIFIED_TOKENS"):
            load_settings(AuthSettings, {"MASA_VERIFIED_TOKENS": value})
    assert load_settings(AuthSettings, {"MASA_VERIFIED_TOKENS": "7"}).verified_tokens == 7


def test_rotating_the_results_key_is_taken_up_and_its_retirement_too_by_a_running_verifier(
    ring: Keyring, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = Clock()
    verifier = ResultVerifier(ring.results_jwks, clock=clock)
    old_kid = ring.signer(RESULTS).kid
    before = ResultSigner(ring.signer(RESULTS)).header(SUBJECT, b"a")
    assert main(["rotate", str(ring.directory), RESULTS]) == 0
    capsys.readouterr()
    after = ResultSigner(ring.signer(RESULTS)).header(SUBJECT, b"b")
    assert len(load_jwks(ring.results_jwks).keys) == 2
    verifier.verify(SUBJECT, b"b", after)
    verifier.verify(SUBJECT, b"a", before)
    assert main(["retire", str(ring.directory), old_kid]) == 0
    capsys.readouterr()
    clock.now += 31
    verifier.verify(SUBJECT, b"b", after)
    with pytest.raises(UnknownKey):
        verifier.verify(SUBJECT, b"a", before)


def test_a_mac_key_rotates_in_two_steps_so_that_no_engine_meets_a_seal_it_cannot_read(
    ring: Keyring, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rotate adds the new key as accepted only; promote makes it the sealing one. An engine
    that restarted on either file reads the seals of an engine on the other."""
    log = "masa.table.v1.t1.log"
    first = Sealer(load_mac_keys(ring.log_mac))
    sealed = first.seal(log, b"entry")
    assert main(["rotate", str(ring.directory), "log-mac"]) == 0
    accepting = Sealer(load_mac_keys(ring.log_mac))
    assert accepting.seal(log, b"entry") == sealed
    assert main(["promote", str(ring.directory)]) == 0
    promoted = Sealer(load_mac_keys(ring.log_mac))
    resealed = promoted.seal(log, b"entry")
    assert resealed != sealed
    assert accepting.holds(log, b"entry", resealed) and promoted.holds(log, b"entry", sealed)
    assert not first.holds(log, b"entry", resealed)
    assert not promoted.holds("masa.table.v1.t2.log", b"entry", resealed)
    assert main(["retire", str(ring.directory), "log-mac"]) == 0
    capsys.readouterr()
    retired = Sealer(load_mac_keys(ring.log_mac))
    assert retired.holds(log, b"entry", resealed)
    assert not retired.holds(log, b"entry", sealed)
    assert main(["promote", str(ring.directory)]) == 2
    assert "one MAC key only" in capsys.readouterr().err


def test_an_operators_keyring_without_the_issuers_private_key_still_retires(
    ring: Keyring, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issuer's key lives with the identity provider: retiring is read from the public
    sets, and the key that signs now is still never retired."""
    old = ring.signer(RESULTS).kid
    assert main(["rotate", str(ring.directory), RESULTS]) == 0
    new = ring.signer(RESULTS).kid
    ring.private(ISSUER).unlink()
    assert main(["retire", str(ring.directory), new]) == 2
    assert main(["retire", str(ring.directory), old]) == 0
    capsys.readouterr()
    assert list(load_jwks(ring.results_jwks).keys) == [new]


def test_unknown_keys_and_broken_files_are_refused_and_change_nothing(
    ring: Keyring, capsys: pytest.CaptureFixture[str]
) -> None:
    jwks = ring.jwks.read_bytes()
    assert main(["retire", str(ring.directory), "issuer-000000000000"]) == 2
    ring.log_mac.write_text("not hex\n")
    assert main(["rotate", str(ring.directory), "log-mac"]) == 2
    assert "not hex" in capsys.readouterr().err
    assert ring.jwks.read_bytes() == jwks
    assert ring.log_mac.read_text() == "not hex\n"
