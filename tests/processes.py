"""Processes as ``/proc`` shows them, for the tests that check what a run or a server leaves:
a process's state, its descendants, and a bridge's zygote holding nothing but spares."""

from __future__ import annotations

import pathlib

import anyio

from scriptbridge import Bridge
from scriptbridge._launcher import ZygoteLauncher


def proc_status(pid: int) -> dict[str, str] | None:
    """``/proc/<pid>/status`` as its fields (names to values, stripped); ``None``: gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            return {
                name: value.strip()
                for name, value in (line.split(":", 1) for line in status if ":" in line)
            }
    except (FileNotFoundError, ProcessLookupError):
        return None


def process_state(pid: int) -> str | None:
    """``pid``'s State letter (``Z``: exited, not yet reaped; ``T``: stopped); ``None``: gone
    (reaped)."""
    status = proc_status(pid)
    return None if status is None else status["State"].split()[0]


def alive(pid: int) -> bool:
    """Whether ``pid`` is a process that hasn't exited (neither gone nor a zombie)."""
    return process_state(pid) not in (None, "Z", "X")


def descendants(pid: int) -> set[int]:
    """Live (not exited) descendants of ``pid``, read from /proc."""
    parents: dict[int, int] = {}
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] not in ("Z", "X"):
                parents[int(entry.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier}
        found |= frontier
    return found


def rss_kib(pid: int) -> int:
    """``pid``'s resident set (``VmRSS``), in KiB."""
    status = proc_status(pid)
    assert status is not None and "VmRSS" in status, f"no VmRSS for {pid}"
    return int(status["VmRSS"].split()[0])


async def only_spares_left(bridge: Bridge) -> None:
    """Return once every live descendant of ``bridge``'s zygote is one of its spares (waiting
    for a run); fail after 30 s. A spare the zygote forked is its descendant a moment before
    the bridge lists it (the refill goes on meanwhile), so a snapshot of the two may differ by
    a spare being made: this waits that moment out, and a run's child left behind fails it."""
    launcher = bridge.launcher
    assert isinstance(launcher, ZygoteLauncher) and launcher.zygote_pid is not None
    zygote = launcher.zygote_pid
    left: set[int] = set()
    with anyio.move_on_after(30):  # under trio, asyncio or uvloop: the host's loop
        while left := descendants(zygote) - set(launcher.spare_pids()):
            await anyio.sleep(0.01)
    assert not left, f"the zygote holds {sorted(left)} beside its spares"
