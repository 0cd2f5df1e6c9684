"""Every message the client writes is valid JSON-RPC 2.0 and MCP: a recording server keeps the
bytes it received, and each line is validated against the MCP specification's JSON Schema
(``tests/schema/``) for its method."""

from __future__ import annotations

import json
import pathlib
import sys
from collections.abc import AsyncIterator
from typing import Any

import jsonschema
import pytest
import trio

from scriptbridge._mcp import McpServer, ToolServerError

HERE = pathlib.Path(__file__).resolve().parent
HOSTILE = str(HERE / "servers" / "hostile_server.py")
SCHEMA = json.loads((HERE / "schema" / "mcp-2025-11-25.schema.json").read_text())
DEFINITION = {
    "initialize": "InitializeRequest",
    "notifications/initialized": "InitializedNotification",
    "tools/list": "ListToolsRequest",
    "tools/call": "CallToolRequest",
    "resources/read": "ReadResourceRequest",
    "ping": "PingRequest",
    "notifications/cancelled": "CancelledNotification",
}


def validate(message: dict[str, Any]) -> None:
    """Validate one message the client sent against the schema's definitions."""
    if "method" in message:
        envelope = "JSONRPCRequest" if "id" in message else "JSONRPCNotification"
        names = [envelope, DEFINITION[message["method"]]]
    else:
        names = ["JSONRPCResultResponse" if "result" in message else "JSONRPCErrorResponse"]
    schema = {"$defs": SCHEMA["$defs"], "allOf": [{"$ref": f"#/$defs/{n}"} for n in names]}
    jsonschema.Draft202012Validator(schema).validate(message)


@pytest.fixture
async def nursery() -> AsyncIterator[trio.Nursery]:
    async with trio.open_nursery() as nursery:
        yield nursery
        nursery.cancel_scope.cancel()


async def test_every_message_written_is_valid_mcp(
    nursery: trio.Nursery, tmp_path: pathlib.Path
) -> None:
    """The handshake, calls (with a progress token), a resource read, a ping, answers to the
    server's own requests and a timed-out call's cancellation all validate."""
    record = tmp_path / "received.jsonl"
    server = McpServer(sys.executable, [HOSTILE], name="h", env={"HOSTILE_RECORD": str(record)})
    await server.open(nursery)
    try:
        await server.call_tool("echo", {"a": [1, {"b": None}]})
        await server.call_tool("pingme", {})
        await server.call_tool("ask", {})
        await server.read_resource("h://thing")
        await server.ping()
        server.timeout_s = 0.5  # for the call that never gets an answer only
        with pytest.raises(ToolServerError, match="didn't answer"):
            await server.call_tool("hang", {})
        server.timeout_s = 60.0
        await server.call_tool("echo", {})
    finally:
        await server.aclose()
    lines = record.read_bytes().splitlines()
    messages = [json.loads(line) for line in lines]
    for message in messages:
        validate(message)
    methods = [m.get("method") for m in messages]
    assert set(DEFINITION) <= set(methods), methods
    assert methods[:3] == ["initialize", "notifications/initialized", "tools/list"]
    calls = [m for m in messages if m.get("method") == "tools/call"]
    assert all("progressToken" in m["params"]["_meta"] for m in calls)
    (hang,) = [m for m in calls if m["params"]["name"] == "hang"]
    (cancelled,) = [m for m in messages if m.get("method") == "notifications/cancelled"]
    assert cancelled["params"]["requestId"] == hang["id"]
    answers = {m["id"]: m for m in messages if "method" not in m}
    assert answers["srv-pingme"]["result"] == {}
    assert answers["srv-ask"]["error"]["code"] == -32601
