"""Sandbox start-up: request to the script's first instruction, and a child's idle memory.

Run with ``.venv/bin/python benchmarks/sandbox_start.py [--runs N]``. It prints, for a trivial
script and a warm zygote:

- p50/p95 of the time from the spawn request to the script's first instruction (the script
  reads ``time.monotonic()``, the same clock as this process), split into spawn-to-ready
  (fork + isolation) and ready-to-first-instruction (start message, compile, exec);
- the same-run floor: ``os.fork()`` + ``os._exit(0)`` + ``waitpid`` from this process, and the
  ratio of the two p50s;
- the USS (Private_Clean + Private_Dirty of ``/proc/PID/smaps_rollup``) of an isolated child
  idling before its script (once it is blocked waiting for ``start``: a child primes itself
  after ``ready`` while none is waiting), beside the USS of a bare forked child of this
  process.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sandbox import BlockingChannel, ZygoteProcess
from sandbox.protocol import Ready
from sandbox.testing import run_script

SCRIPT = "import time\ntime.monotonic()"


def percentile(values: list[float], fraction: float) -> float:
    """The ``fraction`` quantile of ``values`` (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def uss_kib(pid: int) -> int:
    """Unique set size of ``pid`` in KiB, from smaps_rollup."""
    total = 0
    with open(f"/proc/{pid}/smaps_rollup") as rollup:
        for line in rollup:
            if line.startswith(("Private_Clean:", "Private_Dirty:")):
                total += int(line.split()[1])
    return total


def wait_idle(pid: int, timeout: float = 5.0) -> None:
    """Wait until ``pid`` sleeps (``S`` in ``/proc/PID/stat``): a child that said ``ready``
    sleeps only once it waits for ``start``, its priming done."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as stat:
            if stat.read().rsplit(")", 1)[1].split()[0] == "S":
                return
        time.sleep(0.0005)
    raise TimeoutError(f"child {pid} did not go idle within {timeout} s")


def fork_floor(runs: int) -> list[float]:
    """Seconds for fork + _exit + waitpid, ``runs`` times."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        times.append(time.perf_counter() - start)
    return times


def bare_fork_uss() -> int:
    """USS of a forked child of this process, idling once it has said it is running."""
    ready_read, ready_write = os.pipe()
    release_read, release_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready_read)
        os.close(release_write)
        os.write(ready_write, b"r")
        os.read(release_read, 1)
        os._exit(0)
    os.close(ready_write)
    os.close(release_read)
    try:
        os.read(ready_read, 1)
        return uss_kib(pid)
    finally:
        os.close(release_write)
        os.close(ready_read)
        os.waitpid(pid, 0)


def main() -> None:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sb-bench-") as directory:
        workspace = Path(directory)
        (workspace / "refs").mkdir()
        (workspace / "out").mkdir()
        os.chmod(workspace, 0o755)
        measure(workspace, args.runs)


def measure(workspace: Path, runs: int) -> None:
    """Take and print every figure, using ``workspace`` for the children."""
    with ZygoteProcess.start() as zygote:
        for _ in range(10):
            run_script(zygote.client, SCRIPT, workspace=workspace)
        total, to_ready, ready_to_first = [], [], []
        isolation: list[str] = []
        for _ in range(runs):
            record = run_script(zygote.client, SCRIPT, workspace=workspace)
            assert record.ok, record.final
            isolation = record.isolation
            first = float(record.value)
            total.append(first - record.started_at)
            to_ready.append(record.ready_at - record.started_at)
            ready_to_first.append(first - record.ready_at)

        usses = []
        for _ in range(10):
            child = zygote.client.spawn(workspace)
            try:
                message = BlockingChannel(child.from_child, child.to_child).receive_child()
                assert isinstance(message, Ready)
                wait_idle(child.pid)
                usses.append(uss_kib(child.pid))
            finally:
                os.close(child.to_child)
                os.close(child.from_child)
                zygote.client.wait(child.pid, timeout=10)

    floor = fork_floor(runs)
    bare = bare_fork_uss()

    def ms(values: list[float]) -> str:
        p50, p95 = percentile(values, 0.5) * 1e3, percentile(values, 0.95) * 1e3
        return f"p50 {p50:7.2f} ms   p95 {p95:7.2f} ms"

    print(f"sandbox start-up, warm zygote, {runs} runs, layers: {', '.join(isolation)}")
    print(f"  request -> first instruction   {ms(total)}")
    print(f"    spawn request -> ready       {ms(to_ready)}")
    print(f"    ready -> first instruction   {ms(ready_to_first)}")
    print(f"  floor: fork+_exit+waitpid      {ms(floor)}")
    ratio = percentile(total, 0.5) / percentile(floor, 0.5)
    print(f"  ratio (p50 / floor p50)        {ratio:7.1f}x")
    idle = statistics.median(usses) / 1024
    print(f"  idle child USS                 {idle:7.2f} MiB (median of 10)")
    print(f"  bare forked child USS          {bare / 1024:7.2f} MiB")


if __name__ == "__main__":
    main()
