"""Pages of the list calls (AIP-158): newest first, each continued below a sequence number.

The use cases take and give that number; the gRPC adapter seals it into an opaque page token
bound to the listing, its filters and its caller (masa_platform.page_tokens), and opens it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from masa_ledger.domain.errors import BadInput

__all__ = ["DEFAULT_PAGE_SIZE", "MAX_PAGE_SIZE", "Page", "page_of", "page_size"]

ItemT = TypeVar("ItemT")

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500


def page_size(requested: int) -> int:
    if requested < 0:
        raise BadInput("page_size must not be negative", metadata={"field": "page_size"})
    return min(requested or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)


@dataclass(frozen=True, slots=True, kw_only=True)
class Page(Generic[ItemT]):
    """A page, newest first, and the sequence number the next page lists below (None on the
    last page)."""

    items: tuple[ItemT, ...]
    next_before_seq: int | None


def page_of(rows: Sequence[tuple[int, ItemT]], limit: int) -> Page[ItemT]:
    """The page of ``rows`` (sequence number and item, newest first; one more than ``limit``
    when there is a next page)."""
    items = tuple(item for _, item in rows[:limit])
    return Page(items=items, next_before_seq=rows[limit - 1][0] if len(rows) > limit else None)
