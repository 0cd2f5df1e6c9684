"""The channel between the host and one sandbox child: message schema and framing.

This module is shared by both sides. The child imports it from inside the sandbox, so it imports
nothing from ``scriptbridge`` and nothing heavier than ``msgpack`` and ``pydantic``.

Framing
    Every message is one frame: a 4-byte big-endian unsigned length ``N`` followed by ``N`` bytes
    of msgpack. ``N`` is at least 1 and at most the receiver's limit, which is never above
    :data:`MAX_FRAME`. A receiver rejects an oversized prefix *before* it buffers the body.

Bodies
    A body is a msgpack map with an ``op`` key naming the message. Bodies are unpacked with
    ``raw=False`` (strings must be valid UTF-8), ``strict_map_key=True``, a buffer bound equal to
    the frame, and no extension types; then validated by pydantic (unknown ops, unknown fields,
    wrong types and out-of-range values are all refused). Every failure surfaces as one
    exception, :class:`ProtocolError`.

Plain data
    Payload fields typed :data:`PlainData` (tool arguments, tool views, inputs, the script's
    value) carry only ``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes``, ``list`` and
    ``dict`` with ``str`` keys, nested at most :data:`MAX_DATA_DEPTH` deep and at most
    :data:`MAX_DATA_NODES` nodes in one message.

Conversation (one run, one child, one script)::

    child                                   host
      | -- ready{pid, isolation, skipped} -->  |   after isolation, before the script is read
      | <-- start{source, inputs, tools, limits}|
      | -- output{text} ----------------------> |   any number, streamed, capped
      | -- call_tool{call_id, name, args} ----> |
      | <-- tool_result{call_id, view}          |   or tool_error{call_id, message}
      | -- call_tools{call_id, calls} --------> |
      | <-- tool_results{call_id, results}      |   one outcome per call, in order
      | -- fetch{call_id, ref_id} ------------> |
      | <-- fetch_result{call_id, saved_to | unfetchable}
      | -- done{value, value_is_repr} --------> |   or error{type, message, line, phase}
      then the child exits.

The child has at most one request outstanding: after ``call_tool``, ``call_tools`` or ``fetch``
it reads exactly one answer, which must carry the same ``call_id`` and the matching op. Call
ids start at 1 and increase by one per request.
"""

from __future__ import annotations

import contextlib
import os
import struct
from typing import Annotated, Any, Final, Literal, TypeAlias

import msgpack
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from ._endings import Ending as Ending

__all__ = [
    "DEFAULT_FRAME_LIMIT",
    "LAYER_NAMES",
    "MAX_DATA_DEPTH",
    "MAX_DATA_NODES",
    "MAX_FRAME",
    "PROTOCOL_VERSION",
    "BlockingChannel",
    "CallFailed",
    "CallOk",
    "CallTool",
    "CallTools",
    "ChildMessage",
    "Done",
    "Fetch",
    "FetchResult",
    "FrameDecoder",
    "HostMessage",
    "Layer",
    "Output",
    "PlainData",
    "ProtocolError",
    "Ready",
    "RunError",
    "RunLimits",
    "SkippedLayer",
    "Start",
    "ToolCall",
    "ToolFailed",
    "ToolResult",
    "ToolResults",
    "check_plain",
    "encode_frame",
    "encode_parts",
    "parse_child_message",
    "parse_host_message",
    "write_parts",
]

PROTOCOL_VERSION: Final = 1
"""Sent in ``ready``; the host refuses a child that speaks another version."""

MAX_FRAME: Final = 64 * 2**20
"""Absolute ceiling on one frame's body, whatever limit a caller passes."""

DEFAULT_FRAME_LIMIT: Final = 16 * 2**20
"""The limit used when a caller passes none (matches ``Limits.max_message_bytes``)."""

MAX_DATA_DEPTH: Final = 128
"""Deepest nesting of containers allowed in a :data:`PlainData` value."""

MAX_DATA_NODES: Final = 1_000_000
"""Most values (containers, keys and leaves) allowed in one :data:`PlainData` value."""

_PREFIX = struct.Struct(">I")
_READ_CHUNK = 65536
_PACK_BUFFER = 4096
"""Initial size of a message's pack buffer (msgpack's default is 256 KiB; most messages are a
few hundred bytes, and a large one grows the buffer once, before its big value is copied in)."""
_WHOLE_PIECE = 16384
"""A chunk at least this large that is all body is kept by the decoder without a copy."""


class ProtocolError(ValueError):
    """A frame or message broke the protocol: too large, not msgpack, or not a valid message.

    The original msgpack, pydantic or OS error, if any, is chained as ``__cause__``.
    """


# --------------------------------------------------------------------------------------------
# Plain data


def check_plain(
    value: Any, *, max_depth: int = MAX_DATA_DEPTH, max_nodes: int = MAX_DATA_NODES
) -> Any:
    """Return ``value`` unchanged if it is plain data within the depth and node bounds.

    Plain data is ``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes``, ``list`` and
    ``dict`` with ``str`` keys (exact types, no subclasses). The walk is iterative and linear.

    Raises:
        ValueError: naming the first offending value's type, or the bound that was passed.
    """
    stack: list[tuple[Any, int]] = [(value, 0)]
    nodes = 0
    while stack:
        item, depth = stack.pop()
        nodes += 1
        if nodes > max_nodes:
            raise ValueError(f"plain data has more than {max_nodes} values")
        kind = type(item)
        if kind in _LEAF_TYPES:
            continue
        if depth >= max_depth:
            raise ValueError(f"plain data is nested deeper than {max_depth}")
        if kind is list:
            stack.extend((child, depth + 1) for child in item)
        elif kind is dict:
            for key, child in item.items():
                if type(key) is not str:
                    raise ValueError(f"plain data has a {type(key).__name__} map key")
                nodes += 1
                stack.append((child, depth + 1))
        else:
            raise ValueError(f"{kind.__name__} is not plain data")
    return value


_LEAF_TYPES: Final = frozenset({type(None), bool, int, float, str, bytes})

PlainData: TypeAlias = Annotated[Any, AfterValidator(check_plain)]
"""Any value that :func:`check_plain` accepts."""


# --------------------------------------------------------------------------------------------
# Messages

Layer: TypeAlias = Literal[
    "restricted-python", "rlimits", "seccomp", "landlock", "netns", "pidns", "uid", "quota"
]
"""The isolation layers a child reports by name."""

LAYER_NAMES: Final[tuple[Layer, ...]] = (
    "restricted-python",
    "rlimits",
    "seccomp",
    "landlock",
    "netns",
    "pidns",
    "uid",
    "quota",
)

_Name = Annotated[str, Field(min_length=1, max_length=512)]
_CallId = Annotated[int, Field(ge=1, le=2**53)]
_Count = Annotated[int, Field(ge=0, le=2**53)]


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class SkippedLayer(_Message):
    """An isolation layer the child did not apply, and why (never skipped silently)."""

    layer: Layer
    reason: str


class RunLimits(_Message):
    """Limits the child enforces on itself for one run (the host enforces them too).

    Attributes:
        max_output_bytes: UTF-8 bytes of printed text the child streams before it stops the
            script with ``OutputExceeded``.
        max_tool_calls: tool calls (a batch counts each call) before ``ToolCallsExceeded``.
        max_value_bytes: bound on the script's value: a repr is cut to this many characters,
            and a plain value whose frame would pass the frame limit is sent as its cut repr.
        max_message_bytes: the frame limit for every message after ``start``, both ways.
        max_out_bytes: bytes of file contents ``write_text`` lets the run leave in ``out/``
            before it stops the script with ``DiskQuotaExceeded``.
        max_out_files: files and directories ``write_text`` lets the run leave in ``out/``
            before ``DiskQuotaExceeded``.
    """

    max_output_bytes: Annotated[int, Field(ge=0, le=2**40)] = 1_000_000
    max_tool_calls: Annotated[int, Field(ge=0, le=2**40)] = 1000
    max_value_bytes: Annotated[int, Field(ge=64, le=MAX_FRAME)] = 100_000
    max_message_bytes: Annotated[int, Field(ge=1024, le=MAX_FRAME)] = DEFAULT_FRAME_LIMIT
    max_out_bytes: Annotated[int, Field(ge=0, le=2**40)] = 64 * 2**20
    max_out_files: Annotated[int, Field(ge=0, le=10**6)] = 1000


# child -> host


class Ready(_Message):
    """Child -> host, first message: isolation is in force and the child awaits ``start``.

    ``pid`` is the child's pid as the host numbers it (in a PID namespace of its own the
    child is pid 1). ``isolation`` lists the layers in force, in the order applied; ``skipped``
    names every layer that was not applied with the reason. ``restricted-python`` is listed
    here when the script will be compiled by the restricted compiler.
    """

    op: Literal["ready"] = "ready"
    protocol: int
    pid: int
    isolation: list[Layer]
    skipped: list[SkippedLayer]


class ToolCall(_Message):
    """One call of a batch: a tool name as the host registered it, and its arguments."""

    name: _Name
    args: dict[str, PlainData]


class CallTool(_Message):
    """Child -> host: call one tool; the child blocks for ``tool_result`` or ``tool_error``."""

    op: Literal["call_tool"] = "call_tool"
    call_id: _CallId
    name: _Name
    args: dict[str, PlainData]


class CallTools(_Message):
    """Child -> host: call a batch of tools concurrently; answered by one ``tool_results``."""

    op: Literal["call_tools"] = "call_tools"
    call_id: _CallId
    calls: Annotated[list[ToolCall], Field(max_length=10_000)]


class Fetch(_Message):
    """Child -> host: fetch the payload of reference ``ref_id``; answered by ``fetch_result``."""

    op: Literal["fetch"] = "fetch"
    call_id: _CallId
    ref_id: _Name


class Output(_Message):
    """Child -> host: text the script printed, streamed in order (well-formed UTF-8)."""

    op: Literal["output"] = "output"
    text: str


class Done(_Message):
    """Child -> host, last message of a run that completed.

    ``value`` is the value of the script's last expression statement (``None`` if the script
    did not end with one). When that value was not plain data, or too large, ``value`` is its
    ``repr`` cut to ``max_value_bytes`` characters and ``value_is_repr`` is true.
    """

    op: Literal["done"] = "done"
    value: PlainData
    value_is_repr: bool = False


class RunError(_Message):
    """Child -> host, last message of a run that failed.

    Attributes:
        type: the exception's class name (``SyntaxError``, ``CompileError``, ``KeyError``...),
            or a limit the child enforced itself: ``OutputExceeded``, ``ToolCallsExceeded``,
            ``DiskQuotaExceeded``, ``MemoryExceeded``; or ``SandboxSetupFailed`` when the
            child could not start.
        message: human-readable text, cut to a bound.
        line: the script line the error points at, when known.
        phase: ``setup`` (before the script was read), ``compile`` or ``run``.
    """

    op: Literal["error"] = "error"
    type: _Name
    message: str
    line: Annotated[int, Field(ge=0)] | None = None
    phase: Literal["setup", "compile", "run"]


# host -> child


class Start(_Message):
    """Host -> child, once, in answer to ``ready``: the script and what it may use.

    ``tools`` lists the tool names the script may call (``tools.<name>`` is derived from it).
    """

    op: Literal["start"] = "start"
    source: str
    inputs: dict[str, PlainData] = Field(default_factory=dict)
    tools: list[_Name] = Field(default_factory=list)
    limits: RunLimits = Field(default_factory=RunLimits)


class ToolResult(_Message):
    """Host -> child: the script view (SPEC 6.1) of a tool's result for ``call_id``."""

    op: Literal["tool_result"] = "tool_result"
    call_id: _CallId
    view: PlainData


class ToolFailed(_Message):
    """Host -> child: the call ``call_id`` failed; the script sees ``ToolError(message)``."""

    op: Literal["tool_error"] = "tool_error"
    call_id: _CallId
    message: str


class CallOk(_Message):
    """One successful outcome in ``tool_results``."""

    kind: Literal["ok"] = "ok"
    view: PlainData


class CallFailed(_Message):
    """One failed outcome in ``tool_results``."""

    kind: Literal["error"] = "error"
    message: str


class ToolResults(_Message):
    """Host -> child: the outcomes of a ``call_tools`` batch, one per call, in call order."""

    op: Literal["tool_results"] = "tool_results"
    call_id: _CallId
    results: list[Annotated[CallOk | CallFailed, Field(discriminator="kind")]]


class FetchResult(_Message):
    """Host -> child: exactly one of ``saved_to`` (a workspace path under ``refs/``) or
    ``unfetchable`` (the reason, raised in the script as ``Unfetchable``)."""

    op: Literal["fetch_result"] = "fetch_result"
    call_id: _CallId
    saved_to: str | None = None
    unfetchable: str | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> FetchResult:
        if (self.saved_to is None) == (self.unfetchable is None):
            raise ValueError("exactly one of saved_to and unfetchable must be set")
        if self.saved_to is not None and not self.saved_to.startswith("refs/"):
            raise ValueError("saved_to must be a path under refs/")
        return self


ChildMessage: TypeAlias = Annotated[
    Ready | CallTool | CallTools | Fetch | Output | Done | RunError, Field(discriminator="op")
]
HostMessage: TypeAlias = Annotated[
    Start | ToolResult | ToolFailed | ToolResults | FetchResult, Field(discriminator="op")
]

_CHILD_ADAPTER: TypeAdapter[ChildMessage] = TypeAdapter(ChildMessage)
_HOST_ADAPTER: TypeAdapter[HostMessage] = TypeAdapter(HostMessage)


# --------------------------------------------------------------------------------------------
# Framing


def _limit(limit: int) -> int:
    if not 1 <= limit <= MAX_FRAME:
        raise ValueError(f"frame limit must be between 1 and {MAX_FRAME}, not {limit}")
    return limit


def encode_frame(message: _Message, *, limit: int = DEFAULT_FRAME_LIMIT) -> bytes:
    """Return ``message`` framed: a 4-byte big-endian length and its msgpack body.

    Raises:
        ProtocolError: the message cannot be packed (a string that is not well formed, an int
            outside 64 bits) or its body is larger than ``limit``. Nothing is written anywhere.
    """
    return b"".join(encode_parts(message, limit=limit))


def encode_parts(
    message: _Message, *, limit: int = DEFAULT_FRAME_LIMIT
) -> tuple[bytes, memoryview]:
    """Return ``message`` framed as two parts, the 4-byte prefix and the body, to be written
    one after the other (``os.writev``): a large body is then never copied behind its prefix.

    The body is a read-only view of the buffer it was packed into, which belongs to no one
    else: a large body is not copied out of it into a ``bytes`` either.

    Raises:
        ProtocolError: as :func:`encode_frame`.
    """
    packer = msgpack.Packer(use_bin_type=True, autoreset=False, buf_size=_PACK_BUFFER)
    try:
        packer.pack(message.model_dump(mode="python"))
        body = packer.getbuffer().toreadonly()
    except (TypeError, ValueError, OverflowError) as exc:
        raise ProtocolError(f"cannot pack a {type(message).__name__} message: {exc}") from exc
    if len(body) > _limit(limit):
        raise ProtocolError(f"a {len(body)}-byte message is over the {limit}-byte frame limit")
    return _PREFIX.pack(len(body)), body


def write_parts(fd: int, parts: tuple[bytes, memoryview], written: int = 0) -> int:
    """Write what is left of ``parts`` after their first ``written`` bytes to ``fd`` with one
    ``os.writev``; return the new count of bytes written (a non-blocking ``fd`` may take only
    part). Raises what ``os.writev`` raises (``BlockingIOError`` when a non-blocking pipe is
    full)."""
    prefix, body = parts
    if written < len(prefix):
        buffers: list[bytes | memoryview] = [prefix[written:], body]
    else:
        buffers = [body[written - len(prefix) :]]
    return written + os.writev(fd, buffers)


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


def _unpack(body: bytes) -> Any:
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


def parse_child_message(body: bytes) -> ChildMessage:
    """Validate one frame body sent by a child and return the message.

    Raises:
        ProtocolError: the body is not msgpack, or not a valid child message.
    """
    data = _unpack(body)
    try:
        return _CHILD_ADAPTER.validate_python(data)
    except ValidationError as exc:
        raise ProtocolError(f"invalid message from the child: {_summary(exc)}") from exc


def parse_host_message(body: bytes) -> HostMessage:
    """Validate one frame body sent by the host and return the message.

    Raises:
        ProtocolError: the body is not msgpack, or not a valid host message.
    """
    data = _unpack(body)
    try:
        return _HOST_ADAPTER.validate_python(data)
    except ValidationError as exc:
        raise ProtocolError(f"invalid message from the host: {_summary(exc)}") from exc


def _summary(exc: ValidationError) -> str:
    first = exc.errors(include_url=False, include_input=False)[:3]
    return "; ".join(
        f"{'.'.join(str(part) for part in error['loc']) or '<body>'}: {error['msg']}"
        for error in first
    )


# --------------------------------------------------------------------------------------------
# Blocking I/O on raw fds (the child side, and small blocking hosts in tests and benchmarks)


class BlockingChannel:
    """Blocking frame I/O over two raw file descriptors (typically pipes).

    The channel does not own the fds unless :meth:`close` is called; it never closes them on
    error. Reads and writes are retried on partial transfers; ``EINTR`` is retried by Python.
    """

    def __init__(self, read_fd: int, write_fd: int, *, limit: int = DEFAULT_FRAME_LIMIT) -> None:
        self.read_fd = read_fd
        self.write_fd = write_fd
        self._decoder = FrameDecoder(limit=limit)
        self._ready: list[bytes] = []

    @property
    def limit(self) -> int:
        """The frame limit for both directions."""
        return self._decoder.limit

    @limit.setter
    def limit(self, value: int) -> None:
        self._decoder.limit = value

    def send(self, message: _Message) -> None:
        """Write ``message`` as one frame; returns once every byte is written.

        Raises:
            ProtocolError: the message cannot be encoded within the limit (nothing written).
            OSError: the write failed (``BrokenPipeError`` when the reader is gone); part of
                the frame may have been written.
        """
        parts = encode_parts(message, limit=self.limit)
        total, written = len(parts[0]) + len(parts[1]), 0
        while written < total:
            written = write_parts(self.write_fd, parts, written)

    def read_body(self) -> bytes | None:
        """Block until one whole frame arrives and return its body; ``None`` at a clean EOF.

        Raises:
            ProtocolError: the stream ended inside a frame, or a frame is over the limit.
            OSError: the read failed.
        """
        while not self._ready:
            # The rest of a large body in one read (a socket may hold all of it; see
            # sandbox._zygote.open_channel): one allocation and one kernel copy, not many.
            chunk = os.read(self.read_fd, max(_READ_CHUNK, self._decoder.missing))
            if not chunk:
                if self._decoder.at_boundary:
                    return None
                raise ProtocolError("the stream ended inside a frame")
            self._ready.extend(self._decoder.feed(chunk))
        return self._ready.pop(0)

    def receive_host(self) -> HostMessage | None:
        """Read and validate one host message; ``None`` at a clean EOF (see :meth:`read_body`)."""
        body = self.read_body()
        return None if body is None else parse_host_message(body)

    def receive_child(self) -> ChildMessage | None:
        """Read and validate one child message; ``None`` at a clean EOF (see
        :meth:`read_body`)."""
        body = self.read_body()
        return None if body is None else parse_child_message(body)

    def close(self) -> None:
        """Close both fds (each at most once); never raises."""
        for fd in {self.read_fd, self.write_fd}:
            with contextlib.suppress(OSError):
                os.close(fd)
