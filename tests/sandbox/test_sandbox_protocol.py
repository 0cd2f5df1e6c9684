"""The channel's schema and framing: every message round-trips; everything else is refused
with one ProtocolError, before a byte of an oversized body is buffered."""

from __future__ import annotations

import itertools
import os
import struct
from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sandbox.protocol import (
    MAX_FRAME,
    CallFailed,
    CallOk,
    CallTool,
    CallTools,
    Done,
    Fetch,
    FetchResult,
    FrameDecoder,
    Output,
    ProtocolError,
    Ready,
    RunError,
    RunLimits,
    SkippedLayer,
    Start,
    ToolCall,
    ToolFailed,
    ToolResult,
    ToolResults,
    check_plain,
    encode_frame,
    parse_child_message,
    parse_host_message,
)

VIEW = {"content": [{"type": "text", "text": "t"}], "data": {"b": b"\x00\xff"}, "isError": False}

CHILD_MESSAGES = [
    Ready(
        protocol=1,
        pid=42,
        isolation=["restricted-python", "seccomp"],
        skipped=[SkippedLayer(layer="uid", reason="not started as root")],
    ),
    CallTool(call_id=1, name="docs.search", args={"q": "trio", "n": [1, 2.5, None, True]}),
    CallTools(call_id=2, calls=[ToolCall(name="a", args={}), ToolCall(name="b", args={"x": 1})]),
    Fetch(call_id=3, ref_id="ref_9f2c"),
    Output(text="hello ✓\n"),
    Done(value={"k": [b"\x01", -(2**63), 2**64 - 1]}),
    Done(value="{1, 2}", value_is_repr=True),
    RunError(type="KeyError", message="'k'", line=3, phase="run"),
    RunError(type="SyntaxError", message="bad", line=None, phase="compile"),
    RunError(type="OutputExceeded", message="printed too much", line=2, phase="limit"),
]

HOST_MESSAGES = [
    Start(source="1 + 1", inputs={"q": "x"}, tools=["docs.search"], limits=RunLimits()),
    ToolResult(call_id=1, view=VIEW),
    ToolFailed(call_id=1, message="boom"),
    ToolResults(call_id=2, results=[CallOk(view=VIEW), CallFailed(message="no")]),
    FetchResult(call_id=3, saved_to="refs/ref_9f2c.pdf"),
    FetchResult(call_id=3, unfetchable="a server asked that its content never reach you"),
]


@pytest.mark.parametrize("message", CHILD_MESSAGES + HOST_MESSAGES, ids=lambda m: m.op)
def test_a_frame_holds_the_messages_dump(message: Any) -> None:
    """A message is packed from its fields as they are, to the very bytes its dump packs to."""
    assert body(message) == msgpack.packb(message.model_dump(mode="python"), use_bin_type=True)


def body(message: object) -> bytes:
    """The msgpack body of a framed message."""
    return encode_frame(message)[4:]  # type: ignore[arg-type]


@pytest.mark.parametrize("message", CHILD_MESSAGES, ids=lambda m: m.op)
def test_child_messages_round_trip(message: object) -> None:
    """Every child message parses back equal; a host parser refuses it."""
    assert parse_child_message(body(message)) == message
    with pytest.raises(ProtocolError):
        parse_host_message(body(message))


@pytest.mark.parametrize("message", HOST_MESSAGES, ids=lambda m: m.op)
def test_host_messages_round_trip(message: object) -> None:
    """Every host message parses back equal; a child parser refuses it."""
    assert parse_host_message(body(message)) == message
    with pytest.raises(ProtocolError):
        parse_child_message(body(message))


def test_frame_layout() -> None:
    """A frame is a 4-byte big-endian length and the msgpack body."""
    frame = encode_frame(Output(text="x"))
    (length,) = struct.unpack(">I", frame[:4])
    assert length == len(frame) - 4
    assert msgpack.unpackb(frame[4:]) == {"op": "output", "text": "x"}


def test_decoder_is_incremental() -> None:
    """Fed one byte at a time, the decoder returns each body once, when complete."""
    stream = b"".join(encode_frame(m) for m in CHILD_MESSAGES)
    decoder = FrameDecoder()
    bodies = [b for i in range(len(stream)) for b in decoder.feed(stream[i : i + 1])]
    assert [parse_child_message(b) for b in bodies] == CHILD_MESSAGES
    assert decoder.at_boundary


def test_decoder_returns_several_frames_from_one_chunk() -> None:
    """One chunk holding several frames and part of the next yields the whole ones."""
    frames = [encode_frame(Output(text=str(i))) for i in range(3)]
    decoder = FrameDecoder()
    assert len(decoder.feed(frames[0] + frames[1] + frames[2][:5])) == 2
    assert not decoder.at_boundary
    assert len(decoder.feed(frames[2][5:])) == 1


@given(
    bodies=st.lists(st.binary(min_size=1, max_size=3000), min_size=1, max_size=6),
    cuts=st.lists(st.integers(min_value=0, max_value=20_000), max_size=12),
)
def test_decoder_returns_the_same_bodies_however_the_stream_is_cut(
    bodies: list[bytes], cuts: list[int]
) -> None:
    """Whatever chunks the stream arrives in, the bodies come back whole, once, in order."""
    stream = b"".join(struct.pack(">I", len(body)) + body for body in bodies)
    edges = sorted({0, len(stream), *(cut % (len(stream) + 1) for cut in cuts)})
    decoder = FrameDecoder()
    got = [
        body for start, end in itertools.pairwise(edges) for body in decoder.feed(stream[start:end])
    ]
    assert got == bodies
    assert all(type(body) is bytes for body in got)
    assert decoder.at_boundary


@given(
    bodies=st.lists(st.binary(min_size=1, max_size=3000), min_size=1, max_size=6),
    cuts=st.lists(st.integers(min_value=0, max_value=20_000), max_size=12),
)
def test_decoder_tells_how_much_of_a_body_is_missing(bodies: list[bytes], cuts: list[int]) -> None:
    """After each chunk, ``missing`` is what the body being read still lacks (0 between frames
    and inside a length prefix), so a reader may ask for exactly that much at once."""
    stream = b"".join(struct.pack(">I", len(body)) + body for body in bodies)
    edges = sorted({0, len(stream), *(cut % (len(stream) + 1) for cut in cuts)})
    decoder = FrameDecoder()
    for start, end in itertools.pairwise(edges):
        decoder.feed(stream[start:end])
        expected, frame_start = 0, 0
        for body in bodies:
            body_start, body_end = frame_start + 4, frame_start + 4 + len(body)
            if body_start <= end < body_end:
                expected = body_end - end
            frame_start = body_end
        assert decoder.missing == expected
    assert decoder.missing == 0


def test_a_large_body_is_returned_whole_from_many_chunks() -> None:
    """A 3 MiB body fed in 64 KiB reads (as from a pipe) comes back whole."""
    body = os.urandom(3 << 20)
    stream = struct.pack(">I", len(body)) + body
    decoder = FrameDecoder(limit=4 << 20)
    got = [b for i in range(0, len(stream), 65536) for b in decoder.feed(stream[i : i + 65536])]
    assert got == [body]


def test_a_body_fed_a_byte_at_a_time_is_held_compactly() -> None:
    """A sender that trickles its frame one byte per read can't make the decoder hold many
    times the body's size (a piece per byte would cost ~40 bytes of memory per byte)."""
    import tracemalloc

    body = os.urandom(100_000)
    stream = struct.pack(">I", len(body)) + body
    pieces = [stream[i : i + 1] for i in range(len(stream))]
    decoder = FrameDecoder()
    tracemalloc.start()
    try:
        got = [b for piece in pieces[:-1] for b in decoder.feed(piece)]
        held, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert got == [] and decoder.buffered == len(stream) - 1 - 4
    assert held < 3 * len(body)
    assert decoder.feed(pieces[-1]) == [body]


def test_oversized_prefix_is_refused_before_the_body() -> None:
    """A prefix over the limit raises as soon as its 4 bytes arrive, and stays failed."""
    decoder = FrameDecoder(limit=100)
    with pytest.raises(ProtocolError):
        decoder.feed(struct.pack(">I", 101))
    with pytest.raises(ProtocolError):
        decoder.feed(b"")
    ok = FrameDecoder(limit=100)
    assert ok.feed(struct.pack(">I", 100)) == []


def test_zero_length_frame_is_refused() -> None:
    """A zero-length frame is a protocol error."""
    with pytest.raises(ProtocolError):
        FrameDecoder().feed(b"\x00\x00\x00\x00")


def test_limits_are_capped() -> None:
    """No caller can raise a limit past MAX_FRAME."""
    with pytest.raises(ValueError):
        FrameDecoder(limit=MAX_FRAME + 1)


def test_encode_over_limit_raises() -> None:
    """Encoding a message larger than the limit raises ProtocolError."""
    with pytest.raises(ProtocolError):
        encode_frame(Output(text="x" * 2000), limit=1024)


def test_encode_unpackable_raises() -> None:
    """Strings that are not well formed can't be packed: ProtocolError, with the cause."""
    with pytest.raises(ProtocolError) as info:
        encode_frame(Output(text="\ud800"))
    assert info.value.__cause__ is not None


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\xc1",  # never-used msgpack byte
        b"\xc0\xc0",  # trailing data
        b"\x91" * 5000 + b"\xc0",  # nesting past msgpack's stack
        b"\xa2\xff\xfe",  # invalid UTF-8
        b"\xc7\x01\x05a",  # an extension type
        msgpack.packb({"op": "tool_result", "call_id": 1, "view": msgpack.Timestamp(1, 0)}),
        msgpack.packb({1: 2}),  # non-string map key
        msgpack.packb([1, 2]),
        msgpack.packb({"op": "nope"}),
        msgpack.packb({"op": "tool_result", "call_id": 1, "view": {}, "extra": 1}),
        msgpack.packb({"op": "tool_result", "call_id": 0, "view": {}}),
        msgpack.packb({"op": "tool_result", "call_id": "1", "view": {}}),
        msgpack.packb({"op": "fetch_result", "call_id": 1}),
        msgpack.packb({"op": "fetch_result", "call_id": 1, "saved_to": "a", "unfetchable": "b"}),
        msgpack.packb({"op": "fetch_result", "call_id": 1, "saved_to": "/etc/passwd"}),
        msgpack.packb({"op": "tool_result", "call_id": 1, "view": {"a": [[[[[[[]]]]]]] * 2}})[:-1],
    ],
)
def test_bad_host_bodies_raise_protocol_error(raw: bytes) -> None:
    """Malformed, ill-typed or unknown bodies all raise ProtocolError."""
    with pytest.raises(ProtocolError):
        parse_host_message(raw)


def test_plain_data_depth_and_types() -> None:
    """Plain data is bounded in depth and nodes, and refuses other types and keys."""
    deep: list[object] = []
    node = deep
    for _ in range(200):
        node.append([])
        node = node[0]  # type: ignore[assignment]
    with pytest.raises(ValueError, match="deeper"):
        check_plain(deep)
    with pytest.raises(ValueError, match="more than"):
        check_plain([0] * 11, max_nodes=10)
    for bad in ({1: 2}, (1, 2), {1}, object(), bytearray(b"x")):
        with pytest.raises(ValueError):
            check_plain(bad)
    assert check_plain({"a": [None, True, 1, 1.5, "s", b"b"]})


def test_deep_view_is_refused_by_the_host_parser() -> None:
    """A view nested past the bound is a protocol error, not a crash."""
    view: object = "leaf"
    for _ in range(150):
        view = [view]
    with pytest.raises(ProtocolError):
        parse_host_message(msgpack.packb({"op": "tool_result", "call_id": 1, "view": view}))
