"""OS isolation of one sandbox child, applied after ``fork`` and before the script is read.

One module per layer, and one that orders them: :mod:`._process` (hygiene, ``rlimits``,
``uid``, ``pidns``), :mod:`._landlock`, :mod:`._seccomp`, :mod:`._apply` (the order,
:func:`apply_isolation`) and :mod:`._probe` (:func:`probe_layers`, for ``scriptbridge doctor``);
:mod:`._libc` holds the ``ctypes`` calls they share. This module only re-exports their names.

:func:`apply_isolation` runs in the freshly forked child. It always does the basic hygiene
(a new session and process group, every inherited fd closed but the channel's, ``/dev/null``
on fds 0-2, an empty environment, the run's workspace as working directory) and then the named
layers, each reported in :class:`IsolationReport` as applied or skipped with its reason:

``pidns``
    Root only: the child is pid 1 of a PID namespace of its own, so no other process exists for
    it: not another run's child, not the zygote, not the host. This one is applied by the zygote
    before it forks (:class:`PidNamespaces`) and only reported here. As a namespace's init the
    child ignores every signal it has no handler for, from inside its namespace, and every
    such signal but ``SIGKILL`` and ``SIGSTOP`` from outside; the soft CPU limit's ``SIGXCPU``
    included, so the hard limit's ``SIGKILL`` ends it. ``/proc`` is still the host's (it lists
    the host's pids; landlock keeps the child out of it).
``rlimits``
    CPU seconds (``SIGXCPU`` at the soft limit kills the child, ``SIGKILL`` a second later),
    address space (the inherited baseline plus ``memory_mb``), file size (a write past it fails
    with ``EFBIG``; at most one byte past the disk quota), open files, no core dumps.
``netns``
    Root only: a private network namespace, whose only interface is a loopback that is down;
    made by the zygote for this child alone, between requests (:class:`NetNamespaces`), and
    entered here (or made here when the zygote could not).
``uid``
    Root only: the child gets an id of its own from a private range (:class:`ChildIds`: no two
    live children of a zygote share one), ``out/`` is handed to it as uid and gid,
    supplementary groups are dropped, real, effective and saved uid and gid become it, and
    ``RLIMIT_NPROC`` is set to 0. What the kernel lets a process do to another of its own uid
    (``prlimit64``, ``setpriority``, ``sched_setaffinity``, ``ioprio_set``, signals) and what it
    counts per uid (processes, pending signals, pipe buffers) are then the child's alone.
``landlock``
    Read-only access to the Python installation (``sys.prefix``, ``sys.base_prefix``, the
    stdlib and site-packages, this package's directory) and to the workspace's ``refs/``;
    read-write access (no symlinks, no devices, no renames across directories) to ``out/``;
    nothing else on the file system. Where the kernel's ABI allows: no TCP bind or connect, no
    abstract Unix sockets and no signals to processes outside the child's own domain.
``seccomp``
    ``PR_SET_NO_NEW_PRIVS`` and a classic BPF filter written here (no libseccomp needed; see
    :data:`DENIED_SYSCALLS`): process creation, exec, sockets, tracing, namespaces, mounts,
    kernel keys and modules, BPF, perf, ``io_uring``, identity changes and the like fail with
    ``EPERM``; ``clone`` is allowed only with ``CLONE_THREAD``; ``clone3`` fails with
    ``ENOSYS`` so that libc falls back to ``clone``; signals may be sent only to the child
    itself; every call that acts on another process fails: on its memory, descriptors and
    robust list, its limits, priority, scheduling, CPUs and I/O priority (reading and lowering
    its own limits, and reading its own priority, scheduling and CPUs, stay allowed), its CPU
    clock, and pointing a file's or socket's ``SIGIO`` at it; a system call of a foreign ABI
    (x32, i386) kills the process.

``quota`` is applied by the zygote, before the fork: the child's ``out/`` is a tmpfs of the
run's disk quota (:mod:`sandbox._quota`); the child only reports it.

A layer this machine cannot apply is skipped with the reason (for example "not started as
root", "the kernel has no landlock"), never silently. A layer named in ``disable`` (tests of
single layers, and the security suite's "OS layers off" mode) is skipped with the reason
``disabled``.
:func:`probe_layers` answers, for ``scriptbridge doctor``, which layers this machine can apply.
"""

from ._apply import OS_LAYERS as OS_LAYERS
from ._apply import IsolationReport as IsolationReport
from ._apply import apply_isolation as apply_isolation
from ._landlock import landlock_abi as landlock_abi
from ._landlock import open_python_paths as open_python_paths
from ._landlock import python_paths as python_paths
from ._probe import LayerProbe as LayerProbe
from ._probe import probe_here as probe_here
from ._probe import probe_layers as probe_layers
from ._process import CHILD_ID_BASE as CHILD_ID_BASE
from ._process import CHILD_ID_SLOTS as CHILD_ID_SLOTS
from ._process import ID_BLOCK as ID_BLOCK
from ._process import ID_LOCK_DIRS as ID_LOCK_DIRS
from ._process import ChildIds as ChildIds
from ._process import IsolationError as IsolationError
from ._process import NetNamespaces as NetNamespaces
from ._process import PidNamespaces as PidNamespaces
from ._process import address_space_now as address_space_now
from ._seccomp import DENIED_SYSCALLS as DENIED_SYSCALLS
from ._seccomp import build_seccomp_filter as build_seccomp_filter
from ._seccomp import fill_seccomp as fill_seccomp
from ._seccomp import seccomp_arch as seccomp_arch
from ._seccomp import seccomp_template as seccomp_template
from ._userns import Privilege as Privilege
from ._userns import Refusal as Refusal
from ._userns import enter_zygote_namespace as enter_zygote_namespace
from ._userns import explain_refusal as explain_refusal

__all__ = [
    "CHILD_ID_BASE",
    "CHILD_ID_SLOTS",
    "DENIED_SYSCALLS",
    "ID_BLOCK",
    "ID_LOCK_DIRS",
    "OS_LAYERS",
    "ChildIds",
    "IsolationError",
    "IsolationReport",
    "LayerProbe",
    "NetNamespaces",
    "PidNamespaces",
    "Privilege",
    "Refusal",
    "address_space_now",
    "apply_isolation",
    "build_seccomp_filter",
    "enter_zygote_namespace",
    "explain_refusal",
    "fill_seccomp",
    "landlock_abi",
    "open_python_paths",
    "probe_here",
    "probe_layers",
    "python_paths",
    "seccomp_arch",
    "seccomp_template",
]
