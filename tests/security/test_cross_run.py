"""A run that escaped the language layer can't touch a concurrent, unrelated run (issue 13).

The victim is a real sandbox child, with the language layer off so that it can read its own
limits, priorities and CPUs; it reads them, then waits in a tool call while the attacker (also
plain CPython, in a child of the same zygote) tries every call it can name on the victim's pid;
then it reads them again and ends its run. Both are driven through their real channels.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from pathlib import Path
from typing import Any

import pytest
from test_security_suite import MODES, P

from sandbox import BlockingChannel, ChildLimits, ZygoteProcess
from sandbox.protocol import CallTool, Done, Ready, Start, ToolResult
from sandbox.testing import run_script

VICTIM = (
    P
    + """
resource = sysmod.modules["resource"]
libc.syscall.restype = ctypes.c_long
IOPRIO_GET = {"x86_64": 252, "aarch64": 31}[os.uname().machine]
def own():
    return {
        "open files": list(resource.getrlimit(resource.RLIMIT_NOFILE)),
        "cpu seconds": list(resource.getrlimit(resource.RLIMIT_CPU)),
        "nice": os.getpriority(os.PRIO_PROCESS, 0),
        "scheduling": os.sched_getscheduler(0),
        "cpus": sorted(os.sched_getaffinity(0)),
        "io priority": libc.syscall(ctypes.c_long(IOPRIO_GET), ctypes.c_long(1), ctypes.c_long(0)),
    }
before = own()
call_tool("attacked", {})
[before, own()]
"""
)

ATTACKER = (
    P
    + """
victim = inputs["victim"]
resource = sysmod.modules["resource"]
time = sysmod.modules["time"]
stat = sysmod.modules["stat"]
NR = {
    "x86_64": {"kcmp": 312, "get_robust_list": 274, "sched_setattr": 314, "ioprio_set": 251,
               "ioprio_get": 252, "rt_sigqueueinfo": 129, "tgkill": 234, "migrate_pages": 256,
               "move_pages": 279},
    "aarch64": {"kcmp": 272, "get_robust_list": 100, "sched_setattr": 274, "ioprio_set": 30,
                "ioprio_get": 31, "rt_sigqueueinfo": 138, "tgkill": 131, "migrate_pages": 238,
                "move_pages": 239},
}[os.uname().machine]
libc.syscall.restype = ctypes.c_long
def sc(name, *args):
    result = libc.syscall(ctypes.c_long(NR[name]), *[ctypes.c_long(a) for a in args])
    if result < 0:
        raise OSError(ctypes.get_errno(), name)
    return result
def checked(result):
    if result < 0:
        raise OSError(ctypes.get_errno(), "libc")
    return result
outcomes = {}
def attempt(name, action):
    try:
        action()
        outcomes[name] = "ok"
    except OSError as exc:
        outcomes[name] = exc.errno
class Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
buf = ctypes.create_string_buffer(8)
local = Iovec(ctypes.addressof(buf), 8)
remote = Iovec(id(None), 8)
attr = (ctypes.c_uint32 * 12)(48, 0, 0, 0, 19)
info = (ctypes.c_int * 32)(0, 0, -1)
head = ctypes.c_void_p()
size = ctypes.c_size_t()
nodes = ctypes.c_ulong(1)
owner = ctypes.c_int(victim)
r, w = os.pipe()
def socket_fd():
    for fd in range(3, 64):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                return fd
        except OSError:
            pass
attempt("prlimit64 set", lambda: resource.prlimit(victim, resource.RLIMIT_NOFILE, (16, 16)))
attempt("prlimit64 get", lambda: resource.prlimit(victim, resource.RLIMIT_CPU))
attempt("setpriority process", lambda: os.setpriority(os.PRIO_PROCESS, victim, 19))
attempt("setpriority group", lambda: os.setpriority(os.PRIO_PGRP, victim, 19))
attempt("getpriority", lambda: os.getpriority(os.PRIO_PROCESS, victim))
attempt("sched_setaffinity",
        lambda: os.sched_setaffinity(victim, {min(os.sched_getaffinity(0))}))
attempt("sched_getaffinity", lambda: os.sched_getaffinity(victim))
attempt("sched_setscheduler",
        lambda: os.sched_setscheduler(victim, os.SCHED_IDLE, os.sched_param(0)))
attempt("sched_getscheduler", lambda: os.sched_getscheduler(victim))
attempt("sched_setparam", lambda: os.sched_setparam(victim, os.sched_param(0)))
attempt("sched_getparam", lambda: os.sched_getparam(victim))
attempt("sched_rr_get_interval", lambda: os.sched_rr_get_interval(victim))
attempt("sched_setattr", lambda: sc("sched_setattr", victim, ctypes.addressof(attr), 0))
attempt("ioprio_set", lambda: sc("ioprio_set", 1, victim, 3 << 13))
attempt("ioprio_get", lambda: sc("ioprio_get", 1, victim))
attempt("getsid", lambda: os.getsid(victim))
attempt("getpgid", lambda: os.getpgid(victim))
attempt("kill", lambda: os.kill(victim, 0))
attempt("kill its group", lambda: os.kill(-victim, 0))
attempt("kill -1", lambda: os.kill(-1, 0))
attempt("tgkill", lambda: sc("tgkill", victim, victim, 0))
attempt("rt_sigqueueinfo", lambda: sc("rt_sigqueueinfo", victim, 0, ctypes.addressof(info)))
attempt("pidfd_open", lambda: os.pidfd_open(victim))
attempt("kcmp", lambda: sc("kcmp", os.getpid(), victim, 1, 0, 0))
attempt("process_vm_readv", lambda: checked(libc.process_vm_readv(
    victim, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)))
attempt("get_robust_list",
        lambda: sc("get_robust_list", victim, ctypes.addressof(head), ctypes.addressof(size)))
attempt("migrate_pages", lambda: sc("migrate_pages", victim, 64, ctypes.addressof(nodes),
                                    ctypes.addressof(nodes)))
attempt("move_pages", lambda: sc("move_pages", victim, 0, 0, 0, 0, 0))
attempt("ptrace seize", lambda: checked(libc.ptrace(0x4206, victim, 0, 0)))
attempt("clock_gettime of its cpu clock", lambda: time.clock_gettime(((~victim) << 3) | 2))
attempt("fcntl F_SETOWN", lambda: checked(libc.fcntl(r, 8, victim)))
attempt("ioctl FIOSETOWN", lambda: checked(libc.ioctl(socket_fd(), 0x8901, ctypes.byref(owner))))
attempt("/proc/<victim>/status", lambda: realopen(f"/proc/{victim}/status").read())
attempt("/proc listing", lambda: os.listdir("/proc"))
outcomes
"""
)


def run_against_a_victim(
    zygote: ZygoteProcess, tmp_path: Path, disable: Collection[str]
) -> tuple[Any, dict[str, Any]]:
    """Start the victim, let the attacker run while the victim waits in its tool call, then let
    the victim finish; both runs with the layers in ``disable`` off. Return the victim's value
    (its own readings before and after) and the attacker's (what each call gave)."""
    workspace = tmp_path / "victim"
    (workspace / "refs").mkdir(parents=True)
    (workspace / "out").mkdir()
    os.chmod(workspace, 0o755)
    attacker_workspace = tmp_path / "attacker"
    (attacker_workspace / "refs").mkdir(parents=True)
    (attacker_workspace / "out").mkdir()
    os.chmod(attacker_workspace, 0o755)
    child = zygote.client.spawn(workspace, ChildLimits(), disable=disable)
    channel = BlockingChannel(child.from_child, child.to_child)
    try:
        assert isinstance(channel.receive_child(), Ready)
        channel.send(Start(source=VICTIM, tools=["attacked"]))
        call = channel.receive_child()
        assert isinstance(call, CallTool) and call.name == "attacked", call
        attack = run_script(
            zygote.client,
            ATTACKER,
            workspace=attacker_workspace,
            inputs={"victim": child.pid},
            disable=disable,
            timeout=20,
        )
        assert attack.ok, (attack.final, attack.host_error)
        channel.send(
            ToolResult(call_id=call.call_id, view={"content": [], "data": None, "isError": False})
        )
        done = channel.receive_child()
    finally:
        os.close(child.to_child)
        os.close(child.from_child)
        zygote.client.wait(child.pid, timeout=10)
    assert isinstance(done, Done), done
    return done.value, attack.value


@pytest.mark.skipif(os.geteuid() != 0, reason="the pidns and uid layers need root")
def test_a_run_without_its_language_layer_cant_touch_a_concurrent_run(
    security_zygote: ZygoteProcess, tmp_path: Path
) -> None:
    """Every cross-process call the attacker names fails, and the concurrent run ends ok with
    its own limits, nice value, scheduling, CPUs and I/O priority as they were."""
    (before, after), outcomes = run_against_a_victim(
        security_zygote, tmp_path, MODES["language-off"]
    )
    assert after == before
    assert {name: outcome for name, outcome in outcomes.items() if outcome == "ok"} == {}


def test_the_same_attacker_unprotected_changes_the_victim(
    security_zygote: ZygoteProcess, tmp_path: Path
) -> None:
    """Control: with every OS layer off for both runs (both root, so one uid, in one PID
    namespace), the same attacker really lowers the victim's open-file limit, raises its nice
    value and idles its I/O, and the victim's own readings show it."""
    (before, after), outcomes = run_against_a_victim(security_zygote, tmp_path, MODES["control"])
    assert outcomes["prlimit64 set"] == "ok" and outcomes["setpriority process"] == "ok"
    assert before["open files"] != [16, 16] and after["open files"] == [16, 16]
    assert after["nice"] == 19 and after["io priority"] == 3 << 13 != before["io priority"]
