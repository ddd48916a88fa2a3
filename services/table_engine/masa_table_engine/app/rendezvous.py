"""Rendezvous hashing: every node ranks the live nodes for a key alike, from the key and the
nodes alone, so that they agree on who goes first without talking to each other (which node
claims an unserved table, which lists every table this period)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

__all__ = ["claim_order"]


def claim_order(key: str, nodes: Iterable[str]) -> list[str]:
    """``nodes`` in the order they claim ``key``: each key goes first to one node, keys spread
    evenly, and a node that joins or leaves moves only the keys it ranks first."""
    return sorted(set(nodes), key=lambda node: (_weight(node, key), node), reverse=True)


def _weight(node: str, key: str) -> int:
    return int.from_bytes(hashlib.blake2b(f"{node}/{key}".encode(), digest_size=8).digest())
