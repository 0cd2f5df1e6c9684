"""Tests of framing in two parts (prefix, body) and of the bounded one-shot unpacking."""

from __future__ import annotations

import msgpack
import pytest

from sandbox.protocol import (
    Done,
    ProtocolError,
    ToolResult,
    encode_frame,
    encode_parts,
    parse_child_message,
)


def test_parts_are_the_frame() -> None:
    """prefix + body is exactly encode_frame's frame, and both refuse an oversized body."""
    message = ToolResult(call_id=3, view={"content": [{"type": "text", "text": "x" * 5000}]})
    prefix, body = encode_parts(message)
    assert prefix + body == encode_frame(message)
    assert int.from_bytes(prefix, "big") == len(body)
    with pytest.raises(ProtocolError):
        encode_parts(message, limit=1024)


def test_trailing_bytes_and_bad_bodies_are_refused() -> None:
    """A body with bytes after its message, or cut short, is a ProtocolError."""
    body = encode_frame(Done(value=1))[4:]
    with pytest.raises(ProtocolError, match="2 bytes after its message"):
        parse_child_message(body + b"\x01\x02")
    with pytest.raises(ProtocolError, match="not valid msgpack"):
        parse_child_message(body[:-1])


def test_lengths_are_bounded_by_the_body() -> None:
    """A string claiming more bytes than the body holds is refused, not allocated."""
    lying = b"\x81\xa2op\xdb" + (2**31).to_bytes(4, "big") + b"x"
    with pytest.raises(ProtocolError):
        parse_child_message(lying)
    assert msgpack.unpackb(msgpack.packb({"op": "x"})) == {"op": "x"}
