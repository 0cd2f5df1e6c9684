"""Which isolation layers this machine can apply, how, and why not (for ``scriptbridge doctor``
and for the zygote's ``hello``).

:func:`probe_here` forks a child the way the zygote forks one and really applies each layer
in it, in the order a child applies them, so the answer is the kernel's; the child then exits
and the calling process is left unchanged. The zygote calls it once it is set up (its
namespaces entered), so what it reports is what its children get. :func:`probe_layers` does
the same from any single-threaded process, setting up in a throwaway child as a zygote would.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import platform
import resource
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from .. import _quota
from ..protocol import LAYER_NAMES, Layer
from ._landlock import Landlock, landlock_abi
from ._libc import CLONE_NEWIPC, CLONE_NEWNET, os_error, set_no_new_privs, unshare
from ._process import (
    CHILD_ID_BASE,
    CHILD_ID_SLOTS,
    PidNamespaces,
    drop_uid,
    ids_from_proc,
    seal_ipc_namespace,
)
from ._seccomp import install_seccomp, seccomp_arch
from ._userns import Privilege, enter_zygote_namespace

__all__ = ["LayerProbe", "layer_mechanism", "layer_remedy", "probe_here", "probe_layers"]

_PROBE_ID: Final = CHILD_ID_BASE + CHILD_ID_SLOTS
"""The id a probe drops to: just past the children's range, never one of theirs."""

_NAMESPACE_LAYERS: Final = frozenset({"netns", "pidns", "ipcns", "uid", "quota"})

_MECHANISMS: Final[dict[str, str]] = {
    "restricted-python": "RestrictedPython compiles each script, deny-by-default hooks",
    "rlimits": "setrlimit in each child",
    "seccomp": "a BPF filter in each child",
    "landlock": "a landlock ruleset in each child",
    "netns": "a network namespace of each child's own",
    "pidns": "each child pid 1 of a PID namespace of its own",
    "ipcns": "an IPC namespace of each child's own",
    "uid": "a uid of each child's own",
    "quota": "a tmpfs of the run's quota on out/",
}


def layer_mechanism(layer: str, privilege: Privilege) -> str:
    """How ``layer`` is given on this machine, in words (for ``doctor``)."""
    text = _MECHANISMS.get(layer, layer)
    if layer == "landlock":
        with contextlib.suppress(OSError):
            text += f" (ABI {landlock_abi()})"
    if layer == "uid" and privilege.mode == "root":
        text += ", from blocks of ids no other bridge holds"
    if layer == "uid" and privilege.userns:
        text += ", in a user namespace of each child's own, holding no capability"
    if layer in _NAMESPACE_LAYERS:
        text += f", {privilege.describe()}"
    return text


@dataclass(frozen=True)
class LayerProbe:
    """Whether this machine can apply one layer; if so, how (``mechanism``); if not, why
    (``reason``) and what would make it apply (``remedy``)."""

    layer: Layer
    available: bool
    reason: str | None = None
    mechanism: str | None = None
    remedy: str | None = None


def layer_remedy(layer: str, reason: str, privilege: Privilege) -> str:
    """What would let ``layer``, missing for ``reason``, apply on this machine."""
    if reason == "disabled":
        return "don't disable it"
    if layer in _NAMESPACE_LAYERS and privilege.refusal is not None:
        return privilege.refusal.remedy
    if layer == "landlock":
        return "a kernel with landlock: Linux 5.13 or later, landlock in its lsm= list"
    if layer == "seccomp":
        return "a kernel with seccomp filters, on x86_64 or aarch64"
    if layer == "quota" and "no mount calls known" in reason:
        return "x86_64 or aarch64 (the new mount API's numbers are known there)"
    if layer == "pidns" and "/proc" in reason:
        return "a /proc of the PID namespace the host runs in"
    if layer == "restricted-python":
        return "reinstall scriptbridge (RestrictedPython is one of its dependencies)"
    return "see scriptbridge doctor and SECURITY.md (Layers for every user)"


def _probe_in_child(
    privilege: Privilege, mounts: str | None, pidns: str | None, parent: int
) -> dict[str, str | None]:
    """Apply each layer in the calling probe child; ``{layer: None, or why not}``."""
    results: dict[str, str | None] = {}
    try:
        import RestrictedPython  # noqa: F401
    except ImportError as exc:  # pragma: no cover - a dependency of this package
        results["restricted-python"] = f"RestrictedPython is not importable: {exc}"
    else:
        results["restricted-python"] = None
    if pidns is None and (os.getpid() != 1 or ids_from_proc()[1] != parent):
        pidns = "a child forked into a PID namespace was not pid 1 of it"
    results["pidns"] = pidns
    try:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
        results["rlimits"] = None
    except (OSError, ValueError) as exc:
        results["rlimits"] = f"setrlimit failed: {exc}"
    namespaces: str | None = None
    if privilege.refusal is not None:
        namespaces = privilege.refusal.cause
    elif os.geteuid() != 0:
        namespaces = "not started as root"
    for layer, flag in (("netns", CLONE_NEWNET), ("ipcns", CLONE_NEWIPC)):
        if namespaces is not None:
            results[layer] = namespaces
        elif unshare(flag) != 0:
            results[layer] = str(os_error(f"unshare({layer})"))
        else:
            results[layer] = None
    if results["ipcns"] is None:
        try:
            seal_ipc_namespace()
        except OSError as exc:
            results["ipcns"] = f"its IPC namespace's limits could not be set: {exc}"
    results["quota"] = namespaces or mounts or _quota.probe_tmpfs()
    ruleset: Landlock | None = None
    try:
        ruleset = Landlock(landlock_abi(), [])
    except OSError as exc:
        results["landlock"] = (
            "the kernel has no landlock" if exc.errno == errno.ENOSYS else str(exc)
        )
    if namespaces is not None:
        results["uid"] = namespaces
    else:
        try:
            drop_uid(_PROBE_ID, userns=privilege.userns, hand_over_out=False)
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


def _in_child(work: Callable[[], Any], fork: Callable[[], int] = os.fork) -> Any:
    """Run ``work()`` in a child forked by ``fork`` (``os.fork``'s shape) and return its
    answer (a JSON object), or a string saying why there is none."""
    read_fd, write_fd = os.pipe()
    try:
        pid = fork()
    except OSError as exc:
        os.close(read_fd)
        os.close(write_fd)
        return f"could not fork a probe: {exc}"
    if pid == 0:  # pragma: no cover - runs in the probe child
        status = 1
        try:
            os.close(read_fd)
            payload = json.dumps(work()).encode()
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
        found = json.loads(raw)
    except ValueError:
        return "the probe child failed"
    return found if isinstance(found, dict) else "the probe child failed"


def _probes(found: dict[str, str | None] | str, privilege: Privilege) -> list[LayerProbe]:
    probes = []
    for layer in LAYER_NAMES:
        if isinstance(found, str) or layer not in found:
            probes.append(LayerProbe(layer, False, found if isinstance(found, str) else
                                     "the probe child failed"))  # fmt: skip
        elif found[layer] is None:
            probes.append(LayerProbe(layer, True, None, layer_mechanism(layer, privilege)))
        else:
            reason = str(found[layer])
            remedy = layer_remedy(layer, reason, privilege)
            probes.append(LayerProbe(layer, False, reason, None, remedy))
    return probes


def probe_here(privilege: Privilege, mounts: str | None) -> list[LayerProbe]:
    """Probe each layer in a child forked from the calling process as a zygote forks its
    children: ``privilege`` and ``mounts`` are what the caller set up
    (:func:`enter_zygote_namespace`, :func:`sandbox._quota.enter_private_mounts`). Never
    raises."""
    namespaces = PidNamespaces(privilege.refusal.cause if privilege.refusal else None)
    pidns: list[str | None] = [None]

    def fork() -> int:
        pid, pidns[0] = namespaces.fork(())
        return pid

    parent = os.getpid()
    found = _in_child(lambda: _probe_in_child(privilege, mounts, pidns[0], parent), fork)
    return _probes(found, privilege)


def probe_layers() -> list[LayerProbe]:
    """Return, for each layer, whether this machine can apply it, how, and why not.

    A throwaway child sets up as a zygote does (its user namespace when not root, its mount
    namespace) and probes there (:func:`probe_here`); the calling process, which must be
    single-threaded, is left unchanged. Never raises: a probe that cannot run at all reports
    every layer unavailable with the reason.
    """

    def set_up_and_probe() -> dict[str, Any]:
        privilege = enter_zygote_namespace()
        mounts = privilege.refusal.cause if privilege.refusal else _quota.enter_private_mounts()
        probes = probe_here(privilege, mounts)
        return {
            "probes": [[p.layer, p.available, p.reason, p.mechanism, p.remedy] for p in probes],
        }

    found = _in_child(set_up_and_probe)
    if isinstance(found, str):
        return [LayerProbe(layer, False, found) for layer in LAYER_NAMES]
    return [LayerProbe(*row) for row in found["probes"]]
