"""Who ``masa-load`` plays as: an operator's token that creates the tables, and player tokens.

Tokens are signed with the issuer key of a development stack (masa_client.issuer), or read
from a token file for a deployment whose issuer the operator does not hand out. The file is
JSON: ``{"service": "<jwt>", "players": ["<jwt>", ...]}`` (``service`` is the token that may
create tables: an admin's); each player token's subject is read from the token itself (the
client cannot check a signature; the engine does).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from masa_platform.auth import Role, TokenSigner

__all__ = ["Credentials", "CredentialsError", "Metadata", "from_file", "from_issuer"]

Metadata = tuple[tuple[str, str], ...]

# The largest seat count of any game (Elevator seats six): a table needs distinct players.
MOST_SEATS: Final = 6
MAX_TOKEN_FILE_BYTES: Final = 16 * 1024 * 1024


class CredentialsError(ValueError):
    """The token file or the secret cannot give the tokens a run needs."""


@dataclass(frozen=True, slots=True)
class Player:
    name: str
    metadata: Metadata


@dataclass(frozen=True, slots=True)
class Credentials:
    """The service's call metadata and a pool of players, handed out to seats in turn."""

    service: Metadata
    players: tuple[Player, ...]

    def seat_players(self, table_slot: int, seats: int) -> list[Player]:
        """``seats`` distinct players for the table in ``table_slot``.

        With a pool as large as every seat of every table, no player sits at two tables.
        """
        if seats > len(self.players):
            raise CredentialsError(f"{seats} seats need {seats} players, the pool has fewer")
        start = table_slot * seats
        return [self.players[(start + seat) % len(self.players)] for seat in range(seats)]


def _bearer(token: str) -> Metadata:
    return (("authorization", f"Bearer {token}"),)


def from_issuer(
    issuer: TokenSigner, *, players: int, prefix: str, ttl_seconds: float
) -> Credentials:
    """Tokens signed by ``issuer``: an operator's for the tables, and ``players`` players named
    ``prefix-N``."""
    service = issuer.mint(f"{prefix}-lobby", (Role.ADMIN,), ttl_seconds=ttl_seconds)
    pool = tuple(
        Player(
            f"{prefix}-{number}",
            _bearer(issuer.mint(f"{prefix}-{number}", ttl_seconds=ttl_seconds)),
        )
        for number in range(max(players, MOST_SEATS))
    )
    return Credentials(_bearer(service), pool)


def from_file(path: Path) -> Credentials:
    """The tokens of a token file (see the module doc)."""
    if path.stat().st_size > MAX_TOKEN_FILE_BYTES:
        raise CredentialsError(f"{path}: larger than {MAX_TOKEN_FILE_BYTES} bytes")
    try:
        document = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CredentialsError(f"{path}: not JSON ({error})") from None
    if not isinstance(document, dict):
        raise CredentialsError(f"{path}: expected an object with service and players")
    service, players = document.get("service"), document.get("players")
    if not isinstance(service, str) or not service:
        raise CredentialsError(f"{path}: service must be a token")
    if not isinstance(players, list) or not all(isinstance(p, str) for p in players):
        raise CredentialsError(f"{path}: players must be a list of tokens")
    pool = tuple(Player(subject_of(token), _bearer(token)) for token in players)
    if len({player.name for player in pool}) != len(pool):
        raise CredentialsError(f"{path}: two player tokens have the same subject")
    return Credentials(_bearer(service), pool)


def subject_of(token: str) -> str:
    """The ``sub`` claim of a JWT, read without checking the signature (the server does)."""
    parts = token.split(".")
    if len(parts) != 3:
        raise CredentialsError("a token must be a JWT (three dot-separated parts)")
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload))
    except (binascii.Error, UnicodeDecodeError, json.JSONDecodeError):
        raise CredentialsError("a token's claims are not base64url JSON") from None
    subject = claims.get("sub") if isinstance(claims, dict) else None
    if not isinstance(subject, str) or not subject:
        raise CredentialsError("a token has no subject")
    return subject
