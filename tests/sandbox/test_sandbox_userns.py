"""Every layer for every user: the zygote as an ordinary user (user namespaces), an IPC
namespace per child, child ids no two bridges share, and the kernel's refusals named.

An ordinary user's zygote is started from the root test run (:mod:`unprivileged`); the
refusal of a container's seccomp profile is a real filter on that zygote
(:mod:`seccomp_denial`), and ``user.max_user_namespaces = 0`` is real in a user namespace of
the test's own; the switches a kernel may have and this one hasn't (Debian's sysctl, Ubuntu's
AppArmor one) are read from a laid-out ``/proc/sys`` tree.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from escapes import REAL_SYS
from unprivileged import (
    DENY_USER_NAMESPACES,
    NO_USER_NAMESPACES,
    USER_ID,
    can_drop_to_user,
    hand_to_user,
    start_zygote_as_user,
    user_directory,
)

from sandbox import BlockingChannel, ChildLimits, ZygoteProcess
from sandbox._isolation import (
    CHILD_ID_BASE,
    CHILD_ID_SLOTS,
    ID_BLOCK,
    OS_LAYERS,
    ChildIds,
    explain_refusal,
)
from sandbox.protocol import LAYER_NAMES, Ready
from sandbox.testing import RunRecord, run_script

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="these tests start a zygote as another user")
cannot_drop = can_drop_to_user()
as_user = pytest.mark.skipif(cannot_drop is not None, reason=cannot_drop or "")

# The real os and ctypes from plain Python (the language layer off).
REACH = (
    REAL_SYS
    + """
ctypes = sysmod.modules["ctypes"]
libc = ctypes.CDLL(None, use_errno=True)
"""
)


@pytest.fixture(scope="module")
def user_zygote() -> Iterator[ZygoteProcess]:
    """A zygote started as the ordinary user :data:`USER_ID`."""
    if cannot_drop is not None:
        pytest.skip(cannot_drop)
    with start_zygote_as_user() as zygote:
        yield zygote


@pytest.fixture(scope="module")
def root_zygote() -> Iterator[ZygoteProcess]:
    """A zygote started as whoever runs the tests (root in CI)."""
    with ZygoteProcess.start() as zygote:
        yield zygote


@pytest.fixture
def user_workspace() -> Iterator[Path]:
    """A run's workspace, the ordinary user's, as a user's own files are."""
    base = user_directory()
    workspace = base / "ws"
    (workspace / "refs").mkdir(parents=True)
    (workspace / "out").mkdir()
    hand_to_user(base)
    try:
        yield workspace
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False)


@pytest.fixture(params=["root", "user"])
def started_as(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, ZygoteProcess, Path]:
    """Each way a host starts: its name, a zygote started so, and a workspace of its."""
    who: str = request.param
    if who == "user" and cannot_drop is not None:
        pytest.skip(cannot_drop)
    if who == "root" and not ROOT:
        pytest.skip("not run as root")
    zygote: ZygoteProcess = request.getfixturevalue(f"{who}_zygote")
    workspace = request.getfixturevalue("user_workspace") if who == "user" else tmp_path
    (workspace / "refs").mkdir(exist_ok=True)
    (workspace / "out").mkdir(exist_ok=True)
    return who, zygote, workspace


def run(zygote: ZygoteProcess, source: str, workspace: Path, **kwargs: object) -> RunRecord:
    return run_script(zygote.client, source, workspace=workspace, timeout=30, **kwargs)  # type: ignore[arg-type]


@as_user
def test_an_ordinary_users_zygote_gives_every_layer(
    user_zygote: ZygoteProcess, user_workspace: Path
) -> None:
    """Started as an ordinary user, the zygote says every layer applies, each namespace
    layer through user namespaces, and a run has every layer in force."""
    states = {state.layer: state for state in user_zygote.layers}
    assert list(states) == list(LAYER_NAMES)
    assert all(state.available for state in states.values()), states
    for layer in ("netns", "pidns", "ipcns", "uid", "quota"):
        assert f"through user namespaces (started as uid {USER_ID}" in str(states[layer].mechanism)
    record = run(user_zygote, "write_text('out/a.txt', 'hi')\n'ok'", user_workspace)
    assert record.value == "ok", record.final
    assert record.isolation == list(LAYER_NAMES)
    written = user_workspace / "out" / "a.txt"
    assert written.read_text() == "hi" and written.stat().st_uid == USER_ID


CAPABILITIES = (
    REACH
    + """
class Header(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]
class Data(ctypes.Structure):
    _fields_ = [("e", ctypes.c_uint32), ("p", ctypes.c_uint32), ("i", ctypes.c_uint32)]
header = Header(0x20080522, 0)
data = (Data * 2)()
libc.capget(ctypes.byref(header), data)
try:
    os.setuid(0)
    back_to_root = "yes"
except OSError as exc:
    back_to_root = exc.errno
[[d.e for d in data] + [d.p for d in data] + [d.i for d in data], os.getresuid(),
 os.getresgid(), back_to_root]
"""
)


def test_the_child_holds_no_capability_and_a_uid_of_its_own(
    started_as: tuple[str, ZygoteProcess, Path],
) -> None:
    """With the language layer off, the script finds no capability in any set, its uid and
    gid one of the private range, and no way back to 0, whoever started the zygote."""
    _, zygote, workspace = started_as
    record = run(zygote, CAPABILITIES, workspace, disable={"restricted-python"})
    assert record.isolation == [layer for layer in LAYER_NAMES if layer != "restricted-python"]
    caps, uids, gids, back = record.value
    assert caps == [0] * 6
    assert uids == [uids[0]] * 3 and gids == [uids[0]] * 3
    assert CHILD_ID_BASE <= uids[0] < CHILD_ID_BASE + CHILD_ID_SLOTS
    assert back in (errno.EPERM, errno.EINVAL)  # seccomp says EPERM first


SHM_KEY = 0x5B1D_0C
SHM_CREATE = REACH + f"libc.shmget({SHM_KEY}, 4096, 0o1666)\n"  # IPC_CREAT | 0666
SHM_LOOKUP = REACH + f"r = libc.shmget({SHM_KEY}, 0, 0o666)\n[r, ctypes.get_errno()]"


def test_a_runs_sysv_objects_are_gone_for_the_next_run(
    started_as: tuple[str, ZygoteProcess, Path],
) -> None:
    """A SysV shared-memory segment a run tries to leave (they outlive their process) is not
    there for the next run (none can be made in a child's IPC namespace); with ``ipcns`` off
    it is (the attack works unprotected)."""
    _, zygote, workspace = started_as
    language_off = {"restricted-python"}
    created = run(zygote, SHM_CREATE + "'made'", workspace, disable=language_off)
    assert created.value == "made"
    looked = run(zygote, SHM_LOOKUP, workspace, disable=language_off)
    assert looked.value == [-1, errno.ENOENT]
    unprotected = language_off | {"ipcns", "uid"}  # the same uid, as two runs of a user
    run(zygote, SHM_CREATE + "'made'", workspace, disable=unprotected)
    try:
        found = run(zygote, SHM_LOOKUP, workspace, disable=unprotected)
        assert found.value[0] >= 0, found.value
    finally:
        remove = REACH + f"libc.shmctl(libc.shmget({SHM_KEY}, 0, 0), 0, None)\n'gone'"
        run(zygote, remove, workspace, disable=unprotected)


ID_TAKER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {repository!r})
    from sandbox._isolation import ChildIds
    ids = ChildIds(shared=True, start=0, lock_dirs=[{lock_dir!r}])
    taken = [ids.take() for _ in range({count})]
    print(" ".join(map(str, taken)), flush=True)
    sys.stdin.read()  # hold them until told
    """
)


@needs_root
def test_two_processes_never_hand_out_one_child_id(tmp_path: Path) -> None:
    """Two processes drawing child ids at once, both from the same start, get disjoint ids:
    each only from blocks it holds (the old round-robin from one start gave both the same)."""
    lock_dir = tmp_path / "ids"
    lock_dir.mkdir(mode=0o700)
    count = ID_BLOCK + 10  # more than one block each
    source = ID_TAKER.format(
        repository=str(Path(__file__).resolve().parents[2]), lock_dir=str(lock_dir), count=count
    )
    takers = [
        subprocess.Popen(
            [sys.executable, "-c", source], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    try:
        taken = [set(map(int, taker.stdout.readline().split())) for taker in takers]  # type: ignore[union-attr]
    finally:
        for taker in takers:
            taker.communicate("")
    assert len(taken[0]) == len(taken[1]) == count
    assert not taken[0] & taken[1]


@needs_root
def test_ids_are_reserved_only_in_a_directory_of_roots_alone(tmp_path: Path) -> None:
    """A lock directory others may write, or a symlink, is refused with the reason; the next
    candidate is used."""
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    link = tmp_path / "link"
    link.symlink_to(open_dir)
    good = tmp_path / "good"
    with pytest.raises(LookupError, match="not root's alone") as refused:
        ChildIds(shared=True, lock_dirs=[str(open_dir)]).take()
    assert str(open_dir) in str(refused.value)
    with pytest.raises(LookupError, match="link"):
        ChildIds(shared=True, lock_dirs=[str(link)]).take()
    ids = ChildIds(shared=True, lock_dirs=[str(open_dir), str(good)])
    assert CHILD_ID_BASE <= ids.take() < CHILD_ID_BASE + CHILD_ID_SLOTS
    assert good.stat().st_mode & 0o777 == 0o700 and good.stat().st_uid == 0


@needs_root
def test_two_zygotes_children_never_share_a_uid(tmp_path: Path) -> None:
    """Children of two zygotes (two bridges), alive at once, all have different uids."""
    uids: list[int] = []
    with ZygoteProcess.start() as first, ZygoteProcess.start() as second:
        children = []
        for index in range(24):
            zygote = (first, second)[index % 2]
            workspace = tmp_path / f"ws{index}"
            (workspace / "refs").mkdir(parents=True)
            (workspace / "out").mkdir()
            child = zygote.client.spawn(workspace, ChildLimits())
            ready = BlockingChannel(child.from_child, child.to_child).receive_child()
            assert isinstance(ready, Ready) and "uid" in ready.isolation
            children.append((zygote, child))
        for _zygote, child in children:
            status = Path(f"/proc/{child.pid}/status").read_text()
            (line,) = [line for line in status.splitlines() if line.startswith("Uid:")]
            uids.append(int(line.split()[1]))
        for zygote, child in children:
            os.close(child.to_child)
            os.close(child.from_child)
            zygote.client.wait(child.pid, timeout=10)
    assert len(set(uids)) == len(uids)


@as_user
def test_a_container_seccomp_profile_is_named_with_its_remedy(tmp_path: Path) -> None:
    """An ordinary user's zygote under a seccomp filter refusing user namespaces (as Docker's
    default profile does) says each namespace layer is missing, why and the remedy; runs
    still run, with the layers they have, and say the rest skipped with that reason."""
    with start_zygote_as_user(prelude=DENY_USER_NAMESPACES) as zygote:
        states = {state.layer: state for state in zygote.layers}
        base = user_directory()
        try:
            workspace = base / "ws"
            (workspace / "refs").mkdir(parents=True)
            (workspace / "out").mkdir()
            hand_to_user(base)
            record = run(zygote, "'ok'", workspace)
        finally:
            subprocess.run(["rm", "-rf", str(base)], check=False)
    for layer in ("netns", "pidns", "ipcns", "uid", "quota"):
        assert not states[layer].available
        assert "a seccomp filter on this process refuses namespaces" in str(states[layer].reason)
        assert "contrib/seccomp-userns.json" in str(states[layer].remedy)
    for layer in ("restricted-python", "rlimits", "seccomp", "landlock"):
        assert states[layer].available, states[layer]
    assert record.value == "ok"
    assert record.isolation == ["restricted-python", "rlimits", "seccomp", "landlock"]
    assert record.ready is not None
    skipped = {item.layer: item.reason for item in record.ready.skipped}
    assert set(skipped) == {"netns", "pidns", "ipcns", "uid", "quota"}
    assert all("seccomp filter" in reason for reason in skipped.values()), skipped


@as_user
def test_user_namespaces_switched_off_are_named_with_their_remedy() -> None:
    """An ordinary user's zygote on a machine whose ``user.max_user_namespaces`` is 0 (a
    user namespace of the test's own where it is) says each namespace layer is missing, that
    cause, and the sysctl that would give them."""
    with start_zygote_as_user(as_root=NO_USER_NAMESPACES) as zygote:
        states = {state.layer: state for state in zygote.layers}
    for layer in ("netns", "pidns", "ipcns", "uid", "quota"):
        assert not states[layer].available
        assert "user namespaces are switched off (user.max_user_namespaces = 0)" in str(
            states[layer].reason
        )
        assert "sysctl -w user.max_user_namespaces=" in str(states[layer].remedy)
    assert all(states[layer].available for layer in ("rlimits", "seccomp", "landlock"))


def sysctl_tree(root: Path, **values: str) -> Path:
    """A ``/proc/sys`` laid out with ``values`` (``user.max_user_namespaces`` as
    ``user__max_user_namespaces``)."""
    for name, value in values.items():
        path = root / "sys" / name.replace("__", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(value + "\n")
    (root / "sys").mkdir(exist_ok=True)
    return root / "sys"


@pytest.mark.parametrize(
    ("sysctls", "seccomp", "code", "cause", "remedy"),
    [
        ({"user__max_user_namespaces": "0"}, 0, errno.ENOSPC,
         "user.max_user_namespaces = 0", "sysctl -w user.max_user_namespaces="),
        ({"kernel__unprivileged_userns_clone": "0"}, 0, errno.EPERM,
         "kernel.unprivileged_userns_clone = 0", "sysctl -w kernel.unprivileged_userns_clone=1"),
        ({"kernel__apparmor_restrict_unprivileged_userns": "1"}, 0, errno.EPERM,
         "AppArmor restricts", "AppArmor profile"),
        ({}, 2, errno.EPERM, "a seccomp filter on this process", "contrib/seccomp-userns.json"),
        ({"user__max_user_namespaces": "15000"}, 0, errno.ENOSPC,
         "the user namespace limit is reached", "raise user.max_user_namespaces"),
        ({}, 0, errno.EINVAL, "Invalid argument", "start as root"),
    ],
)  # fmt: skip
def test_each_refusal_is_named_with_its_remedy(
    tmp_path: Path,
    sysctls: dict[str, str],
    seccomp: int,
    code: int,
    cause: str,
    remedy: str,
) -> None:
    """``explain_refusal`` names the cause a machine's ``/proc`` shows, and its remedy."""
    sysctl = sysctl_tree(tmp_path, **sysctls)
    status = tmp_path / "status"
    status.write_text(f"Name:\tpython\nSeccomp:\t{seccomp}\nSeccomp_filters:\t{seccomp // 2}\n")
    refusal = explain_refusal(
        code, "unshare(CLONE_NEWUSER)", sysctl=str(sysctl), status=str(status)
    )
    assert refusal.cause.startswith("unshare(CLONE_NEWUSER): ")
    assert cause in refusal.cause
    assert remedy in refusal.remedy


def test_the_os_layers_include_the_ipc_namespace() -> None:
    """``ipcns`` is an OS layer, so the security suite's modes switch it with the others."""
    assert "ipcns" in OS_LAYERS and "ipcns" in LAYER_NAMES


def test_the_container_profile_allows_namespaces_and_refuses_the_rest() -> None:
    """``contrib/seccomp-userns.json`` (SECURITY.md) lets the calls every layer needs through
    and refuses the kernel's dangerous ones."""
    profile = json.loads(
        (Path(__file__).resolve().parents[2] / "contrib" / "seccomp-userns.json").read_text()
    )
    assert profile["defaultAction"] == "SCMP_ACT_ALLOW"
    denied = {
        name
        for rule in profile["syscalls"]
        if rule["action"] == "SCMP_ACT_ERRNO"
        for name in rule["names"]
    }
    needed = {"unshare", "clone", "clone3", "setns", "mount", "umount2", "fsopen", "fsconfig"}
    assert not needed & denied
    assert {"ptrace", "bpf", "kexec_load", "init_module", "keyctl", "perf_event_open"} <= denied
