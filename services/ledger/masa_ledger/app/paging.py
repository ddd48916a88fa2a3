"""Page tokens of the list calls (AIP-158): opaque, and bound to the filters they came with."""

from __future__ import annotations

import base64
import hashlib

from masa_ledger.domain.errors import BadInput

__all__ = ["DEFAULT_PAGE_SIZE", "MAX_PAGE_SIZE", "decode_token", "encode_token", "page_size"]

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500


def page_size(requested: int) -> int:
    if requested < 0:
        raise BadInput("page_size must not be negative", metadata={"field": "page_size"})
    return min(requested or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)


def encode_token(before_seq: int, filters: str) -> str:
    raw = f"{before_seq}:{_digest(filters)}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_token(token: str, filters: str) -> int | None:
    """The sequence to continue below, or None for the first page; a token made for other
    filters, or not made by the ledger, is INVALID_ARGUMENT."""
    if not token:
        return None
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        seq_text, digest = raw.split(":", 1)
        seq = int(seq_text)
    except (ValueError, UnicodeDecodeError):
        raise BadInput(
            "page_token is not a token of this list", metadata={"field": "page_token"}
        ) from None
    if digest != _digest(filters) or seq < 1:
        raise BadInput("page_token was made for other filters", metadata={"field": "page_token"})
    return seq


def _digest(filters: str) -> str:
    return hashlib.sha256(filters.encode()).hexdigest()[:16]
