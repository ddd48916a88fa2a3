"""Pages of the list calls (AIP-158): newest first, each continued below a sequence number.

The use cases take and give that number; the gRPC adapter seals it into an opaque page token
bound to the listing, its filters and its caller (masa_platform.page_tokens), and opens it.
"""

from __future__ import annotations

from masa_ledger.domain.errors import BadInput

__all__ = ["DEFAULT_PAGE_SIZE", "MAX_PAGE_SIZE", "page_size"]

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500


def page_size(requested: int) -> int:
    if requested < 0:
        raise BadInput("page_size must not be negative", metadata={"field": "page_size"})
    return min(requested or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
