"""``masa-keys``: make a deployment's keys, and rotate them without stopping anything.

- ``masa-keys generate DIR`` writes a fresh keyring (:class:`~masa_platform.keys.Keyring`): the
  issuer's, the service identities' and the results key (Ed25519 PEM, owner-only), the log MAC
  key, and the public JWK sets ``jwks.json`` and ``results.jwks.json``.
- ``masa-keys rotate DIR WHAT`` makes a new key for ``WHAT`` (``issuer``, ``table-engine``,
  ``matchmaking`` or ``results``): the private key file is replaced, and the new public key is
  *added* to its JWK set beside the old one. Publish the JWK set to every service first (they
  read it again when a token or result names a key they do not hold), then give the signer its
  new key.
- ``masa-keys rotate DIR log-mac`` adds a new MAC key *after* the sealing one: engines accept
  it once they have the file, and nothing seals with it yet. When every engine has it,
  ``masa-keys promote DIR`` puts it first, so that engines seal with it from their next start
  and an engine still on the old order reads what the others seal (two rolling restarts).
- ``masa-keys retire DIR KID`` removes an old key from its JWK set once nothing signed with it
  is still in use (the longest token lifetime has passed; every result signed with it is
  settled); ``masa-keys retire DIR log-mac`` keeps only the sealing MAC key, once every table
  sealed with the others has ended. The key that signs now is never retired.

Each command prints one JSON document of what it did. Exit codes: 0 done, 2 refused (a
keyring already there, an unknown identity or key id, the current key).
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from masa_platform.keys import (
    ISSUER,
    MAC_BYTES,
    RESULTS,
    SERVICE_IDENTITIES,
    KeyFileError,
    Keyring,
    SigningKey,
    key_id,
    load_jwks,
    load_mac_keys,
    write_private,
)

__all__ = ["main"]

LOG_MAC: Final = "log-mac"
_SIGNING: Final = (ISSUER, *SERVICE_IDENTITIES, RESULTS)


class Refused(Exception):
    """A command that would break the keyring, or names what is not in it."""


def _jwks_of(ring: Keyring, identity: str) -> Path:
    return ring.results_jwks if identity == RESULTS else ring.jwks


def _read_jwks(path: Path) -> dict[str, Any]:
    load_jwks(path)  # refuses a broken set before it is rewritten
    document: dict[str, Any] = json.loads(path.read_text())
    return document


def _write_jwks(path: Path, document: dict[str, Any]) -> None:
    staged = path.with_suffix(".tmp")
    staged.write_text(json.dumps(document, indent=2) + "\n")
    # A rename, so that a service reading the set sees the old one or the new one, never half.
    staged.replace(path)


def generate(directory: Path) -> dict[str, Any]:
    ring = Keyring(directory)
    if ring.jwks.exists():
        raise Refused(f"{directory} already holds a keyring: rotate its keys instead")
    Keyring.generate(directory)
    return {"generated": str(directory), "kids": _kids(ring)}


def rotate(directory: Path, what: str) -> dict[str, Any]:
    ring = Keyring(directory)
    if what == LOG_MAC:
        keys = (*load_mac_keys(ring.log_mac), secrets.token_bytes(MAC_BYTES))
        _write_mac_keys(ring, keys)
        return {"rotated": LOG_MAC, "mac_keys": len(keys), "sealing": 1}
    if what not in _SIGNING:
        raise Refused(f"no key {what!r}: one of {', '.join((*_SIGNING, LOG_MAC))}")
    jwks = _jwks_of(ring, what)
    document = _read_jwks(jwks)
    private = Ed25519PrivateKey.generate()
    kid = key_id(private.public_key(), what)
    document["keys"].insert(0, SigningKey(private, what, kid).public_jwk())
    _write_jwks(jwks, document)
    pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    write_private(ring.private(what), pem.decode())
    return {"rotated": what, "kid": kid, "jwks": str(jwks)}


def promote(directory: Path) -> dict[str, Any]:
    ring = Keyring(directory)
    keys = load_mac_keys(ring.log_mac)
    if len(keys) < 2:
        raise Refused("one MAC key only: rotate log-mac first")
    _write_mac_keys(ring, (keys[-1], *keys[:-1]))
    return {"promoted": LOG_MAC, "mac_keys": len(keys), "sealing": 1}


def _write_mac_keys(ring: Keyring, keys: Sequence[bytes]) -> None:
    write_private(ring.log_mac, "".join(f"{key.hex()}\n" for key in keys))


def retire(directory: Path, kid: str) -> dict[str, Any]:
    ring = Keyring(directory)
    if kid == LOG_MAC:
        keys = load_mac_keys(ring.log_mac)
        _write_mac_keys(ring, keys[:1])
        return {"retired": LOG_MAC, "mac_keys_removed": len(keys) - 1}
    if kid in _signing_now(ring):
        raise Refused(f"{kid} signs now: rotate it first, then retire it")
    for jwks in (ring.jwks, ring.results_jwks):
        document = _read_jwks(jwks)
        kept = [jwk for jwk in document["keys"] if jwk.get("kid") != kid]
        if len(kept) < len(document["keys"]):
            _write_jwks(jwks, {**document, "keys": kept})
            return {"retired": kid, "jwks": str(jwks)}
    raise Refused(f"no key {kid!r} in {ring.jwks.name} or {ring.results_jwks.name}")


def _signing_now(ring: Keyring) -> set[str]:
    """The key that signs now for each identity: the first of its identity in its JWK set
    (rotate puts a new key first). Read from the public sets, so that a keyring without some
    private key (the issuer's, with the identity provider) can still retire."""
    first: dict[str, str] = {}
    for jwks in (ring.jwks, ring.results_jwks):
        for kid, (_, identity) in load_jwks(jwks).keys.items():
            first.setdefault(identity, kid)
    return set(first.values())


def _kids(ring: Keyring) -> dict[str, list[str]]:
    kids: dict[str, list[str]] = {}
    for jwks in (ring.jwks, ring.results_jwks):
        for kid, (_, identity) in load_jwks(jwks).keys.items():
            kids.setdefault(identity, []).append(kid)
    return kids


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="masa-keys", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    made = commands.add_parser("generate", help="write a fresh keyring into DIR")
    made.add_argument("directory", type=Path)
    rotated = commands.add_parser("rotate", help="a new key for WHAT, the old one kept beside it")
    rotated.add_argument("directory", type=Path)
    rotated.add_argument("what", choices=[*_SIGNING, LOG_MAC])
    promoted = commands.add_parser("promote", help="seal with the newest log MAC key")
    promoted.add_argument("directory", type=Path)
    retired = commands.add_parser("retire", help="remove an old key (a kid, or log-mac)")
    retired.add_argument("directory", type=Path)
    retired.add_argument("kid")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "generate":
            done = generate(args.directory)
        elif args.command == "rotate":
            done = rotate(args.directory, args.what)
        elif args.command == "promote":
            done = promote(args.directory)
        else:
            done = retire(args.directory, args.kid)
    except (Refused, KeyFileError) as error:
        print(f"masa-keys: {error}", file=sys.stderr)
        return 2
    print(json.dumps(done, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
