"""Benchmark: a trivial script through ``scriptbridge serve`` against the same script in process.

Run by hand: ``.venv/bin/python benchmarks/serve_round_trip.py [--samples N]``. Inside one trio
run it opens a :class:`~scriptbridge.Bridge` in this process and starts ``scriptbridge serve``
as a subprocess over stdio with the ``mcp`` SDK's client, then alternates: one ``bridge.run``
of ``1 + 1``, one ``tools/call`` of ``run_python`` with the same code (a round trip: JSON-RPC
over the pipes, the server's own ``Bridge.run``, the answer's JSON). A pause between samples
lets each side's spare child be ready, as it is for a model that thinks between calls. It
prints the p50 and p90 of each and the p50 ratio, serve over in process: what speaking MCP
costs on top of a run. No goal is set for it; a ratio near 1 says the wire is cheap beside the
child.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import trio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scriptbridge import Bridge  # noqa: E402

CODE = "1 + 1"
PAUSE_S = 0.02


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def main(samples: int) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    with tempfile.TemporaryDirectory(prefix="sb-serve-bench-") as tmp:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "scriptbridge._cli", "serve", "--workspace", str(Path(tmp) / "serve")],
            env=env,
        )
        ours: list[float] = []
        served: list[float] = []
        async with (
            Bridge(Path(tmp) / "inproc") as bridge,
            stdio_client(params) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            for _ in range(3):
                await bridge.run(CODE)
                await session.call_tool("run_python", {"code": CODE})
            for _ in range(samples):
                await trio.sleep(PAUSE_S)
                started = time.perf_counter()
                result = await bridge.run(CODE)
                ours.append(time.perf_counter() - started)
                assert result.value == 2, result
                await trio.sleep(PAUSE_S)
                started = time.perf_counter()
                answer = await session.call_tool("run_python", {"code": CODE})
                served.append(time.perf_counter() - started)
                assert (answer.structured_content or {}).get("value") == 2, answer
    for name, values in (("Bridge.run in process", ours), ("run_python over stdio", served)):
        print(
            f"{name:<24} p50 {percentile(values, 0.5) * 1e3:7.2f} ms"
            f"   p90 {percentile(values, 0.9) * 1e3:7.2f} ms   (n={len(values)})"
        )
    ratio = statistics.median(served) / statistics.median(ours)
    print(f"serve round trip / in process, p50: {ratio:.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=60)
    trio.run(main, parser.parse_args().samples)
