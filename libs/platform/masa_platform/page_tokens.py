"""Page tokens of the List calls (AIP-158): opaque, keyed, bounded, and bound to their listing.

A token is the unpadded base64url of one version byte, a 32-byte HMAC-SHA256 tag and the
cursor as compact JSON. The tag covers the version, the cursor and a digest of what the page
was asked for: the listing (its method), the caller and the filters. So a token continues only
the listing it came from, for the caller it was given to, on a service that holds the key it
was made with, and no client can alter a cursor or make one. The cursor is signed, not
encrypted: it must hold nothing the caller may not see.

A cursor is a frozen dataclass of ``int`` and ``str`` fields, one type per use. Opening a token
checks, in this order: its length (before any decoding), its alphabet and canonical encoding,
the version, the tag (in constant time), and only then the cursor: a flat JSON object with
exactly the cursor's fields, integers in ``0 .. MAX_CURSOR_INT``, strings of at most
``MAX_CURSOR_TEXT`` printable ASCII characters (an id or a key), and no floats, NaN or
Infinity, booleans, nulls or nesting. Every refusal is
:class:`~masa_platform.errors.InvalidPageToken` (INVALID_ARGUMENT, reason INVALID_PAGE_TOKEN),
with the same message whichever check failed.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import hmac
import json
import re
import typing
from collections.abc import Sequence
from typing import Any, Final, NoReturn, TypeVar

from masa_platform.errors import InvalidPageToken

__all__ = [
    "MAX_CURSOR_INT",
    "MAX_CURSOR_TEXT",
    "MAX_TOKEN_CHARACTERS",
    "MIN_KEY_BYTES",
    "Filter",
    "PageTokens",
]

# The longest token opened or made; a longer one is refused before it is decoded.
MAX_TOKEN_CHARACTERS: Final = 512
# One less than the largest bigint of SQLite and PostgreSQL: a cursor, and one more than it,
# is always a valid query parameter.
MAX_CURSOR_INT: Final = 2**63 - 2
MAX_CURSOR_TEXT: Final = 64
MIN_KEY_BYTES: Final = 32

_VERSION: Final = b"\x01"
_TAG_BYTES: Final = hashlib.sha256().digest_size
_ALPHABET: Final = re.compile(r"[A-Za-z0-9_-]+")
_TEXT: Final = re.compile(r"[ -~]*")
_REFUSAL: Final = "page_token is not a token of this listing; list again from the first page"

Cursor = TypeVar("Cursor")
Filter = str | int


class PageTokens:
    """Seals cursors into page tokens and opens them, with one secret key."""

    def __init__(self, key: bytes) -> None:
        if len(key) < MIN_KEY_BYTES:
            raise ValueError(f"a page token key is at least {MIN_KEY_BYTES} bytes")
        self._key = key

    def seal(self, cursor: object, *, listing: str, caller: str, filters: Sequence[Filter]) -> str:
        """The token of ``cursor`` for the next page of ``listing`` as ``caller`` asked it with
        ``filters``. A cursor out of bounds is a defect of the caller (``ValueError``)."""
        fields = _fields(type(cursor))
        values = {name: getattr(cursor, name) for name in fields}
        for name, kind in fields.items():
            if not _fits(values[name], kind):
                raise ValueError(f"cursor field {name}={values[name]!r} is out of bounds")
        payload = json.dumps(values, separators=(",", ":"), sort_keys=True).encode()
        token = _encode(_VERSION + self._tag(payload, listing, caller, filters) + payload)
        if len(token) > MAX_TOKEN_CHARACTERS:
            raise ValueError(f"a {len(token)}-character page token is too long")
        return token

    def open(
        self,
        token: str,
        cursor_type: type[Cursor],
        *,
        listing: str,
        caller: str,
        filters: Sequence[Filter],
    ) -> Cursor | None:
        """The cursor ``token`` holds, or None for an empty token (the first page)."""
        if not token:
            return None
        if len(token) > MAX_TOKEN_CHARACTERS or _ALPHABET.fullmatch(token) is None:
            raise _invalid()
        raw = _decode(token)
        version, tag, payload = raw[:1], raw[1 : 1 + _TAG_BYTES], raw[1 + _TAG_BYTES :]
        if version != _VERSION or not payload:
            raise _invalid()
        if not hmac.compare_digest(tag, self._tag(payload, listing, caller, filters)):
            raise _invalid()
        return _cursor(payload, cursor_type)

    def _tag(self, payload: bytes, listing: str, caller: str, filters: Sequence[Filter]) -> bytes:
        bound = json.dumps([listing, caller, *filters], separators=(",", ":")).encode()
        message = _VERSION + hashlib.sha256(bound).digest() + payload
        return hmac.new(self._key, message, hashlib.sha256).digest()


def _invalid() -> InvalidPageToken:
    return InvalidPageToken(_REFUSAL, metadata={"field": "page_token"})


def _encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _decode(token: str) -> bytes:
    """The bytes of a token in the base64url alphabet; only the one encoding ``_encode`` makes
    of them is accepted, so that a cursor has exactly one token."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except binascii.Error:
        raise _invalid() from None
    if _encode(raw) != token:
        raise _invalid()
    return raw


def _cursor(payload: bytes, cursor_type: type[Cursor]) -> Cursor:
    fields = _fields(cursor_type)
    try:
        decoded = json.loads(
            payload, parse_float=_no_number, parse_constant=_no_number, object_pairs_hook=_object
        )
    except (ValueError, RecursionError):
        raise _invalid() from None
    if not isinstance(decoded, dict) or decoded.keys() != fields.keys():
        raise _invalid()
    if not all(_fits(decoded[name], kind) for name, kind in fields.items()):
        raise _invalid()
    return cursor_type(**decoded)


def _no_number(text: str) -> NoReturn:
    raise ValueError(f"{text} is not an integer")


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    if len({name for name, _ in pairs}) != len(pairs):
        raise ValueError("a name appears twice")
    return dict(pairs)


def _fits(value: object, kind: type) -> bool:
    """Whether ``value`` is exactly of ``kind`` (a bool is no int here) and within bounds."""
    if type(value) is not kind:
        return False
    if isinstance(value, int):
        return 0 <= value <= MAX_CURSOR_INT
    return (
        isinstance(value, str)
        and len(value) <= MAX_CURSOR_TEXT
        and _TEXT.fullmatch(value) is not None
    )


def _fields(cursor_type: type) -> dict[str, type]:
    """The fields of a cursor type, each ``int`` or ``str``."""
    if not dataclasses.is_dataclass(cursor_type):
        raise TypeError(f"a cursor is a dataclass, not {cursor_type!r}")
    hints = typing.get_type_hints(cursor_type)
    fields = {field.name: hints[field.name] for field in dataclasses.fields(cursor_type)}
    for name, kind in fields.items():
        if kind not in (int, str):
            raise TypeError(f"cursor field {cursor_type.__name__}.{name} is neither int nor str")
    return fields
