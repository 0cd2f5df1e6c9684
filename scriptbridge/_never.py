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
probes once the filter is in use (the positions of Kirsch and Mitzenmacher's double hashing,
from the digest's two halves). Nothing is ever scanned.
"""

from __future__ import annotations

import math
import secrets
from hashlib import blake2b
from typing import Final

__all__ = ["NeverMemory"]

_PROBES: Final = 7
_BITS_PER_KEY: Final = 15  # about 1 in 1,000 wrong at the sizing point, with 7 probes
_SIZED_FOR: Final = 4  # the filter is sized for this many times capacity keys past it
_LOW_64: Final = (1 << 64) - 1


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

    def add(self, key: str) -> None:
        """Remember ``key`` for the rest of this memory's life."""
        digest = blake2b(
            key.encode("utf-8", "surrogatepass"), digest_size=16, key=self._salt
        ).digest()
        exact = self._exact
        if digest in exact:
            return
        if len(exact) < self.capacity:
            exact.add(digest)
            return
        bits = self._bits
        if bits is None:
            bits = self._bits = bytearray((self._size + 7) // 8)
        # The probes (first + i * second) % size, i < _PROBES, of the digest's two halves.
        size = self._size
        value = int.from_bytes(digest, "little")
        position = (value & _LOW_64) % size
        step = ((value >> 64) | 1) % size
        for _ in range(_PROBES):
            bits[position >> 3] |= 1 << (position & 7)
            position += step
            if position >= size:
                position -= size
        self._filtered += 1

    def __contains__(self, key: object) -> bool:
        """Whether ``key`` was added (or, past capacity, may have been)."""
        if not isinstance(key, str):
            return False
        digest = blake2b(
            key.encode("utf-8", "surrogatepass"), digest_size=16, key=self._salt
        ).digest()
        if digest in self._exact:
            return True
        bits = self._bits
        if bits is None:
            return False
        size = self._size  # the probes of add, in the same order
        value = int.from_bytes(digest, "little")
        position = (value & _LOW_64) % size
        step = ((value >> 64) | 1) % size
        for _ in range(_PROBES):
            if not bits[position >> 3] & (1 << (position & 7)):
                return False
            position += step
            if position >= size:
                position -= size
        return True
