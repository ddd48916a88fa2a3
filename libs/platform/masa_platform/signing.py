"""Facts the table-engine publishes, sealed so that whoever reads them knows they are its own.

- A **table result** (``masa.table.v1.<table>.result``: a hand's, a game's end) is what the ledger
  pays and matchmaking rates from. The engine signs it with the results key (Ed25519, engines
  only): header ``Masa-Signature: <kid>.<signature>`` over the subject and the payload, so a
  result moved to another table's subject, changed in any byte, or made by anyone without the
  key does not verify. The ledger and matchmaking hold the public keys only
  (:class:`ResultVerifier`).
- A **table-log entry** and a **snapshot** are written and read by engines alone, so they carry
  an HMAC-SHA256 under a key only engines hold (:class:`Sealer`): as strong a proof among them,
  at a few microseconds where a signature costs a tenth of a millisecond per action.

Both cover the subject (or key) as well as the bytes, with a domain string of their own, so a
seal of one kind never stands for another.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

from masa_platform.keys import RESULTS, KeySetFile, SigningKey

__all__ = [
    "RESULT_SIGNATURE",
    "SEAL",
    "ResultSigner",
    "ResultVerifier",
    "Sealer",
    "UnknownKey",
    "Unverified",
]

RESULT_SIGNATURE: Final = "Masa-Signature"
SEAL: Final = "Masa-Seal"
_RESULT_DOMAIN: Final = b"masa-result-v1\n"
_SEAL_DOMAIN: Final = b"masa-seal-v1\n"
# A signature header is a kid and 86 base64 characters; anything much longer is not one.
_MAX_HEADER: Final = 256


class Unverified(Exception):
    """A result whose signature is missing, malformed, by an unknown key or wrong."""


class UnknownKey(Unverified):
    """A result signed with a key this process does not hold: forged, or signed with a key
    a rotation added that has not reached this process yet (worth a retry, for a while)."""


def _signed(domain: bytes, subject: str, payload: bytes) -> bytes:
    return domain + subject.encode() + b"\n" + payload


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class ResultSigner:
    """The engine's half: the signature header of a result it publishes."""

    def __init__(self, key: SigningKey) -> None:
        if key.identity != RESULTS:
            raise ValueError(f"results are signed with the {RESULTS} key, not {key.identity}'s")
        self._key = key

    def header(self, subject: str, payload: bytes) -> str:
        signature = self._key.sign(_signed(_RESULT_DOMAIN, subject, payload))
        return f"{self._key.kid}.{_b64(signature)}"


class ResultVerifier:
    """The ledger's and matchmaking's half: checks a result's signature against the results
    keys of ``MASA_RESULT_KEYS_FILE`` (:class:`~masa_platform.keys.KeySetFile`: a key added is
    trusted at the first result that names it, a key retired stops being trusted within 30 s).
    """

    def __init__(self, path: Path, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._keys = KeySetFile(path, clock=clock)

    def verify(self, subject: str, payload: bytes, header: str | None) -> None:
        """Return if ``header`` is a good signature of ``payload`` on ``subject``; raise
        :class:`Unverified` saying why not (:class:`UnknownKey` for a key not held)."""
        if not header:
            raise Unverified("the result is not signed")
        if len(header) > _MAX_HEADER:
            raise Unverified("the signature header is too long")
        kid, _, encoded = header.partition(".")
        try:
            signature = _unb64(encoded)
        except (binascii.Error, ValueError):
            raise Unverified("the signature is not base64") from None
        keys = self._keys.current(kid)
        if keys.identity_of(kid) is None:
            raise UnknownKey(f"the result is signed with an unknown key {kid[:40]!r}")
        data = _signed(_RESULT_DOMAIN, subject, payload)
        if not keys.verify(kid, signature, data, identity=RESULTS):
            raise Unverified(f"the signature by {kid} does not hold for this result")


class Sealer:
    """HMAC-SHA256 seals of the engines' own records (log entries, snapshots): made with the
    first key, accepted from any (a rotation puts the new key first and keeps the old one until
    nothing sealed with it is read)."""

    def __init__(self, keys: Sequence[bytes]) -> None:
        if not keys or any(len(key) < 32 for key in keys):
            raise ValueError("a sealer needs keys of at least 32 bytes each")
        self._keys = tuple(keys)

    def seal(self, subject: str, payload: bytes) -> str:
        return self._seal(self._keys[0], _signed(_SEAL_DOMAIN, subject, payload))

    def holds(self, subject: str, payload: bytes, seal: str | None) -> bool:
        """Whether ``seal`` is one of the keys' seal of ``payload`` on ``subject`` (each
        compared in constant time)."""
        if not seal or len(seal) > _MAX_HEADER:
            return False
        data = _signed(_SEAL_DOMAIN, subject, payload)
        return any(hmac.compare_digest(self._seal(key, data), seal) for key in self._keys)

    @staticmethod
    def _seal(key: bytes, data: bytes) -> str:
        return _b64(hmac.new(key, data, hashlib.sha256).digest())
