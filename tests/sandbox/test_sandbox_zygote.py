"""The zygote: one fresh child per request, reaped and reported; no secrets, no leaks."""

from __future__ import annotations

import os
import select
import signal
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from escapes import REAL_SYS

from sandbox import BlockingChannel, ZygoteError, ZygoteProcess
from sandbox._isolation import ID_LOCK_DIRS, python_paths
from sandbox.protocol import Ready, RunError
from sandbox.testing import RunRecord, run_script

Run = Callable[..., RunRecord]


def wait_exited(pidfd: int, timeout: float = 10.0) -> bool:
    """Whether the process behind ``pidfd`` exits within ``timeout`` seconds."""
    readable, _, _ = select.select([pidfd], [], [], timeout)
    return bool(readable)


def test_every_run_gets_a_fresh_child(run: Run) -> None:
    """Each run is served by a new process that has exited when the run returns."""
    records = [run("1") for _ in range(3)]
    pids = {record.ready.pid for record in records if record.ready is not None}
    assert len(pids) == 3
    assert all(record.exit is not None and record.exit.returncode == 0 for record in records)


def test_zygote_has_an_empty_environment(zygote: ZygoteProcess) -> None:
    """The zygote was started with no environment at all."""
    with open(f"/proc/{zygote.pid}/environ", "rb") as environ:
        assert environ.read() == b""


def test_the_zygote_and_its_children_never_load_pydantic(zygote: ZygoteProcess) -> None:
    """Nothing of pydantic is mapped into the zygote (so into no child it forks): the host
    validates what a child sends, and the child side holds plain classes."""
    with open(f"/proc/{zygote.pid}/maps") as maps:
        assert "pydantic" not in maps.read()


def test_zygote_holds_no_extra_handles(zygote: ZygoteProcess) -> None:
    """Besides fds 0-2, the zygote holds only its socket, its epoll fd, child pidfds, the
    Python installation's directories (named in each child's landlock rules) and, as root, its
    own network namespace, the network namespace made for the next child and the lock files
    of the blocks of child ids it holds."""
    expected = ("socket:", "anon_inode:[eventpoll]", "anon_inode:[pidfd]")
    if os.geteuid() == 0:
        expected += ("net:[", *(f"{directory}/" for directory in ID_LOCK_DIRS))
    python_dirs = set(python_paths())
    for fd in os.listdir(f"/proc/{zygote.pid}/fd"):
        if int(fd) <= 2:
            continue
        target = os.readlink(f"/proc/{zygote.pid}/fd/{fd}")
        assert target.startswith(expected) or target in python_dirs, target


def test_kill_and_wait(zygote: ZygoteProcess, workspace: Path) -> None:
    """A child can be killed through the zygote; wait reports the signal; kill after the
    exit reports no delivery; a second wait is an error."""
    child = zygote.client.spawn(workspace)
    try:
        channel = BlockingChannel(child.from_child, child.to_child)
        assert isinstance(channel.receive_child(), Ready)
        assert zygote.client.kill(child.pid)
        exit = zygote.client.wait(child.pid, timeout=10)
        assert exit.returncode == -signal.SIGKILL
        assert not zygote.client.kill(child.pid)
        with pytest.raises(ZygoteError):
            zygote.client.wait(child.pid, timeout=10)
    finally:
        os.close(child.to_child)
        os.close(child.from_child)


def test_child_exits_when_the_host_closes_the_channel(
    zygote: ZygoteProcess, workspace: Path
) -> None:
    """A child whose host goes away before ``start`` exits on its own."""
    child = zygote.client.spawn(workspace)
    os.close(child.to_child)
    os.close(child.from_child)
    assert zygote.client.wait(child.pid, timeout=10).returncode == 3


def test_setup_failure_is_reported(zygote: ZygoteProcess, tmp_path: Path) -> None:
    """A missing workspace is reported as SandboxSetupFailed, and the child exits."""
    record = run_script(zygote.client, "1", workspace=tmp_path / "missing")
    assert isinstance(record.final, RunError) and record.final.type == "SandboxSetupFailed"
    assert record.exit is not None and record.exit.returncode == 71


def test_concurrent_spawns(zygote: ZygoteProcess, workspace: Path) -> None:
    """Threads may drive runs through one client at once."""
    results: list[RunRecord] = []
    lock = threading.Lock()

    def one(i: int) -> None:
        record = run_script(zygote.client, f"{i} * 2", workspace=workspace)
        with lock:
            results.append(record)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(record.value for record in results) == [i * 2 for i in range(8)]


def test_no_fds_leak_in_the_host(run: Run) -> None:
    """Runs leave no fd open in the host process."""
    run("1")
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(5):
        run("print('x')\n1")
        run("raise ValueError('x')")
    assert len(os.listdir("/proc/self/fd")) == before


def test_close_kills_children(private_zygote: ZygoteProcess, workspace: Path) -> None:
    """Closing the zygote kills the children it still has, and the zygote exits."""
    child = private_zygote.client.spawn(workspace)
    pidfd = os.pidfd_open(child.pid)
    try:
        private_zygote.close()
        assert wait_exited(pidfd)
        assert private_zygote.process.returncode == 0
    finally:
        os.close(pidfd)
        os.close(child.to_child)
        os.close(child.from_child)


def test_children_die_with_the_zygote(private_zygote: ZygoteProcess, workspace: Path) -> None:
    """If the zygote is killed, its children get SIGKILL (parent-death signal)."""
    child = private_zygote.client.spawn(workspace)
    pidfd = os.pidfd_open(child.pid)
    try:
        channel = BlockingChannel(child.from_child, child.to_child)
        assert isinstance(channel.receive_child(), Ready)  # isolation, pdeathsig included, done
        private_zygote.process.kill()
        assert wait_exited(pidfd)
    finally:
        os.close(pidfd)
        os.close(child.to_child)
        os.close(child.from_child)


def test_dead_zygote_is_reported(private_zygote: ZygoteProcess, workspace: Path) -> None:
    """Requests to a zygote that died raise ZygoteError."""
    private_zygote.process.kill()
    private_zygote.process.wait()
    with pytest.raises(ZygoteError):
        private_zygote.client.spawn(workspace)


def test_host_environment_never_reaches_a_child(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A variable in the host's environment when the zygote starts is visible neither to the
    zygote nor to a child, even one running plain Python with the OS layers off."""
    monkeypatch.setenv("SCRIPTBRIDGE_TEST_SECRET", "s3cret")
    source = REAL_SYS + "[dict(os.environ), open('/proc/self/environ', 'rb').read()]"
    with ZygoteProcess.start() as zygote:
        with open(f"/proc/{zygote.pid}/environ", "rb") as environ:
            assert b"s3cret" not in environ.read()
        record = run_script(
            zygote.client,
            source.replace("open(", "os.fdopen(os.open(").replace(", 'rb')", ", 0), 'rb')"),
            workspace=workspace,
            disable={"restricted-python", "rlimits", "netns", "uid", "landlock", "seccomp"},
        )
    assert record.ok, record.final
    assert record.value == [{}, b""]
