"""An example sync host: ``SyncBridge`` in plain blocking code, called from a thread pool.

Run: ``python examples/sync_host.py``. It offers a sync ``lookup`` tool (run in a worker
thread) and the example MCPL peer, and runs four agent-written scripts from four threads at once.
"""

from __future__ import annotations

import concurrent.futures
import json
import pathlib
import sys
import tempfile

from scriptbridge import Limits, McpServer, SyncBridge, python_tool

HERE = pathlib.Path(__file__).resolve().parent

AGENT_SCRIPT = """
prices = [tools.lookup(item=item)["data"]["price"] for item in inputs["items"]]
note = tools.peer_embedded_text()["content"][0]["text"]
{"total": sum(prices), "note": note}
"""


def lookup(item: str) -> dict[str, object]:
    """Look an item's price up in the host's own catalogue."""
    catalogue = {"apple": 3, "pear": 4, "plum": 2}
    return {"item": item, "price": catalogue.get(item, 0)}


def main() -> None:
    with tempfile.TemporaryDirectory() as workspace:
        limits = Limits(wall_s=10, cpu_s=5, memory_mb=256, max_tool_calls=50)
        with SyncBridge(workspace, limits=limits) as bridge:
            bridge.add_tool(python_tool(lookup))
            bridge.add_server(McpServer(sys.executable, [str(HERE / "peer.py")], name="peer"))
            baskets = [["apple"], ["pear", "plum"], ["plum"], ["apple", "pear", "plum"]]
            with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
                results = list(
                    pool.map(
                        lambda items: bridge.run(AGENT_SCRIPT, inputs={"items": items}), baskets
                    )
                )
    print(json.dumps([result.model_dump(mode="json") for result in results], indent=2))


if __name__ == "__main__":
    main()
