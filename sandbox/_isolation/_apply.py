"""The order of the layers: :func:`apply_isolation`, run in a freshly forked child.

It always does the basic hygiene (:func:`sandbox._isolation._process.hygiene`) and then the
named layers, in the order of :data:`OS_LAYERS`, each reported in :class:`IsolationReport` as
applied or skipped with its reason, never silently.
"""

from __future__ import annotations

import errno
import os
import platform
import sys
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Final

from ..protocol import ChildLimits, Layer, SkippedLayer
from ._landlock import Landlock, landlock_abi, workspace_rules
from ._libc import CLONE_NEWNET, os_error, set_no_new_privs, unshare
from ._process import apply_rlimits, drop_uid, hygiene, watch_parent
from ._seccomp import install_seccomp, seccomp_arch

__all__ = ["OS_LAYERS", "IsolationReport", "apply_isolation"]

OS_LAYERS: Final[tuple[Layer, ...]] = (
    "pidns", "rlimits", "netns", "uid", "landlock", "seccomp", "quota"
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
    disable: Collection[str] = frozenset(),
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
        disable: OS layers to skip (reason ``disabled``); for tests of single layers and the
            security suite's "OS layers off" mode only.

    Returns:
        The kept fds (renumbered above 2 if needed, in the order given) and the report. A
        layer that failed is in ``report.skipped`` with the error; the others still apply.

    Raises:
        IsolationError: the session, fds, environment or working directory could not be set
            up; the process is then partly isolated and must exit without running a script.
    """
    kept = hygiene(workspace, keep_fds)
    report = IsolationReport()
    root = os.geteuid() == 0
    if pid_namespace is None:
        report.applied.append("pidns")
    else:
        report.skip("pidns", pid_namespace)

    def wanted(layer: Layer, *, needs_root: bool = False) -> bool:
        if layer in disable:
            report.skip(layer, "disabled")
            return False
        if needs_root and not root:
            report.skip(layer, "not started as root")
            return False
        return True

    if wanted("rlimits"):
        try:
            apply_rlimits(limits)
        except (OSError, ValueError) as exc:
            report.skip("rlimits", f"setrlimit failed: {exc}")
        else:
            report.applied.append("rlimits")

    if wanted("netns", needs_root=True):
        if unshare(CLONE_NEWNET) != 0:
            report.skip("netns", str(os_error("unshare(CLONE_NEWNET)")))
        else:
            report.applied.append("netns")

    landlock: Landlock | None = None
    if wanted("landlock"):
        try:  # built now, while every path can still be opened; enforced after the uid drop
            landlock = Landlock(landlock_abi(), workspace_rules())
        except OSError as exc:
            reason = "the kernel has no landlock" if exc.errno == errno.ENOSYS else str(exc)
            report.skip("landlock", reason)

    if wanted("uid", needs_root=True):
        try:
            drop_uid(child_id, hand_over_out=True)
        except OSError as exc:
            report.skip("uid", f"could not drop to uid {child_id}: {exc}")
        else:
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
