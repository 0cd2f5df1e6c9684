"""The never memory: which canonical keys were ever marked never, in fixed memory, forever.

:class:`NeverMemory` answers "was this key marked?" for the whole life of a registry. It never
forgets and can only err toward "yes" (SPEC section 4):

- it keeps a 128-bit keyed hash of each canonical key, never the key itself, so a few thousand
  long uris pin 16 bytes each, not their strings;
- up to ``capacity`` keys, an exact set of those hashes (a false "yes" needs a 128-bit
  collision under a key chosen at random per memory);
- past it, every further key goes into a Bloom filter of fixed size, sized so that with four
  times ``capacity`` keys in it it is wrong about one key in a thousand, and more often after
  that, but always toward "yes": overflow costs availability (a payload that was never marked may be
  refused as if it were), never confidentiality.

Every operation is O(1) in the number of keys held: one hash and a set lookup, plus seven bit
probes once the filter is in use. Nothing is ever scanned.
"""

from __future__ import annotations

import hashlib
import math
import secrets
from typing import Final

__all__ = ["NeverMemory"]

_PROBES: Final = 7
_BITS_PER_KEY: Final = 15  # about 1 in 1,000 wrong at the sizing point, with 7 probes
_SIZED_FOR: Final = 4  # the filter is sized for this many times capacity keys past it


class NeverMemory:
    """A set of canonical keys that never forgets and errs only toward membership."""

    __slots__ = ("_bits", "_exact", "_filtered", "_salt", "_size", "capacity")

    def __init__(self, capacity: int = 100_000) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity: Final = capacity
        self._salt = secrets.token_bytes(16)
        self._exact: set[bytes] = set()
        self._size = max(64, math.ceil(_SIZED_FOR * capacity * _BITS_PER_KEY))
        self._bits: bytearray | None = None  # made when the exact set is full
        self._filtered = 0

    def __len__(self) -> int:
        """How many keys were added (past capacity, an upper bound: repeats may count twice)."""
        return len(self._exact) + self._filtered

    @property
    def overflowed(self) -> bool:
        """Whether keys past ``capacity`` went to the filter (answers may now err toward yes)."""
        return self._bits is not None

    def _digest(self, key: str) -> bytes:
        data = key.encode("utf-8", "surrogatepass")
        return hashlib.blake2b(data, digest_size=16, key=self._salt).digest()

    def _positions(self, digest: bytes) -> list[int]:
        first = int.from_bytes(digest[:8], "little")
        second = int.from_bytes(digest[8:], "little") | 1
        return [(first + i * second) % self._size for i in range(_PROBES)]

    def add(self, key: str) -> None:
        """Remember ``key`` for the rest of this memory's life."""
        digest = self._digest(key)
        if digest in self._exact:
            return
        if len(self._exact) < self.capacity:
            self._exact.add(digest)
            return
        if self._bits is None:
            self._bits = bytearray((self._size + 7) // 8)
        for position in self._positions(digest):
            self._bits[position >> 3] |= 1 << (position & 7)
        self._filtered += 1

    def __contains__(self, key: object) -> bool:
        """Whether ``key`` was added (or, past capacity, may have been)."""
        if not isinstance(key, str):
            return False
        digest = self._digest(key)
        if digest in self._exact:
            return True
        bits = self._bits
        if bits is None:
            return False
        return all(bits[p >> 3] & (1 << (p & 7)) for p in self._positions(digest))
