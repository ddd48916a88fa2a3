"""The keys of a deployment: who may sign what, and the public halves everyone else holds.

Every key is Ed25519 (``cryptography``), and each has one job:

- the **issuer** key signs player and admin tokens; only the issuer holds it (an identity
  provider in production; ``make run``, ``masa token`` and the tests in development);
- a **service identity** key per calling service (``table-engine``, ``matchmaking``) signs that
  service's own tokens and no one else's: a token it signs says who it is, never more;
- the **results** key signs the table results the engines publish, which the ledger pays and
  matchmaking rates from; only engines hold it;
- the **log MAC** key (32 random bytes, HMAC-SHA256) seals each table-log entry; only engines
  write and read the log, so a shared secret among them is enough, and it costs a few
  microseconds where a signature would cost a tenth of a millisecond per action.

The services hold the public halves only, as JWK sets (RFC 7517): ``jwks.json`` (the issuer and
the service identities, for every gRPC server) and ``results.jwks.json`` (for the ledger and
matchmaking). Each JWK carries ``masa_identity``, the one identity its key may sign for, and a
``kid`` derived from the key, so a token or a result names the key it was signed with and a
rotation adds a key beside the old one (docs/security.md).

:class:`Keyring` writes a whole set into a folder (``masa-keys generate``; ``make run`` makes one
under ``.masa/keys``) and hands out the settings and environment of each service.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

__all__ = [
    "ISSUER",
    "MAC_BYTES",
    "RESULTS",
    "SERVICE_IDENTITIES",
    "KeyFileError",
    "KeySetFile",
    "Keyring",
    "PublicKeys",
    "SigningKey",
    "jwks_document",
    "key_id",
    "load_jwks",
    "load_mac_keys",
    "load_signing_key",
    "parse_jwks",
    "write_private",
]

ISSUER: Final = "issuer"
RESULTS: Final = "results"
# The services that call other services, each with an identity key of its own. The ledger and
# the bot call nobody, so they hold no signing key at all.
SERVICE_IDENTITIES: Final = ("table-engine", "matchmaking")
MAC_BYTES: Final = 32
# The largest key file read: a PEM key is a few hundred bytes, a JWK set a few kilobytes.
_MAX_FILE_BYTES: Final = 1 << 20


class KeyFileError(ValueError):
    """A key file that is missing, unreadable or not what it should be."""


def key_id(public: Ed25519PublicKey, identity: str) -> str:
    """The ``kid`` of a key: its identity and a digest of the key itself."""
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return f"{identity}-{hashlib.sha256(raw).hexdigest()[:12]}"


@dataclass(frozen=True, slots=True)
class SigningKey:
    """A private key, the identity it signs for and its ``kid``."""

    private: Ed25519PrivateKey
    identity: str
    kid: str

    def sign(self, data: bytes) -> bytes:
        return self.private.sign(data)

    def public_jwk(self) -> dict[str, str]:
        raw = self.private.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        return {
            "kty": "OKP",
            "crv": "Ed25519",
            "x": _b64(raw),
            "kid": self.kid,
            "alg": "EdDSA",
            "use": "sig",
            "masa_identity": self.identity,
        }


@dataclass(frozen=True, slots=True)
class PublicKeys:
    """A JWK set: each key by its ``kid``, with the identity it may sign for."""

    keys: Mapping[str, tuple[Ed25519PublicKey, str]]

    def identity_of(self, kid: str) -> str | None:
        found = self.keys.get(kid)
        return found[1] if found is not None else None

    def key(self, kid: str) -> Ed25519PublicKey | None:
        found = self.keys.get(kid)
        return found[0] if found is not None else None

    def verify(self, kid: str, signature: bytes, data: bytes, *, identity: str) -> bool:
        """Whether ``signature`` over ``data`` is by key ``kid`` of ``identity``."""
        found = self.keys.get(kid)
        if found is None or found[1] != identity:
            return False
        try:
            found[0].verify(signature, data)
        except InvalidSignature:
            return False
        return True


def load_signing_key(path: Path, identity: str) -> SigningKey:
    """An Ed25519 private key from a PEM (PKCS #8) file, to sign for ``identity``."""
    data = _read(path)
    try:
        private = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as error:
        raise KeyFileError(f"{path}: not a PEM private key ({error})") from None
    if not isinstance(private, Ed25519PrivateKey):
        raise KeyFileError(f"{path}: not an Ed25519 key")
    return SigningKey(private, identity, key_id(private.public_key(), identity))


def load_jwks(path: Path) -> PublicKeys:
    """The Ed25519 keys of a JWK set file; any other kind of key in it is refused."""
    try:
        document = json.loads(_read(path))
    except ValueError as error:
        raise KeyFileError(f"{path}: not JSON ({error})") from None
    return parse_jwks(document, str(path))


def parse_jwks(document: Any, where: str = "the JWK set") -> PublicKeys:
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise KeyFileError(f'{where}: a JWK set is an object with a "keys" list')
    keys: dict[str, tuple[Ed25519PublicKey, str]] = {}
    for number, jwk in enumerate(document["keys"]):
        if not isinstance(jwk, dict):
            raise KeyFileError(f"{where}: key {number} is not an object")
        if (jwk.get("kty"), jwk.get("crv")) != ("OKP", "Ed25519"):
            raise KeyFileError(f"{where}: key {number} is not an Ed25519 key (kty OKP)")
        kid, identity, x = (_text(jwk, name) for name in ("kid", "masa_identity", "x"))
        if not (kid and identity and x):
            raise KeyFileError(f"{where}: key {number} needs kid, masa_identity and x")
        try:
            public = Ed25519PublicKey.from_public_bytes(_unb64(x))
        except ValueError as error:
            raise KeyFileError(f"{where}: key {kid}: {error}") from None
        if kid in keys:
            raise KeyFileError(f"{where}: kid {kid} twice")
        keys[kid] = (public, identity)
    return PublicKeys(keys)


def _text(jwk: Mapping[str, Any], name: str) -> str:
    value = jwk.get(name)
    return value if isinstance(value, str) else ""


# A key named by a signature but not held: the file is read again, at most once a second.
_UNKNOWN_KEY_RELOAD_SECONDS: Final = 1.0
# Otherwise the file is looked at every 30 s, so that a key removed from it (retired) stops
# being trusted within that long by every running process.
_CHECK_EVERY_SECONDS: Final = 30.0


class KeySetFile:
    """The JWK set of one file as a running service holds it: read again when a signature
    names a key it does not hold (a rotation added one, at most once a second), and whenever
    the file changed, looked at every 30 s (a retirement removed one).

    A file that cannot be read keeps the keys held (it is being rewritten, or broken: a
    restart would refuse to start without it); at start it raises :class:`KeyFileError`.
    """

    def __init__(self, path: Path, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._path = path
        self._clock = clock
        self._stamp: tuple[int, int, int] | None = None
        self._looked_at = -math.inf
        self._reloaded_at = -math.inf
        # Bumped whenever the keys change, so that what was verified with them is checked again.
        self.generation = 0
        self.keys = PublicKeys({})
        self._load()

    def current(self, kid: str | None = None) -> PublicKeys:
        """The keys to check a signature by ``kid`` with (or to check that what was verified
        before still stands, without one)."""
        now = self._clock()
        unknown = kid is not None and self.keys.key(kid) is None
        if unknown and now - self._reloaded_at >= _UNKNOWN_KEY_RELOAD_SECONDS:
            self._reloaded_at = now
            self._looked_at = now
            self._load()
        elif now - self._looked_at >= _CHECK_EVERY_SECONDS:
            self._looked_at = now
            if _stamp(self._path) != self._stamp:
                self._load()
        return self.keys

    def _load(self) -> None:
        stamp = _stamp(self._path)
        if stamp is not None and stamp == self._stamp:
            return
        try:
            keys = load_jwks(self._path)
        except KeyFileError:
            if self._stamp is None:
                raise
            return
        self.keys = keys
        self._stamp = stamp
        self.generation += 1


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_ino, stat.st_mtime_ns, stat.st_size


def jwks_document(keys: list[SigningKey]) -> dict[str, list[dict[str, str]]]:
    return {"keys": [key.public_jwk() for key in keys]}


def load_mac_keys(path: Path) -> tuple[bytes, ...]:
    """A MAC key file: one key a line, as hex of at least 32 bytes. The first key seals; every
    one is accepted, so that a rotation adds a key in front and retires the old one once
    nothing sealed with it is read any more."""
    lines = [line.strip() for line in _read(path).decode(errors="replace").splitlines()]
    keys: list[bytes] = []
    for number, text in enumerate((line for line in lines if line), start=1):
        try:
            key = bytes.fromhex(text)
        except ValueError:
            raise KeyFileError(f"{path}: MAC key {number} is not hex") from None
        if len(key) < MAC_BYTES:
            raise KeyFileError(f"{path}: MAC key {number} has fewer than {MAC_BYTES} bytes")
        keys.append(key)
    if not keys:
        raise KeyFileError(f"{path}: no MAC key")
    return tuple(keys)


@dataclass(frozen=True, slots=True)
class Keyring:
    """A deployment's keys in one folder (development and tests; production keeps each in the
    secret of the one service that holds it)."""

    directory: Path

    @property
    def jwks(self) -> Path:
        return self.directory / "jwks.json"

    @property
    def results_jwks(self) -> Path:
        return self.directory / "results.jwks.json"

    @property
    def log_mac(self) -> Path:
        return self.directory / "log-mac.key"

    @property
    def results_key(self) -> Path:
        """The engines' results signing key (private)."""
        return self.private(RESULTS)

    def private(self, identity: str) -> Path:
        return self.directory / f"{identity}.pem"

    @classmethod
    def generate(cls, directory: Path) -> Keyring:
        """Fresh keys for every identity, written owner-only; the public sets beside them."""
        directory.mkdir(parents=True, exist_ok=True)
        ring = cls(directory)
        signing: list[SigningKey] = []
        for identity in (ISSUER, *SERVICE_IDENTITIES, RESULTS):
            private = Ed25519PrivateKey.generate()
            pem = private.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
            write_private(ring.private(identity), pem)
            signing.append(SigningKey(private, identity, key_id(private.public_key(), identity)))
        tokens = [key for key in signing if key.identity != RESULTS]
        results = [key for key in signing if key.identity == RESULTS]
        ring.jwks.write_text(json.dumps(jwks_document(tokens), indent=2) + "\n")
        ring.results_jwks.write_text(json.dumps(jwks_document(results), indent=2) + "\n")
        write_private(ring.log_mac, (secrets.token_hex(MAC_BYTES) + "\n").encode())
        return ring

    @classmethod
    def existing_or_new(cls, directory: Path) -> Keyring:
        """The keyring in ``directory``, made there first when it holds none."""
        ring = cls(directory)
        return ring if ring.jwks.is_file() else cls.generate(directory)

    def signer(self, identity: str) -> SigningKey:
        return load_signing_key(self.private(identity), identity)

    def env(self, service: str) -> dict[str, str]:
        """The ``MASA_*`` key settings of ``service``: the public keys every server holds,
        plus what that service alone may hold."""
        env = {"MASA_JWT_JWKS_FILE": str(self.jwks)}
        if service in SERVICE_IDENTITIES:
            env["MASA_JWT_KEY_FILE"] = str(self.private(service))
        if service == "table-engine":
            env["MASA_RESULT_SIGNING_KEY_FILE"] = str(self.private(RESULTS))
            env["MASA_LOG_MAC_KEY_FILE"] = str(self.log_mac)
        if service in ("ledger", "matchmaking"):
            env["MASA_RESULT_KEYS_FILE"] = str(self.results_jwks)
        return env


def _read(path: Path) -> bytes:
    try:
        with path.open("rb") as source:
            data = source.read(_MAX_FILE_BYTES + 1)
    except OSError as error:
        raise KeyFileError(f"{path}: {error.strerror or error}") from None
    if len(data) > _MAX_FILE_BYTES:
        raise KeyFileError(f"{path}: larger than a key file can be")
    return data


def write_private(path: Path, data: bytes | str) -> None:
    """``data`` into ``path``, readable by its owner only, from the moment it exists: written
    beside it and renamed over it, so that a reader sees the old key or the new one."""
    staged = path.with_name(f".{path.name}.new")
    staged.unlink(missing_ok=True)
    descriptor = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as out:
        out.write(data.encode() if isinstance(data, str) else data)
    staged.replace(path)


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
