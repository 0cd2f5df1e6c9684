"""Tests of the Bridge's spare children: forked ahead, used once, bound to their own directory."""

from __future__ import annotations

import os
import pathlib

import pytest
import trio
import trio.testing

from scriptbridge import Bridge
from scriptbridge._launcher import Child, ZygoteLauncher
from scriptbridge._limits import Limits
from scriptbridge._run_dirs import SPARES_DIR, TRASH_DIR, RunDir
from scriptbridge._spares import SPARE_CHILDREN


def launcher_of(bridge: Bridge) -> ZygoteLauncher:
    assert isinstance(bridge.launcher, ZygoteLauncher)
    return bridge.launcher


async def spares_ready(bridge: Bridge) -> list[int]:
    """The spares' pids, once all of them are ready."""
    with trio.fail_after(20):
        while len(launcher_of(bridge).spare_pids()) < SPARE_CHILDREN:
            await trio.sleep(0.01)
    return launcher_of(bridge).spare_pids()


async def test_a_run_takes_a_ready_spare_and_it_is_replaced(bridge: Bridge) -> None:
    """A run gets a spare (isolated, its ready already read); another is forked after it."""
    pids = await spares_ready(bridge)
    result = await bridge.run("write_text('out/a.txt', 'x')\n1 + 1\n")
    assert result.ok and result.value == 2
    assert result.isolation and result.isolation[0] == "restricted-python"
    assert result.outputs and result.outputs[0].startswith("runs/")
    new = await spares_ready(bridge)
    assert pids[0] not in new  # that spare served its run and is gone
    assert (bridge.workspace.root / result.outputs[0]).read_text() == "x"


class RecordingLauncher(ZygoteLauncher):
    """The zygote launcher, noting the pid of every child it hands a run."""

    def __init__(self) -> None:
        super().__init__()
        self.pids: list[int] = []

    async def spawn(self, run_dir: RunDir, limits: Limits) -> Child:
        child = await super().spawn(run_dir, limits)
        self.pids.append(child.pid)
        return child


async def test_every_run_gets_a_process_of_its_own(tmp_path: pathlib.Path) -> None:
    """Sequential and concurrent runs never share a child: a spare serves one run."""
    launcher = RecordingLauncher()
    async with Bridge(tmp_path / "ws", launcher=launcher) as bridge:
        await spares_ready(bridge)
        for _ in range(3):
            assert (await bridge.run("1\n")).ok
        async with trio.open_nursery() as nursery:
            for _ in range(5):
                nursery.start_soon(bridge.run, "2\n")
        assert len(launcher.pids) == 8
        assert len(set(launcher.pids)) == 8


async def test_a_run_cannot_see_a_spares_directory(bridge: Bridge) -> None:
    """A run's child reads only its own run directory: the spares' are elsewhere."""
    await spares_ready(bridge)
    spares = bridge.workspace.root / SPARES_DIR
    assert len(list(spares.iterdir())) == SPARE_CHILDREN
    result = await bridge.run(f"read_text('../{SPARES_DIR}/x/out/a')\n")
    assert result.error is not None and result.error.type == "PermissionError"


@pytest.mark.parametrize("limits", [Limits(cpu_s=3), Limits(max_out_files=5)])
async def test_other_limits_fork_their_own_child(bridge: Bridge, limits: Limits) -> None:
    """A run whose OS limits (its disk quota included) differ from the bridge's doesn't take a
    spare."""
    pids = await spares_ready(bridge)
    result = await bridge.run("2\n", limits=limits)
    assert result.ok and result.value == 2
    assert launcher_of(bridge).spare_pids() == pids


async def test_a_dead_spare_is_never_handed_out(bridge: Bridge) -> None:
    """A spare that died while waiting is dropped; the run gets a live child."""
    pids = await spares_ready(bridge)
    os.kill(pids[0], 9)
    with trio.fail_after(10):
        while not launcher_of(bridge).has_exited(pids[0]):
            await trio.sleep(0.01)
    result = await bridge.run("3\n")
    assert result.ok and result.value == 3


async def test_closing_removes_the_spares(tmp_path: pathlib.Path) -> None:
    """After the bridge closes no spare directory (nor .spares/) is left."""
    async with Bridge(tmp_path / "ws") as bridge:
        await spares_ready(bridge)
    assert not (tmp_path / "ws" / SPARES_DIR).exists()


async def test_a_finished_run_leaves_runs_at_once_and_is_removed_later(bridge: Bridge) -> None:
    """A run that wrote nothing is out of runs/ when run returns; its directory, thrown away in
    one rename, is removed in the background; one that wrote keeps its files."""
    root = bridge.workspace.root
    assert (await bridge.run("1 + 1\n")).ok
    assert list((root / "runs").iterdir()) == []
    wrote = await bridge.run("write_text('out/kept.txt', 'x')\n")
    (kept,) = wrote.outputs
    assert (root / kept).read_text() == "x"
    assert sorted(p.name for p in (root / kept).parent.parent.iterdir()) == ["out"]  # no refs/
    with trio.fail_after(10):  # the first run's directory goes once its child is reaped
        while list((root / TRASH_DIR).iterdir()):
            await trio.sleep(0.01)


async def test_closing_leaves_no_trash(tmp_path: pathlib.Path) -> None:
    """Closing right after runs (their directories not yet removed) leaves no .trash/."""
    async with Bridge(tmp_path / "ws") as bridge:
        for _ in range(3):
            assert (await bridge.run("1\n")).ok
    assert not (tmp_path / "ws" / TRASH_DIR).exists()
    assert list((tmp_path / "ws" / "runs").iterdir()) == []


async def test_trash_left_by_an_earlier_bridge_is_removed(tmp_path: pathlib.Path) -> None:
    """A run directory an earlier bridge left in .trash/ (it was killed) is removed too."""
    left = tmp_path / "ws" / TRASH_DIR / "0123456789abcdef"
    (left / "out").mkdir(parents=True)
    (left / "refs").mkdir()
    async with Bridge(tmp_path / "ws"):
        await trio.testing.wait_all_tasks_blocked()
        assert not left.exists()


async def test_the_bridge_passes_its_spare_bound_on(tmp_path: pathlib.Path) -> None:
    """``Bridge(max_spares=0)`` keeps no spare and still runs; with a launcher of one's own the
    keyword is refused, as is a negative bound."""
    async with Bridge(tmp_path / "ws", max_spares=0) as bridge:
        assert (await bridge.run("1 + 1\n")).value == 2
        await trio.testing.wait_all_tasks_blocked()
        assert launcher_of(bridge).spare_pids() == []
    with pytest.raises(ValueError, match="max_spares"):
        Bridge(tmp_path / "ws", launcher=ZygoteLauncher(), max_spares=2)
    with pytest.raises(ValueError, match="max_spares"):
        Bridge(tmp_path / "ws", max_spares=-1)
