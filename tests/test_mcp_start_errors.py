"""A server that fails as it starts is said to have failed in words that say what to do: how
it exited and the last of what it printed, or that the command doesn't speak MCP.

Every server here is a real process over stdio: a Python one-liner, ``cat`` and ``echo``.
"""

from __future__ import annotations

import sys

import pytest
import trio

from scriptbridge import McpServer, ToolServerError


async def start(server: McpServer) -> ToolServerError:
    """Open ``server`` and return the error it fails with."""
    async with trio.open_nursery() as nursery:
        with pytest.raises(ToolServerError) as failed:
            await server.open(nursery)
        await server.aclose()
    return failed.value


async def test_a_server_that_dies_says_its_status_and_last_words() -> None:
    """A server that exits before it answers ``initialize`` is said to have exited with its
    status, and the last lines of its stderr are in the error."""
    source = (
        "import sys\n"
        "print('starting up', file=sys.stderr)\n"
        "print('boom: missing API key', file=sys.stderr)\n"
        "sys.exit(3)\n"
    )
    error = await start(McpServer(sys.executable, ["-c", source], name="dies", timeout_s=30))
    said = str(error)
    assert "server 'dies' exited with status 3 before it answered initialize" in said
    assert "boom: missing API key" in said and "starting up" in said


async def test_a_server_killed_by_a_signal_says_the_signal() -> None:
    """A server killed by a signal as it starts is said so, by the signal's name."""
    source = "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n"
    error = await start(McpServer(sys.executable, ["-c", source], name="crash", timeout_s=30))
    assert "server 'crash' was killed by SIGSEGV before it answered initialize" in str(error)


async def test_only_the_last_of_a_flood_of_stderr_is_kept() -> None:
    """What the error quotes of stderr is bounded: the last few lines, each cut short."""
    source = (
        "import sys\n"
        "for i in range(20000):\n"
        "    print(f'line {i} ' + 'x' * 500, file=sys.stderr)\n"
        "print('the last word', file=sys.stderr)\n"
        "sys.exit(1)\n"
    )
    error = await start(McpServer(sys.executable, ["-c", source], name="noisy", timeout_s=30))
    said = str(error)
    assert "the last word" in said and "line 19999" in said
    assert "line 10000 " not in said
    assert len(said) < 2500


async def test_a_command_that_echoes_is_said_not_to_speak_mcp() -> None:
    """``cat`` answers ``initialize`` with our own request: it is said not to speak MCP, not
    to have refused ``initialize``."""
    error = await start(McpServer("cat", [], name="cat", timeout_s=30))
    said = str(error)
    assert "server 'cat' doesn't speak MCP" in said
    assert "refused" not in said


async def test_a_command_that_prints_text_is_said_not_to_speak_mcp() -> None:
    """A command that prints text and exits says so: its lines weren't MCP messages."""
    error = await start(McpServer("echo", ["hello"], name="echo", timeout_s=30))
    said = str(error)
    assert "server 'echo' doesn't speak MCP" in said
    assert "exited with status 0" in said
    assert "1 line of its stdout wasn't an MCP message" in said
