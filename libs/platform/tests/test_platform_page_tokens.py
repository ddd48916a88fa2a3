"""Page tokens (masa_platform.page_tokens): opaque, keyed, bounded, bound to their listing.

Some tests make tokens with a valid tag around payloads the module would never seal, the way
a holder of the key could: ``keyed`` builds them by the format the module's doc states. They
show that the cursor is checked even behind a valid tag, so no float, huge integer or nesting
reaches a caller whatever the key's fate.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st
from masa.common.v1 import error_pb2
from masa_platform.errors import InvalidPageToken
from masa_platform.page_tokens import (
    MAX_CURSOR_INT,
    MAX_CURSOR_TEXT,
    MAX_TOKEN_CHARACTERS,
    Filter,
    PageTokens,
)

KEY = bytes(range(32))
OTHER_KEY = bytes(range(1, 33))
LISTING = "/masa.test.v1.Test/ListThings"
CALLER = "ayse"
FILTERS: tuple[Filter, ...] = ("game = ELEVATOR", 7)
REASON = error_pb2.ErrorReason.Name(error_pb2.ERROR_REASON_INVALID_PAGE_TOKEN).removeprefix(
    "ERROR_REASON_"
)


@dataclass(frozen=True, slots=True)
class Below:
    seq: int


@dataclass(frozen=True, slots=True)
class Mark:
    seq: int
    name: str


TOKENS = PageTokens(KEY)


def seal(cursor: object, tokens: PageTokens = TOKENS, filters: Sequence[Filter] = FILTERS) -> str:
    return tokens.seal(cursor, listing=LISTING, caller=CALLER, filters=filters)


def opened(
    token: str,
    tokens: PageTokens = TOKENS,
    *,
    listing: str = LISTING,
    caller: str = CALLER,
    filters: Sequence[Filter] = FILTERS,
) -> Mark | None:
    return tokens.open(token, Mark, listing=listing, caller=caller, filters=filters)


def refused(
    token: str,
    tokens: PageTokens = TOKENS,
    *,
    listing: str = LISTING,
    caller: str = CALLER,
    filters: Sequence[Filter] = FILTERS,
) -> InvalidPageToken:
    with pytest.raises(InvalidPageToken) as refusal:
        opened(token, tokens, listing=listing, caller=caller, filters=filters)
    return refusal.value


def keyed(
    payload: bytes,
    *,
    key: bytes = KEY,
    listing: str = LISTING,
    caller: str = CALLER,
    filters: Sequence[Filter] = FILTERS,
) -> str:
    """A token with a valid tag around ``payload``, as the module doc lays the format out."""
    bound = json.dumps([listing, caller, *filters], separators=(",", ":")).encode()
    tag = hmac.new(key, b"\x01" + hashlib.sha256(bound).digest() + payload, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(b"\x01" + tag + payload).decode().rstrip("=")


def test_a_cursor_comes_back_from_its_token_which_is_url_safe_and_short() -> None:
    for cursor in (Mark(0, ""), Mark(MAX_CURSOR_INT, '"' * MAX_CURSOR_TEXT), Mark(41, "a b")):
        token = seal(cursor)
        assert re.fullmatch(r"[A-Za-z0-9_-]+", token)
        assert len(token) <= MAX_TOKEN_CHARACTERS
        assert opened(token) == cursor
    assert opened("") is None, "an empty token asks for the first page"


def test_the_refusal_is_invalid_argument_with_reason_invalid_page_token() -> None:
    refusal = refused("not-a-token")
    assert refusal.code == grpc.StatusCode.INVALID_ARGUMENT
    assert refusal.reason == REASON
    assert refusal.metadata == {"field": "page_token"}


def test_a_token_continues_only_its_listing_for_its_caller_with_its_filters() -> None:
    token = seal(Mark(5, "x"))
    refused(token, listing="/masa.test.v1.Test/ListOthers")
    refused(token, caller="mehmet")
    refused(token, filters=("game = FIFTYONE", 7))
    refused(token, filters=("game = ELEVATOR", "7"))
    refused(token, filters=("game = ELEVATOR",))
    refused(token, filters=("game = ELEVATOR", 7, ""))
    # Filters are bound as a list, not run together: ("ab", "") is not ("a", "b").
    joined = seal(Mark(5, "x"), filters=("ab", ""))
    refused(joined, filters=("a", "b"))
    assert opened(token) == Mark(5, "x")


def test_every_changed_character_is_refused() -> None:
    token = seal(Mark(5, "x"))
    for at, char in enumerate(token):
        for other in ("A", "_"):
            if other != char:
                refused(token[:at] + other + token[at + 1 :])
    refused(token[:-1])
    refused(token + "A")
    refused(token + "=")


def test_a_token_of_another_key_is_refused() -> None:
    token = seal(Mark(5, "x"), PageTokens(OTHER_KEY))
    refused(token)
    assert opened(token, PageTokens(OTHER_KEY)) == Mark(5, "x")


def test_a_token_of_another_version_is_refused() -> None:
    token = seal(Mark(5, "x"))
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    refused(base64.urlsafe_b64encode(b"\x02" + raw[1:]).decode().rstrip("="))


def test_an_over_long_token_is_refused_before_it_is_decoded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_decoding(data: object) -> bytes:
        raise AssertionError("decoded")

    monkeypatch.setattr(base64, "urlsafe_b64decode", no_decoding)
    refused("A" * (MAX_TOKEN_CHARACTERS + 1))
    refused("A" * 10_000_000)
    refused("%" * 100)


@pytest.mark.parametrize(
    "payload",
    [
        b'{"name":"x","seq":9223372036854775807}',
        b'{"name":"x","seq":9223372036854775808}',
        b'{"name":"x","seq":-1}',
        b'{"name":"x","seq":5.0}',
        b'{"name":"x","seq":5e3}',
        b'{"name":"x","seq":Infinity}',
        b'{"name":"x","seq":-Infinity}',
        b'{"name":"x","seq":NaN}',
        b'{"name":"x","seq":true}',
        b'{"name":"x","seq":null}',
        b'{"name":"x","seq":"5"}',
        b'{"name":5,"seq":5}',
        b'{"name":"' + b"x" * (MAX_CURSOR_TEXT + 1) + b'","seq":5}',
        b'{"name":"\\u00e9","seq":5}',
        b'{"name":"\\n","seq":5}',
        b'{"name":"x","seq":[5]}',
        b'{"name":{"name":"x"},"seq":5}',
        b'{"name":"x","seq":' + b"[" * 150 + b"5" + b"]" * 150 + b"}",
        b'{"name":"x","seq":5,"seq":6}',
        b'{"name":"x","seq":5,"more":1}',
        b'{"seq":5}',
        b"[5]",
        b"5",
        b'{"name":"x","seq":5',
        b"\xff\xfe",
    ],
)
def test_a_cursor_out_of_bounds_is_refused_even_behind_a_valid_tag(payload: bytes) -> None:
    refused(keyed(payload))


def test_a_cursor_in_bounds_behind_a_valid_tag_opens() -> None:
    assert opened(keyed(b'{"name":"x","seq":9223372036854775806}')) == Mark(MAX_CURSOR_INT, "x")


@pytest.mark.parametrize(
    "cursor",
    [
        Below(-1),
        Below(MAX_CURSOR_INT + 1),
        Below(True),
        Mark(1, "x" * (MAX_CURSOR_TEXT + 1)),
        Mark(1, "é"),
    ],
)
def test_sealing_a_cursor_out_of_bounds_is_a_defect(cursor: object) -> None:
    with pytest.raises(ValueError, match="out of bounds"):
        seal(cursor)


def test_a_cursor_is_a_dataclass_of_ints_and_strings() -> None:
    @dataclass(frozen=True)
    class Fractional:
        at: float

    with pytest.raises(TypeError):
        seal(Fractional(0.5))
    with pytest.raises(TypeError):
        seal({"seq": 5})


def test_a_key_is_at_least_32_bytes() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        PageTokens(b"k" * 31)


@given(st.text(max_size=700))
def test_any_text_is_refused_with_the_one_error(token: str) -> None:
    if token:
        refused(token)


@given(st.binary(max_size=400))
def test_any_bytes_as_a_token_are_refused_with_the_one_error(raw: bytes) -> None:
    token = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    if token:
        refused(token)


@given(st.binary(min_size=1, max_size=300))
def test_any_payload_behind_a_valid_tag_opens_in_bounds_or_is_refused(payload: bytes) -> None:
    try:
        cursor = opened(keyed(payload))
    except InvalidPageToken:
        return
    assert cursor is not None
    assert 0 <= cursor.seq <= MAX_CURSOR_INT and len(cursor.name) <= MAX_CURSOR_TEXT


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=10,
)


@given(st.dictionaries(st.sampled_from(["seq", "name", "other"]), JSON_VALUES))
def test_any_json_behind_a_valid_tag_opens_in_bounds_or_is_refused(
    document: dict[str, object],
) -> None:
    token = keyed(json.dumps(document).encode())
    if len(token) > MAX_TOKEN_CHARACTERS:
        refused(token)
        return
    try:
        cursor = opened(token)
    except InvalidPageToken:
        return
    assert cursor is not None
    assert (cursor.seq, cursor.name) == (document["seq"], document["name"])
    assert type(cursor.seq) is int and 0 <= cursor.seq <= MAX_CURSOR_INT
