"""The sandbox's host side as an ordinary user, started from a root test run.

A zygote does all of a child's isolation, so one started as an ordinary user
(:func:`start_zygote_as_user`) is what a host that isn't root gets: it finds itself without
root and takes every namespace layer through user namespaces. The user is :data:`USER_ID`, a
uid no account has, with no supplementary group.

The Python the tests run may sit under a directory the user can't enter (``/root/.pyenv``,
``/root`` being ``0700``). Only for that, the zygote starts in a mount namespace of its own
where each such directory is a ``0755`` tmpfs holding bind mounts of just the entries on the
way to what it needs (the interpreter, the repository); nothing of it is made readable that
wasn't, and nothing changes outside that namespace. Then it drops to the user
(``setpriv``: real, effective and saved uid and gid, no groups; capabilities go with root) and
``exec``s the interpreter, with the zygote's pid all along.

Files the user's sandbox must guard are the user's own, as on a real machine:
:func:`user_directory` makes a directory of the user's for a test's workspace and secrets,
and :func:`hand_to_user` gives a tree to the user.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from sandbox import ZygoteProcess

USER_ID = 0x6000_0000
"""The ordinary user (uid and gid) the tests drop to: no account, below the children's range."""

REPOSITORY = Path(__file__).resolve().parents[1]


def can_drop_to_user() -> str | None:
    """``None`` when this run can start a zygote as :data:`USER_ID`, else why not."""
    if os.geteuid() != 0:
        return "the tests don't run as root, so they can't start a host as another user"
    for tool in ("unshare", "setpriv", "mount"):
        if shutil.which(tool) is None:
            return f"{tool} (util-linux) is not installed"
    return None


def _closed_ancestors(paths: Iterable[str]) -> dict[str, set[str]]:
    """For each directory on the way to ``paths`` that others can't enter: the names in it
    that lead to them."""
    closed: dict[str, set[str]] = {}
    for path in paths:
        parts = Path(os.path.abspath(path)).parts
        for depth in range(1, len(parts) - 1):
            directory = os.path.join(*parts[:depth])
            if not os.stat(directory).st_mode & stat.S_IXOTH:
                closed.setdefault(directory, set()).add(parts[depth])
                break
    return closed


def _wrapper(
    python: str, uid: int, needs: Sequence[str], prelude: str | None, as_root: str | None
) -> str:
    """A shell script that starts ``python`` (with its arguments) as ``uid`` (module doc),
    after running ``as_root`` (Python, as root, before the drop) and ``prelude`` (Python, as
    ``uid``) in the same process, when given."""
    steps = ["set -e", "keep=$(mktemp -d)"]
    for index, (directory, names) in enumerate(sorted(_closed_ancestors(needs).items())):
        keep = f'"$keep/{index}"'
        steps.append(f"mkdir {keep}; mount --bind {shlex.quote(directory)} {keep}")
        steps.append(f"mount -t tmpfs -o mode=0755 tmpfs {shlex.quote(directory)}")
        for name in sorted(names):
            inside = shlex.quote(os.path.join(directory, name))
            steps.append(f"mkdir {inside}; mount --bind {keep}/{shlex.quote(name)} {inside}")
        steps.append(f"umount {keep}; rmdir {keep}")
    steps.append('rmdir "$keep"')
    command = shlex.quote(python)
    if prelude is not None:
        boot = f"{prelude}\nimport os, sys\nos.execv({python!r}, [{python!r}, *sys.argv[1:]])"
        command = f"{shlex.quote(python)} -I -c {shlex.quote(boot)}"
    drop = f"setpriv --reuid={uid} --regid={uid} --clear-groups --"
    if as_root is not None:
        boot = f"{as_root}\nimport os, sys\nos.execvp(sys.argv[1], sys.argv[1:])"
        drop = f"{shlex.quote(python)} -I -c {shlex.quote(boot)} {drop}"
    steps.append(f'exec {drop} {command} "$@"')
    inner = "; ".join(steps)
    return (
        "#!/bin/sh\n"
        f"exec unshare --mount --propagation private -- /bin/sh -c {shlex.quote(inner)} "
        'sh "$@"\n'
    )


NO_USER_NAMESPACES = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
ready_read, ready_write = os.pipe()
parent = os.getpid()
helper = os.fork()
if helper == 0:  # maps every id as it is, from outside the namespace (a process can't itself)
    os.read(ready_read, 1)
    for name in ("uid_map", "gid_map"):
        with open(f"/proc/{parent}/{name}", "w") as ids:
            ids.write("0 0 4294967295")
    os._exit(0)
if libc.unshare(0x10000000) != 0:  # CLONE_NEWUSER
    raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWUSER)")
os.write(ready_write, b"x")
os.waitpid(helper, 0)
with open("/proc/sys/user/max_user_namespaces", "w") as limit:
    limit.write("0")
"""
"""A prelude, as root, that puts the process in a user namespace mapping every id as it is,
where ``user.max_user_namespaces`` is 0: no process in it can make another, as on a machine
where an administrator switched them off."""

DENY_USER_NAMESPACES = f"""
import sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
import seccomp_denial
seccomp_denial.deny_user_namespaces()
"""
"""A prelude that puts the process under a seccomp filter refusing user namespaces, as a
container's default profile does (:mod:`seccomp_denial`)."""


@contextlib.contextmanager
def python_as_user(
    uid: int = USER_ID, prelude: str | None = None, as_root: str | None = None
) -> Iterator[str]:
    """The path of a command that runs this interpreter as ``uid`` (module doc), for
    ``ZygoteProcess.start(python=...)`` or ``ZygoteLauncher(python=...)``; removed after.
    ``as_root`` and ``prelude`` run first, as root and as ``uid`` (:func:`_wrapper`)."""
    python = os.path.realpath(sys.executable)
    needs = [python, sys.prefix, sys.base_prefix, str(REPOSITORY)]
    scripts = Path(tempfile.mkdtemp(prefix="scriptbridge-as-user-"))
    try:
        wrapper = scripts / "python"
        wrapper.write_text(_wrapper(sys.executable, uid, needs, prelude, as_root))
        wrapper.chmod(0o700)
        yield str(wrapper)
    finally:
        shutil.rmtree(scripts, ignore_errors=True)


def start_zygote_as_user(
    uid: int = USER_ID, prelude: str | None = None, as_root: str | None = None
) -> ZygoteProcess:
    """Start a zygote as the ordinary user ``uid`` (module doc); the caller closes it."""
    with python_as_user(uid, prelude, as_root) as python:
        return ZygoteProcess.start(python=python)


def user_directory(uid: int = USER_ID) -> Path:
    """A new directory of ``uid``'s (mode 0700) under the temporary directory; the caller
    removes it."""
    path = Path(tempfile.mkdtemp(prefix="scriptbridge-user-"))
    os.chown(path, uid, uid)
    return path


def hand_to_user(root: Path, uid: int = USER_ID) -> None:
    """Make ``root`` and everything in it ``uid``'s (never following a symlink)."""
    os.chown(root, uid, uid, follow_symlinks=False)
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            os.chown(os.path.join(directory, name), uid, uid, follow_symlinks=False)
