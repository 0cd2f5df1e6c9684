"""The bundled end-to-end demo: real servers, real children, a readable report.

:func:`run_demo` starts a loopback HTTP server holding two payloads (``report.txt``, and
``payroll.csv``, which the peer marks ``never``), the example MCPL peer (``examples/peer.py``)
and the example standard MCP server (``examples/mcp_server.py``) over stdio, runs every script
in ``examples/scripts/`` in its own sandbox child, and prints what each script saw. It ends by
showing how often the payload server was asked for each file: ``payroll.csv`` never is.

The examples live in a source checkout, beside the package; an installed wheel has none, and the
demo says so.
"""

from __future__ import annotations

import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Final

from ._mcp import McpServer
from ._results import ScriptResult
from ._supervisor import Bridge

__all__ = ["EXAMPLES", "PAYLOADS", "demo_bridge", "payload_server", "run_demo"]

EXAMPLES: Final = Path(__file__).resolve().parent.parent / "examples"
PAYLOADS: Final = {
    "/report.txt": b"Q3: revenue grew 12%, costs fell 3%.",
    "/payroll.csv": b"name,salary\nalice,100000\nbob,95000\n",
}


class _PayloadHandler(BaseHTTPRequestHandler):
    hits: Counter[str]

    def do_GET(self) -> None:
        self.hits[self.path] += 1
        data = PAYLOADS.get(self.path)
        if data is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass  # the demo prints its own report


@contextmanager
def payload_server() -> Iterator[tuple[str, Counter[str]]]:
    """Serve :data:`PAYLOADS` on 127.0.0.1; yields its base url and a count of requests by path."""
    hits: Counter[str] = Counter()
    handler = type("Handler", (_PayloadHandler,), {"hits": hits})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", hits
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


async def demo_bridge(bridge: Bridge, payload_base: str) -> None:
    """Connect the example peer and the example standard server to ``bridge``."""
    python = sys.executable
    peer = str(EXAMPLES / "peer.py")
    await bridge.add_server(McpServer(python, [peer, "--payload-base", payload_base], name="peer"))
    await bridge.add_server(McpServer(python, [str(EXAMPLES / "mcp_server.py")], name="docs"))


def _describe(name: str, source: str, result: ScriptResult) -> str:
    status = "ok" if result.ok else f"failed: {result.error.type if result.error else '?'}"
    header = (
        f"== {name} ({status}, {result.duration_s * 1000:.0f} ms, "
        f"{result.tool_calls} tool call(s), {result.fetches} fetch(es))"
    )
    lines = [header]
    lines += [f"   {line}" for line in source.splitlines() if line.startswith("#")]
    if result.stdout:
        lines.append("   printed:")
        lines += [f"     {line}" for line in result.stdout.rstrip("\n").splitlines()]
    if result.error is not None:
        lines.append(f"   error: {result.error.type}: {result.error.message}")
    else:
        lines.append(f"   value: {result.value!r}")
    if result.outputs:
        lines.append(f"   left in out/: {', '.join(result.outputs)}")
    return "\n".join(lines)


async def run_demo(write: Callable[[str], object] = print) -> int:
    """Run the demo and write its report; returns 0 when every script ran to its end."""
    scripts = sorted((EXAMPLES / "scripts").glob("*.py"))
    if not scripts:
        write(f"scriptbridge demo: no example scripts at {EXAMPLES} (it needs a source checkout)")
        return 2
    failures = 0
    with payload_server() as (base, hits), tempfile.TemporaryDirectory() as workspace:
        async with Bridge(workspace, fetch_allow=["127.0.0.1"]) as bridge:
            await demo_bridge(bridge, base)
            write(
                f"scriptbridge demo: {len(scripts)} scripts, each in a fresh sandbox "
                f"child; tools: {', '.join(bridge.tool_names)}\n"
            )
            for path in scripts:
                source = path.read_text()
                result = await bridge.run(source)
                failures += not result.ok
                write(_describe(path.name, source, result) + "\n")
            layers = " ".join(result.isolation)
        write(f"isolation layers in force: {layers}")
        write(
            "payload server requests: "
            + ", ".join(f"{path} x{hits[path]}" for path in PAYLOADS)
            + " (payroll.csv is marked never: nothing asked for it)"
        )
    return 1 if failures else 0
