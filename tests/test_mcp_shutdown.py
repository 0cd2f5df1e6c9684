"""Closing a bridge while a server's tools are being listed again says nothing: the listing
was cut short by the close, not by the server."""

from __future__ import annotations

import logging
import pathlib
import sys

import pytest
import trio

from scriptbridge import Bridge, Limits, McpServer

HOSTILE = str(pathlib.Path(__file__).resolve().parent / "servers" / "hostile_server.py")


async def test_a_listing_cut_short_by_closing_is_not_warned_of(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A server whose tools changed is listed again; the bridge closes while it waits for the
    answer: no 'couldn't list its tools again' warning, as no server failed."""
    caplog.set_level(logging.WARNING, logger="scriptbridge")
    server = McpServer(
        sys.executable, [HOSTILE], name="h", env={"HOSTILE_SLOW_RELIST": "30"}, timeout_s=60
    )
    with trio.fail_after(60):
        async with Bridge(tmp_path / "ws", limits=Limits(wall_s=30), max_spares=0) as bridge:
            await bridge.add_server(server)
            result = await bridge.run("call_tool('h.addtool', {})\n'ok'")
            assert result.value == "ok", result.error
            while not server._listing.locked():  # the listing again is in flight
                await trio.sleep(0.01)
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert not [w for w in warned if "couldn't list its tools again" in w], warned


async def test_a_message_handed_to_the_stdio_transport_is_written_even_as_it_closes(
    tmp_path: pathlib.Path,
) -> None:
    """What a caller handed the transport is written whole, even when the connection is
    cancelled at once after (as closing a server does right after the last call's courtesy
    ``notifications/cancelled`` went in): the writer took it, so it isn't lost. It was, when
    the cancel reached the writer before its write to the server's stdin (a lost cancel at
    close, seen under load in ``test_abandoned_calls_are_cancelled_at_the_server``)."""
    import mcp_types
    from mcp.shared.message import SessionMessage

    from scriptbridge._mcp_stdio import stdio_transport

    record = tmp_path / "stdin.bin"
    copy = f"import sys\nopen({str(record)!r}, 'wb').write(sys.stdin.buffer.read())"
    note = mcp_types.JSONRPCNotification(
        jsonrpc="2.0", method="notifications/cancelled", params={"requestId": 7}
    )
    with trio.fail_after(30):
        with trio.CancelScope() as connection:
            async with stdio_transport(sys.executable, ["-c", copy], None, name="copy") as (_, w):
                await w.send(SessionMessage(note))
                connection.cancel()  # before the writer has run: as aclose's close() can
                await trio.sleep(10)
    assert b'"requestId":7' in record.read_bytes()


async def test_a_server_that_never_reads_cant_hold_the_transport_open(
    tmp_path: pathlib.Path,
) -> None:
    """The write of a message is shielded, but a server that never reads its stdin can't hold
    it: the transport still closes within its grace (closing the server's stdin ends the
    blocked write), and the server is stopped."""
    import mcp_types
    from mcp.shared.message import SessionMessage

    from scriptbridge._mcp_stdio import EXIT_GRACE_S, FLUSH_S, KILL_GRACE_S, stdio_transport

    big = mcp_types.JSONRPCNotification(
        jsonrpc="2.0", method="notifications/message", params={"data": "x" * (4 * 2**20)}
    )
    started = trio.current_time()
    with trio.fail_after(60):
        sleeper = ["-c", "import time\ntime.sleep(600)"]
        with trio.CancelScope() as connection:
            async with (
                stdio_transport(sys.executable, sleeper, None, name="deaf") as (_, w),
                trio.open_nursery() as nursery,
            ):
                nursery.start_soon(w.send, SessionMessage(big))  # more than a pipe holds
                await trio.sleep(0.2)
                connection.cancel()
    assert trio.current_time() - started < 0.2 + FLUSH_S + EXIT_GRACE_S + KILL_GRACE_S + 10
