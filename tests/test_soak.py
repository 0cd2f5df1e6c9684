"""Load and soak: a thousand scripts of every ending through one Bridge, sixteen at a time.

The mix: 60% normal scripts (a value, printed text, a host tool call), 15% that raise, 5% that
loop until their 0.3 s wall time, 10% that ask for far more memory than their limit, 10% that
flood their output. Every result must be exactly what its script calls for; afterwards no
process, fd or temporary file may be left, ``runs/`` must be empty, and the supervisor's
resident memory must not have grown past :data:`RSS_GROWTH_BOUND_KIB`.

The bound: 16 MiB over the thousand runs, measured after a warm-up of 64 runs (which fills the
allocator's pools, pydantic's and trio's caches and the registry's structures once). Nothing of
a finished run is kept by the supervisor (its directory, pipes and child go with it, and the
test keeps only wrong results), so growth should be flat: on the reference machine it was
0.04 to 0.14 MiB after 1,000 runs, 1.0 MiB after 4,000 and 1.0 MiB after 12,000 (allocator
noise, not growth per run). A leak of 16 KiB per run (a pipe buffer, a kept journal or stdout
list, a child's record) would pass the bound within the thousand runs.

``SCRIPTBRIDGE_SOAK_SCRIPTS=N`` runs ``N`` scripts instead of 1,000 (a long soak).
"""

from __future__ import annotations

import gc
import os
import pathlib
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
import trio
from hostile_children import open_fds
from processes import descendants, rss_kib

from scriptbridge._limits import Limits
from scriptbridge._results import ScriptResult
from scriptbridge._supervisor import Bridge
from scriptbridge._tools import python_tool

SCRIPTS = int(os.environ.get("SCRIPTBRIDGE_SOAK_SCRIPTS", "1000") or 1000)
AT_ONCE = 16
WARM_UP = 64
RSS_GROWTH_BOUND_KIB = 16 * 1024
IDLE_CHILDREN_BOUND = AT_ONCE
"""Children the bridge may keep between runs (forked ahead of need), at most."""

LIMITS = Limits(wall_s=10, cpu_s=5, memory_mb=128, max_output_bytes=1000)


@dataclass(frozen=True)
class Kind:
    """One kind of script: its source, its limits, and what its result must be."""

    name: str
    source: str
    limits: Limits
    check: Callable[[int, ScriptResult], bool]


KINDS = [
    Kind(
        "normal",
        "print('n', inputs['n'])\ncall_tool('double', {'n': inputs['n']})['data'] + 1\n",
        LIMITS,
        lambda n, r: r.ok and r.value == 2 * n + 1 and r.stdout == f"n {n}\n" and r.tool_calls == 1,
    ),
    Kind(
        "raising",
        "def f(n):\n    raise ValueError(f'bad {n}')\nf(inputs['n'])\n",
        LIMITS,
        lambda n, r: (
            r.error is not None
            and (r.error.type, r.error.message, r.error.line) == ("ValueError", f"bad {n}", 2)
        ),
    ),
    Kind(
        "looping",
        "while True:\n    pass\n",
        LIMITS.model_copy(update={"wall_s": 0.3}),
        lambda n, r: r.error is not None and r.error.type == "WallTimeExceeded",
    ),
    Kind(
        "memory-hungry",
        "x = 'a' * (512 * 2**20)\n",
        LIMITS,
        lambda n, r: r.error is not None and r.error.type == "MemoryExceeded",
    ),
    Kind(
        "output-flooding",
        "while True:\n    print('x' * 100)\n",
        LIMITS,
        lambda n, r: (
            r.error is not None
            and r.error.type == "OutputExceeded"
            and len(r.stdout.encode()) <= 1000
        ),
    ),
]
WEIGHTS = {"normal": 12, "raising": 3, "looping": 1, "memory-hungry": 2, "output-flooding": 2}
PLAN = [kind for kind in KINDS for _ in range(WEIGHTS[kind.name])]


@dataclass
class Tally:
    """What a soak saw: runs per kind, and every run whose result was wrong (kept whole)."""

    runs: Counter[str] = field(default_factory=Counter)
    wrong: list[tuple[int, str, ScriptResult]] = field(default_factory=list)


async def soak(bridge: Bridge, count: int, start: int = 0) -> Tally:
    """Run ``count`` scripts of the mix, ``AT_ONCE`` at a time, checking each result as it
    comes (only wrong ones are kept, so the test itself holds no memory per run)."""
    tally = Tally()
    numbers = iter(range(start, start + count))

    async def worker() -> None:
        for n in numbers:
            kind = PLAN[n % len(PLAN)]
            result = await bridge.run(kind.source, inputs={"n": n}, limits=kind.limits)
            tally.runs[kind.name] += 1
            if not kind.check(n, result):
                tally.wrong.append((n, kind.name, result))

    async with trio.open_nursery() as nursery:
        for _ in range(AT_ONCE):
            nursery.start_soon(worker)
    return tally


async def test_a_thousand_scripts_through_one_bridge(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A thousand scripts of every ending, sixteen at a time, each end as they should, and leave
    no process, fd, temporary file or run directory, with flat supervisor memory."""
    private_tmp = tmp_path / "tmp"  # this test's own temp dir: other processes' files aren't in it
    private_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(private_tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(private_tmp))
    scratch = set(os.listdir(tempfile.gettempdir()))
    processes = descendants(os.getpid())
    fds = open_fds()
    workspace = tmp_path / "ws"
    async with Bridge(workspace) as bridge:
        bridge.add_tool(python_tool(lambda n: 2 * n, name="double"))
        warm = await soak(bridge, WARM_UP)
        gc.collect()
        rss_before, fds_before = rss_kib(os.getpid()), len(open_fds())
        tally = await soak(bridge, SCRIPTS, start=WARM_UP)
        gc.collect()
        rss_after, fds_after = rss_kib(os.getpid()), len(open_fds())
        idle_children = descendants(os.getpid()) - processes
        assert warm.wrong + tally.wrong == []
        assert tally.runs.total() == SCRIPTS and set(tally.runs) == set(WEIGHTS)
        assert fds_after <= fds_before + 2 * IDLE_CHILDREN_BOUND, (fds_before, fds_after)
        assert len(idle_children) <= IDLE_CHILDREN_BOUND + 1, idle_children  # + the zygote
        assert list((workspace / "runs").iterdir()) == []
        assert rss_after - rss_before <= RSS_GROWTH_BOUND_KIB, (rss_before, rss_after)
    assert descendants(os.getpid()) == processes
    assert open_fds() == fds
    assert list(workspace.rglob("*.part")) == [] and list((workspace / "runs").iterdir()) == []
    assert set(os.listdir(tempfile.gettempdir())) <= scratch
