"""Benchmark: scriptbridge against pydantic-monty, side by side in one run, plus our own floors.

Run it with ``make bench``, or by hand once the ``bench`` extra is installed::

    .venv/bin/python benchmarks/compare.py [--cpus 0] [--json] [--quick]

Both systems run in the same process tree, **interleaved** (one scriptbridge sample, then one
monty sample, and so on) and under the **same CPU pinning**: ``--cpus`` sets this process's
affinity with ``os.sched_setaffinity`` before anything else starts, so the zygote, every sandbox
child, every monty worker, the helper processes and curl inherit it (the run checks that they
did). Cross-CPU wake-ups change round trips several times over, so compare ratios only within one
run and one setting.

Figures (scriptbridge is "ours", the peer is monty unless said otherwise):

``warm_start``
    request -> result of a 3-line script, pools warmed (monty: ``checkout`` + ``feed_run`` on a
    reused worker; ours: ``Bridge.run``, which always runs a fresh isolated child).
``fresh_start``
    the same, with monty forced onto a fresh worker per script (``max_checkouts_per_worker=1``),
    its like-for-like with our design.
``tool_call``
    per call: a script calling a no-op host function 5,000 times in a loop (total / 5,000).
    Our host functions here are coroutine functions, which a bridge calls on its event loop,
    as monty calls its external functions in the caller's thread.
``tool_call_sync``
    the same with a plain (sync) function, which a bridge calls in a worker thread so that a
    slow one can't stall other runs (report only: the price of that thread hop).
``warm_start_asyncio`` / ``tool_call_asyncio``
    ``warm_start`` and ``tool_call`` with the bridge opened under asyncio (its trio side in a
    thread of its own, the coroutine tool called on the host's asyncio loop), against the same
    figures under trio, sampled in turn with them: the price of embedding in an asyncio host.
``warm_start_b2b``
    ``warm_start`` with no pause between runs (as a batch evaluation or an RL rollout runs
    scripts): each run then also meets the making of the spare that replaces the one it took.
``scripts_per_s`` / ``scripts_per_s_x8``
    1,000 trivial scripts in a row, and 1,000 with 8 at a time (throughput; higher is better).
``scripts_per_s_fresh``
    ``scripts_per_s`` against monty with a fresh worker per script, its like-for-like.
``scripts_per_s_x8_vs_x1``
    our ``scripts_per_s_x8`` against our ``scripts_per_s``: how our throughput scales with
    runs at once (pinned to one CPU, as ``make bench`` is by default, it can't pass 1.0; the
    goal of 1.7 is for ``--cpus 0,1``).
``loop_1m``
    a 1,000,000-iteration pure-Python loop inside the sandbox, request -> result.
``payload_1mib``
    per call: a host function (a coroutine function) returning a 1 MiB string, called 100
    times by one script (total / 100, so the run's own start, which ``warm_start`` measures,
    is spread thin).
``idle_worker_memory``
    USS (``Private_*`` of ``/proc/PID/smaps_rollup``) of one idle, isolated sandbox child (once
    it sleeps waiting for ``start``, its priming done) against the RSS of monty's idle worker.

Our own figures against their physical floors, measured in the same run:

``tool_call_vs_pipe``
    our ``tool_call`` against a msgpack ping-pong of the same request and reply over
    ``os.pipe`` between two Python processes.
``fresh_child_vs_fork``
    spawn request -> ``ready`` of one isolated child (every layer in force; it primes itself
    after ``ready``, while no ``start`` waits) against ``os.fork()`` + ``_exit`` + ``waitpid``
    of a process warmed up like the zygote (report only: with spare children this is off the
    request path).
``child_exit_vs_fork``
    the end of one isolated child, from the host closing its pipes to the zygote reporting it
    reaped, against the same ``fork`` + ``_exit`` + ``waitpid`` (report only). Every run pays
    this before ``Bridge.run`` returns; monty's reused worker never does.
``render_vs_packb``
    the script-view renderer on a 100,000-block result against ``msgpack.packb`` of it.
``fetch_vs_curl`` / ``fetch_peak_memory``
    the reference fetcher against ``curl -o`` on a 100 MiB loopback payload (throughput), and
    the fetcher's peak memory growth against its 32 MiB budget.

Every sample goes to a JSON file (``--samples``), the table to ``--markdown`` and a plot of the
ratios to ``--plot``. With ``--json`` the summary is printed as
``{"figures": {"<name>": {"ours": <p50>, "peer": <p50>, "ratio": <ours/peer>, "goal": "<= 1.0",
"meets": true}}}`` (times in seconds, throughputs per second, memory in bytes; the table goes to
stderr then). A figure without a goal in the issue has the goal ``"none"`` and always meets it.
Only runs whose isolation list is the default's count: any other run marks its figure missed.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import datetime
import json
import os
import platform
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

import fetch as fetch_bench  # noqa: E402  (benchmarks/fetch.py)
import render as render_bench  # noqa: E402  (benchmarks/render.py)
import sandbox_start  # noqa: E402  (benchmarks/sandbox_start.py)

MIB = 1 << 20

WARM_SCRIPT = "x = 1\ny = x + 2\ny * 3\n"
WARM_VALUE = 9
TOOL_CALLS = 5000
OURS_TOOL_SCRIPT = f"for i in range({TOOL_CALLS}):\n    tools.noop()\n"
OURS_SYNC_TOOL_SCRIPT = f"for i in range({TOOL_CALLS}):\n    tools.noop_sync()\n"
PEER_TOOL_SCRIPT = f"for i in range({TOOL_CALLS}):\n    noop()\n"
LOOP_SCRIPT = "total = 0\nfor i in range(1000000):\n    total += i\ntotal\n"
LOOP_VALUE = 499999500000
PAYLOAD_CALLS = 100
OURS_PAYLOAD_SCRIPT = (
    f"for i in range({PAYLOAD_CALLS}):\n    n = len(tools.payload()['content'][0]['text'])\nn\n"
)
PEER_PAYLOAD_SCRIPT = f"for i in range({PAYLOAD_CALLS}):\n    n = len(payload())\nn\n"
PAYLOAD = "x" * MIB

# The floor's messages mirror a real tool call of the no-op tool, byte for byte in shape.
PING = {"op": "call_tool", "call_id": 1, "name": "noop", "args": {}}
PONG = {
    "op": "tool_result",
    "call_id": 1,
    "view": {"content": [{"type": "text", "text": "null"}], "data": None, "isError": False},
}


class AsyncioHost:
    """A bridge opened under asyncio, on an asyncio loop in a thread of its own (its trio side
    in another thread, as under any asyncio host), with the same no-op coroutine tool as the
    trio bridge: the peer of each ``*_asyncio`` figure is the trio bridge, sampled in turn with
    it in the same loop of samples, so the two meet the same state of the machine."""

    def __init__(self, workspace: Path, expected_layers: list[str]) -> None:
        self.workspace = workspace
        self.expected_layers = expected_layers
        self.invalid = 0
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="bench-asyncio")
        self.bridge: Any = None

    def __enter__(self) -> AsyncioHost:
        from scriptbridge import Bridge  # imported late, as the trio figures' are

        async def noop() -> None:
            return None

        async def open_bridge() -> None:
            bridge = Bridge(self.workspace)
            await bridge.__aenter__()
            self.bridge = bridge  # open: closed by __exit__ from here on
            bridge.add_tool(noop)

        self.thread.start()
        try:
            self._call(open_bridge())
        except BaseException:
            self.__exit__()  # the loop's thread must not outlive a bridge that didn't open
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            if self.bridge is not None:
                self._call(self.bridge.__aexit__(None, None, None))
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join()
            self.loop.close()

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def sample(self, source: str, value: Any, limits: Any = None) -> float:
        """One timed ``Bridge.run`` on the asyncio loop (blocks the calling thread)."""

        async def timed() -> float:
            started = time.perf_counter()
            result = await self.bridge.run(source, limits=limits)
            elapsed = time.perf_counter() - started
            if not result.ok or result.value != value:
                raise BenchError(f"our asyncio run failed: {result.error} {result.value!r}")
            if result.isolation != self.expected_layers:
                self.invalid += 1
            return elapsed

        elapsed: float = self._call(timed())
        return elapsed


ORDER = (
    "warm_start",
    "fresh_start",
    "tool_call",
    "tool_call_sync",
    "warm_start_asyncio",
    "tool_call_asyncio",
    "warm_start_b2b",
    "scripts_per_s",
    "scripts_per_s_fresh",
    "scripts_per_s_x8",
    "scripts_per_s_x8_vs_x1",
    "loop_1m",
    "payload_1mib",
    "idle_worker_memory",
    "tool_call_vs_pipe",
    "fresh_child_vs_fork",
    "child_exit_vs_fork",
    "render_vs_packb",
    "fetch_vs_curl",
    "fetch_peak_memory",
)


@dataclass
class Figure:
    """One row of the table: our samples, the peer's, and how to compare them."""

    name: str
    peer_name: str
    unit: str  # "s", "/s" or "B"
    goal: str  # "<= X", ">= X", "< X" or "none"
    ours: list[float] = field(default_factory=list)
    peer: list[float] = field(default_factory=list)
    invalid: int = 0  # our runs whose isolation list was shorter than the default's
    note: str = ""

    def p(self, which: str, fraction: float) -> float:
        values = self.ours if which == "ours" else self.peer
        return sandbox_start.percentile(values, fraction)

    @property
    def ratio(self) -> float:
        return self.p("ours", 0.5) / self.p("peer", 0.5)

    @property
    def meets(self) -> bool:
        if self.invalid:
            return False
        if self.goal == "none":
            return True
        op, bound = self.goal.split()
        # fetch_peak_memory is an absolute budget: the peer column holds it
        absolute = self.name == "fetch_peak_memory"
        value = self.p("ours", 0.5) / MIB if absolute else self.ratio
        return {"<=": value <= float(bound), ">=": value >= float(bound)}.get(
            op, value < float(bound)
        )

    def summary(self) -> dict[str, Any]:
        return {
            "ours": self.p("ours", 0.5),
            "peer": self.p("peer", 0.5),
            "ratio": self.ratio,
            "goal": self.goal,
            "meets": self.meets,
        }


class BenchError(RuntimeError):
    """A run gave a wrong answer; the benchmark stops rather than report it."""


# --------------------------------------------------------------------------------------------
# Pinning


def parse_cpus(text: str) -> set[int]:
    cpus: set[int] = set()
    for part in text.split(","):
        if "-" in part:
            low, high = part.split("-")
            cpus.update(range(int(low), int(high) + 1))
        elif part.strip():
            cpus.add(int(part))
    return cpus


def affinity_of(pid: int) -> list[int] | None:
    try:
        return sorted(os.sched_getaffinity(pid))
    except OSError:
        return None


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (from /proc/*/stat)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
                parents[int(entry)] = int(fields[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        for child, ppid in parents.items():
            if ppid == parent:
                found.append(child)
                frontier.append(child)
    return found


def check_affinity(cpus: set[int]) -> dict[str, Any]:
    """Whether this process's threads and every descendant run on exactly ``cpus``."""
    expected = sorted(cpus)
    threads = [int(t) for t in os.listdir("/proc/self/task")]
    bad = [
        p for p in [*threads, *descendants(os.getpid())] if affinity_of(p) not in (None, expected)
    ]
    return {
        "expected": expected,
        "checked": len(threads) + len(descendants(os.getpid())),
        "off": bad,
    }


# --------------------------------------------------------------------------------------------
# Floors


class PingPong:
    """A forked Python process answering msgpack frames over two pipes (the tool-call floor)."""

    def __init__(self) -> None:
        import msgpack

        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # pragma: no cover - the helper
            status = 0
            try:
                os.close(self._to_child)
                os.close(self._from_child)
                while True:
                    body = _read_frame(to_child_r)
                    if body is None:
                        break
                    request = msgpack.unpackb(body, raw=False)
                    reply = dict(PONG, call_id=request["call_id"])
                    _write_frame(from_child_w, msgpack.packb(reply, use_bin_type=True))
            except BaseException:
                status = 1
            finally:
                os._exit(status)
        os.close(to_child_r)
        os.close(from_child_w)
        self._packb = msgpack.packb
        self._unpackb = msgpack.unpackb

    def round_trips(self, count: int) -> float:
        """Seconds per round trip over ``count`` round trips."""
        started = time.perf_counter()
        for call_id in range(1, count + 1):
            _write_frame(self._to_child, self._packb(dict(PING, call_id=call_id)))
            body = _read_frame(self._from_child)
            assert body is not None and self._unpackb(body, raw=False)["call_id"] == call_id
        return (time.perf_counter() - started) / count

    def close(self) -> None:
        os.close(self._to_child)
        os.close(self._from_child)
        os.waitpid(self.pid, 0)


def _write_frame(fd: int, body: bytes) -> None:
    data = memoryview(struct.pack(">I", len(body)) + body)
    while data:
        data = data[os.write(fd, data) :]


def _read_exactly(fd: int, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = os.read(fd, left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _read_frame(fd: int) -> bytes | None:
    prefix = _read_exactly(fd, 4)
    if prefix is None:
        return None
    return _read_exactly(fd, struct.unpack(">I", prefix)[0])


_FORKER = """
import os, struct, sys, time
sys.path.insert(0, sys.argv[1])
from sandbox import _isolation, _warm
_warm.warm_up()
_isolation.python_paths()
os.write(1, b"r")
while os.read(0, 1):
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    os.write(1, struct.pack("d", time.perf_counter() - started))
"""


class ForkFloor:
    """A Python process warmed up like the zygote, timing ``os.fork()`` + ``os._exit(0)`` +
    ``waitpid`` on request (the floor for a fresh child: the zygote's own fork)."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-c", _FORKER, str(ROOT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self.process.stdout is not None and self.process.stdin is not None
        self._in, self._out = self.process.stdin, self.process.stdout
        if self._out.read(1) != b"r":
            raise BenchError("the fork-floor helper did not start")

    def once(self) -> float:
        """Seconds for one fork + _exit + waitpid in the helper."""
        self._in.write(b"f")
        self._in.flush()
        (seconds,) = struct.unpack("d", self._out.read(8))
        return float(seconds)

    def close(self) -> None:
        self._in.close()
        self.process.wait()


def status_kib(pid: int, field_name: str) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    raise BenchError(f"no {field_name} for {pid}")


def pss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/smaps_rollup") as rollup:
        for line in rollup:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    return 0


# --------------------------------------------------------------------------------------------
# scriptbridge and monty, interleaved


@dataclass
class Sizes:
    starts: int
    tool_samples: int
    throughput_scripts: int
    throughput_rounds: int
    loop_samples: int
    payload_samples: int
    memory_samples: int
    render_samples: int
    render_blocks: int
    fetch_runs: int
    fetch_mib: int


FULL = Sizes(200, 10, 1000, 3, 5, 10, 10, 5, 100_000, 5, 100)
QUICK = Sizes(20, 2, 100, 1, 2, 2, 3, 2, 10_000, 2, 20)


async def compare_runtimes(
    figures: dict[str, Figure],
    sizes: Sizes,
    gap_s: float,
    workspace: Path,
    expected_layers: list[str],
    extra: dict[str, Any],
) -> None:
    """Take every scriptbridge-versus-monty figure, interleaved, inside one trio run."""
    import pydantic_monty
    import trio

    from sandbox import BlockingChannel, ChildLimits, ZygoteProcess
    from sandbox.protocol import Ready
    from scriptbridge import Bridge, Limits

    def fig(name: str, peer: str, unit: str, goal: str) -> Figure:
        figures[name] = Figure(name, peer, unit, goal)
        return figures[name]

    async def noop() -> None:
        return None

    def noop_sync() -> None:
        return None

    def payload() -> str:  # monty's
        return PAYLOAD

    async def payload_async() -> str:  # ours
        return PAYLOAD

    ping = PingPong()
    forker = ForkFloor()
    many = Limits(max_tool_calls=TOOL_CALLS * 2)
    peer_limits: pydantic_monty.ResourceLimits = {"max_suspensions": TOOL_CALLS * 2}
    warm_pool = pydantic_monty.Monty(min_processes=1)
    fresh_pool = pydantic_monty.Monty(min_processes=1, max_checkouts_per_worker=1)
    wide_pool = pydantic_monty.Monty(min_processes=8, max_processes=8)
    try:
        aio = AsyncioHost(workspace / "ws-asyncio", expected_layers)
        with warm_pool, fresh_pool, wide_pool, aio:
            async with Bridge(workspace / "ws") as bridge:
                bridge.add_tool(noop)
                bridge.add_tool(noop_sync)
                bridge.add_tool(payload_async, name="payload")

                async def ours(source: str, value: Any, limits: Limits | None = None) -> float:
                    started = time.perf_counter()
                    result = await bridge.run(source, limits=limits)
                    elapsed = time.perf_counter() - started
                    if not result.ok or result.value != value:
                        raise BenchError(f"our run failed: {result.error} {result.value!r}")
                    if result.isolation != expected_layers:
                        current.invalid += 1
                    return elapsed

                def peer(
                    pool: Any,
                    source: str,
                    value: Any,
                    lookup: dict[str, Any] | None = None,
                    limits: pydantic_monty.ResourceLimits | None = None,
                ) -> float:
                    started = time.perf_counter()
                    with pool.checkout(limits=limits) as session:
                        got = session.feed_run(source, external_lookup=lookup)
                    elapsed = time.perf_counter() - started
                    if got != value:
                        raise BenchError(f"monty's run gave {got!r}")
                    return elapsed

                async def pause() -> None:
                    await trio.sleep(gap_s)

                async def interleave(
                    count: int,
                    figure: Figure,
                    mine: Callable[[], Awaitable[float]],
                    theirs: Callable[[], float],
                    under_asyncio: tuple[Figure, Callable[[], float]] | None = None,
                ) -> None:
                    """``count`` rounds of one sample of ours, then the peer's (and, given
                    ``under_asyncio``, then ours under asyncio, whose peer is ours under
                    trio), each followed by a gap; ours under asyncio by two, so that each of
                    our runs starts as long after the other bridge's last run as after its
                    own (a run meeting the making of a spare is ``warm_start_b2b``'s case)."""
                    nonlocal current
                    current = figure
                    for _ in range(count):
                        figure.ours.append(await mine())
                        await pause()
                        figure.peer.append(theirs())
                        await pause()
                        if under_asyncio is not None:
                            aio_figure, aio_sample = under_asyncio
                            aio_figure.ours.append(await trio.to_thread.run_sync(aio_sample))
                            await pause()  # two gaps, as ours had before it: the asyncio
                            await pause()  # bridge makes its next spare meanwhile
                    if under_asyncio is not None:
                        under_asyncio[0].peer = list(figure.ours)
                        under_asyncio[0].invalid = aio.invalid

                # warm everything up: imports, pools, caches, first children
                current = fig("warmup", "monty", "s", "none")
                for _ in range(10):
                    await ours(WARM_SCRIPT, WARM_VALUE)
                    peer(warm_pool, WARM_SCRIPT, WARM_VALUE)
                    peer(fresh_pool, WARM_SCRIPT, WARM_VALUE)
                    await trio.to_thread.run_sync(aio.sample, WARM_SCRIPT, WARM_VALUE)
                del figures["warmup"]
                aio.invalid = 0
                await pause()

                print("  warm_start, warm_start_asyncio ...", file=sys.stderr)
                await interleave(
                    sizes.starts,
                    fig("warm_start", "monty (reused worker)", "s", "<= 1.0"),
                    lambda: ours(WARM_SCRIPT, WARM_VALUE),
                    lambda: peer(warm_pool, WARM_SCRIPT, WARM_VALUE),
                    (
                        fig("warm_start_asyncio", "ours under trio", "s", "<= 1.5"),
                        lambda: aio.sample(WARM_SCRIPT, WARM_VALUE),
                    ),
                )
                aio.invalid = 0

                print("  fresh_start ...", file=sys.stderr)
                await interleave(
                    sizes.starts,
                    fig("fresh_start", "monty (fresh worker)", "s", "none"),
                    lambda: ours(WARM_SCRIPT, WARM_VALUE),
                    lambda: peer(fresh_pool, WARM_SCRIPT, WARM_VALUE),
                )

                print("  warm_start_b2b ...", file=sys.stderr)
                b2b = fig("warm_start_b2b", "monty (reused worker)", "s", "<= 1.0")
                current = b2b
                for _ in range(max(sizes.starts // 20, 1)):
                    for _ in range(20):  # no pause: each run starts as the last one returns
                        b2b.ours.append(await ours(WARM_SCRIPT, WARM_VALUE))
                    await pause()
                    for _ in range(20):
                        b2b.peer.append(peer(warm_pool, WARM_SCRIPT, WARM_VALUE))
                    await pause()

                print("  tool_call, tool_call_asyncio ...", file=sys.stderr)
                tool = fig("tool_call", "monty", "s", "<= 1.0")
                floor = fig("tool_call_vs_pipe", "msgpack ping-pong over os.pipe", "s", "<= 1.5")
                tool_aio = fig("tool_call_asyncio", "ours under trio", "s", "<= 1.5")
                current = tool
                for _ in range(sizes.tool_samples):
                    tool.ours.append(await ours(OURS_TOOL_SCRIPT, None, many) / TOOL_CALLS)
                    await pause()
                    tool.peer.append(
                        peer(warm_pool, PEER_TOOL_SCRIPT, None, {"noop": lambda: None}, peer_limits)
                        / TOOL_CALLS
                    )
                    await pause()
                    floor.peer.append(ping.round_trips(TOOL_CALLS))
                    await pause()
                    aio_s = await trio.to_thread.run_sync(aio.sample, OURS_TOOL_SCRIPT, None, many)
                    tool_aio.ours.append(aio_s / TOOL_CALLS)
                    await pause()
                    await pause()
                floor.ours = list(tool.ours)
                tool_aio.peer = list(tool.ours)
                tool_aio.invalid = aio.invalid
                aio.invalid = 0

                print("  tool_call_sync ...", file=sys.stderr)

                async def ours_sync_call() -> float:
                    return await ours(OURS_SYNC_TOOL_SCRIPT, None, many) / TOOL_CALLS

                def peer_call() -> float:
                    lookup = {"noop": lambda: None}
                    return peer(warm_pool, PEER_TOOL_SCRIPT, None, lookup, peer_limits) / TOOL_CALLS

                await interleave(
                    sizes.tool_samples,
                    fig("tool_call_sync", "monty", "s", "none"),
                    ours_sync_call,
                    peer_call,
                )

                print("  scripts_per_s ...", file=sys.stderr)
                count = sizes.throughput_scripts
                seq = fig("scripts_per_s", "monty", "/s", ">= 0.5")
                fresh = fig("scripts_per_s_fresh", "monty (fresh worker)", "/s", ">= 1.0")
                wide = fig("scripts_per_s_x8", "monty (8 workers)", "/s", "none")
                executor = concurrent.futures.ThreadPoolExecutor(8)

                def peer_batch(pool: Any, n: int) -> None:
                    for _ in range(n):
                        peer(pool, WARM_SCRIPT, WARM_VALUE)

                async def ours_batch(n: int) -> None:
                    for _ in range(n):
                        await ours(WARM_SCRIPT, WARM_VALUE)

                for _ in range(sizes.throughput_rounds):
                    current = seq
                    started = time.perf_counter()
                    await ours_batch(count)
                    seq.ours.append(count / (time.perf_counter() - started))
                    await pause()
                    started = time.perf_counter()
                    peer_batch(warm_pool, count)
                    seq.peer.append(count / (time.perf_counter() - started))
                    await pause()
                    started = time.perf_counter()
                    peer_batch(fresh_pool, count)
                    fresh.peer.append(count / (time.perf_counter() - started))
                    await pause()
                    current = wide
                    started = time.perf_counter()
                    async with trio.open_nursery() as nursery:
                        for _ in range(8):
                            nursery.start_soon(ours_batch, count // 8)
                    wide.ours.append(count // 8 * 8 / (time.perf_counter() - started))
                    await pause()
                    started = time.perf_counter()
                    futures = [executor.submit(peer_batch, wide_pool, count // 8) for _ in range(8)]
                    for future in futures:
                        future.result()
                    wide.peer.append(count // 8 * 8 / (time.perf_counter() - started))
                    await pause()
                executor.shutdown()
                fresh.ours = list(seq.ours)
                scaling = fig("scripts_per_s_x8_vs_x1", "ours, one at a time", "/s", ">= 1.7")
                scaling.ours, scaling.peer = list(wide.ours), list(seq.ours)
                scaling.invalid = wide.invalid + seq.invalid

                print("  loop_1m ...", file=sys.stderr)
                await interleave(
                    sizes.loop_samples,
                    fig("loop_1m", "monty", "s", "<= 1.0"),
                    lambda: ours(LOOP_SCRIPT, LOOP_VALUE),
                    lambda: peer(warm_pool, LOOP_SCRIPT, LOOP_VALUE),
                )

                print("  payload_1mib ...", file=sys.stderr)

                async def ours_payload() -> float:
                    return await ours(OURS_PAYLOAD_SCRIPT, MIB) / PAYLOAD_CALLS

                def peer_payload() -> float:
                    lookup = {"payload": payload}
                    return peer(warm_pool, PEER_PAYLOAD_SCRIPT, MIB, lookup) / PAYLOAD_CALLS

                await interleave(
                    sizes.payload_samples,
                    fig("payload_1mib", "monty", "s", "<= 1.0"),
                    ours_payload,
                    peer_payload,
                )

                print("  idle_worker_memory, child start and exit ...", file=sys.stderr)
                memory = fig("idle_worker_memory", "monty worker RSS", "B", "<= 1.0")
                spawn = fig("fresh_child_vs_fork", "fork+_exit+waitpid", "s", "none")
                ending = fig("child_exit_vs_fork", "fork+_exit+waitpid", "s", "none")
                idle_dir = workspace / "idle"
                (idle_dir / "refs").mkdir(parents=True)
                (idle_dir / "out").mkdir()
                os.chmod(idle_dir, 0o755)
                peer_details: list[dict[str, int]] = []
                ours_details: list[dict[str, int]] = []
                with ZygoteProcess.start() as zygote:
                    for _ in range(sizes.memory_samples):
                        started = time.perf_counter()
                        child = zygote.client.spawn(idle_dir, ChildLimits())
                        try:
                            ready = BlockingChannel(
                                child.from_child, child.to_child
                            ).receive_child()
                            spawn.ours.append(time.perf_counter() - started)
                            if not isinstance(ready, Ready):
                                raise BenchError(f"the idle child sent {ready!r}")
                            if list(ready.isolation) != expected_layers:
                                memory.invalid += 1
                            sandbox_start.wait_idle(child.pid)
                            memory.ours.append(sandbox_start.uss_kib(child.pid) * 1024)
                            ours_details.append(
                                {"uss_kib": sandbox_start.uss_kib(child.pid),
                                 "pss_kib": pss_kib(child.pid),
                                 "rss_kib": status_kib(child.pid, "VmRSS")}
                            )  # fmt: skip
                        finally:
                            released = time.perf_counter()
                            os.close(child.to_child)
                            os.close(child.from_child)
                            zygote.client.wait(child.pid, timeout=10)
                            ending.ours.append(time.perf_counter() - released)
                        await pause()
                        with warm_pool.checkout() as session:
                            session.feed_run(WARM_SCRIPT)
                            worker = session.worker_pid
                        assert worker is not None
                        await pause()  # the worker is idle, back in its pool
                        memory.peer.append(status_kib(worker, "VmRSS") * 1024)
                        peer_details.append(
                            {"uss_kib": sandbox_start.uss_kib(worker),
                             "pss_kib": pss_kib(worker),
                             "rss_kib": status_kib(worker, "VmRSS")}
                        )  # fmt: skip
                        fork_s = forker.once()
                        spawn.peer.append(fork_s)
                        ending.peer.append(fork_s)
                        await pause()
                extra["idle_memory_detail"] = {"ours": ours_details, "monty": peer_details}
                extra["affinity"] = check_affinity(set(os.sched_getaffinity(0)))
    finally:
        ping.close()
        forker.close()


# --------------------------------------------------------------------------------------------
# Renderer and fetcher (each against its floor, interleaved)


def compare_render(figures: dict[str, Figure], sizes: Sizes) -> None:
    import msgpack

    from scriptbridge import ReferenceRegistry, render_script_view

    figure = figures["render_vs_packb"] = Figure("render_vs_packb", "msgpack.packb", "s", "<= 3")
    registry = ReferenceRegistry()
    result = render_bench.make_result(sizes.render_blocks)
    registry.ingest(result, server="bench")
    render_script_view(result, registry)
    msgpack.packb(result)
    for _ in range(sizes.render_samples):
        started = time.perf_counter()
        render_script_view(result, registry)
        figure.ours.append(time.perf_counter() - started)
        started = time.perf_counter()
        msgpack.packb(result)
        figure.peer.append(time.perf_counter() - started)


def compare_fetch(figures: dict[str, Figure], sizes: Sizes, workspace: Path) -> None:
    curl = shutil.which("curl")
    if curl is None:
        print("  curl not found: no fetcher figures", file=sys.stderr)
        return
    size = sizes.fetch_mib * MIB
    speed = figures["fetch_vs_curl"] = Figure("fetch_vs_curl", "curl -o", "/s", ">= 0.8")
    memory = figures["fetch_peak_memory"] = Figure(
        "fetch_peak_memory", "32 MiB budget", "B", "< 32"
    )
    payload_path = workspace / "payload.bin"
    expected = fetch_bench.write_payload(payload_path, sizes.fetch_mib)
    server, url = fetch_bench.start_server(payload_path)
    try:
        fetch_bench.run_fetcher(url, workspace / "fetch-ws", size, -1)
        fetch_bench.run_curl(curl, url, workspace / "curl.bin")
        os.unlink(workspace / "curl.bin")  # else curl's first counted run truncates it
        for run in range(sizes.fetch_runs):
            seconds = fetch_bench.run_curl(curl, url, workspace / "curl.bin")
            if (workspace / "curl.bin").stat().st_size != size:
                raise BenchError("curl's copy has the wrong size")
            os.unlink(workspace / "curl.bin")
            speed.peer.append(size / seconds)
            before = fetch_bench._status_kib("VmRSS") or 0
            if not fetch_bench._reset_peak():
                raise BenchError("can't reset the peak-RSS mark (/proc/self/clear_refs)")
            elapsed, got, sha = fetch_bench.run_fetcher(url, workspace / "fetch-ws", size, run)
            if got != size or sha != expected:
                raise BenchError("the fetched copy differs")
            speed.ours.append(size / elapsed)
            memory.ours.append(((fetch_bench._status_kib("VmHWM") or 0) - before) * 1024)
            memory.peer.append(32 * MIB)
    finally:
        server.kill()
        server.wait()


# --------------------------------------------------------------------------------------------
# Reporting


def human(value: float, unit: str) -> str:
    if unit == "s":
        if value < 1e-3:
            return f"{value * 1e6:.1f} µs"
        if value < 1:
            return f"{value * 1e3:.2f} ms"
        return f"{value:.2f} s"
    if unit == "B":
        return f"{value / MIB:.1f} MiB"
    if value >= 1e6:
        return f"{value / MIB:.0f} MiB/s"  # fetch throughput, bytes per second
    return f"{value:,.0f}/s"


def table(figures: dict[str, Figure]) -> str:
    rows = [
        "| figure | ours p50 | ours p95 | peer | peer p50 | peer p95 | ratio | goal | meets |",
        "|---|---:|---:|---|---:|---:|---:|---|---|",
    ]
    for figure in figures.values():
        ours_p95 = figure.p("ours", 0.05 if figure.unit == "/s" else 0.95)
        peer_p95 = figure.p("peer", 0.05 if figure.unit == "/s" else 0.95)
        meets = "yes" if figure.meets else "**no**"
        if figure.goal == "none":
            meets = "n/a"
        rows.append(
            f"| {figure.name} | {human(figure.p('ours', 0.5), figure.unit)} "
            f"| {human(ours_p95, figure.unit)} | {figure.peer_name} "
            f"| {human(figure.p('peer', 0.5), figure.unit)} | {human(peer_p95, figure.unit)} "
            f"| {figure.ratio:.2f}× | {figure.goal} "
            f"| {meets} |"
        )
    return "\n".join(rows)


def machine() -> dict[str, Any]:
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    memory = 0
    with contextlib.suppress(ValueError, OSError):
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    virtual = False
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as cpuinfo:
        virtual = " hypervisor" in cpuinfo.read()
    return {
        "cpu": model + (" (virtual machine)" if virtual else ""),
        "cores": os.cpu_count(),
        "memory_gib": round(memory / 2**30, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
    }


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in ("scriptbridge", "pydantic-monty", "RestrictedPython", "trio", "msgpack"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "?"
    return found


def markdown(meta: dict[str, Any], figures: dict[str, Figure], plot_name: str | None) -> str:
    host = meta["machine"]
    lines = [
        "# Benchmarks",
        "",
        f"Latest run: {meta['date']}, `{meta['command']}` (`make bench` runs it with no "
        "arguments; the default pinning is `--cpus 0`).",
        "",
        f"- Machine: {host['cpu']}, {host['cores']} cores, {host['memory_gib']} GiB, "
        f"Linux {host['kernel']}, Python {host['python']}.",
        f"- Pinning: every process on CPU(s) {meta['cpus']} "
        f"(checked: {meta['affinity']['checked']} threads and processes, "
        f"{len(meta['affinity']['off'])} off).",
        f"- Versions: {', '.join(f'{k} {v}' for k, v in meta['versions'].items())}.",
        f"- Isolation of every counted run: {', '.join(meta['isolation'])}.",
        "- Interleaved: one scriptbridge sample, then one peer sample, and so on. Ratios are "
        "ours/peer of the p50s (for throughputs, higher is better; for the rest, lower).",
        "",
        table(figures),
        "",
        "For throughputs (`/s`) the p95 column is the slow end (the 5th percentile). "
        "Figures with the goal `none` have no goal in the issue; they are shown for context. "
        "`fetch_peak_memory` compares the fetcher's peak memory growth with its 32 MiB budget. "
        "Every sample is in `benchmarks-samples.json` beside this file; "
        "`benchmarks/compare.py` explains each figure.",
    ]
    if plot_name:
        lines += ["", f"![ratio of scriptbridge to each peer, per figure]({plot_name})"]
    return "\n".join(lines) + "\n"


def plot(figures: dict[str, Figure], path: Path, meta: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(figures)
    ratios = [figures[n].ratio for n in names]
    colours = [
        "#999999" if figures[n].goal == "none" else ("#2a9d4a" if figures[n].meets else "#d1495b")
        for n in names
    ]
    fig, axis = plt.subplots(figsize=(9, 0.42 * len(names) + 1.4))
    positions = list(range(len(names)))[::-1]
    axis.barh(positions, ratios, color=colours)
    for position, name in zip(positions, names, strict=True):
        figure = figures[name]
        if figure.goal != "none":  # the memory budget is the peer: its goal is a ratio of 1
            bound = 1.0 if figure.name == "fetch_peak_memory" else float(figure.goal.split()[1])
            axis.plot([bound, bound], [position - 0.4, position + 0.4], color="black", lw=1.5)
        axis.text(figure.ratio, position, f" {figure.ratio:.2f}×", va="center", fontsize=8)
    labels = [f"{n} (higher is better)" if figures[n].unit == "/s" else n for n in names]
    axis.set_yticks(positions, labels, fontsize=9)
    axis.set_xscale("log")
    axis.axvline(1.0, color="#555555", lw=0.6, ls=":")
    axis.set_xlabel(
        "ratio ours / peer (log); black tick = goal; green meets, red misses, grey no goal"
    )
    axis.set_title(
        f"scriptbridge / pydantic-monty and floors, CPU(s) {meta['cpus']}, {meta['date']}",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpus", default="0", help="CPU list to pin everything to (e.g. 0 or 0,1)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--quick", action="store_true", help="few samples (a smoke test)")
    parser.add_argument("--gap-ms", type=float, default=5.0, help="idle gap between samples")
    parser.add_argument("--samples", default=str(ROOT / "docs" / "benchmarks-samples.json"))
    parser.add_argument("--markdown", default=str(ROOT / "docs" / "benchmarks.md"))
    parser.add_argument("--plot", default=str(ROOT / "docs" / "benchmarks.png"))
    parser.add_argument("--only", default="", help="comma-separated phases: runtimes,render,fetch")
    args = parser.parse_args()

    cpus = parse_cpus(args.cpus)
    os.sched_setaffinity(0, cpus)  # first: every thread and process started later inherits it
    sizes = QUICK if args.quick else FULL
    phases = set(filter(None, args.only.split(","))) or {"runtimes", "render", "fetch"}
    log = sys.stderr
    print(f"pinned to CPU(s) {sorted(cpus)}; {'quick' if args.quick else 'full'} run", file=log)

    import trio

    from sandbox import probe_layers

    expected = [probe.layer for probe in probe_layers() if probe.available]
    figures: dict[str, Figure] = {}
    extra: dict[str, Any] = {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="sb-compare-") as tmp:
        workspace = Path(tmp)
        os.chmod(workspace, 0o755)
        if "fetch" in phases:  # first: its peak-memory growth is read on a small heap
            print("  fetch_vs_curl ...", file=log)
            compare_fetch(figures, sizes, workspace)
        if "runtimes" in phases:
            trio.run(
                compare_runtimes, figures, sizes, args.gap_ms / 1000, workspace, expected, extra
            )
        if "render" in phases:
            print("  render_vs_packb ...", file=log)
            compare_render(figures, sizes)
        figures = {name: figures[name] for name in ORDER if name in figures}
    if "affinity" not in extra:
        extra["affinity"] = check_affinity(cpus)

    meta = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": " ".join(["python benchmarks/compare.py", *sys.argv[1:]]),
        "cpus": ",".join(str(c) for c in sorted(cpus)),
        "machine": machine(),
        "versions": versions(),
        "isolation": expected,
        "affinity": extra.pop("affinity"),
        "seconds": round(time.perf_counter() - started, 1),
    }
    report = {
        "meta": meta,
        "figures": {
            name: {
                **figure.summary(),
                "unit": figure.unit,
                "peer_name": figure.peer_name,
                "invalid_runs": figure.invalid,
                "samples": {"ours": figure.ours, "peer": figure.peer},
            }
            for name, figure in figures.items()
        },
        **extra,
    }
    if args.samples:
        Path(args.samples).parent.mkdir(parents=True, exist_ok=True)
        Path(args.samples).write_text(json.dumps(report, indent=1) + "\n")
    plot_name = None
    if args.plot:
        Path(args.plot).parent.mkdir(parents=True, exist_ok=True)
        plot(figures, Path(args.plot), meta)
        plot_name = Path(args.plot).name
    if args.markdown:
        Path(args.markdown).parent.mkdir(parents=True, exist_ok=True)
        Path(args.markdown).write_text(markdown(meta, figures, plot_name))

    text = table(figures)
    summary = {"figures": {name: figure.summary() for name, figure in figures.items()}}
    if args.json:
        print(text, file=log)
        print(json.dumps(summary, indent=2))
    else:
        print(text)
    print(f"{meta['seconds']} s; pinned to {meta['cpus']}; affinity off: "
          f"{meta['affinity']['off']}", file=log)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
