"""What a newcomer waits for: whole processes, each against the interpreter's own start, sampled
in turn in the same run.

Run with::

    .venv/bin/python benchmarks/startup.py [--runs N]

Measured, wall time from ``exec`` to exit (or to the answer), p50 and p95 of ``--runs``:

- ``python -c pass``: the interpreter alone (the baseline every figure is read against);
- ``python -c "import scriptbridge"``;
- ``python -c "from scriptbridge import Bridge, SyncBridge, McpServer"``: what an embedding
  host imports;
- ``scriptbridge run hello.py``: the command line, a zygote started, one script run, its output
  printed, everything closed;
- ``scriptbridge serve`` over stdio, from ``exec`` to its answer to ``initialize``.

Printed against the first-hour goals (issue 28): ``import scriptbridge`` at most 150 ms over
``python -c pass``, ``run hello.py`` at most 400 ms, ``serve``'s first answer at most 600 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

BIN = Path(sys.executable).parent
PYTHON = sys.executable
SCRIPTBRIDGE = str(BIN / "scriptbridge")
GOALS_S = {"import scriptbridge (over python)": 0.150, "run hello.py": 0.400, "serve": 0.600}

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "startup-bench", "version": "0"},
    },
}


def percentile(values: list[float], fraction: float) -> float:
    """The ``fraction`` quantile of ``values`` (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def whole(command: list[str]) -> Callable[[], float]:
    """A sampler: the wall time of ``command`` from start to exit (which must be 0)."""

    def once() -> float:
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, check=False)
        elapsed = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"{command} failed: {done.stderr.decode(errors='replace')}")
        return elapsed

    return once


def serve_first_answer(workspace: str) -> Callable[[], float]:
    """A sampler: ``scriptbridge serve`` over stdio, from start to its answer to
    ``initialize``; the server is then closed (its exit is not counted)."""

    def once() -> float:
        started = time.perf_counter()
        server = subprocess.Popen(
            [SCRIPTBRIDGE, "serve", "--workspace", workspace],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
        server.stdin.flush()
        answer = json.loads(server.stdout.readline())
        elapsed = time.perf_counter() - started
        if answer.get("id") != 1 or "result" not in answer:
            raise SystemExit(f"serve answered {answer!r}")
        server.stdin.close()
        server.wait(timeout=30)
        return elapsed

    return once


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        hello = Path(tmp) / "hello.py"
        hello.write_text('print("hello")\n')
        workspace = Path(tmp) / "ws"
        workspace.mkdir()
        samplers = {
            "python -c pass": whole([PYTHON, "-c", "pass"]),
            "import scriptbridge": whole([PYTHON, "-c", "import scriptbridge"]),
            "import Bridge, SyncBridge, McpServer": whole(
                [PYTHON, "-c", "from scriptbridge import Bridge, SyncBridge, McpServer"]
            ),
            "run hello.py": whole(
                [SCRIPTBRIDGE, "run", "--workspace", str(workspace), str(hello)]
            ),
            "serve": serve_first_answer(str(workspace)),
        }
        samples: dict[str, list[float]] = {name: [] for name in samplers}
        for sampler in samplers.values():
            sampler()  # warm the page cache and .pyc files once
        for _ in range(args.runs):
            for name, sampler in samplers.items():
                samples[name].append(sampler())
    p50 = {name: percentile(values, 0.5) for name, values in samples.items()}
    print(f"{'':40} {'p50 ms':>8} {'p95 ms':>8}   (cpus: {os.cpu_count()}, runs: {args.runs})")
    for name, values in samples.items():
        print(f"{name:40} {p50[name] * 1e3:8.1f} {percentile(values, 0.95) * 1e3:8.1f}")
    measured = {
        "import scriptbridge (over python)": p50["import scriptbridge"] - p50["python -c pass"],
        "run hello.py": p50["run hello.py"],
        "serve": p50["serve"],
    }
    print()
    for name, goal in GOALS_S.items():
        verdict = "met" if measured[name] <= goal else "NOT met"
        print(f"{name:40} {measured[name] * 1e3:8.1f} ms  goal {goal * 1e3:.0f} ms: {verdict}")


if __name__ == "__main__":
    main()
