"""McpServer against small hostile stdio servers of our own: bad bytes are skipped with one log
line each and the server keeps working, a line past the bound costs linear time and bounded
memory, a broken transport fails the call in flight at once and restarts the server."""

from __future__ import annotations

import logging
import pathlib
import sys
import time
from collections.abc import AsyncIterator

import pytest
import trio

from scriptbridge._mcp import McpServer, ToolServerError

HOSTILE = str(pathlib.Path(__file__).resolve().parent / "servers" / "hostile_server.py")


@pytest.fixture
async def nursery() -> AsyncIterator[trio.Nursery]:
    async with trio.open_nursery() as nursery:
        yield nursery
        nursery.cancel_scope.cancel()


def text_of(result: dict[str, object]) -> object:
    return result["content"][0]["text"]  # type: ignore[index]


async def test_bad_lines_are_skipped_with_one_log_line_each(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    """Invalid UTF-8, non-JSON, JSON that isn't JSON-RPC and a line past the bound are each
    dropped with one log line and no traceback; every call answers and nothing restarts."""
    server = McpServer(sys.executable, [HOSTILE], name="h", max_line_bytes=1 << 20)
    await server.open(nursery)
    try:
        expected = {"garbage": 1, "badutf8": 2, "notjsonrpc": 3}
        for tool, lines in expected.items():
            caplog.clear()
            with caplog.at_level(logging.INFO, logger="scriptbridge.mcp"):
                assert text_of(await server.call_tool(tool, {"t": tool})) == f'{{"t": "{tool}"}}'
            dropped = [r for r in caplog.records if "dropped" in r.getMessage()]
            assert len(dropped) == lines, (tool, caplog.text)
            assert all(r.exc_info is None for r in caplog.records), caplog.text
            assert "Traceback" not in caplog.text
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="scriptbridge.mcp"):
            result = await server.call_tool("longline", {"bytes": 3 << 20})
        assert text_of(result) == '{"bytes": 3145728}'
        (dropped,) = [r for r in caplog.records if "dropped" in r.getMessage()]
        assert "1048576" in dropped.getMessage() and dropped.exc_info is None
        assert server.restarts == 0
    finally:
        await server.aclose()


async def test_a_gigantic_line_costs_linear_time(nursery: trio.Nursery) -> None:
    """A 64 MiB line (4 times the default bound) is skipped in time linear in its length (4
    times a 16 MiB line's, not 16 times as a quadratic read would take, with room for a busy
    machine), and the server answers the call that wrote it."""
    server = McpServer(sys.executable, [HOSTILE], name="h")
    await server.open(nursery)
    try:
        took: dict[int, float] = {}
        for mib in (16, 64):
            started = time.perf_counter()
            result = await server.call_tool("longline", {"bytes": mib << 20})
            took[mib] = time.perf_counter() - started
            assert text_of(result) == f'{{"bytes": {mib << 20}}}'
        assert took[64] < 8 * took[16] + 1.0, took
        assert server.restarts == 0
    finally:
        await server.aclose()


async def test_a_closed_stdout_fails_the_call_at_once_and_the_next_call_restarts(
    nursery: trio.Nursery,
) -> None:
    """A server that closes its stdout but stays alive fails the call in flight at once (not
    after its timeout) with a clear reason; the next call starts it again."""
    server = McpServer(sys.executable, [HOSTILE], name="h", timeout_s=120)
    await server.open(nursery)
    try:
        first = await server.call_tool("echo", {})
        started = time.perf_counter()
        with pytest.raises(ToolServerError, match=r"server 'h' (exited|closed)"):
            await server.call_tool("closeout", {})
        assert time.perf_counter() - started < 120 / 4, "it waited for the call's timeout"
        again = await server.call_tool("echo", {"n": 2})
        assert text_of(again) == '{"n": 2}' and again["pid"] != first["pid"]
        assert server.restarts == 1
    finally:
        await server.aclose()


async def test_stderr_and_log_messages_go_to_logging(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    """A server's stderr and its notifications/message land in logging under
    scriptbridge.mcp.<server>, escape sequences escaped."""
    server = McpServer(sys.executable, [HOSTILE], name="h")
    with caplog.at_level(logging.DEBUG, logger="scriptbridge.mcp"):
        await server.open(nursery)
        try:
            await server.call_tool("log", {})
            await server.call_tool("stderr", {})
            await server.ping()  # the stderr line has been read by the time this answers
            with trio.fail_after(5):
                while "red" not in caplog.text:
                    await trio.sleep(0.01)
        finally:
            await server.aclose()
    records = [r for r in caplog.records if r.name == "scriptbridge.mcp.h"]
    (logged,) = [r for r in records if "careful" in r.getMessage()]
    assert logged.levelno == logging.WARNING and "\x1b" not in logged.getMessage()
    (stderr,) = [r for r in records if "red" in r.getMessage()]
    assert "a line on stderr" in stderr.getMessage() and "\x1b" not in stderr.getMessage()


@pytest.mark.parametrize(
    ("kind", "said"),
    [
        ("elicit", "asked for input (elicitation: 'Which account\\x1b[31m?')"),
        ("sample", "asked for input (sampling: a model's completion)"),
        ("roots", "asked for input (roots: the client's roots)"),
        ("other", "a result of type 'something_new'"),
    ],
)
async def test_a_result_that_wants_input_fails_the_call_saying_what_it_wanted(
    nursery: trio.Nursery, kind: str, said: str
) -> None:
    """A 2026-07-28 server's ``resultType: "input_required"`` (SEP-2322) is no tool result:
    the call fails with a ToolServerError (a script's ``ToolError``) saying what the server
    wanted, its message escaped and bounded, not an empty result; a result type this client
    doesn't know fails the same way."""
    server = McpServer(sys.executable, [HOSTILE], name="h")
    await server.open(nursery)
    try:
        with pytest.raises(ToolServerError) as failed:
            await server.call_tool("needinput", {"kind": kind})
        assert said in str(failed.value), str(failed.value)
        assert "\x1b" not in str(failed.value)
        assert text_of(await server.call_tool("echo", {"x": 1})) == '{"x": 1}'  # still serving
    finally:
        await server.aclose()
