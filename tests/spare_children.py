"""Waiting for a bridge's spare children, for the tests that need them ready."""

from __future__ import annotations

import trio

from scriptbridge import Bridge
from scriptbridge._launcher import ZygoteLauncher
from scriptbridge._spares import SPARE_CHILDREN


async def spares_ready(bridge: Bridge) -> list[int]:
    """The pids of ``bridge``'s spares (the next one a run takes first), once all are ready."""
    launcher = bridge.launcher
    assert isinstance(launcher, ZygoteLauncher)
    with trio.fail_after(20):
        while len(launcher.spare_pids()) < SPARE_CHILDREN:
            await trio.sleep(0.01)
    return launcher.spare_pids()
