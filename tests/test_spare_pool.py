"""Tests of the spare pool alone: concurrent forks, a number of spares that follows demand, and
the bound the host sets. The children are fakes (pipes that say ``ready``) so that the tests
decide when each fork ends; the pool, its channels and its directories are the real ones."""

from __future__ import annotations

import itertools
import os
import pathlib
from collections.abc import AsyncIterator

import pytest
import trio
import trio.testing

from sandbox import ChildExit, ChildLimits
from sandbox.protocol import Ready, encode_frame
from scriptbridge._launcher import Child
from scriptbridge._run_dirs import RunDir, RunDirs
from scriptbridge._spares import SPARE_CHILDREN, SparePool, usable_cpus

LIMITS = ChildLimits()


class FakeChild(Child):
    """No process: a pipe that already holds ``ready``, and a socket-less pipe to it."""

    def __init__(self, pid: int, forks: Forks) -> None:
        self.pid = pid
        self._forks = forks
        self.from_child, ready_end = os.pipe()
        os.write(ready_end, encode_frame(Ready(protocol=1, pid=pid, isolation=[], skipped=[])))
        os.close(ready_end)
        self._reader, self.to_child = os.pipe()

    async def wait(self, timeout: float) -> ChildExit:
        os.close(self._reader)
        return ChildExit(pid=self.pid, returncode=-9, cpu_s=0.0, max_rss_kb=0)

    async def kill(self) -> None:
        self._forks.killed.append(self.pid)


class Forks:
    """The pool's fork: each call waits for the test to let it end (when ``gated``), and the
    most forks in flight at once, and the most spares held plus forks in flight, are kept."""

    def __init__(self, *, gated: bool) -> None:
        self.gated = gated
        self.gate = trio.Event()
        self.in_flight = 0
        self.most_in_flight = 0
        self.most_held = 0
        self.killed: list[int] = []
        self.pool: SparePool | None = None
        self._pids = itertools.count(1000)

    async def __call__(self, directory: RunDir, limits: ChildLimits) -> Child:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        assert self.pool is not None
        self.most_held = max(self.most_held, len(self.pool.pids()) + self.in_flight)
        try:
            if self.gated:
                await self.gate.wait()
            else:
                await trio.sleep(0)
            return FakeChild(next(self._pids), self)
        finally:
            self.in_flight -= 1


@pytest.fixture
async def dirs(tmp_path: pathlib.Path) -> AsyncIterator[RunDirs]:
    dirs = RunDirs(tmp_path)
    dirs.open()
    yield dirs
    dirs.close()


def pool_of(forks: Forks, dirs: RunDirs, **options: int) -> SparePool:
    pool = SparePool(forks, dirs, LIMITS, 2**20, lambda: False, **options)
    forks.pool = pool
    return pool


async def burst(pool: SparePool, dirs: RunDirs, runs: int) -> int:
    """``runs`` runs arriving at once; each then finishes (``want``). Returns how many found a
    spare."""
    found = []
    for number in range(runs):
        run_dir = dirs.for_run(f"run{number}-{trio.current_time()}")
        child = await pool.take(LIMITS, run_dir)
        if child is not None:
            found.append(child)
            await child.close_fds()
            await child.wait(1.0)
    for _ in range(runs):
        pool.want()
    return len(found)


async def test_spares_are_forked_concurrently(dirs: RunDirs) -> None:
    """With room for several spares, the pool forks as many at once as it may in parallel."""
    forks = Forks(gated=True)
    pool = pool_of(forks, dirs, max_spares=4, parallel=2)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pool.keep)
        await trio.testing.wait_all_tasks_blocked()
        assert forks.in_flight == 2
        forks.gate.set()
        await trio.testing.wait_all_tasks_blocked()
        assert len(pool.pids()) == SPARE_CHILDREN
        assert forks.most_in_flight == 2
        nursery.cancel_scope.cancel()
    await pool.close()


async def test_a_burst_finds_spares_after_one_like_it(dirs: RunDirs) -> None:
    """A burst of runs larger than the pool raises the number of spares kept, so the next
    burst of the same size finds a spare for every run."""
    forks = Forks(gated=False)
    pool = pool_of(forks, dirs, max_spares=8)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pool.keep)
        await trio.testing.wait_all_tasks_blocked()
        assert len(pool.pids()) == SPARE_CHILDREN
        assert await burst(pool, dirs, 6) == SPARE_CHILDREN
        await trio.testing.wait_all_tasks_blocked()
        assert len(pool.pids()) == 6
        assert await burst(pool, dirs, 6) == 6
        nursery.cancel_scope.cancel()
    await pool.close()


async def test_the_spare_bound_holds(dirs: RunDirs) -> None:
    """However large a burst, spares held and forks in flight together never pass the bound."""
    forks = Forks(gated=False)
    pool = pool_of(forks, dirs, max_spares=3, parallel=8)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pool.keep)
        for _ in range(3):
            await trio.testing.wait_all_tasks_blocked()
            await burst(pool, dirs, 10)
        await trio.testing.wait_all_tasks_blocked()
        assert len(pool.pids()) == 3
        assert forks.most_held <= 3
        nursery.cancel_scope.cancel()
    await pool.close()


async def test_no_spares_when_the_bound_is_zero(dirs: RunDirs) -> None:
    """``max_spares=0`` forks no spare: every run forks its own child."""
    forks = Forks(gated=False)
    pool = pool_of(forks, dirs, max_spares=0)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pool.keep)
        await trio.testing.wait_all_tasks_blocked()
        assert await burst(pool, dirs, 3) == 0
        await trio.testing.wait_all_tasks_blocked()
        assert pool.pids() == []
        nursery.cancel_scope.cancel()
    await pool.close()


async def test_spares_beyond_the_need_are_dropped_once_idle(
    dirs: RunDirs, autojump_clock: trio.testing.MockClock
) -> None:
    """When no burst has come for a while, the pool shrinks back to its resting size, killing
    and reaping the spares it no longer needs."""
    forks = Forks(gated=False)
    pool = pool_of(forks, dirs, max_spares=8)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pool.keep)
        await trio.testing.wait_all_tasks_blocked()
        await burst(pool, dirs, 6)
        await trio.testing.wait_all_tasks_blocked()
        assert len(pool.pids()) == 6
        await trio.sleep(120)
        assert len(pool.pids()) == SPARE_CHILDREN
        assert len(forks.killed) == 6 - SPARE_CHILDREN
        nursery.cancel_scope.cancel()
    await pool.close()


async def test_a_negative_bound_is_refused(dirs: RunDirs) -> None:
    """The bound is a count of processes: a negative one is a ``ValueError``."""
    with pytest.raises(ValueError, match="max_spares"):
        pool_of(Forks(gated=False), dirs, max_spares=-1)


def test_usable_cpus_follow_the_affinity() -> None:
    """Spares are forked as many at once as the CPUs this process may run on: a pinning (or a
    container's share) counts, not the machine's count."""
    mine = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, {min(mine)})
        assert usable_cpus() == 1
    finally:
        os.sched_setaffinity(0, mine)
    assert usable_cpus() == len(mine)
