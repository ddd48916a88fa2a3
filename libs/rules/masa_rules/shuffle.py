"""The provably fair shuffle (rules.md F-5), shared by every game.

Algorithm, so that anyone can recompute a deal from the published seed alone:

1. A game has a secret *game seed* (bytes; a text seed is its UTF-8 encoding, an integer its
   decimal text). Hand ``n`` (1-based) uses the *hand seed*
   ``HMAC-SHA256(key=game_seed, msg=b"masa/hand/" + str(n))``, 32 bytes.
2. Before the deal every seat receives the *commitment* ``SHA-256(hand_seed)`` in hex.
3. The hand seed keys a byte stream: block ``k`` (k = 0, 1, ...) is
   ``HMAC-SHA256(key=hand_seed, msg=k as 8 bytes big-endian)``; blocks are concatenated.
4. An integer uniform in ``[0, n)`` reads the next 8 bytes of the stream as a big-endian
   unsigned ``u`` and rejects it while ``u >= 2**64 - (2**64 % n)``; the result is ``u % n``.
5. Fisher-Yates: starting from the pack in its canonical order (``fiftyone_pack()`` or
   ``elevator_pack()``), for ``i`` from ``len - 1`` down to ``1`` swap positions ``i`` and
   ``uniform(i + 1)``. Position 0 of the result is the top of the stock.
6. Further draws for the same hand (the cut point of F-4) continue the same stream.
7. When the hand ends the hand seed is revealed; ``SHA-256`` of it must equal the commitment.

The hand seed reveals nothing about the game seed or the other hands (HMAC is one-way).
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Sequence
from typing import TypeVar

__all__ = ["DrawStream", "Seed", "commitment", "game_seed_bytes", "hand_seed", "shuffled"]

T = TypeVar("T")
_SPAN = 1 << 64
_U64 = struct.Struct(">Q")

# The seed of a game, in every game: bytes, or text or an integer standing for bytes (step 1).
Seed = bytes | str | int


def game_seed_bytes(seed: Seed) -> bytes:
    """Normalise a game seed: bytes as given, text as UTF-8, an integer as its decimal text."""
    if isinstance(seed, bytes):
        return seed
    return str(seed).encode()


def hand_seed(game_seed: Seed, hand_no: int) -> bytes:
    """Step 1: the secret seed of hand ``hand_no`` (1-based)."""
    key = game_seed_bytes(game_seed)
    return hmac.new(key, b"masa/hand/" + str(hand_no).encode(), hashlib.sha256).digest()


def commitment(seed: bytes) -> str:
    """Step 2: what every seat sees before the deal."""
    return hashlib.sha256(seed).hexdigest()


class DrawStream:
    """Steps 3 and 4: uniform integers from the HMAC-SHA256 stream of one seed."""

    __slots__ = ("_block", "_buffer", "_offset", "_seed")

    def __init__(self, seed: bytes) -> None:
        self._seed = seed
        self._block = 0
        self._buffer = b""
        self._offset = 0

    def below(self, n: int) -> int:
        """A uniform integer in ``[0, n)``."""
        if n <= 0:
            raise ValueError(f"below() needs a positive bound, got {n}")
        limit = _SPAN - _SPAN % n
        while True:
            # Every read is 8 bytes and a block 32, so a read never straddles two blocks.
            offset = self._offset
            if offset == len(self._buffer):
                self._buffer = hmac.digest(self._seed, self._block.to_bytes(8, "big"), "sha256")
                self._block += 1
                offset = 0
            self._offset = offset + 8
            value: int = _U64.unpack_from(self._buffer, offset)[0]
            if value < limit:
                return value % n

    def shuffle(self, items: Sequence[T]) -> list[T]:
        """Step 5: Fisher-Yates over a copy of ``items``."""
        out = list(items)
        for i in range(len(out) - 1, 0, -1):
            j = self.below(i + 1)
            out[i], out[j] = out[j], out[i]
        return out


def shuffled(items: Sequence[T], seed: bytes) -> list[T]:
    """The deck order for ``seed``: position 0 is the top of the stock.

    >>> shuffled(range(5), b"seed") == shuffled(range(5), b"seed")
    True
    """
    return DrawStream(seed).shuffle(items)
