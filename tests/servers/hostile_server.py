"""A misbehaving stdio tool server for tests: it crashes, hangs, or writes garbage on request.

Tools: ``echo`` (returns its arguments as text), ``crash`` (exits at once), ``hang`` (never
answers), ``garbage`` (writes a line that isn't JSON, then answers), ``badutf8`` (a line of
invalid UTF-8), ``notjsonrpc`` (JSON lines that aren't JSON-RPC messages), ``longline``
(``{"bytes": n}``: one line of n bytes, written in pieces, then answers), ``closeout`` (closes its
stdout and stays alive), ``ask`` and ``pingme`` (send the client a request of their own, then
answer), ``progress`` (``{"seconds": s}``: one ``notifications/progress`` for the call's token,
then answers after s seconds), ``log`` (a ``notifications/message``), ``stderr`` (writes a line
with an escape sequence to stderr), ``addtool`` (adds the tool ``added`` and sends
``notifications/tools/list_changed``) and ``needinput`` (answers as a 2026-07-28 server wanting
input, ``resultType: "input_required"``: ``{"kind": "elicit"|"sample"|"roots"|"other"}``).

With ``HOSTILE_TOOLS=odd`` in its environment it also lists tools no script can call (a
600-character name, spaces, a non-str, an empty name, a duplicate); with ``HOSTILE_TOOLS=many``,
40,000 more tools. With ``HOSTILE_RECORD=PATH`` it appends every line it receives, as received,
to PATH (flushed at once), so a test can read what the client wrote. With
``HOSTILE_SLOW_RELIST=S``, each ``tools/list`` after ``addtool`` is answered after S seconds
(while it waits, the server reads nothing more).
"""

from __future__ import annotations

import json
import os
import sys
import time

out = sys.stdout.buffer
added: list[str] = []


def send(message: dict[str, object]) -> None:
    out.write(json.dumps(message).encode() + b"\n")
    out.flush()


def answer(rid: object, text: str) -> None:
    send(
        {
            "jsonrpc": "2.0",
            "id": rid,
            "result": {"content": [{"type": "text", "text": text}], "pid": os.getpid()},
        }
    )


def call(rid: object, params: dict[str, object]) -> None:
    name = params.get("name")
    arguments = params.get("arguments")
    args = arguments if isinstance(arguments, dict) else {}
    meta = params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    if name == "crash":
        os._exit(3)
    if name == "needinput":
        kind = args.get("kind", "elicit")
        wanted = {
            "elicit": {
                "method": "elicitation/create",
                "params": {"message": "Which account\x1b[31m?", "requestedSchema": {}},
            },
            "sample": {"method": "sampling/createMessage", "params": {"messages": []}},
            "roots": {"method": "roots/list"},
        }
        result: dict[str, object] = {"resultType": "input_required", "requestState": "s1"}
        if kind in wanted:
            result["inputRequests"] = {"ask": wanted[kind]}
        else:
            result["resultType"] = "something_new"
        send({"jsonrpc": "2.0", "id": rid, "result": result})
        return
    if name == "hang":
        return
    if name == "closeout":
        out.flush()
        os.close(1)
        time.sleep(60)
        return
    if name == "garbage":
        out.write(b"this is not json\n")
    if name == "badutf8":
        out.write(b'{"jsonrpc": "2.0", "method": "x\xff\xfe"}\n\xc3\x28 broken\n')
    if name == "notjsonrpc":
        out.write(b'{"hello": 1}\n[1, 2]\n{"jsonrpc": "2.0", "id": true}\n')
    if name == "longline":
        size = int(args.get("bytes", 0))
        piece = b"x" * (1 << 20)
        while size > 0:
            out.write(piece[: min(size, len(piece))])
            size -= len(piece)
        out.write(b"\n")
    if name in ("ask", "pingme"):
        method = "sampling/createMessage" if name == "ask" else "ping"
        send({"jsonrpc": "2.0", "id": f"srv-{name}", "method": method, "params": {}})
    if name == "progress":
        send(
            {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progressToken": token, "progress": 1, "total": 2, "message": "half"},
            }
        )
        time.sleep(float(args.get("seconds", 0)))
    if name == "log":
        send(
            {
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"level": "warning", "logger": "hostile", "data": "careful\x1b[31m"},
            }
        )
    if name == "stderr":
        sys.stderr.write("a line on stderr \x1b[31mred\n")
        sys.stderr.flush()
    if name == "addtool":
        added.append("added")
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    answer(rid, json.dumps(arguments))


def main() -> None:
    record_path = os.environ.get("HOSTILE_RECORD")
    record = open(record_path, "ab", buffering=0) if record_path else None  # noqa: SIM115
    for line in sys.stdin.buffer:
        if record is not None:
            record.write(line)
        try:
            request = json.loads(line)
        except ValueError:
            continue
        if not isinstance(request, dict) or "id" not in request or "method" not in request:
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
                        "capabilities": {"tools": {"listChanged": True}},
                        "serverInfo": {"name": "hostile", "version": "0"},
                    },
                }
            )
        elif method == "tools/list":
            if added and os.environ.get("HOSTILE_SLOW_RELIST"):
                time.sleep(float(os.environ["HOSTILE_SLOW_RELIST"]))
            names: list[object] = [
                "echo",
                "crash",
                "hang",
                "garbage",
                "badutf8",
                "notjsonrpc",
                "longline",
                "closeout",
                "ask",
                "pingme",
                "progress",
                "log",
                "stderr",
                "addtool",
                "needinput",
                *added,
            ]
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
            call(rid, params)
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": rid, "result": {}})
        elif method == "resources/read":
            uri = params.get("uri")
            send(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "result": {
                        "contents": [{"uri": uri, "text": "read", "mimeType": "text/plain"}]
                    },
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
