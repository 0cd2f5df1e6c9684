"""The ``quota`` layer: a run's out/ is a size- and inode-limited tmpfs in the zygote's own
mount namespace, copied to the disk within the quota once the child has exited.

The scripts here run with the language layer off (plain ``exec``) and reach ``os`` through the
``object.__subclasses__`` walk, so that what stops them is the OS, not ``write_text``.
"""

from __future__ import annotations

import os
import select
import signal
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from escapes import REAL_SYS

from sandbox import OS_LAYERS, BlockingChannel, ChildLimits, ZygoteProcess
from sandbox.protocol import Done, Ready, RunError, RunLimits, Start
from sandbox.testing import RunRecord, run_script

Run = Callable[..., RunRecord]

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the quota layer mounts: root only")

ATTEMPT = """
def attempt(action):
    try:
        return ["ok", action()]
    except OSError as exc:
        return ["denied", exc.errno]
"""
PRELUDE = REAL_SYS + ATTEMPT

LANGUAGE_OFF = frozenset({"restricted-python"})
SMALL = ChildLimits(max_out_bytes=1 << 20, max_out_files=50)


def on_disk(out: Path) -> tuple[int, int]:
    """(bytes of file contents, entries) under ``out``, never following a symlink."""
    size = entries = 0
    for directory, dirs, files in os.walk(out):
        entries += len(dirs) + len(files)
        size += sum(os.lstat(os.path.join(directory, name)).st_size for name in files)
    return size, entries


def mounted_anywhere(path: Path) -> list[str]:
    """Every process's mount table lines that name ``path``, machine-wide."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/mountinfo") as table:
                found += [f"{pid}: {line}" for line in table if str(path) in line]
        except OSError:
            continue
    return found


def test_the_layer_is_reported(run: Run) -> None:
    """A default child reports ``quota`` in force; disabled, it is skipped with the reason."""
    assert "quota" in run("1").isolation
    record = run("1", disable={"quota"})
    assert record.ready is not None and "quota" not in record.isolation
    assert ("quota", "disabled") in {(s.layer, s.reason) for s in record.ready.skipped}
    assert "quota" in OS_LAYERS


def test_many_files_from_plain_python_are_stopped(run: Run, workspace: Path) -> None:
    """Plain os.open past max_out_files fails in the script (ENOSPC); the run ends with
    DiskQuotaExceeded, found by the zygote, and the disk keeps at most the quota."""
    code = (
        "make = lambda i: os.close(os.open(f'out/f{i}', os.O_CREAT | os.O_WRONLY))\n"
        "[attempt(lambda: make(i)) for i in range(200)]"
    )
    record = run(PRELUDE + code, disable=LANGUAGE_OFF, limits=SMALL)
    assert isinstance(record.final, Done)  # the child said nothing of it: the zygote found it
    assert record.error_type == "DiskQuotaExceeded", record.final
    size, entries = on_disk(workspace / "out")
    assert 0 < entries <= 50 and size == 0


def test_nested_directories_from_plain_python_are_stopped(run: Run, workspace: Path) -> None:
    """mkdir past max_out_files, each inside the last, is stopped the same way."""
    code = """
path = "out"
for i in range(200):
    path += "/d"
    if attempt(lambda: os.mkdir(path))[0] == "denied":
        break
i
"""
    record = run(PRELUDE + code, disable=LANGUAGE_OFF, limits=SMALL)
    assert record.error_type == "DiskQuotaExceeded", record.final
    assert on_disk(workspace / "out")[1] <= 50


def test_one_large_file_from_plain_python_is_stopped(run: Run, workspace: Path) -> None:
    """os.write past max_out_bytes fails (RLIMIT_FSIZE follows the quota); the run ends with
    DiskQuotaExceeded and the file past the quota is not kept."""
    code = """
fd = os.open("out/big", os.O_CREAT | os.O_WRONLY)
chunk = b"x" * 65536
written = 0
while written < 4 * 2 ** 20 and attempt(lambda: os.write(fd, chunk))[0] == "ok":
    written += len(chunk)
written
"""
    record = run(PRELUDE + code, disable=LANGUAGE_OFF, limits=SMALL)
    assert record.error_type == "DiskQuotaExceeded", record.final
    assert on_disk(workspace / "out")[0] <= 1 << 20


def test_a_sparse_file_past_the_quota_is_not_copied(run: Run, workspace: Path) -> None:
    """A file made huge and sparse (the tmpfs holds no page of it) counts its size: with the
    file-size rlimit off it is made, and the zygote neither copies it nor lets the run pass."""
    code = """
fd = os.open("out/sparse", os.O_CREAT | os.O_WRONLY)
[attempt(lambda: os.ftruncate(fd, 2 ** 40)), os.fstat(fd).st_size]
"""
    record = run(PRELUDE + code, disable=LANGUAGE_OFF | {"rlimits"}, limits=SMALL)
    assert record.error_type == "DiskQuotaExceeded", record.final
    assert on_disk(workspace / "out")[0] == 0


def test_hard_links_count_once_each(run: Run, workspace: Path) -> None:
    """Each hard link is an entry, and each is copied as the file it names: links to one file
    can't multiply it on the disk past the quota."""
    code = """
fd = os.open("out/data", os.O_CREAT | os.O_WRONLY)
os.write(fd, b"x" * 300_000)
os.close(fd)
[attempt(lambda: os.link("out/data", f"out/link{i}")) for i in range(10)]
"""
    record = run(PRELUDE + code, disable=LANGUAGE_OFF, limits=SMALL)
    assert record.error_type == "DiskQuotaExceeded", record.final
    size, entries = on_disk(workspace / "out")
    assert size <= 1 << 20 and entries <= 4


def test_the_copy_keeps_only_regular_files_and_directories(run: Run, workspace: Path) -> None:
    """Symlinks and fifos are not copied; files and directories get fixed modes (no set-id
    bit), and names the kernel took are kept as they are, inside out/ only."""
    code = """
os.mkdir("out/dir")
for name in ("out/dir/a.txt", "out/odd\\nname\\\\..", b"out/\\xff\\xfe"):
    fd = os.open(name, os.O_CREAT | os.O_WRONLY, 0o6777)
    os.write(fd, b"data")
    os.close(fd)
os.symlink("/etc/passwd", "out/link")
os.symlink("..", "out/dir/up")
os.mkfifo("out/fifo")
1
"""
    record = run(PRELUDE + code, disable=LANGUAGE_OFF | {"landlock"})
    assert record.ok, record.final
    out = os.fsencode(workspace / "out")
    assert sorted(os.listdir(out)) == [b"dir", b"odd\nname\\..", b"\xff\xfe"]
    assert os.listdir(os.path.join(out, b"dir")) == [b"a.txt"]
    for path in (os.path.join(out, b"dir", b"a.txt"), os.path.join(out, b"\xff\xfe")):
        info = os.lstat(path)
        assert stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o644
        assert Path(os.fsdecode(path)).read_bytes() == b"data"
    assert stat.S_IMODE(os.lstat(os.path.join(out, b"dir")).st_mode) == 0o755
    assert sorted(os.listdir(workspace)) == ["out", "refs"]


def test_a_run_within_the_quota_leaves_its_files(run: Run, workspace: Path) -> None:
    """A run that stays within the quota ends well, and every byte it wrote is on the disk."""
    record = run(
        "write_text('out/a/b.txt', 'x' * 1000)\nwrite_text('out/c.txt', 'y')\n1",
        limits=SMALL,
        run_limits=RunLimits(max_out_bytes=1 << 20, max_out_files=50),
    )
    assert record.ok, record.final
    assert on_disk(workspace / "out") == (1001, 3)
    assert (workspace / "out" / "a" / "b.txt").read_text() == "x" * 1000


def test_a_full_tmpfs_under_write_text_is_the_quota(run: Run) -> None:
    """When the OS refuses a write_text (ENOSPC from the tmpfs, the child's own counts being
    larger), the run still ends with DiskQuotaExceeded, not an OSError."""
    record = run(
        "for i in range(20):\n    write_text(f'out/{i}', 'x')\n",
        limits=ChildLimits(max_out_files=5),
        run_limits=RunLimits(max_out_files=1000),
    )
    assert isinstance(record.final, RunError) and record.final.type == "DiskQuotaExceeded"


def test_the_file_size_rlimit_follows_the_quota(run: Run) -> None:
    """RLIMIT_FSIZE is the smaller of max_file_bytes and one byte past max_out_bytes."""
    code = "resource = sysmod.modules['resource']\nresource.getrlimit(resource.RLIMIT_FSIZE)"
    limits = ChildLimits(max_file_bytes=12345, max_out_bytes=5000)
    record = run(PRELUDE + code, disable=LANGUAGE_OFF, limits=limits)
    assert record.value == [5001, 5001]


def test_the_mount_is_never_the_hosts(zygote: ZygoteProcess, workspace: Path) -> None:
    """The zygote lives in a mount namespace of its own: the tmpfs on a child's out/ is in its
    table and in no table of the host's, and is gone once the child's exit is reported."""
    assert os.readlink("/proc/self/ns/mnt") != os.readlink(f"/proc/{zygote.pid}/ns/mnt")
    child = zygote.client.spawn(workspace)
    try:
        assert isinstance(BlockingChannel(child.from_child, child.to_child).receive_child(), Ready)
        found = mounted_anywhere(workspace / "out")
        assert found and all(
            line.startswith(f"{zygote.pid}: ") or line.startswith(f"{child.pid}: ")
            for line in found
        ), found
    finally:
        os.close(child.to_child)
        os.close(child.from_child)
    zygote.client.wait(child.pid, timeout=10)
    assert mounted_anywhere(workspace / "out") == []


def test_a_killed_zygote_leaves_no_mount(private_zygote: ZygoteProcess, workspace: Path) -> None:
    """A zygote killed while its child runs takes every mount it made with it: no process on
    the machine has the out/ mounted afterwards."""
    child = private_zygote.client.spawn(workspace)
    pidfd = os.pidfd_open(child.pid)
    try:
        assert isinstance(BlockingChannel(child.from_child, child.to_child).receive_child(), Ready)
        assert mounted_anywhere(workspace / "out")
        private_zygote.process.send_signal(signal.SIGKILL)
        private_zygote.process.wait()
        assert select.select([pidfd], [], [], 10)[0]  # the child died with it
    finally:
        os.close(pidfd)
        os.close(child.to_child)
        os.close(child.from_child)
    assert mounted_anywhere(workspace / "out") == []


def test_the_mount_follows_its_directory_when_renamed(
    zygote: ZygoteProcess, tmp_path: Path
) -> None:
    """A spare's directory is renamed to its run's after the child isolated itself: the tmpfs
    moves with it, and the files land on the disk under the new name."""
    before, after = tmp_path / "spare", tmp_path / "run"
    (before / "refs").mkdir(parents=True)
    (before / "out").mkdir()
    child = zygote.client.spawn(before)
    channel = BlockingChannel(child.from_child, child.to_child)
    try:
        ready = channel.receive_child()
        assert isinstance(ready, Ready) and "quota" in ready.isolation
        os.rename(before, after)
        channel.send(Start(source="write_text('out/moved.txt', 'here')\n'ok'"))
        assert channel.receive_child() == Done(value="ok")
    finally:
        channel.close()
    zygote.client.wait(child.pid, timeout=10)
    assert (after / "out" / "moved.txt").read_text() == "here"


def test_a_second_child_in_the_same_out_goes_without(
    zygote: ZygoteProcess, workspace: Path
) -> None:
    """Two children can't share one out/ mount: a second child spawned on an out/ another
    live child's tmpfs covers reports the layer skipped, and the first keeps its own."""
    first = zygote.client.spawn(workspace)
    try:
        assert isinstance(BlockingChannel(first.from_child, first.to_child).receive_child(), Ready)
        record = run_script(zygote.client, "1", workspace=workspace)
        assert record.ready is not None and "quota" not in record.isolation
        (reason,) = [s.reason for s in record.ready.skipped if s.layer == "quota"]
        assert "another child" in reason
    finally:
        os.close(first.to_child)
        os.close(first.from_child)
    zygote.client.wait(first.pid, timeout=10)
