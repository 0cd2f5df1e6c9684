#!/usr/bin/env python3
"""Fuzz target: the MCP stdio transport's line reader (:mod:`scriptbridge._mcp_stdio`).

Invariant: for any bytes a tool server writes on stdout (raw, or JSON-RPC-shaped lines built
from the fuzzer's bytes), cut into chunks of any sizes, under any line bound:

- :class:`LineSplitter` yields exactly what splitting the whole stream at ``\\n`` gives: each
  finished line's bytes when it is at most ``max_bytes`` long, else its length as an ``int``;
  the unfinished rest is never yielded, and it holds at most ``max_bytes`` of it;
- :func:`parse_line` returns a ``SessionMessage`` or a reason (``str``) for any line, never
  raises;
- :func:`shown` (what a server's stderr line becomes in the log) never raises and returns
  printable text of at most ``limit`` characters plus escapes and ``...``.

Run: ``.venv/bin/python fuzz/run.py --seconds N mcp_stdio`` (``make fuzz`` runs every target);
a finding's input, given as the only argument, runs once.
"""

from __future__ import annotations

import json
import sys

import _coverage
import atheris

# the messages are validated by pydantic-core, compiled code atheris doesn't see
with atheris.instrument_imports(
    **_coverage.packages(
        "scriptbridge._mcp_stdio",
    )
):
    from mcp.shared.message import SessionMessage

    from scriptbridge._mcp_stdio import LineSplitter, parse_line, shown

KEYS = ("jsonrpc", "id", "method", "params", "result", "error", "code", "message", "data")
VALUES = ("2.0", "1.0", "tools/call", "initialize", "notifications/progress", 1, -1, 0, 2**63,
          None, True, 1.5, "", "\ud800", [], {}, "\\u0000")  # fmt: skip


def json_line(fdp: atheris.FuzzedDataProvider) -> bytes:
    """A JSON-RPC-shaped line: an object of the protocol's keys, values of any JSON type."""
    message: dict[str, object] = {}
    for _ in range(fdp.ConsumeIntInRange(0, 6)):
        key = KEYS[fdp.ConsumeIntInRange(0, len(KEYS) - 1)]
        value: object = VALUES[fdp.ConsumeIntInRange(0, len(VALUES) - 1)]
        if fdp.ConsumeBool():
            value = {KEYS[fdp.ConsumeIntInRange(0, len(KEYS) - 1)]: value}
        message[key] = value
    text = json.dumps(message, ensure_ascii=fdp.ConsumeBool())
    return text.encode("utf-8", "surrogatepass")


def test_one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    max_bytes = fdp.ConsumeIntInRange(0, 300)
    cuts = sorted(fdp.ConsumeIntInRange(0, 2048) for _ in range(fdp.ConsumeIntInRange(0, 8)))
    if fdp.ConsumeBool():
        lines = [json_line(fdp) for _ in range(fdp.ConsumeIntInRange(1, 4))]
        stream = b"\n".join(lines) + (b"\n" if fdp.ConsumeBool() else b"")
    else:
        stream = fdp.ConsumeBytes(fdp.remaining_bytes())
    splitter = LineSplitter(max_bytes)
    got: list[bytes | int] = []
    start = 0
    for end in [*cuts, len(stream)]:
        end = max(start, min(end, len(stream)))
        got += splitter.feed(stream[start:end])
        if len(splitter._line) > max_bytes:
            raise AssertionError(f"the splitter holds {len(splitter._line)} bytes > {max_bytes}")
        start = end
    *finished, _rest = stream.split(b"\n")
    expected = [line if len(line) <= max_bytes else len(line) for line in finished]
    if got != expected:
        raise AssertionError(f"split {got!r}, expected {expected!r}")
    for line in finished:
        parsed = parse_line(line)
        if not isinstance(parsed, SessionMessage | str):
            raise AssertionError(f"parse_line gave {parsed!r}")
        text = line.decode("utf-8", "replace")
        limit = fdp.ConsumeIntInRange(0, 64) if fdp.remaining_bytes() else 2000
        out = shown(text, limit)
        if not out.isprintable() or len(out) > 4 + 10 * min(len(text), limit):
            raise AssertionError(f"shown({text!r}, {limit}) gave {out!r}")


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
