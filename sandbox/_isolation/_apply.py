"""The order of the layers: :func:`apply_isolation`, run in a freshly forked child.

It always does the basic hygiene (:func:`sandbox._isolation._process.hygiene`) and then the
named layers, in the order of :data:`OS_LAYERS`, each reported in :class:`IsolationReport` as
applied or skipped with its reason, never silently.
"""

from __future__ import annotations

import contextlib
import errno
import os
import platform
import sys
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Final

from .._wire import SkippedLayer
from .._zygote_wire import ChildLimits
from ..protocol import Layer
from ._landlock import Landlock, landlock_abi, workspace_rules
from ._libc import CLONE_NEWIPC, CLONE_NEWNET, os_error, set_no_new_privs, setns, unshare
from ._process import (
    IsolationError,
    apply_rlimits,
    drop_uid,
    hygiene,
    seal_ipc_namespace,
    watch_parent,
)
from ._seccomp import install_seccomp, seccomp_arch
from ._userns import Privilege

__all__ = ["OS_LAYERS", "IsolationReport", "apply_isolation"]

OS_LAYERS: Final[tuple[Layer, ...]] = (
    "pidns", "rlimits", "netns", "ipcns", "uid", "landlock", "seccomp", "quota"
)  # fmt: skip
"""The OS layers: ``pidns`` (made by the zygote at the fork), those this module applies, in the
order it applies them, then ``quota`` (the zygote's, applied before the fork)."""


@dataclass
class IsolationReport:
    """The named layers in force, in the order applied, and those skipped, with reasons; and
    the child's pid as the zygote (and the host) number it, which is not ``os.getpid()`` in a
    PID namespace of its own."""

    applied: list[Layer] = field(default_factory=list)
    skipped: list[SkippedLayer] = field(default_factory=list)
    pid: int = 0

    def skip(self, layer: Layer, reason: str) -> None:
        """Record ``layer`` as skipped because of ``reason``."""
        self.skipped.append(SkippedLayer(layer=layer, reason=reason))


def apply_isolation(
    *,
    workspace: str,
    limits: ChildLimits,
    keep_fds: Sequence[int],
    parent_pid: int,
    pid_namespace: str | None,
    child_id: int,
    privilege: Privilege,
    disable: Collection[str] = frozenset(),
    address_space: int | None = None,
    netns_fd: int | None = None,
    python_dirs: Sequence[int] | None = None,
) -> tuple[list[int], IsolationReport]:
    """Isolate the calling process (a fresh child) and report what is in force.

    Args:
        workspace: the run's workspace directory (holding ``refs/`` and ``out/``).
        limits: the OS limits to apply.
        keep_fds: the channel's fds; everything else is closed.
        parent_pid: the zygote's pid; the child is killed if it dies.
        pid_namespace: ``None`` when the zygote forked this child as pid 1 of a PID namespace
            of its own (:meth:`PidNamespaces.enter`), else the reason it did not.
        child_id: the uid and gid the ``uid`` layer drops to (:meth:`ChildIds.take`).
        privilege: where the namespace layers come from (:func:`enter_zygote_namespace`: root,
            the zygote's user namespace, or none, with the reason).
        disable: OS layers to skip (reason ``disabled``); for tests of single layers and the
            security suite's "OS layers off" mode only.
        address_space: the zygote's address space at the fork, the baseline of the
            ``rlimits`` layer's memory limit (``None``: read here).
        netns_fd: a fresh network namespace the zygote made for this child alone
            (:class:`NetNamespaces`), entered for the ``netns`` layer (``None``: one is made
            here); closed here.
        python_dirs: fds of the Python installation's directories for landlock's rules
            (:func:`open_python_paths`; ``None``: opened here by path); closed here.

    Returns:
        The kept fds (renumbered above 2 if needed, in the order given) and the report. A
        layer that failed is in ``report.skipped`` with the error; the others still apply,
        but for the ``uid`` layer, whose failure part-way could leave capabilities held.

    Raises:
        IsolationError: the session, fds, environment or working directory could not be set
            up, or the ``uid`` layer failed; the process is then partly isolated and must exit
            without running a script.
    """
    extra = ([] if netns_fd is None else [netns_fd]) + list(python_dirs or ())
    held = hygiene(workspace, [*keep_fds, *extra])  # the extras are closed below, each once
    kept = held[: len(keep_fds)]
    if netns_fd is not None:
        netns_fd = held[len(keep_fds)]
    dirs = held[len(keep_fds) + (netns_fd is not None) :] if python_dirs is not None else None
    try:
        return _apply_layers(
            workspace, limits, kept, parent_pid, pid_namespace, child_id, privilege, disable,
            address_space, netns_fd, dirs,
        )  # fmt: skip
    finally:
        for fd in held[len(keep_fds) :]:
            with contextlib.suppress(OSError):
                os.close(fd)


def _apply_layers(
    workspace: str,
    limits: ChildLimits,
    kept: list[int],
    parent_pid: int,
    pid_namespace: str | None,
    child_id: int,
    privilege: Privilege,
    disable: Collection[str],
    address_space: int | None,
    netns_fd: int | None,
    python_dirs: Sequence[int] | None,
) -> tuple[list[int], IsolationReport]:
    """:func:`apply_isolation` past the hygiene."""
    report = IsolationReport()
    if pid_namespace is None:
        report.applied.append("pidns")
    else:
        report.skip("pidns", pid_namespace)

    def wanted(layer: Layer, *, namespace: bool = False) -> bool:
        if layer in disable:
            report.skip(layer, "disabled")
            return False
        if namespace and privilege.refusal is not None:
            report.skip(layer, privilege.refusal.cause)
            return False
        if namespace and os.geteuid() != 0:
            report.skip(layer, "not started as root")
            return False
        return True

    if wanted("rlimits"):
        try:
            apply_rlimits(limits, address_space)
        except (OSError, ValueError) as exc:
            report.skip("rlimits", f"setrlimit failed: {exc}")
        else:
            report.applied.append("rlimits")

    if wanted("netns", namespace=True):
        if netns_fd is not None and setns(netns_fd, CLONE_NEWNET) == 0:
            report.applied.append("netns")
        elif unshare(CLONE_NEWNET) != 0:
            report.skip("netns", str(os_error("unshare(CLONE_NEWNET)")))
        else:
            report.applied.append("netns")

    if wanted("ipcns", namespace=True):
        if unshare(CLONE_NEWIPC) != 0:
            report.skip("ipcns", str(os_error("unshare(CLONE_NEWIPC)")))
        else:
            try:
                seal_ipc_namespace()
            except OSError as exc:
                report.skip("ipcns", f"its IPC namespace's limits could not be set: {exc}")
            else:
                report.applied.append("ipcns")

    landlock: Landlock | None = None
    if wanted("landlock"):
        try:  # built now, while every path can still be opened; enforced after the uid drop
            landlock = Landlock(landlock_abi(), workspace_rules(), python_dirs)
        except OSError as exc:
            reason = "the kernel has no landlock" if exc.errno == errno.ENOSYS else str(exc)
            report.skip("landlock", reason)

    if wanted("uid", namespace=True):
        try:
            drop_uid(child_id, userns=privilege.userns, hand_over_out=True)
        except OSError as exc:
            raise IsolationError(exc.errno, f"could not drop to uid {child_id}: {exc}") from exc
        report.applied.append("uid")
    report.pid = watch_parent(parent_pid, own_namespace=pid_namespace is None)

    seccomp = wanted("seccomp")
    if landlock is None and not seccomp:
        return kept, report
    try:
        set_no_new_privs()
    except OSError as exc:
        if landlock is not None:
            os.close(landlock.fd)
            report.skip("landlock", str(exc))
        if seccomp:
            report.skip("seccomp", str(exc))
        return kept, report

    if landlock is not None:
        try:
            landlock.restrict_self()
        except OSError as exc:
            report.skip("landlock", str(exc))
        else:
            report.applied.append("landlock")

    if seccomp:
        arch = seccomp_arch()
        if arch is None:
            report.skip("seccomp", f"no filter for {platform.machine()} ({sys.byteorder}-endian)")
        else:
            try:
                install_seccomp(arch)
            except OSError as exc:
                report.skip("seccomp", str(exc))
            else:
                report.applied.append("seccomp")
    return kept, report
