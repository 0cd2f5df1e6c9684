"""The MCP reference server nobody here wrote, ``@modelcontextprotocol/server-everything``
(installed by ``make test`` into ``.venv/npm``), over stdio and over its streamable HTTP
transport on 127.0.0.1: one script calls its echo, image, embedded-resource, resource-links
(then ``fetch()`` and ``read_text``), structured-content and long-running tools, and the long
run's progress shows in ``Bridge.progress()``."""

from __future__ import annotations

import os
import pathlib
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
import trio

from scriptbridge._mcp import McpServer
from scriptbridge._supervisor import Bridge

NPM_DIR = pathlib.Path(os.environ.get("SCRIPTBRIDGE_NPM_DIR", pathlib.Path(sys.prefix) / "npm"))
EVERYTHING = NPM_DIR / "node_modules" / "@modelcontextprotocol" / "server-everything"
ENTRY = EVERYTHING / "dist" / "index.js"
NODE = shutil.which("node")

pytestmark = [
    pytest.mark.skipif(NODE is None, reason="node isn't installed: server-everything needs it"),
    pytest.mark.skipif(
        NODE is not None and not ENTRY.exists(),
        reason=f"server-everything isn't installed in {NPM_DIR}: `make test` installs it",
    ),
]

SCRIPT = """
out = {}
out["echo"] = call_tool("everything.echo", {"message": "hi"})["content"][0]["text"]
image = call_tool("everything.get-tiny-image", {})["content"]
out["image"] = [(b["type"], b.get("mimeType")) for b in image if b["type"] == "image"]
embedded = call_tool("everything.get-resource-reference", {"resourceType": "Text", "resourceId": 2})
out["embedded"] = [b["type"] for b in embedded["content"]]
out["embedded_text"] = embedded["content"][1]["text"]
links = [b for b in call_tool("everything.get-resource-links", {"count": 2})["content"]
         if b["type"] == "reference"]
out["links"] = [(b["name"], b["uri"]) for b in links]
out["fetched"] = read_text(fetch(links[1]))
out["structured"] = call_tool("everything.get-structured-content", {"location": "Chicago"})["data"]
long = call_tool("everything.trigger-long-running-operation", {"duration": 0.6, "steps": 3})
out["long"] = long["content"][0]["text"]
out
"""


async def run_everything(server: McpServer, workspace: pathlib.Path) -> tuple[Any, list[Any]]:
    """Run SCRIPT against ``server`` in a Bridge; returns its value and the progress seen."""
    seen: list[Any] = []
    async with Bridge(workspace) as bridge:
        await bridge.add_server(server)
        assert "everything.simulate-research-query" in bridge.tool_names  # on initialized
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                while True:
                    seen.extend(p for run in bridge.progress() for p in run.tool_progress)
                    await trio.sleep(0.02)

            nursery.start_soon(watch)
            result = await bridge.run(SCRIPT)
            nursery.cancel_scope.cancel()
    assert result.ok, result.error
    return result.value, seen


def check(value: Any, seen: list[Any]) -> None:
    assert value["echo"] == "Echo: hi"
    assert value["image"] == [["image", "image/png"]]
    assert value["embedded"] == ["text", "text", "text"]  # the resource shows as its contents
    assert value["embedded_text"].startswith("Resource 2: This is a plaintext resource")
    assert [name for name, _ in value["links"]] == ["Blob Resource 1", "Text Resource 2"]
    assert value["fetched"].startswith("Resource 2: This is a plaintext resource")
    assert value["structured"] == {
        "temperature": 36,
        "conditions": "Light rain / drizzle",
        "humidity": 82,
    }
    assert value["long"].startswith("Long running operation completed")
    steps = {(p.tool, p.progress, p.total) for p in seen}
    assert ("everything.trigger-long-running-operation", 1, 3) in steps, seen


async def test_server_everything_over_stdio(tmp_path: pathlib.Path) -> None:
    """Every tool of the script works over stdio, and the long run's progress shows."""
    server = McpServer(str(NODE), [str(ENTRY), "stdio"], name="everything")
    check(*await run_everything(server, tmp_path / "ws"))


@pytest.fixture(scope="module")
def everything_http() -> Iterator[str]:
    """server-everything's streamable HTTP transport on a free 127.0.0.1 port; its URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [str(NODE), str(ENTRY), "streamableHttp"],
        env={**os.environ, "PORT": str(port), "HOST": "127.0.0.1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("server-everything's HTTP transport didn't start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


async def test_server_everything_over_streamable_http(
    everything_http: str, tmp_path: pathlib.Path
) -> None:
    """The same script over the streamable HTTP transport, on 127.0.0.1, with no fetch
    allowlist: the host's own servers aren't subject to the fetch network policy."""
    server = McpServer.http(everything_http, name="everything", timeout_s=30)
    check(*await run_everything(server, tmp_path / "ws"))


def test_cli_connects_a_streamable_http_server(
    everything_http: str, tmp_path: pathlib.Path
) -> None:
    """``scriptbridge run --mcp-http NAME=URL`` offers the HTTP server's tools to the script."""
    script = tmp_path / "s.py"
    script.write_text("call_tool('ev.echo', {'message': 'over http'})['content'][0]['text']\n")
    done = subprocess.run(
        [
            *(sys.executable, "-m", "scriptbridge._cli", "run", str(script)),
            *("--mcp-http", f"ev={everything_http}", "--mcp-timeout", "20", "--json"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert '"value": "Echo: over http"' in done.stdout
