"""Which isolation layers this machine can apply, and why not (for ``scriptbridge doctor``).

:func:`probe_layers` really applies each layer in a forked child that then exits, so the answer
is the kernel's; the calling process is left unchanged.
"""

from __future__ import annotations

import errno
import json
import os
import platform
import resource
import sys
from dataclasses import dataclass
from typing import Final

from .. import _quota
from ..protocol import LAYER_NAMES, Layer
from ._landlock import Landlock, landlock_abi
from ._libc import CLONE_NEWNET, os_error, set_no_new_privs, unshare
from ._process import CHILD_ID_BASE, CHILD_ID_SLOTS, PidNamespaces, drop_uid, ids_from_proc
from ._seccomp import install_seccomp, seccomp_arch

__all__ = ["LayerProbe", "probe_layers"]

_PROBE_ID: Final = CHILD_ID_BASE + CHILD_ID_SLOTS
"""The id ``probe_layers`` drops to: just past the children's range, never one of theirs."""


@dataclass(frozen=True)
class LayerProbe:
    """Whether this machine can apply one layer, and if not, why."""

    layer: Layer
    available: bool
    reason: str | None = None


def _probe_pid_namespace() -> str | None:
    """Fork a child as the zygote would, as pid 1 of a namespace of its own; ``None`` if it
    was, else why not."""
    namespaces = PidNamespaces()
    reason = namespaces.enter(())
    if reason is not None:
        return reason
    parent = os.getpid()
    try:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the probe's child
            os._exit(0 if os.getpid() == 1 and ids_from_proc()[1] == parent else 1)
    except OSError as exc:
        return f"could not fork into a PID namespace: {exc}"
    finally:
        namespaces.leave()
    _, status = os.waitpid(pid, 0)
    return None if status == 0 else "a child forked into a PID namespace was not pid 1 of it"


def _probe_in_child() -> dict[str, str | None]:
    results: dict[str, str | None] = {}
    try:
        import RestrictedPython  # noqa: F401
    except ImportError as exc:  # pragma: no cover - a dependency of this package
        results["restricted-python"] = f"RestrictedPython is not importable: {exc}"
    else:
        results["restricted-python"] = None
    try:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
        results["rlimits"] = None
    except (OSError, ValueError) as exc:
        results["rlimits"] = f"setrlimit failed: {exc}"
    root = os.geteuid() == 0
    results["pidns"] = _probe_pid_namespace()
    if not root:
        results["netns"] = results["uid"] = "not started as root"
    else:
        results["netns"] = (
            None if unshare(CLONE_NEWNET) == 0 else str(os_error("unshare(CLONE_NEWNET)"))
        )
    results["quota"] = _quota.probe()
    ruleset: Landlock | None = None
    try:
        ruleset = Landlock(landlock_abi(), [])
    except OSError as exc:
        results["landlock"] = (
            "the kernel has no landlock" if exc.errno == errno.ENOSYS else str(exc)
        )
    if root:
        try:
            drop_uid(_PROBE_ID, hand_over_out=False)
            results["uid"] = None
        except OSError as exc:
            results["uid"] = f"could not drop to uid {_PROBE_ID}: {exc}"
    try:
        set_no_new_privs()
    except OSError as exc:
        results["landlock"] = results["seccomp"] = str(exc)
        return results
    if ruleset is not None:
        try:
            ruleset.restrict_self()
            results["landlock"] = None
        except OSError as exc:
            results["landlock"] = str(exc)
    arch = seccomp_arch()
    if arch is None:
        results["seccomp"] = f"no filter for {platform.machine()} ({sys.byteorder}-endian)"
    else:
        try:
            install_seccomp(arch)
            results["seccomp"] = None
        except OSError as exc:
            results["seccomp"] = str(exc)
    return results


def probe_layers() -> list[LayerProbe]:
    """Return, for each layer, whether this machine can apply it and why not.

    The layers are really applied, in a forked child that then exits, so the answer is the
    kernel's. The calling process is left unchanged. Never raises: a probe that cannot run at
    all reports every layer unavailable with the reason.
    """
    read_fd, write_fd = os.pipe()
    try:
        pid = os.fork()
    except OSError as exc:
        os.close(read_fd)
        os.close(write_fd)
        return [LayerProbe(layer, False, f"could not fork a probe: {exc}") for layer in LAYER_NAMES]
    if pid == 0:  # pragma: no cover - runs in the probe child
        status = 1
        try:
            os.close(read_fd)
            payload = json.dumps(_probe_in_child()).encode()
            with os.fdopen(write_fd, "wb") as pipe:
                pipe.write(payload)
            status = 0
        finally:
            os._exit(status)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        raw = pipe.read()
    os.waitpid(pid, 0)
    try:
        found: dict[str, str | None] = json.loads(raw)
    except ValueError:
        found = {}
    probes = []
    for layer in LAYER_NAMES:
        if layer not in found:
            probes.append(LayerProbe(layer, False, "the probe child failed"))
        else:
            reason = found[layer]
            probes.append(LayerProbe(layer, reason is None, reason))
    return probes
