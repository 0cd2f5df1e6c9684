"""An example MCPL peer: a real stdio JSON-RPC tool server that writes its blocks raw.

The ``mcp`` SDK's server side drops fields it doesn't model (``disposition`` among them), so
this peer speaks JSON-RPC itself, one message per line, and sends MCPL blocks exactly as the
protocol says. Its tools return each kind of block a script can meet:

``text``, ``image`` (a 1x1 PNG), ``embedded_text``, ``embedded_image``, ``embedded_pdf``,
``reference`` (an MCPL reference to a payload on the demo's loopback HTTP server),
``never_reference`` (the same with ``disposition: "never"``), ``note_reference`` (a reference
read back through this server's ``resources/read``), ``link_never`` (a ``resource_link`` marked
never) and ``fail`` (an error result).

Run: ``python examples/peer.py --payload-base http://127.0.0.1:8765``.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from typing import Any

PNG_1X1 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42"
    "mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
PDF_BLOB = base64.b64encode(b"%PDF-1.4\n" + b"0" * 12_000 + b"\n%%EOF\n").decode()
NOTES = {"peer://notes/readme": "The peer's notes: read through resources/read."}


def tools(payload_base: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """Tool name -> (description, result)."""
    return {
        "text": ("Plain text.", {"content": [{"type": "text", "text": "hello from the peer"}]}),
        "image": (
            "A 1x1 PNG.",
            {"content": [{"type": "image", "data": PNG_1X1, "mimeType": "image/png"}]},
        ),
        "embedded_text": (
            "An embedded text resource.",
            {
                "content": [
                    {
                        "type": "resource",
                        "resource": {
                            "uri": "peer://secret/notes.txt",
                            "mimeType": "text/plain",
                            "text": "embedded words",
                        },
                    }
                ]
            },
        ),
        "embedded_image": (
            "An embedded image.",
            {
                "content": [
                    {
                        "type": "resource",
                        "resource": {
                            "uri": "peer://secret/pixel.png",
                            "mimeType": "image/png",
                            "blob": PNG_1X1,
                        },
                    }
                ]
            },
        ),
        "embedded_pdf": (
            "An embedded PDF.",
            {
                "content": [
                    {
                        "type": "resource",
                        "resource": {
                            "uri": "peer://secret/report.pdf",
                            "mimeType": "application/pdf",
                            "blob": PDF_BLOB,
                        },
                    }
                ]
            },
        ),
        "reference": (
            "A reference to a payload.",
            {
                "content": [
                    {"type": "text", "text": "the report is attached"},
                    {
                        "type": "resource",
                        "uri": f"{payload_base}/report.txt",
                        "name": "report.txt",
                        "mimeType": "text/plain",
                    },
                ]
            },
        ),
        "never_reference": (
            "A reference whose payload must never reach the agent.",
            {
                "content": [
                    {
                        "type": "resource",
                        "uri": f"{payload_base}/payroll.csv",
                        "name": "payroll.csv",
                        "mimeType": "text/csv",
                        "disposition": "never",
                    }
                ]
            },
        ),
        "note_reference": (
            "A reference read through resources/read.",
            {
                "content": [
                    {
                        "type": "resource",
                        "uri": "peer://notes/readme",
                        "name": "readme",
                        "mimeType": "text/plain",
                    }
                ]
            },
        ),
        "link_never": (
            "A resource link marked never.",
            {
                "content": [
                    {
                        "type": "resource_link",
                        "uri": f"{payload_base}/payroll.csv",
                        "name": "payroll.csv",
                        "disposition": "never",
                    }
                ]
            },
        ),
        "fail": (
            "Always fails.",
            {"isError": True, "content": [{"type": "text", "text": "the peer failed on purpose"}]},
        ),
    }


def answer(request: dict[str, Any], table: dict[str, tuple[str, dict[str, Any]]]) -> Any:
    method = request.get("method")
    params = request.get("params") or {}
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion", "2025-11-25"),
            "capabilities": {"tools": {}, "resources": {}},
            "serverInfo": {"name": "example-peer", "version": "1.0"},
        }
    if method == "ping":
        return {}
    if method == "tools/list":
        return {
            "tools": [
                {"name": name, "description": description, "inputSchema": {"type": "object"}}
                for name, (description, _) in table.items()
            ]
        }
    if method == "tools/call":
        name = params.get("name")
        if name not in table:
            return {"isError": True, "content": [{"type": "text", "text": f"no tool {name}"}]}
        return table[name][1]
    if method == "resources/read":
        uri = params.get("uri")
        if uri in NOTES:
            return {"contents": [{"uri": uri, "mimeType": "text/plain", "text": NOTES[uri]}]}
        raise LookupError(f"no resource {uri}")
    raise NotImplementedError(method)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--payload-base", default="http://127.0.0.1:8765")
    table = tools(parser.parse_args().payload_base.rstrip("/"))
    for line in sys.stdin:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        if "id" not in request:
            continue  # a notification
        try:
            reply: dict[str, Any] = {"result": answer(request, table)}
        except NotImplementedError as exc:
            reply = {"error": {"code": -32601, "message": f"method not found: {exc}"}}
        except LookupError as exc:
            reply = {"error": {"code": -32002, "message": str(exc)}}
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], **reply}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
