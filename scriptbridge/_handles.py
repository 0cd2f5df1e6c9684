"""Server-minted state handles: ``serve``'s session handles (SPEC section 8, "State handles").

A handle is what ``run_python`` returns for a client to pass back to continue a session. It is
minted here, never chosen by a client, and is never authority by itself:

- **Unguessable**: ``sb_`` then 32 bytes from :mod:`secrets` (256 bits), URL-safe base64.
- **Bound to an identity**: the caller's, as the server names it (the token's name; the MCP
  session on handshake-era HTTP; ``stdio``): :meth:`Handles.look_up` answers a handle only to
  the identity it was minted for.
- **Expiring**: one unused for ``idle_s`` expires (:meth:`Handles.expired`, called by the
  server's expiry task; a handle in use doesn't expire).
- **One error for every refusal**: :meth:`Handles.look_up` raises :class:`HandleRefused`, whose
  ``reason`` is ``"expired"`` for a handle of this caller's that expired (remembered for the
  last :data:`REMEMBERED_EXPIRED` expiries) and ``"unknown"`` otherwise: a handle minted for
  another identity, live or expired, is ``"unknown"``, exactly as one never minted, so a
  refusal never tells whether a handle belongs to someone else.

The values a handle names (a session, in ``serve``) are the caller's; this module holds them
and never looks inside. Not thread-safe: one event loop uses it.
"""

from __future__ import annotations

import collections
import hmac
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Final, Generic, Literal, TypeVar

__all__ = ["HANDLE_BYTES", "HandleRefused", "Handles"]

HANDLE_BYTES: Final = 32
"""Random bytes in a handle (256 bits, at least the 128 the spec asks)."""
PREFIX: Final = "sb_"
MAX_HANDLE_CHARS: Final = 128
"""A handle passed in longer than this is refused as unknown without a look-up."""
REMEMBERED_EXPIRED: Final = 4096
"""How many expired handles are remembered (with their identity) to answer ``expired``."""

V = TypeVar("V")


class HandleRefused(Exception):
    """A handle this caller can't use: ``reason`` is ``"expired"`` or ``"unknown"``."""

    def __init__(self, reason: Literal["expired", "unknown"]) -> None:
        super().__init__(reason)
        self.reason: Literal["expired", "unknown"] = reason


@dataclass
class Held(Generic[V]):
    """What a live handle names, for whom, and since when it is unused."""

    owner: str
    value: V
    last_used: float = field(default_factory=time.monotonic)
    in_use: int = 0


class Handles(Generic[V]):
    """Handles minted for identities, each naming a value (module doc).

    Args:
        idle_s: a handle unused for this long expires.
        clock: the time source (``time.monotonic``; tests pass their own).
    """

    def __init__(self, idle_s: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.idle_s = idle_s
        self._clock = clock
        self._live: dict[str, Held[V]] = {}
        self._expired: collections.OrderedDict[str, str] = collections.OrderedDict()
        """Handle -> its owner, for the last :data:`REMEMBERED_EXPIRED` expiries."""

    def __len__(self) -> int:
        return len(self._live)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._live))

    def mint(self, owner: str, value: V) -> str:
        """A new handle naming ``value`` for ``owner``."""
        handle = PREFIX + secrets.token_urlsafe(HANDLE_BYTES)
        self._live[handle] = Held(owner, value, self._clock())
        return handle

    def look_up(self, handle: object, owner: str) -> Held[V]:
        """What ``handle`` names, if it was minted for ``owner`` and is live; marked used now.
        Raises :class:`HandleRefused` otherwise (module doc)."""
        if not isinstance(handle, str) or len(handle) > MAX_HANDLE_CHARS:
            raise HandleRefused("unknown")
        held = self._live.get(handle)
        if held is not None and _same(held.owner, owner):
            held.last_used = self._clock()
            return held
        expired_for = self._expired.get(handle)
        if held is None and expired_for is not None and _same(expired_for, owner):
            raise HandleRefused("expired")
        raise HandleRefused("unknown")

    def idle_of(self, owner: str) -> list[str]:
        """The live handles of ``owner`` not in use, longest unused first."""
        idle = [
            (held.last_used, handle)
            for handle, held in self._live.items()
            if held.owner == owner and held.in_use == 0
        ]
        return [handle for _, handle in sorted(idle)]

    def held(self, handle: str) -> Held[V]:
        """What a live handle names (``KeyError`` for one that isn't live)."""
        return self._live[handle]

    def expired(self) -> list[tuple[str, V]]:
        """Expire every handle unused for ``idle_s`` and not in use; returns each with its
        value (for the caller to close)."""
        now = self._clock()
        gone = [
            handle
            for handle, held in self._live.items()
            if held.in_use == 0 and now - held.last_used >= self.idle_s
        ]
        return [(handle, self.drop(handle, expired=True)) for handle in gone]

    def drop(self, handle: str, *, expired: bool = False) -> V:
        """Forget a live handle (remembered as expired when ``expired``); returns its value."""
        held = self._live.pop(handle)
        if expired:
            self._expired[handle] = held.owner
            while len(self._expired) > REMEMBERED_EXPIRED:
                self._expired.popitem(last=False)
        return held.value


def _same(a: str, b: str) -> bool:
    """Identities compared in constant time (an identity may be a token's name)."""
    return hmac.compare_digest(a.encode(), b.encode())
