"""Benchmark: the host's time for one large tool result, from the tool's return to the frame.

Run by hand: ``.venv/bin/python benchmarks/tool_result_host.py``. A tool returns a result whose
script view holds about 70,000 values (300 content blocks, 100 of them links, and 6,450 rows of
structured data); the host ingests it (never marks land), renders the script's view, builds the
``tool_result`` message and frames it for the pipe, each step timed as
:class:`~scriptbridge._run_services.RunServices` and the conversation do it. The peer is
``msgpack.packb`` of the same view, in the same process: the least any host could spend.
Prints each step's median and the whole against the peer.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import msgpack
from render import median_time  # benchmarks/render.py

from sandbox.protocol import encode_parts
from scriptbridge import Limits, ReferenceFetcher, ReferenceRegistry, Workspace
from scriptbridge._conversation import tool_reply
from scriptbridge._run_dirs import RunDirs
from scriptbridge._run_services import RunServices
from scriptbridge._run_state import RunState
from scriptbridge._tool_table import ToolTable

ROWS = 6450
REPEAT = 15


def make_result(rows: int = ROWS) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": f"row {n}"} for n in range(200)]
    content += [
        {"type": "resource_link", "uri": f"https://x.example/{n}", "name": f"f{n}.txt"}
        for n in range(100)
    ]
    data = {
        "rows": [
            {"id": n, "name": f"item {n}", "tags": ["a", "b"], "ok": True} for n in range(rows)
        ]
    }
    return {"content": content, "structuredContent": data}


def main() -> None:
    result = make_result()
    with tempfile.TemporaryDirectory() as root:
        registry = ReferenceRegistry()
        workspace = Workspace(root)
        fetcher = ReferenceFetcher(registry, workspace)
        run = RunState(id="bench", limits=Limits())
        run_dir = RunDirs(Path(root)).for_run(run.id)
        services = RunServices(
            run,
            run_dir,
            ToolTable(),
            registry,
            fetcher,
            lambda res, server: registry.ingest(res, server=server),
            Path(root),
        )
        registry.ingest(result, server=None)
        ok, view = services._answer("t", True, result)
        assert ok, view
        message = tool_reply(1, ok, view)
        steps = {
            "ingest": median_time(lambda: registry.ingest(result, server=None), REPEAT),
            "view (render, ids, size)": median_time(
                lambda: services._answer("t", True, result), REPEAT
            ),
            "message": median_time(lambda: tool_reply(1, ok, view), REPEAT),
            "frame": median_time(lambda: encode_parts(message, limit=64 * 2**20), REPEAT),
        }
        packb = median_time(lambda: msgpack.packb(view), REPEAT)
    total = sum(steps.values())
    for name, seconds in steps.items():
        print(f"{name:>26}: {seconds * 1e3:7.1f} ms")
    print(f"{'host total':>26}: {total * 1e3:7.1f} ms")
    print(f"{'msgpack.packb of the view':>26}: {packb * 1e3:7.1f} ms")
    print(f"{'ratio':>26}: {total / packb:7.1f}x")


if __name__ == "__main__":
    main()
