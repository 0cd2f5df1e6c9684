"""A run returns once its child is killed and can run no more code, not once it is reaped
(``scriptbridge._reaping``): real zygote, real children, the zygote stopped with SIGSTOP to
show which step waits for it."""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import threading
from collections.abc import Iterator

import pytest
import trio
from processes import process_state
from spare_children import spares_ready

from sandbox import ChildExit, ChildLimits, ZygoteProcess
from scriptbridge import Bridge, _launcher, _supervisor, python_tool
from scriptbridge._launcher import Child, ZygoteLauncher
from scriptbridge._run_dirs import TRASH_DIR, RunDirs
from scriptbridge._zygote_link import ZygoteLink


async def stop(pid: int) -> None:
    """Send ``pid`` SIGSTOP and return once it has stopped (a signal is taken when the process
    next runs, which a busy machine may put off)."""
    os.kill(pid, signal.SIGSTOP)
    with trio.fail_after(30):
        while process_state(pid) != "T":
            await trio.sleep(0.001)


@contextlib.contextmanager
def resumed(pid: int) -> Iterator[None]:
    """Send ``pid`` SIGCONT as the block ends, however it ends (a stopped zygote would hold the
    bridge's close)."""
    try:
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


async def test_a_run_that_ended_cleanly_returns_without_waiting_for_the_zygote(
    bridge: Bridge,
) -> None:
    """The zygote reaps children; stopped, it reaps none. A script that stops it and returns
    still gets its result at once: the host killed the child itself (its pidfd), found its
    out/ empty (its tmpfs's fd), and left the reap for later. The child is a zombie then."""
    zygote = bridge.launcher.zygote_pid  # type: ignore[attr-defined]
    assert zygote is not None
    child = (await spares_ready(bridge))[0]

    @python_tool
    async def stop_the_zygote() -> str:
        await stop(zygote)
        return "stopped"

    bridge.add_tool(stop_the_zygote)
    fired: list[int] = []
    with resumed(zygote):
        async with trio.open_nursery() as nursery:
            # else a run that waits for the reap hangs here: then it returns only after this
            nursery.start_soon(_resume_after, zygote, 60.0, fired)
            result = await bridge.run("tools.stop_the_zygote()\n'done'")
            zygote_state = process_state(zygote)
            with trio.fail_after(30):
                while process_state(child) not in ("Z", None):
                    await trio.sleep(0.01)
            child_state = process_state(child)
            nursery.cancel_scope.cancel()
    assert result.ok and result.value == "done" and result.outputs == []
    assert not fired and zygote_state == "T", "the run waited for the zygote"
    assert child_state == "Z"  # killed, waiting for its (stopped) parent's reap


async def _resume_after(pid: int, delay: float, fired: list[int] | None = None) -> None:
    """Send ``pid`` SIGCONT after ``delay`` seconds (noted in ``fired``)."""
    await trio.sleep(delay)
    os.kill(pid, signal.SIGCONT)
    if fired is not None:
        fired.append(pid)


async def test_a_run_that_wrote_to_out_is_reaped_first_and_its_files_are_on_the_disk(
    bridge: Bridge,
) -> None:
    """What the script wrote is copied to the disk at the reap: its run waits for it, and
    ``outputs`` lists the files, there when ``run`` returns."""
    zygote = bridge.launcher.zygote_pid  # type: ignore[attr-defined]
    await spares_ready(bridge)

    @python_tool
    async def stop_the_zygote_for_a_while() -> str:
        await stop(zygote)
        nursery.start_soon(_resume_after, zygote, 0.5)  # after the stop, whenever that is
        return "stopped"

    bridge.add_tool(stop_the_zygote_for_a_while)
    with resumed(zygote):
        async with trio.open_nursery() as nursery:
            result = await bridge.run(
                "write_text('out/kept.txt', 'x' * 10)\ntools.stop_the_zygote_for_a_while()\n'done'"
            )
    assert result.ok, result.error
    assert process_state(zygote) != "T"  # it waited for the zygote's copy
    (kept,) = result.outputs
    assert (bridge.workspace.root / kept).read_text() == "x" * 10


async def test_a_failed_script_returns_early_too_and_a_crash_is_reaped_first(
    bridge: Bridge,
) -> None:
    """A script that raised said error: its result is whole without the reap. A child that
    died without a word needs its exit status: that one is reaped before its run returns."""
    failed = await bridge.run("raise ValueError('no')")
    assert not failed.ok and failed.error is not None and "no" in failed.error.message
    crashed = await bridge.run("x = 'a' * (1 << 34)")  # past its address space
    assert not crashed.ok and crashed.error is not None


async def test_closing_the_bridge_waits_for_every_reap(tmp_path: pathlib.Path) -> None:
    """Runs that returned before their reap: once the bridge is closed, none of their children
    is left, not even as a zombie, and no run directory is left in runs/ or the trash."""
    pids: list[int] = []
    async with Bridge(tmp_path / "ws") as bridge:
        for _ in range(6):
            pids.extend((await spares_ready(bridge))[:1])
            assert (await bridge.run("1")).ok
    assert [pid for pid in pids if process_state(pid) is not None] == []
    assert list((tmp_path / "ws" / "runs").iterdir()) == []
    assert not (tmp_path / "ws" / TRASH_DIR).exists()


async def test_closing_with_the_zygote_hung_is_bounded_and_leaves_no_process(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A close that finds a reap pending and the zygote hung (stopped) waits for it at most
    REAP_TIMEOUT_S, then gives the zygote ZYGOTE_STOP_TIMEOUT_S before killing it; its children
    die with it. No process, zombie or run directory is left."""
    monkeypatch.setattr(_supervisor, "REAP_TIMEOUT_S", 0.5)
    monkeypatch.setattr(_launcher, "ZYGOTE_STOP_TIMEOUT_S", 0.5)
    zygotes: list[int] = []
    pids: list[int] = []

    @python_tool
    async def stop_the_zygote() -> str:
        await stop(zygotes[0])
        return "stopped"

    with contextlib.ExitStack() as stack:
        async with Bridge(tmp_path / "ws") as bridge:
            zygote = bridge.launcher.zygote_pid  # type: ignore[attr-defined]
            zygotes.append(zygote)
            stack.enter_context(resumed(zygote))  # only if the test fails first
            watchdog = threading.Timer(30, os.kill, (zygote, signal.SIGCONT))
            watchdog.start()  # a close that doesn't bound its waits fails here, never hangs
            stack.callback(watchdog.cancel)
            bridge.add_tool(stop_the_zygote)
            pids.extend(await spares_ready(bridge))
            result = await bridge.run("tools.stop_the_zygote()\n'done'")
            assert result.ok and result.value == "done"
            assert process_state(zygote) == "T"
            closing = trio.current_time()
        took = trio.current_time() - closing
        stopped = process_state(zygote)
    # bounded by the two timeouts (0.5 s each, and slack): unbounded, the watchdog ends it
    assert took < 30 / 2, f"the close took {took:.1f} s"
    assert stopped is None, "the hung zygote is still there"
    with trio.fail_after(30):  # its children, reparented, are reaped by whoever adopted them
        while left := [pid for pid in pids if process_state(pid) is not None]:
            await trio.sleep(0.05)
    assert left == []
    assert list((tmp_path / "ws" / "runs").iterdir()) == []
    assert not (tmp_path / "ws" / TRASH_DIR).exists()


def test_a_run_directory_finished_unreaped_leaves_runs_at_once_and_goes_once_reaped(
    tmp_path: pathlib.Path,
) -> None:
    """The directory of a run whose child is killed but not reaped leaves runs/ at once; what
    lands in its out/ after that (a write under way at the kill) goes with it, after the reap,
    not before."""
    dirs = RunDirs(tmp_path)
    dirs.open()
    run_dir = dirs.for_run("r1")
    run_dir.make()
    run_dir.finish_unreaped()
    assert not run_dir.path.exists()
    (hidden,) = (tmp_path / TRASH_DIR).iterdir()
    (hidden / "out" / "late.txt").write_text("late")

    async def sweep_once() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(dirs.sweep)
            await trio.sleep(0.05)
            assert hidden.exists()  # not before the reap
            run_dir.reaped()
            with trio.fail_after(5):
                while hidden.exists():
                    await trio.sleep(0.01)
            nursery.cancel_scope.cancel()

    trio.run(sweep_once)
    dirs.close()
    assert not (tmp_path / TRASH_DIR).exists()


def pidfd_pid(fd: int) -> int:
    with open(f"/proc/self/fdinfo/{fd}") as info:
        for line in info:
            if line.startswith("Pid:"):
                return int(line.split()[1])
    raise AssertionError(f"fd {fd} is no pidfd")


async def test_the_zygote_hands_the_host_the_childs_pidfd_and_its_tmpfs(
    tmp_path: pathlib.Path,
) -> None:
    """``spawned`` carries the child's pidfd (and, with the quota layer, its tmpfs's fd); a
    client that reads replies without room for fds (the sync one) is left none."""
    zygote = await trio.to_thread.run_sync(ZygoteProcess.start)
    try:
        link = ZygoteLink(zygote)
        async with trio.open_nursery() as nursery:
            await nursery.start(link.serve)
            (tmp_path / "out").mkdir()
            (tmp_path / "refs").mkdir()
            spawned = await link.spawn(tmp_path, ChildLimits())
            assert spawned.pidfd is not None and pidfd_pid(spawned.pidfd) == spawned.pid
            if spawned.out_fd is not None:  # the quota layer (the zygote is root)
                assert os.fstatvfs(spawned.out_fd).f_files > 0
            signal.pidfd_send_signal(spawned.pidfd, signal.SIGKILL)
            status = await link.wait(spawned.pid, 10)
            assert status.returncode == -signal.SIGKILL
            for fd in (spawned.to_child, spawned.from_child, spawned.pidfd, spawned.out_fd):
                if fd is not None:
                    os.close(fd)
            nursery.cancel_scope.cancel()
    finally:
        await trio.to_thread.run_sync(zygote.close)


def open_fds() -> set[int]:
    return {int(name) for name in os.listdir("/proc/self/fd")}


def test_a_sync_client_of_the_zygote_is_left_no_fd(tmp_path: pathlib.Path) -> None:
    """The blocking client reads replies with ``recv``: the kernel drops the fds of spawned."""
    (tmp_path / "out").mkdir()
    (tmp_path / "refs").mkdir()
    with ZygoteProcess.start() as zygote:
        client = zygote.client
        before = open_fds()
        spawned = client.spawn(tmp_path, ChildLimits())
        client.kill(spawned.pid)
        client.wait(spawned.pid, 10)
        os.close(spawned.to_child)
        os.close(spawned.from_child)
        assert open_fds() - before == set()


class FailingReaper(ZygoteLauncher):
    """The zygote launcher whose first reap raises, as a launcher with a bug would."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    async def reap(self, child: Child, *, exits_on_its_own: bool) -> ChildExit | None:
        if not self.failed:
            self.failed = True
            raise RuntimeError("a launcher's bug")
        return await super().reap(child, exits_on_its_own=exits_on_its_own)


async def test_a_reap_that_raises_after_its_run_returned_is_logged_and_the_bridge_goes_on(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A reap after its run returned has no caller to raise to: what it raises is logged, and
    the next runs, their reaps and the bridge's close go on."""
    launcher = FailingReaper()
    async with Bridge(tmp_path / "ws", launcher=launcher) as bridge:
        for _ in range(3):
            assert (await bridge.run("1")).ok
    assert launcher.failed
    assert "couldn't reap child" in caplog.text
