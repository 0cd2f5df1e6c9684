"""An example asyncio host: the same Bridge inside ``asyncio.run``, with an asyncio tool.

Run: ``python examples/asyncio_host.py``. The host's ``lookup`` tool is a coroutine function
that takes an ``asyncio.Lock`` of the host's (it runs on the host's own loop), the example MCPL
peer is a server, and three agent-written scripts run at once with ``asyncio.gather``.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import sys
import tempfile

from scriptbridge import Bridge, Limits, McpServer, python_tool

HERE = pathlib.Path(__file__).resolve().parent

AGENT_SCRIPT = """
prices = [tools.lookup(item=item)["data"]["price"] for item in inputs["items"]]
note = tools.peer_embedded_text()["content"][0]["text"]
{"total": sum(prices), "note": note}
"""

CATALOGUE = {"apple": 3, "pear": 4, "plum": 2}


async def main() -> None:
    catalogue_lock = asyncio.Lock()  # the host's own asyncio object, used by its tool

    async def lookup(item: str) -> dict[str, object]:
        """Look an item's price up in the host's own catalogue."""
        async with catalogue_lock:
            await asyncio.sleep(0)
            return {"item": item, "price": CATALOGUE.get(item, 0)}

    with tempfile.TemporaryDirectory() as workspace:
        limits = Limits(wall_s=10, cpu_s=5, memory_mb=256, max_tool_calls=50)
        async with Bridge(workspace, limits=limits) as bridge:
            bridge.add_tool(python_tool(lookup))
            await bridge.add_server(McpServer(sys.executable, [str(HERE / "peer.py")], name="peer"))
            baskets = [["apple", "pear"], ["plum"], ["apple", "plum", "pear"]]
            results = await asyncio.gather(
                *(bridge.run(AGENT_SCRIPT, inputs={"items": basket}) for basket in baskets)
            )
    print(json.dumps([result.model_dump(mode="json") for result in results], indent=2))


if __name__ == "__main__":
    asyncio.run(main())
