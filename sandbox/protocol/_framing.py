"""Framing: one message is one length-prefixed msgpack frame. Sans-I/O: bytes in, bytes out.

Every message is one frame: a 4-byte big-endian unsigned length ``N`` followed by ``N`` bytes of
msgpack. ``N`` is at least 1 and at most the receiver's limit, which is never above
:data:`MAX_FRAME`. :class:`FrameDecoder` rejects an oversized prefix *before* it buffers the
body. A body is unpacked (:func:`unpack_body`) with ``raw=False`` (strings must be valid UTF-8),
``strict_map_key=True``, a bound equal to the frame and no extension types. Every failure is
one exception, :class:`ProtocolError`. Reading and writing the frames is the caller's.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any, Final

import msgpack

__all__ = [
    "DEFAULT_FRAME_LIMIT",
    "MAX_FRAME",
    "FrameDecoder",
    "ProtocolError",
    "encode_frame",
    "encode_parts",
    "unpack_body",
]

MAX_FRAME: Final = 64 * 2**20
"""Absolute ceiling on one frame's body, whatever limit a caller passes."""

DEFAULT_FRAME_LIMIT: Final = 16 * 2**20
"""The limit used when a caller passes none (matches ``Limits.max_message_bytes``)."""

_PREFIX = struct.Struct(">I")
_PACK_BUFFER = 4096
"""Initial size of a message's pack buffer (msgpack's default is 256 KiB; most messages are a
few hundred bytes, and a large one grows the buffer once, before its big value is copied in)."""
_WHOLE_PIECE = 16384
"""A chunk at least this large that is all body is kept by the decoder without a copy."""


class ProtocolError(ValueError):
    """A frame or message broke the protocol: too large, not msgpack, or not a valid message.

    The original msgpack, pydantic or OS error, if any, is chained as ``__cause__``.
    """


def _limit(limit: int) -> int:
    if not 1 <= limit <= MAX_FRAME:
        raise ValueError(f"frame limit must be between 1 and {MAX_FRAME}, not {limit}")
    return limit


def encode_frame(message: Any, *, limit: int = DEFAULT_FRAME_LIMIT) -> bytes:
    """Return ``message`` framed: a 4-byte big-endian length and its msgpack body.

    Raises:
        ProtocolError: the message cannot be packed (a string that is not well formed, an int
            outside 64 bits) or its body is larger than ``limit``. Nothing is written anywhere.
    """
    return b"".join(encode_parts(message, limit=limit))


def encode_parts(message: Any, *, limit: int = DEFAULT_FRAME_LIMIT) -> tuple[bytes, memoryview]:
    """Return ``message`` framed as two parts, the 4-byte prefix and the body, to be written
    one after the other (``os.writev``): a large body is then never copied behind its prefix.

    ``message`` is a message model, a child's message (:mod:`sandbox._wire`, whose ``body()``
    is its map), or a message's body as a mapping made by trusted code (the host's own
    replies: packed as they are, with nothing validated or copied first).

    The body is a read-only view of the buffer it was packed into, which belongs to no one
    else: a large body is not copied out of it into a ``bytes`` either.

    Raises:
        ProtocolError: as :func:`encode_frame`.
    """
    packer = msgpack.Packer(use_bin_type=True, autoreset=False, buf_size=_PACK_BUFFER)
    try:
        if isinstance(message, Mapping):
            packer.pack(message)
        elif _is_model(message):
            packer.pack(_fields(message))
        else:
            packer.pack(message.body())
        body = packer.getbuffer().toreadonly()
    except (TypeError, ValueError, OverflowError) as exc:
        raise ProtocolError(f"cannot pack a {type(message).__name__} message: {exc}") from exc
    if len(body) > _limit(limit):
        raise ProtocolError(f"a {len(body)}-byte message is over the {limit}-byte frame limit")
    return _PREFIX.pack(len(body)), body


def _is_model(value: Any) -> bool:
    """Whether ``value`` is a pydantic model (told without importing pydantic, which the child
    never loads)."""
    return hasattr(type(value), "model_fields")


def _fields(message: Any) -> dict[str, Any]:
    """A message's fields as msgpack packs them, the same body ``model_dump(mode="python")``
    gives: nested messages become dicts of their fields, and every other value (plain data, a
    message's own payload) is handed to msgpack as it is, not copied first."""
    return {name: _field(getattr(message, name)) for name in type(message).model_fields}


def _field(value: Any) -> Any:
    if _is_model(value):
        return _fields(value)
    if type(value) is list and value and _is_model(value[0]):
        return [_field(item) for item in value]
    return value


class FrameDecoder:
    """Incremental, I/O-free splitter of a byte stream into frame bodies.

    Feed it bytes as they arrive; it returns the bodies completed by them. It never buffers more
    than one frame's prefix plus a body within the limit: a length prefix over the limit (or of
    zero) raises :class:`ProtocolError` as soon as its 4 bytes are seen. After an error the
    decoder stays failed and every later :meth:`feed` raises again.
    """

    def __init__(self, *, limit: int = DEFAULT_FRAME_LIMIT) -> None:
        self._limit = _limit(limit)
        self._prefix = bytearray()  # the bytes of a length prefix read so far (0..3)
        self._need: int | None = None  # body length of the frame being read, once known
        self._parts: list[bytes | bytearray] = []  # the body read so far, joined at its end
        self._have = 0  # their total length
        self._failed: ProtocolError | None = None

    @property
    def limit(self) -> int:
        """The largest body accepted from now on."""
        return self._limit

    @limit.setter
    def limit(self, value: int) -> None:
        self._limit = _limit(value)

    @property
    def at_boundary(self) -> bool:
        """True when no partial frame is buffered (end of stream here is a clean close)."""
        return not self._prefix and self._need is None

    @property
    def buffered(self) -> int:
        """How many bytes of the frame being read are held (under 4 of its prefix, or fewer
        than its body's length)."""
        return len(self._prefix) + self._have

    @property
    def missing(self) -> int:
        """How many bytes of the body being read are still to come (0 between frames and inside
        a length prefix): a reader may ask for that much at once, to take a large body in one
        read where its stream holds it."""
        return 0 if self._need is None else self._need - self._have

    def feed(self, data: bytes) -> list[bytes]:
        """Add ``data`` and return every body it completes, in order.

        A large body is copied once: a chunk of at least :data:`_WHOLE_PIECE` bytes that is all
        body is kept as it is, and the pieces are joined when the body is complete, so a frame
        read in many large chunks costs no buffer regrowth and no second copy. Smaller pieces
        are gathered into one buffer, so a sender that trickles a frame in tiny reads makes
        the decoder hold little more than the bytes themselves.

        Raises:
            ProtocolError: a length prefix is zero or over the limit; the decoder is then
                failed for good and keeps the bytes it had (they are never returned).
        """
        if self._failed is not None:
            raise self._failed
        bodies: list[bytes] = []
        position, end = 0, len(data)
        while position < end:
            if self._need is None:
                take = min(_PREFIX.size - len(self._prefix), end - position)
                self._prefix += data[position : position + take]
                position += take
                if len(self._prefix) < _PREFIX.size:
                    break
                (length,) = _PREFIX.unpack(self._prefix)
                if length == 0 or length > self._limit:
                    self._failed = ProtocolError(
                        f"frame length {length} is outside 1..{self._limit}"
                    )
                    raise self._failed
                self._prefix.clear()
                self._need = length
                continue
            take = min(self._need - self._have, end - position)
            if take == self._need:  # the whole body is in this chunk: one slice, no buffer
                piece = data[position : position + take]
                bodies.append(piece if type(piece) is bytes else bytes(piece))
                position += take
                self._need = None
                continue
            if take >= _WHOLE_PIECE and position == 0 and take == end and type(data) is bytes:
                self._parts.append(data)  # immutable and all body: kept without a copy
            elif self._parts and type(self._parts[-1]) is bytearray:
                self._parts[-1] += data[position : position + take]  # small pieces coalesce
            else:
                self._parts.append(bytearray(data[position : position + take]))
            self._have += take
            position += take
            if self._have == self._need:
                parts, self._parts, self._have, self._need = self._parts, [], 0, None
                only = parts[0] if len(parts) == 1 else None
                bodies.append(only if type(only) is bytes else b"".join(parts))
        return bodies


def _reject_ext(code: int, data: bytes) -> Any:
    raise ValueError(f"msgpack extension type {code} is not allowed")


def unpack_body(body: bytes) -> Any:
    """Unpack one frame body as the module doc says (bounded by its own size, no extension
    types, strict UTF-8 strings and ``str``-keyed maps); the caller validates the result.

    Raises:
        ProtocolError: the body is not one valid msgpack value.
    """
    size = max(len(body), 1)
    try:
        # Bounded as an Unpacker with max_buffer_size=size would be, without copying the body.
        return msgpack.unpackb(
            body,
            raw=False,
            strict_map_key=True,
            ext_hook=_reject_ext,
            use_list=True,
            max_str_len=size,
            max_bin_len=size,
            max_array_len=size,
            max_map_len=size // 2,
            max_ext_len=size,
        )
    except msgpack.ExtraData as exc:
        raise ProtocolError(f"body has {len(exc.extra)} bytes after its message") from exc
    except (ValueError, TypeError, msgpack.UnpackException, RecursionError) as exc:
        # UnicodeDecodeError, StackError, FormatError and an incomplete body are ValueErrors.
        raise ProtocolError(f"body is not valid msgpack: {exc!r}") from exc
