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
