#!/usr/bin/env python3
"""Fuzz target: the channel's frame decoder and the child-message parser.

Invariant: for any byte stream a child could write (raw bytes, or frames holding msgpack
bodies built from the fuzzer's bytes: messages of every op with fields of any type, and garbage
after them), cut into chunks of any sizes, under any frame limit:

- :meth:`FrameDecoder.feed` returns bodies or raises :class:`ProtocolError` only, and the
  bodies it returns, each framed again, are the stream from its start, in order, each of
  ``1..limit`` bytes; after an error every later ``feed`` raises again; it never holds more
  than a prefix and one body (``buffered < 4 + limit``); how the stream is cut changes
  neither whether it fails nor, when it doesn't, the bodies;
- :func:`parse_child_message` (and :func:`unpack_body`) returns a message or raises
  :class:`ProtocolError` only, whatever the body;
- a message it returns, framed again (:func:`encode_frame`), parses to the same message
  (the same frame once framed again).

Run: ``.venv/bin/python fuzz/run.py --seconds N frames`` (``make fuzz`` runs every target);
a finding's input, given as the only argument, runs once.
"""

from __future__ import annotations

import contextlib
import struct
import sys
from typing import Any

import _coverage
import atheris

# msgpack's unpacker and pydantic-core are compiled code, which atheris doesn't see
with atheris.instrument_imports(
    **_coverage.packages(
        "sandbox.protocol._framing",
        "sandbox.protocol._messages",
        "sandbox.protocol._plain",
    )
):
    import msgpack

    from sandbox.protocol import FrameDecoder, ProtocolError, encode_frame
    from sandbox.protocol._framing import unpack_body
    from sandbox.protocol._messages import parse_child_message

OPS = ("ready", "call_tool", "call_tools", "fetch", "output", "carry", "done", "error", "start")
FIELDS = ("op", "pid", "isolation", "skipped", "call_id", "name", "args", "calls", "ref_id",
          "text", "value", "value_is_repr", "type", "message", "line", "phase", "limit",
          "globals", "definitions", "dropped", "version", "layer", "reason")  # fmt: skip


def value(fdp: atheris.FuzzedDataProvider, depth: int = 0) -> Any:
    how = fdp.ConsumeIntInRange(0, 11)
    if how == 0:
        return None
    if how == 1:
        return fdp.ConsumeBool()
    if how == 2:
        return fdp.ConsumeIntInRange(-2, 70)
    if how == 3:
        return fdp.ConsumeInt(9)
    if how == 4:
        return fdp.ConsumeFloat()
    if how == 5:
        return fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 8))
    if how == 6:
        return OPS[fdp.ConsumeIntInRange(0, len(OPS) - 1)]
    if how == 7:
        return FIELDS[fdp.ConsumeIntInRange(0, len(FIELDS) - 1)]
    if how == 8 and depth < 6:
        return [value(fdp, depth + 1) for _ in range(fdp.ConsumeIntInRange(0, 4))]
    if how == 9 and depth < 6:
        return message(fdp, depth + 1)
    if how == 10 and depth < 2:  # deep nesting: past the plain data's depth bound
        inner: Any = value(fdp, depth + 1)
        for _ in range(fdp.ConsumeIntInRange(95, 105)):
            inner = [inner]
        return inner
    return fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, 12))


def message(fdp: atheris.FuzzedDataProvider, depth: int = 0) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if depth == 0 and fdp.ConsumeIntInRange(0, 7):
        body["op"] = OPS[fdp.ConsumeIntInRange(0, len(OPS) - 1)]
    for _ in range(fdp.ConsumeIntInRange(0, 6)):
        body[FIELDS[fdp.ConsumeIntInRange(0, len(FIELDS) - 1)]] = value(fdp, depth + 1)
    return body


def stream(fdp: atheris.FuzzedDataProvider) -> bytes:
    """What a child writes: frames of msgpack messages, raw bytes, or both."""
    parts: list[bytes] = []
    for _ in range(fdp.ConsumeIntInRange(1, 4)):
        how = fdp.ConsumeIntInRange(0, 3)
        if how == 3:
            parts.append(fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 64)))
            continue
        try:
            body = msgpack.packb(message(fdp), use_bin_type=True)
        except (ValueError, OverflowError, TypeError):
            body = b"\xc1"
        if how == 1:  # trailing bytes, or a body cut short
            body += fdp.ConsumeBytes(2) if fdp.ConsumeBool() else b""
            body = body[: max(1, len(body) - fdp.ConsumeIntInRange(0, 3))]
        length = len(body) if how != 2 else fdp.ConsumeIntInRange(0, 2**32 - 1)
        parts.append(struct.pack(">I", length) + body)
    return b"".join(parts)


def decode(data: bytes, limit: int, cuts: list[int]) -> tuple[list[bytes], bool]:
    """The bodies a decoder gives for ``data`` fed in pieces ending at ``cuts``, and whether
    it failed; checks the decoder's own invariants on the way."""
    decoder = FrameDecoder(limit=limit)
    bodies: list[bytes] = []
    start = 0
    for end in [*cuts, len(data)]:
        try:
            bodies += decoder.feed(data[start:end])
        except ProtocolError:
            for _ in range(2):
                try:
                    decoder.feed(b"\x00\x00\x00\x01x")
                except ProtocolError:
                    continue
                raise AssertionError("a failed decoder accepted more bytes") from None
            return bodies, True
        if decoder.buffered >= 4 + limit:
            raise AssertionError(f"the decoder holds {decoder.buffered} bytes (limit {limit})")
        start = end
    return bodies, False


def test_one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    limit = fdp.ConsumeIntInRange(1, 512) if fdp.ConsumeBool() else 16 * 2**20
    cuts = sorted(fdp.ConsumeIntInRange(0, 256) for _ in range(fdp.ConsumeIntInRange(0, 6)))
    raw = fdp.ConsumeBool()
    written = fdp.ConsumeBytes(fdp.remaining_bytes()) if raw else stream(fdp)
    cuts = [min(cut, len(written)) for cut in cuts]
    bodies, failed = decode(written, limit, cuts)
    whole, whole_failed = decode(written, limit, [])
    # A feed that raises returns nothing, so a failing stream fed whole gives no bodies, and
    # fed in pieces, the bodies of the pieces before the one that failed.
    if failed != whole_failed or (not failed and bodies != whole):
        raise AssertionError("how the stream was cut changed what was decoded")
    framed = b"".join(struct.pack(">I", len(body)) + body for body in bodies)
    if not written.startswith(framed) or any(not 1 <= len(b) <= limit for b in bodies):
        raise AssertionError("the bodies are not the stream's frames")
    for body in bodies:
        with contextlib.suppress(ProtocolError):
            unpack_body(body)
        try:
            parsed = parse_child_message(body)
        except ProtocolError:
            continue
        framed_again = encode_frame(parsed)
        again = parse_child_message(framed_again[4:])
        if encode_frame(again) != framed_again:  # compared as bytes: a NaN is no NaN's equal
            raise AssertionError(f"{parsed!r} framed again parses to {again!r}")


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
