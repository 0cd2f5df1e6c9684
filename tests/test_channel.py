"""Tests for the host side of the channel: real pipes, a hostile writer on the other end."""

from __future__ import annotations

import os
import struct

import msgpack
import pytest
import trio

from sandbox.protocol import Output, ToolResult, encode_frame
from scriptbridge import ProtocolViolation
from scriptbridge._channel import ChildChannel

LIMIT = 1 << 16


def frame_of(body: object) -> bytes:
    packed = msgpack.packb(body)
    return struct.pack(">I", len(packed)) + packed


def channel_pair() -> tuple[ChildChannel, int, int]:
    """A channel on the host's ends; returns it with the child's write and read fds."""
    child_to_host_r, child_to_host_w = os.pipe()
    host_to_child_r, host_to_child_w = os.pipe()
    return (
        ChildChannel(child_to_host_r, host_to_child_w, limit=LIMIT),
        child_to_host_w,
        host_to_child_r,
    )


async def test_valid_messages_arrive_validated_then_eof() -> None:
    """Frames written by the child arrive as validated messages; a clean close is None."""
    channel, child_w, child_r = channel_pair()
    os.write(child_w, encode_frame(Output(text="one")) + encode_frame(Output(text="two")))
    os.close(child_w)
    assert await channel.receive() == Output(text="one")
    assert await channel.receive() == Output(text="two")
    assert await channel.receive() is None
    await channel.aclose()
    os.close(child_r)


async def test_send_reaches_the_child() -> None:
    """A host message is framed onto the child's pipe."""
    channel, child_w, child_r = channel_pair()
    await channel.send(ToolResult(call_id=1, view={"content": []}))
    frame = os.read(child_r, 1 << 16)
    (length,) = struct.unpack(">I", frame[:4])
    assert msgpack.unpackb(frame[4 : 4 + length]) == {
        "op": "tool_result",
        "call_id": 1,
        "view": {"content": []},
    }
    await channel.aclose()
    os.close(child_w)
    os.close(child_r)


@pytest.mark.parametrize(
    ("raw", "match"),
    [
        (struct.pack(">I", 4 * 2**30 - 1), "outside"),
        (struct.pack(">I", 0), "outside"),
        (struct.pack(">I", 5) + b"\xc1\xc1\xc1\xc1\xc1", "not valid msgpack"),
        (struct.pack(">I", 1) + msgpack.packb(7), "invalid message"),
        (frame_of({"op": "launch_missiles"}), "invalid message"),
        (frame_of({"op": "output", "text": "x", "extra": 1}), "invalid message"),
    ],
)
async def test_hostile_bytes_are_protocol_violations(raw: bytes, match: str) -> None:
    """Huge or zero prefixes, garbage, and unknown ops raise ProtocolViolation at once."""
    channel, child_w, child_r = channel_pair()
    os.write(child_w, raw)  # the writer stays open: the verdict can't wait for more bytes
    with trio.fail_after(5), pytest.raises(ProtocolViolation, match=match):
        await channel.receive()
    await channel.aclose()
    os.close(child_w)
    os.close(child_r)


async def test_stream_ending_inside_a_frame() -> None:
    """A child that dies mid-frame is a violation, not a clean close."""
    channel, child_w, child_r = channel_pair()
    os.write(child_w, encode_frame(Output(text="hello"))[:-2])
    os.close(child_w)
    with pytest.raises(ProtocolViolation, match="inside a frame"):
        await channel.receive()
    await channel.aclose()
    os.close(child_r)


def test_the_hosts_own_bodies_parse_as_the_messages_they_stand_for() -> None:
    """The replies the host builds as bodies (a view's tool_result, a batch's tool_results)
    are packed as they are and parse, on the child's side, as the validated messages."""
    from sandbox.protocol import (
        CallFailed,
        CallOk,
        ToolResult,
        ToolResults,
        encode_frame,
        parse_host_message,
    )
    from scriptbridge._conversation import tool_reply

    view = {"content": [{"type": "text", "text": "t"}], "data": {"b": b"\x00"}, "isError": False}
    assert parse_host_message(encode_frame(tool_reply(3, True, view))[4:]) == ToolResult(
        call_id=3, view=view
    )
    batch = {
        "op": "tool_results",
        "call_id": 4,
        "results": [{"kind": "ok", "view": view}, {"kind": "error", "message": "no"}],
    }
    assert parse_host_message(encode_frame(batch)[4:]) == ToolResults(
        call_id=4, results=[CallOk(view=view), CallFailed(message="no")]
    )
