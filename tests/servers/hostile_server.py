"""A misbehaving stdio tool server for tests: it crashes, hangs, or writes garbage on request.

Tools: ``echo`` (returns its arguments as text), ``crash`` (exits at once), ``hang`` (never
answers), ``garbage`` (writes a line that isn't JSON-RPC, then answers) and ``ask`` (sends the
client a request of its own, then answers). With ``HOSTILE_TOOLS=odd`` in its environment it
also lists tools no script can call (a 600-character name, spaces, a non-str, an empty name, a
duplicate); with ``HOSTILE_TOOLS=many``, 40,000 more tools.
"""

from __future__ import annotations

import json
import os
import sys


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    for line in sys.stdin:
        request = json.loads(line)
        if "id" not in request or "method" not in request:
            continue
        method, rid = request["method"], request["id"]
        params = request.get("params") or {}
        if method == "initialize":
            send(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "result": {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "hostile", "version": "0"},
                    },
                }
            )
        elif method == "tools/list":
            names: list[object] = ["echo", "crash", "hang", "garbage", "ask"]
            extra = os.environ.get("HOSTILE_TOOLS")
            if extra == "odd":
                names += ["x" * 600, "has space", 7, "", "echo", "tab\there", "ünïcode", "ok.b-c_d"]
            elif extra == "many":
                names += [f"t{n}" for n in range(40_000)]
            send(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "result": {
                        "tools": [{"name": n, "inputSchema": {"type": "object"}} for n in names]
                    },
                }
            )
        elif method == "tools/call":
            name = params.get("name")
            if name == "crash":
                os._exit(3)
            if name == "hang":
                continue
            if name == "garbage":
                sys.stdout.write("this is not json\n")
            if name == "ask":
                send(
                    {
                        "jsonrpc": "2.0",
                        "id": "srv-1",
                        "method": "sampling/createMessage",
                        "params": {},
                    }
                )
            text = json.dumps(params.get("arguments"))
            send(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "result": {"content": [{"type": "text", "text": text}], "pid": os.getpid()},
                }
            )
        else:
            send(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "error": {"code": -32601, "message": "method not found"},
                }
            )


if __name__ == "__main__":
    main()
