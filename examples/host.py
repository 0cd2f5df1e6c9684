"""An example host: embed a Bridge in a trio program, give scripts a host tool and a server.

Run: ``python examples/host.py``. It offers a ``lookup`` host function and the example MCPL peer,
runs one agent-written script, and prints the result a host would hand back to its model.
"""

from __future__ import annotations

import pathlib
import sys
import tempfile

import trio

from scriptbridge import Bridge, Limits, McpServer, python_tool

HERE = pathlib.Path(__file__).resolve().parent

AGENT_SCRIPT = """
prices = [tools.lookup(item=item)["data"]["price"] for item in inputs["items"]]
note = tools.peer_embedded_text()["content"][0]["text"]
print("looked up", len(prices), "prices")
{"total": sum(prices), "note": note}
"""


def lookup(item: str) -> dict[str, object]:
    """Look an item's price up in the host's own catalogue."""
    catalogue = {"apple": 3, "pear": 4, "plum": 2}
    return {"item": item, "price": catalogue.get(item, 0)}


async def main() -> None:
    with tempfile.TemporaryDirectory() as workspace:
        limits = Limits(wall_s=10, cpu_s=5, memory_mb=256, max_tool_calls=50)
        async with Bridge(workspace, limits=limits) as bridge:
            bridge.add_tool(python_tool(lookup))
            await bridge.add_server(McpServer(sys.executable, [str(HERE / "peer.py")], name="peer"))
            result = await bridge.run(AGENT_SCRIPT, inputs={"items": ["apple", "pear", "plum"]})
    print(result.model_dump_json(indent=2))


if __name__ == "__main__":
    trio.run(main)
