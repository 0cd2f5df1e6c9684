"""Each OS isolation layer is in force inside a real child, and reported.

The scripts here run with the language layer off (plain ``exec``) and reach ``os`` through the
classic ``object.__subclasses__`` walk, to show that the OS layers hold on their own even when
the Python-level restrictions are bypassed. Where a denial could come from more than one layer,
the other layers are disabled so that the one under test is the only one left.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import signal
import socket
import subprocess
from collections.abc import Callable, Collection, Iterator
from pathlib import Path

import pytest

from sandbox import BlockingChannel, SpawnedChild, ZygoteProcess
from sandbox._isolation import OS_LAYERS
from sandbox._isolation._probe import probe_layers
from sandbox._isolation._process import CHILD_ID_BASE, CHILD_ID_SLOTS, ChildIds
from sandbox._isolation._seccomp import (
    _CLOCK_CALLS,
    _CLONE,
    _CLONE3,
    _COMMAND_CALLS,
    _SELF_CALLS,
    _SIGNAL_CALLS,
    _SYSCALLS,
    _WHO_CALLS,
    DENIED_SYSCALLS,
    build_seccomp_filter,
    seccomp_template,
)
from sandbox.protocol import LAYER_NAMES, ChildLimits, Ready
from sandbox.testing import RunRecord

Run = Callable[..., RunRecord]

# Reaches the real os/sys/builtins from plain Python with the sandbox's builtins.
PRELUDE = """
for klass in ().__class__.__base__.__subclasses__():
    if klass.__name__ == "_wrap_close":
        sysmod = klass.__init__.__globals__["sys"]
        break
os = sysmod.modules["os"]
realopen = sysmod.modules["builtins"].open
def attempt(action):
    try:
        return ["ok", action()]
    except OSError as exc:
        return ["denied", exc.errno]
"""

ALL_OS = set(OS_LAYERS)
NAMESPACE_LAYERS = ("netns", "pidns", "ipcns", "uid", "quota")


def _user_namespaces_work() -> bool:
    """Whether this machine gives an ordinary user namespaces (asked of util-linux's
    ``unshare``, not of the code under test)."""
    try:
        done = subprocess.run(
            ["unshare", "--user", "--map-root-user", "--net", "--ipc", "--pid", "--fork", "true"],
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


ROOT = os.geteuid() == 0 or _user_namespaces_work()
"""Whether the namespace layers apply here: as root, or through user namespaces."""
REAL_ROOT = os.geteuid() == 0
needs_real_root = pytest.mark.skipif(
    not REAL_ROOT,
    reason="as an ordinary user a child's own uid exists in its user namespace only: on the "
    "host every child is the user (SECURITY.md, Layers for every user)",
)
needs_root = pytest.mark.skipif(
    not ROOT, reason="the namespace layers need root or unprivileged user namespaces"
)


def only(*layers: str) -> set[str]:
    """The disable set that leaves just ``layers`` (and the language layer off)."""
    return {"restricted-python", *(ALL_OS - set(layers))}


@pytest.fixture
def escape(run: Run) -> Callable[..., RunRecord]:
    """Run ``attempt(...)``-style code after the prelude, language layer off."""

    def runner(code: str, *, keep: tuple[str, ...] = OS_LAYERS, **kwargs: object) -> RunRecord:
        record = run(PRELUDE + code, disable=only(*keep), **kwargs)
        assert record.ok, record.final
        return record

    return runner


@contextlib.contextmanager
def idle_child(
    zygote: ZygoteProcess, directory: Path, disable: Collection[str] = ()
) -> Iterator[SpawnedChild]:
    """A child of another run (every layer on but those in ``disable``), ready and waiting for
    its script; let go and reaped at the end."""
    (directory / "refs").mkdir(parents=True)
    (directory / "out").mkdir()
    os.chmod(directory, 0o755)
    child = zygote.client.spawn(directory, ChildLimits(), disable=disable)
    try:
        assert isinstance(BlockingChannel(child.from_child, child.to_child).receive_child(), Ready)
        yield child
    finally:
        os.close(child.to_child)
        os.close(child.from_child)
        zygote.client.wait(child.pid, timeout=10)


@pytest.fixture
def other_run(zygote: ZygoteProcess, tmp_path: Path) -> Iterator[int]:
    """The pid of a concurrent, unrelated run's child (see :func:`idle_child`)."""
    with idle_child(zygote, tmp_path / "other") as child:
        yield child.pid


def ids_of(pid: int) -> list[list[int]]:
    """The real, effective, saved and file-system uids and gids of ``pid``, from /proc."""
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return [
        [int(field) for field in line.split()[1:]]
        for line in lines
        if line.startswith(("Uid:", "Gid:"))
    ]


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A TCP socket listening on the host's loopback."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server


def test_all_layers_reported(run: Run) -> None:
    """A default child reports every layer this machine can apply, and skips none."""
    record = run("1")
    assert record.ready is not None
    expected = [layer for layer in LAYER_NAMES if ROOT or layer not in NAMESPACE_LAYERS]
    assert record.isolation == expected
    assert all(skipped.layer not in expected for skipped in record.ready.skipped)


def test_disabled_layers_are_reported_with_reason(run: Run) -> None:
    """Disabled layers are listed in ``skipped`` with the reason, not silently left out."""
    record = run("1", disable=ALL_OS)
    assert record.ready is not None
    assert record.isolation == ["restricted-python"]
    assert {(s.layer, s.reason) for s in record.ready.skipped} == {
        (layer, "disabled") for layer in OS_LAYERS
    }


def test_probe_layers_reports_the_pid_namespace() -> None:
    """doctor's probe says whether a child can get a PID namespace of its own: yes as root."""
    (probe,) = [probe for probe in probe_layers() if probe.layer == "pidns"]
    assert probe.available == ROOT
    assert probe.reason is None if ROOT else probe.reason


def test_probe_layers_is_consistent() -> None:
    """``probe_layers`` names every layer once; a reason is given exactly when unavailable."""
    probes = probe_layers()
    assert [probe.layer for probe in probes] == list(LAYER_NAMES)
    for probe in probes:
        assert probe.available == (probe.reason is None)
        assert probe.available or probe.reason


def test_hygiene(escape: Callable[..., RunRecord], workspace: Path) -> None:
    """Only fds 0-2 and the channel are open, the environment is empty, the cwd is the
    workspace, and the child leads its own session."""
    code = """
def is_open(fd):
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False
[[fd for fd in range(256) if is_open(fd)], dict(os.environ), os.getcwd(),
 os.getsid(0) == os.getpid(), os.getpgid(0) == os.getpid()]
"""
    fds, environ, cwd, leader, group = escape(code).value
    assert len(fds) == 5 and fds[:3] == [0, 1, 2]
    assert environ == {}
    assert cwd == str(workspace)
    assert leader and group


def test_environment_variable_of_the_host_is_unreachable(escape: Callable[..., RunRecord]) -> None:
    """A variable set in the host's environment is not visible, nor its /proc environ."""
    os.environ["SCRIPTBRIDGE_TEST_SECRET"] = "s3cret"
    try:
        code = """
[os.environ.get("SCRIPTBRIDGE_TEST_SECRET"), os.getenv("HOME"),
 attempt(lambda: realopen(f"/proc/{inputs['host']}/environ", "rb").read()),
 attempt(lambda: realopen("/proc/self/environ", "rb").read())]
"""
        record = escape(code, inputs={"host": os.getpid()})
    finally:
        del os.environ["SCRIPTBRIDGE_TEST_SECRET"]
    assert record.value[:3] == [None, None, ["denied", errno.EACCES]]
    assert b"s3cret" not in repr(record.value).encode()


def test_seccomp_denies_sockets(escape: Callable[..., RunRecord]) -> None:
    """seccomp alone: creating a socket of any family fails with EPERM."""
    code = """
socketmod = sysmod.modules["socket"]
[attempt(lambda: socketmod.socket(socketmod.AF_INET, socketmod.SOCK_STREAM).fileno()),
 attempt(lambda: socketmod.socket(socketmod.AF_UNIX, socketmod.SOCK_STREAM).fileno()),
 attempt(lambda: len(socketmod.socketpair()))]
"""
    assert escape(code, keep=("seccomp",)).value == [["denied", errno.EPERM]] * 3


CONNECT = """
socketmod = sysmod.modules["socket"]
def connect():
    with socketmod.create_connection(("127.0.0.1", inputs["port"]), timeout=5):
        return "connected"
attempt(connect)
"""


@needs_root
def test_netns_cuts_the_network(escape: Callable[..., RunRecord], listener: socket.socket) -> None:
    """netns alone: a connection to the host's loopback fails (the namespace's lo is down)."""
    port = listener.getsockname()[1]
    assert escape(CONNECT, keep=("netns",), inputs={"port": port}).value == [
        "denied",
        errno.ENETUNREACH,
    ]


def test_connect_works_without_os_layers(
    escape: Callable[..., RunRecord], listener: socket.socket
) -> None:
    """Control: with every OS layer off, the same connection succeeds."""
    port = listener.getsockname()[1]
    assert escape(CONNECT, keep=(), inputs={"port": port}).value == ["ok", "connected"]


def test_landlock_denies_tcp_connect(
    escape: Callable[..., RunRecord], listener: socket.socket
) -> None:
    """landlock alone (ABI 4+): a TCP connect is refused."""
    port = listener.getsockname()[1]
    assert escape(CONNECT, keep=("landlock",), inputs={"port": port}).value == [
        "denied",
        errno.EACCES,
    ]


def test_seccomp_denies_fork_and_exec(escape: Callable[..., RunRecord]) -> None:
    """seccomp alone: fork, subprocess and exec fail; nothing is started."""
    code = """
subprocess = sysmod.modules["subprocess"]
[attempt(lambda: os.fork()),
 attempt(lambda: subprocess.run(["/bin/true"]).returncode),
 attempt(lambda: os.execv("/bin/true", ["true"])),
 attempt(lambda: os.posix_spawn("/bin/true", ["true"], {}))]
"""
    assert escape(code, keep=("seccomp",)).value == [["denied", errno.EPERM]] * 4


def test_seccomp_allows_threads(escape: Callable[..., RunRecord]) -> None:
    """seccomp alone: clone with CLONE_THREAD stays allowed (threads work)."""
    code = """
threading = sysmod.modules["threading"]
box = []
thread = threading.Thread(target=lambda: box.append(1))
thread.start()
thread.join()
box
"""
    assert escape(code, keep=("seccomp",)).value == [1]


@needs_root
def test_uid_layer_denies_fork_by_nproc(escape: Callable[..., RunRecord]) -> None:
    """uid alone: RLIMIT_NPROC 0 after the drop makes fork fail with EAGAIN."""
    assert escape("attempt(lambda: os.fork())", keep=("uid",)).value == ["denied", errno.EAGAIN]


def test_landlock_denies_exec(escape: Callable[..., RunRecord]) -> None:
    """landlock alone: executing a file is refused."""
    code = 'attempt(lambda: os.execv("/bin/true", ["true"]))'
    assert escape(code, keep=("landlock",)).value == ["denied", errno.EACCES]


def test_landlock_denies_reads_outside(escape: Callable[..., RunRecord]) -> None:
    """landlock alone: /etc/passwd, the root directory and /proc can't be read; refs/ can."""
    code = """
[attempt(lambda: realopen("/etc/passwd").read()),
 attempt(lambda: os.listdir("/")),
 attempt(lambda: realopen("/proc/self/status").read()),
 attempt(lambda: realopen("refs/note.txt").read())]
"""
    assert escape(code, keep=("landlock",)).value == [
        ["denied", errno.EACCES],
        ["denied", errno.EACCES],
        ["denied", errno.EACCES],
        ["ok", "hello refs"],
    ]


def test_landlock_denies_writes_outside_out(
    escape: Callable[..., RunRecord], workspace: Path, tmp_path: Path
) -> None:
    """landlock alone: writes outside out/ fail (refs/, the workspace, /tmp), out/ works."""
    outside = tmp_path / "outside.txt"
    code = """
def write(path):
    with realopen(path, "w") as handle:
        return handle.write("x")
[attempt(lambda: write(inputs["outside"])), attempt(lambda: write("refs/new.txt")),
 attempt(lambda: write("top.txt")), attempt(lambda: write("/dev/shm/x")),
 attempt(lambda: os.symlink("/etc/passwd", "out/link")), attempt(lambda: write("out/ok.txt"))]
"""
    record = escape(code, keep=("landlock",), inputs={"outside": str(outside)})
    assert record.value == [["denied", errno.EACCES]] * 5 + [["ok", 1]]
    assert not outside.exists() and not (workspace / "refs" / "new.txt").exists()
    assert (workspace / "out" / "ok.txt").read_text() == "x"


@needs_root
def test_uid_layer_drops_root(escape: Callable[..., RunRecord]) -> None:
    """uid alone: the child runs as an id of the private range, as uid and gid, and cannot get
    root back, nor read /etc/shadow."""
    code = """
[os.getresuid(), os.getresgid(), os.getgroups(), attempt(lambda: os.setuid(0)),
 attempt(lambda: realopen("/etc/shadow").read())]
"""
    uids, gids, groups, *denied = escape(code, keep=("uid",)).value
    assert uids == gids == [uids[0]] * 3
    assert CHILD_ID_BASE <= uids[0] < CHILD_ID_BASE + CHILD_ID_SLOTS
    assert groups == []
    unmapped = errno.EPERM if REAL_ROOT else errno.EINVAL  # 0 doesn't exist in its namespace
    assert denied == [["denied", unmapped], ["denied", errno.EACCES]]


def test_child_ids_go_round_and_skip_those_still_held() -> None:
    """Ids are handed out round-robin from the start slot, never one a live child still holds,
    and one comes back only once it was released (its child reaped)."""
    ids = ChildIds(shared=False, start=1, slots=3)
    first, second, third = ids.take(), ids.take(), ids.take()
    assert [first, second, third] == [CHILD_ID_BASE + 1, CHILD_ID_BASE + 2, CHILD_ID_BASE]
    with pytest.raises(LookupError):
        ids.take()
    ids.release(second)
    assert ids.take() == second  # the only free one, though not next in turn
    ids.release(third)
    ids.release(first)
    assert ids.take() == third  # next in turn after second, then first
    assert ids.take() == first


def test_seccomp_denies_setuid(escape: Callable[..., RunRecord]) -> None:
    """seccomp alone: setuid(0) fails with EPERM even where the process is still root."""
    assert escape("attempt(lambda: os.setuid(0))", keep=("seccomp",)).value == [
        "denied",
        errno.EPERM,
    ]


def test_seccomp_signals_only_self(escape: Callable[..., RunRecord], zygote: object) -> None:
    """seccomp alone: signals to another process (the zygote) are refused."""
    code = "attempt(lambda: os.kill(os.getppid(), 0))"
    assert escape(code, keep=("seccomp",)).value == ["denied", errno.EPERM]


CHANNEL_SOCKET = """
stat = sysmod.modules["stat"]
socketmod = sysmod.modules["socket"]
def is_socket(fd):
    return attempt(lambda: stat.S_ISSOCK(os.fstat(fd).st_mode)) == ["ok", True]
(fd,) = [fd for fd in range(3, 64) if is_socket(fd)]
# family, type and proto given: wrapping the fd makes no system call
sock = socketmod.socket(socketmod.AF_UNIX, socketmod.SOCK_STREAM, 0, fd)
results = [
    attempt(lambda: os.write(fd, b"x")),
    attempt(lambda: sock.send(b"x")),
    attempt(lambda: sock.sendmsg([b"x"])),
    attempt(lambda: sock.recv(1, socketmod.MSG_DONTWAIT | socketmod.MSG_PEEK)),
    attempt(lambda: sock.recvmsg(1, 0, socketmod.MSG_DONTWAIT | socketmod.MSG_PEEK)),
    attempt(lambda: sock.setsockopt(socketmod.SOL_SOCKET, socketmod.SO_SNDBUF, 1 << 22)),
    attempt(lambda: sock.getsockopt(socketmod.SOL_SOCKET, socketmod.SO_TYPE)),
    attempt(lambda: sock.bind("\\0scriptbridge-test")),
    attempt(lambda: sock.connect("\\0scriptbridge-test")),
    attempt(lambda: sock.listen()),
    attempt(lambda: sock.getpeername()),
    attempt(lambda: sock.shutdown(socketmod.SHUT_RD)),
]
sock.detach()
results
"""


def test_channel_from_the_host_is_a_read_only_socket(escape: Callable[..., RunRecord]) -> None:
    """The child's end of the host -> child channel is a socket (so a large frame crosses in
    one write) that it can only read: writing to it fails with EPIPE, and with seccomp every
    call a pipe doesn't have (sendmsg with its descriptor passing, bind, setsockopt, ...)
    fails with EPERM."""
    results = escape(CHANNEL_SOCKET, keep=("seccomp",)).value
    assert results[0] == ["denied", errno.EPIPE]
    assert results[1:] == [["denied", errno.EPERM]] * (len(results) - 1)


def test_channel_socket_without_seccomp_still_refuses_writes_and_names(
    escape: Callable[..., RunRecord],
) -> None:
    """Without seccomp the socket calls reach the kernel, but the host's end was shut for
    reading before the child got its own: nothing the child sends arrives (EPIPE). And its end
    already has an (autobound, unreachable) name, so it can't take an abstract socket name of
    its choosing in the host's network namespace, nor listen."""
    results = escape(CHANNEL_SOCKET, keep=("rlimits",)).value
    assert results[:3] == [["denied", errno.EPIPE]] * 3
    assert results[7] == ["denied", errno.EINVAL]  # bind
    assert results[8][0] == "denied"  # connect: no such listener, and already connected
    assert results[9] == ["denied", errno.EINVAL]  # listen


def test_rlimits_values(escape: Callable[..., RunRecord]) -> None:
    """rlimits alone: CPU, file size, open files and core are as configured."""
    code = """
resource = sysmod.modules["resource"]
[resource.getrlimit(resource.RLIMIT_CPU), resource.getrlimit(resource.RLIMIT_FSIZE),
 resource.getrlimit(resource.RLIMIT_NOFILE), resource.getrlimit(resource.RLIMIT_CORE)]
"""
    limits = ChildLimits(cpu_s=2.5, max_file_bytes=12345, max_open_files=32)
    assert escape(code, keep=("rlimits",), limits=limits).value == [
        [3, 4],
        [12345, 12345],
        [32, 32],
        [0, 0],
    ]


def test_cpu_limit_kills(run: Run) -> None:
    """A CPU loop is killed by SIGXCPU at the CPU limit."""
    record = run("while True:\n    pass", limits=ChildLimits(cpu_s=1))
    assert record.final is None and record.exit is not None
    assert record.exit.returncode in (-signal.SIGXCPU, -signal.SIGKILL)
    assert record.exit.cpu_s >= 0.9


def test_memory_limit(run: Run) -> None:
    """An allocation past the memory limit fails with MemoryExceeded."""
    record = run("x = 'a' * (512 * 2 ** 20)\nlen(x)", limits=ChildLimits(memory_mb=64))
    assert record.error_type == "MemoryExceeded"


def test_file_size_limit(run: Run, workspace: Path) -> None:
    """A write past the file-size limit fails with an OSError instead of killing the child."""
    limits = ChildLimits(max_file_bytes=1000)
    record = run("write_text('out/big.txt', 'x' * 5000)", limits=limits)
    assert record.error_type == "OSError" and "too large" in record.final.message  # type: ignore[union-attr]


def test_fd_limit(escape: Callable[..., RunRecord]) -> None:
    """rlimits alone: opening fds past the limit fails with EMFILE."""
    code = """
fds = []
def exhaust():
    while len(fds) < 10000:
        fds.append(os.dup(0))
attempt(exhaust)
"""
    assert escape(code, keep=("rlimits",)).value == ["denied", errno.EMFILE]


def test_seccomp_filter_builds_for_both_arches() -> None:
    """The BPF program assembles for x86_64 and aarch64 with every jump in range."""
    for arch in ("x86_64", "aarch64"):
        program = build_seccomp_filter(arch, own_pid=1234)
        assert 50 < len(program) < 4096
        assert program[-1][0] == 0x06  # the program ends with a return
        for index, (code, jt, jf, _k) in enumerate(program):
            assert code in (0x20, 0x15, 0x35, 0x45, 0x06)
            if code in (0x15, 0x35, 0x45):  # conditional jumps land inside the program
                assert index + 1 + max(jt, jf) < len(program)
    assert "execve" in DENIED_SYSCALLS and "clone3" in DENIED_SYSCALLS


CROSS_PROCESS = """
resource = sysmod.modules["resource"]
other = inputs["other"]
[attempt(lambda: resource.prlimit(other, resource.RLIMIT_NOFILE, (16, 16))),
 attempt(lambda: resource.prlimit(other, resource.RLIMIT_NOFILE)),
 attempt(lambda: os.setpriority(os.PRIO_PROCESS, other, 19)),
 attempt(lambda: os.sched_setaffinity(other, os.sched_getaffinity(0))),
 attempt(lambda: os.sched_setscheduler(other, os.SCHED_IDLE, os.sched_param(0))),
 attempt(lambda: os.kill(other, 0))]
"""


@needs_root
@pytest.mark.parametrize(
    ("layer", "error"),
    [
        ("pidns", errno.ESRCH),
        pytest.param("uid", errno.EPERM, marks=needs_real_root),
        ("seccomp", errno.EPERM),
    ],
)
def test_each_of_three_layers_alone_keeps_a_run_off_another(
    escape: Callable[..., RunRecord], other_run: int, layer: str, error: int
) -> None:
    """pidns, uid or seccomp alone: the child can't lower another run's open-file limit (nor
    read it), renice it, move it to other CPUs, change its scheduling or signal it."""
    record = escape(CROSS_PROCESS, keep=(layer,), inputs={"other": other_run})
    assert record.value == [["denied", error]] * 6


def test_without_os_layers_a_run_reaches_another(
    escape: Callable[..., RunRecord], zygote: ZygoteProcess, tmp_path: Path
) -> None:
    """Control: with every OS layer off for both runs (one uid, one PID namespace), the same
    calls on the other run's child succeed."""
    with idle_child(zygote, tmp_path / "other", disable=ALL_OS) as other:
        record = escape(CROSS_PROCESS, keep=(), inputs={"other": other.pid})
    assert [outcome[0] for outcome in record.value] == ["ok"] * 6


@needs_root
def test_pidns_child_is_alone_in_its_namespace(
    escape: Callable[..., RunRecord], other_run: int, zygote: ZygoteProcess
) -> None:
    """pidns alone: the child is pid 1 of a namespace of its own, its parent is outside it, and
    another run's child, the zygote and the host don't exist for it; the host still knows it
    by its own pid."""
    code = """
[os.getpid(), os.getppid(), attempt(lambda: os.kill(inputs["other"], 0)),
 attempt(lambda: os.kill(inputs["zygote"], 0)), attempt(lambda: os.kill(inputs["host"], 0)),
 attempt(lambda: os.kill(-1, 0)), attempt(lambda: os.kill(1, 0))]
"""
    inputs = {"other": other_run, "zygote": zygote.pid, "host": os.getpid()}
    record = escape(code, keep=("pidns",), inputs=inputs)
    assert record.value == [1, 0, *[["denied", errno.ESRCH]] * 4, ["ok", None]]
    assert record.ready is not None and record.exit is not None
    assert record.ready.pid == record.exit.pid != 1
    assert "pidns" in record.isolation


@needs_root
def test_pidns_can_be_disabled(escape: Callable[..., RunRecord]) -> None:
    """``disable={"pidns"}`` forks the child into the zygote's PID namespace, and says so."""
    record = escape("[os.getpid(), os.getppid()]", keep=tuple(ALL_OS - {"pidns"}))
    assert record.ready is not None and record.exit is not None
    assert record.value[0] == record.exit.pid != 1 and record.value[1] != 0
    assert "pidns" not in record.isolation
    assert ("pidns", "disabled") in {(s.layer, s.reason) for s in record.ready.skipped}


@needs_root
def test_signals_to_itself_still_work_as_pid_1(escape: Callable[..., RunRecord]) -> None:
    """pidns and seccomp: the filter's own-pid rule still means the child itself when it is
    pid 1 of its namespace (kill and a thread's tgkill), and nothing else (pid 0, -1)."""
    code = """
signalmod = sysmod.modules["signal"]
threading = sysmod.modules["threading"]
[attempt(lambda: os.kill(os.getpid(), 0)),
 attempt(lambda: signalmod.pthread_kill(threading.get_ident(), 0)),
 attempt(lambda: os.kill(0, 0)), attempt(lambda: os.kill(-1, 0))]
"""
    assert escape(code, keep=("pidns", "seccomp")).value == [
        ["ok", None],
        ["ok", None],
        ["denied", errno.EPERM],
        ["denied", errno.EPERM],
    ]


SELF_CALLS = """
resource = sysmod.modules["resource"]
time = sysmod.modules["time"]
nofile = resource.getrlimit(resource.RLIMIT_NOFILE)
[attempt(lambda: resource.prlimit(0, resource.RLIMIT_NOFILE) == nofile),
 attempt(lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (nofile[0] - 1, nofile[1]))),
 attempt(lambda: os.getpriority(os.PRIO_PROCESS, 0)),
 attempt(lambda: len(os.sched_getaffinity(0)) > 0),
 attempt(lambda: os.sched_getscheduler(0)),
 attempt(lambda: os.getsid(0) == os.getpgid(0)),
 attempt(lambda: time.clock_gettime(time.CLOCK_PROCESS_CPUTIME_ID) > 0),
 attempt(lambda: os.setpriority(os.PRIO_PROCESS, 0, 1)),
 attempt(lambda: os.sched_setaffinity(0, os.sched_getaffinity(0))),
 attempt(lambda: os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0)))]
"""


@needs_root
def test_seccomp_lets_a_child_read_and_lower_its_own_limits(
    escape: Callable[..., RunRecord],
) -> None:
    """pidns and seccomp: a child may still read its own limits, nice value, CPUs, scheduling,
    session and CPU clock, and lower its own limits; setting its priority, CPUs or scheduling
    is denied, as it is for any process."""
    assert escape(SELF_CALLS, keep=("pidns", "seccomp")).value == [
        ["ok", True],
        ["ok", None],
        ["ok", 0],
        ["ok", True],
        ["ok", 0],
        ["ok", True],
        ["ok", True],
        *[["denied", errno.EPERM]] * 3,
    ]


@needs_root
def test_cpu_limit_in_a_pid_namespace_ends_with_sigkill(run: Run) -> None:
    """As pid 1 of its namespace a child ignores SIGXCPU, so the hard limit's SIGKILL ends a CPU
    loop, past the limit (which the host reports as CpuTimeExceeded)."""
    record = run("while True:\n    pass", limits=ChildLimits(cpu_s=1))
    assert "pidns" in record.isolation
    assert record.final is None and record.exit is not None
    assert record.exit.returncode == -signal.SIGKILL and record.exit.cpu_s >= 1


@needs_real_root
def test_concurrent_children_have_different_ids(zygote: ZygoteProcess, tmp_path: Path) -> None:
    """Two live children of one zygote never share a uid or gid, each from the private range."""
    with (
        idle_child(zygote, tmp_path / "a") as first,
        idle_child(zygote, tmp_path / "b") as second,
    ):
        first_ids, second_ids = ids_of(first.pid), ids_of(second.pid)
    for uids, gids in (first_ids, second_ids):
        assert len(set(uids)) == 1 and uids == gids
        assert CHILD_ID_BASE <= uids[0] < CHILD_ID_BASE + CHILD_ID_SLOTS
    assert first_ids[0][0] != second_ids[0][0]


@needs_root
def test_each_child_has_a_network_namespace_of_its_own(
    zygote: ZygoteProcess, tmp_path: Path
) -> None:
    """Live children never share a network namespace, nor with the zygote or this process,
    though the zygote makes each one ahead of its child; a child whose netns layer is off is
    in the zygote's."""
    namespaces = []
    with (
        idle_child(zygote, tmp_path / "a") as first,
        idle_child(zygote, tmp_path / "b") as second,
        idle_child(zygote, tmp_path / "c", disable={"netns"}) as third,
    ):
        for pid in (first.pid, second.pid, third.pid, zygote.pid, os.getpid()):
            namespaces.append(os.readlink(f"/proc/{pid}/ns/net"))
    assert len(set(namespaces[:2] + namespaces[3:4])) == 3
    assert namespaces[2] == namespaces[3] == namespaces[4]


@needs_real_root
def test_the_host_can_read_list_and_remove_what_a_child_left_in_out(
    escape: Callable[..., RunRecord], workspace: Path
) -> None:
    """uid alone: the child writes in out/ as its own id (a directory and a file it made
    unreadable included), and the host, as root, can still read, list and remove all of it."""
    code = """
os.mkdir("out/kept")
with realopen("out/kept/note.txt", "w") as handle:
    handle.write("left behind")
os.chmod("out/kept/note.txt", 0)
os.chmod("out/kept", 0)
[os.getuid(), os.stat("out").st_uid]
"""
    uid, owner = escape(code, keep=("uid",)).value
    assert owner == uid and CHILD_ID_BASE <= uid < CHILD_ID_BASE + CHILD_ID_SLOTS
    kept = workspace / "out" / "kept"
    assert kept.stat().st_uid == uid and os.listdir(kept) == ["note.txt"]
    assert (kept / "note.txt").read_text() == "left behind"
    shutil.rmtree(workspace / "out")
    assert not (workspace / "out").exists()


ON_ANOTHER = """
resource = sysmod.modules["resource"]
time = sysmod.modules["time"]
stat = sysmod.modules["stat"]
ctypes = sysmod.modules["ctypes"]
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
other = inputs["other"]
NR = {"x86_64": {"ioprio_get": 252, "get_robust_list": 274},
      "aarch64": {"ioprio_get": 31, "get_robust_list": 100}}[os.uname().machine]
def checked(result):
    if result < 0:
        raise OSError(ctypes.get_errno(), "libc")
    return result
def sc(name, *args):
    return checked(libc.syscall(ctypes.c_long(NR[name]), *[ctypes.c_long(a) for a in args]))
r, w = os.pipe()
def is_socket(fd):
    return attempt(lambda: stat.S_ISSOCK(os.fstat(fd).st_mode)) == ["ok", True]
(sock,) = [fd for fd in range(3, 64) if is_socket(fd)]
owner = ctypes.c_int(other)
head, size = ctypes.c_void_p(), ctypes.c_size_t()
[attempt(lambda: os.getpriority(os.PRIO_PROCESS, other)),
 attempt(lambda: os.getpriority(os.PRIO_USER, 0)),
 attempt(lambda: len(os.sched_getaffinity(other)) > 0),
 attempt(lambda: os.sched_getscheduler(other)),
 attempt(lambda: os.getsid(other) > 0),
 attempt(lambda: os.getpgid(other) > 0),
 attempt(lambda: time.clock_gettime(((~other) << 3) | 2) > 0),
 attempt(lambda: checked(libc.fcntl(r, 8, other))),
 attempt(lambda: checked(libc.ioctl(sock, 0x8901, ctypes.byref(owner)))),
 attempt(lambda: sc("ioprio_get", 1, other) >= 0),
 attempt(lambda: sc("get_robust_list", other, ctypes.addressof(head), ctypes.addressof(size)))]
"""


def test_seccomp_denies_each_call_that_names_another_process(
    escape: Callable[..., RunRecord], other_run: int
) -> None:
    """seccomp alone (the child is root and sees the other run's pid): reading another
    process's priority, CPUs, scheduling, session, group, CPU clock, I/O priority or robust
    list, or pointing a file's or socket's SIGIO at it, fails with EPERM."""
    record = escape(ON_ANOTHER, keep=("seccomp",), inputs={"other": other_run})
    assert record.value == [["denied", errno.EPERM]] * 11


def test_without_seccomp_each_call_that_names_another_process_works(
    escape: Callable[..., RunRecord], zygote: ZygoteProcess, tmp_path: Path
) -> None:
    """Control: with every OS layer off for both runs, the same calls succeed."""
    with idle_child(zygote, tmp_path / "other", disable=ALL_OS) as other:
        record = escape(ON_ANOTHER, keep=(), inputs={"other": other.pid})
    assert [outcome[0] for outcome in record.value] == ["ok"] * 11


def seccomp_rules() -> dict[str, tuple[int | None, int | None]]:
    """Every call the filter has a rule for, with its (x86_64, aarch64) numbers."""
    rules = {**_SYSCALLS, "clone": _CLONE, "clone3": _CLONE3, **_SIGNAL_CALLS, **_SELF_CALLS}
    rules |= _CLOCK_CALLS
    rules |= {name: numbers for name, (numbers, _) in _WHO_CALLS.items()}
    rules |= {name: numbers for name, (numbers, _) in _COMMAND_CALLS.items()}
    return rules


def test_no_call_has_two_seccomp_rules() -> None:
    """On each arch every number the filter checks belongs to one call (a second rule for it
    would never be reached)."""
    for column in (0, 1):
        numbers = [pair[column] for pair in seccomp_rules().values() if pair[column] is not None]
        assert len(numbers) == len(set(numbers))


HEADERS = {
    0: Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
    1: Path("/usr/include/asm-generic/unistd.h"),  # aarch64's table
}


@pytest.mark.skipif(
    not all(path.exists() for path in HEADERS.values()), reason="no kernel uapi headers here"
)
def test_seccomp_numbers_match_the_kernel_headers() -> None:
    """Every system call number of the filter, for both arches, is the one the kernel's uapi
    headers give (``__NR_name``, or asm-generic's ``__NR3264_name``), and a call an arch lacks
    is missing from its header."""
    for column, path in HEADERS.items():
        found: dict[str, int] = {}
        for name, number in re.findall(
            r"^#define __NR(?:3264)?_(\w+)\s+(\d+)\s*$", path.read_text(), re.MULTILINE
        ):
            found.setdefault(name, int(number))
        for name, numbers in seccomp_rules().items():
            expected = found.get(name, NEWER_THAN_THE_HEADERS.get(name))
            assert numbers[column] == expected, (path.name, name)


NEWER_THAN_THE_HEADERS = {"fchmodat2": 452, "setxattrat": 463, "removexattrat": 466}
"""Calls newer than the uapi headers Debian 12 installs (Linux 6.1): fchmodat2 (6.6),
setxattrat and removexattrat (6.13), numbered alike on every arch since the unified table
(424 on); the filter denies them on a kernel that has them."""


def test_the_template_a_child_fills_in_is_the_filter() -> None:
    """The program the zygote makes once, with a child's own pid filled in, is instruction for
    instruction the filter built for that pid, on both arches."""
    for arch in ("x86_64", "aarch64"):
        template, own_pid_at = seccomp_template(arch)
        filled = [(f.code, f.jt, f.jf, f.k) for f in template]
        for index in own_pid_at:
            filled[index] = (*filled[index][:3], 4321)
        assert filled == build_seccomp_filter(arch, 4321)
        assert len(own_pid_at) == 5 + 9 + 2  # one in each signal, self and who rule
