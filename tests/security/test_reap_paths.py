"""Attacks on a run's end (``scriptbridge._reaping``): ``Bridge.run`` returns once a child that
said done or error is killed, and reaps it after. The hostile children here run with the
language layer off (plain Python, the real ``os`` at hand, their own channel's fd), as a child
that escaped it would; real zygote, real children, no doubles.

Each test's docstring tells an attack; the test holds it stopped. Those under "weaknesses" once
got through (each was red before its fix); those under "what held" never did.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import textwrap
from collections.abc import AsyncIterator

import pytest
import trio
from escapes import REAL_SYS
from processes import proc_status
from spare_children import spares_ready

from sandbox import ChildLimits
from scriptbridge import Bridge
from scriptbridge._launcher import Child, ZygoteChild, ZygoteLauncher
from scriptbridge._run_dirs import RunDir

# The real os and msgpack from plain Python (the language layer is off), and the child's own
# end of its channel to the host: the pipe it writes to.
PRELUDE = REAL_SYS + textwrap.dedent("""
    stat = sysmod.modules["stat"]
    fcntl = sysmod.modules["fcntl"]
    msgpack = sysmod.modules["msgpack"]
    def channel_out():
        for fd in range(3, 64):
            try:
                info = os.fstat(fd)
            except OSError:
                continue
            if stat.S_ISFIFO(info.st_mode) and fcntl.fcntl(fd, fcntl.F_GETFL) & 3 == os.O_WRONLY:
                return fd
        raise RuntimeError("no channel")
    def forge_done(value):
        data = msgpack.packb({"op": "done", "value": value})
        os.write(channel_out(), len(data).to_bytes(4, "big") + data)
""")


def hostile(body: str) -> str:
    return PRELUDE + textwrap.dedent(body)


class LanguageOffLauncher(ZygoteLauncher):
    """The default launcher, spares and all, whose children run with the language layer off."""

    async def _fork(self, directory: RunDir, limits: ChildLimits) -> Child:
        link = self._live_link()
        spawned = await link.spawn(directory.path, limits, disable=["restricted-python"])
        return ZygoteChild(link, spawned)


@pytest.fixture
async def hostile_bridge(tmp_path: pathlib.Path) -> AsyncIterator[Bridge]:
    async with Bridge(tmp_path / "ws", launcher=LanguageOffLauncher()) as bridge:
        yield bridge


def can_run_code(pid: int) -> bool:
    """Whether ``pid`` may still run code of its own: not exited, and no SIGKILL pending."""
    fields = proc_status(pid)
    if fields is None or fields["State"].split()[0] in ("Z", "X"):
        return False
    pending = int(fields["ShdPnd"], 16) | int(fields["SigPnd"], 16)
    return not pending & (1 << (9 - 1))  # SIGKILL


def pidfds_and_outs() -> dict[int, str]:
    """This process's pidfds and fds of an ``out/`` tmpfs (what ``spawned`` hands over)."""
    found = {}
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{name}")
            if target == "anon_inode:[pidfd]" or target.endswith("/out"):
                found[int(name)] = target
    return found


# --- weaknesses (each was red before its fix) ---------------------------------------------------


async def test_a_program_the_host_runs_inherits_no_pidfd_and_no_tmpfs(
    bridge: Bridge, tmp_path: pathlib.Path
) -> None:
    """A host tool runs a helper program (``os.system``) while the bridge is open. Were the
    children's pidfds and ``out/`` tmpfs fds the zygote hands the host inheritable, the helper
    could kill any spare or running child, and plant a file in a spare's ``out/`` that the
    next run lists as its own output. They came in without close-on-exec; now they have it."""
    await spares_ready(bridge)
    held = pidfds_and_outs()
    assert held, "no pidfd or tmpfs fd in the host: nothing to check"
    assert {fd: target for fd, target in held.items() if os.get_inheritable(fd)} == {}
    plant = (
        "for fd in /proc/self/fd/*; do "
        'case "$(readlink $fd)" in */out) echo planted > "$fd/planted.txt";; esac; done; '
        f"ls -l /proc/self/fd/ > {tmp_path}/fds.txt 2>&1"
    )
    await trio.to_thread.run_sync(os.system, f"sh -c '{plant}'")
    seen = (tmp_path / "fds.txt").read_text().splitlines()
    assert [line for line in seen if "pidfd" in line or "/out" in line] == []
    result = await bridge.run("1")
    assert result.ok and result.outputs == []


# --- what held ----------------------------------------------------------------------------------


async def test_a_child_that_forges_done_and_goes_on_is_stopped_as_run_returns(
    hostile_bridge: Bridge,
) -> None:
    """The child writes a ``done`` frame on its own channel and spins on: the run takes the
    forged ending, but once ``run`` returns the child runs no more code (SIGKILL is pending, or
    it is dead), where it once had a 5 s grace to go on."""
    for _ in range(5):
        child = (await spares_ready(hostile_bridge))[0]
        result = await hostile_bridge.run(hostile("forge_done('forged')\nwhile True:\n    pass\n"))
        assert result.ok and result.value == "forged", result.error
        assert not can_run_code(child)


async def test_files_made_after_a_forged_done_never_stay_unlisted(tmp_path: pathlib.Path) -> None:
    """The child forges ``done`` and then makes files in ``out/`` as fast as it can, racing the
    kill. What ``out/`` held at the kill is its output (the host can't tell it from what it
    made before); whatever it is, every file left in the workspace once the bridge is closed is
    one a result listed, and each listed file is on the disk as ``run`` returns."""
    listed: set[str] = set()
    root = tmp_path / "ws"
    async with Bridge(root, launcher=LanguageOffLauncher()) as bridge:
        for _ in range(8):
            await spares_ready(bridge)
            result = await bridge.run(
                hostile("""
                    forge_done("forged")
                    i = 0
                    while True:
                        os.close(os.open("out/late-%d" % i, os.O_CREAT | os.O_WRONLY, 0o644))
                        i += 1
                """)
            )
            assert result.value == "forged" or result.error is not None
            for path in result.outputs:
                assert (root / path).is_file()
            listed.update(result.outputs)
    left = {str(p.relative_to(root)) for p in (root / "runs").rglob("*") if p.is_file()}
    assert left <= listed
    assert not (root / ".trash").exists()
