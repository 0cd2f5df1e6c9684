"""Tool servers that couldn't start, tried again while ``serve`` serves the others.

``scriptbridge serve`` starts with the servers that came up; each one that didn't is said on
stderr and in the log (``WARNING``, why), named in ``run_python``'s description
(:attr:`ServerRetries.unavailable`), and started again after 1 s, then twice as long each time
it fails again, never longer than :data:`MAX_BACKOFF_S`, until it comes up (its tools are then
offered as any server's) or ``serve`` stops.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Final

import anyio

from ._exceptions import ToolServerError
from ._mcp import McpServer
from ._supervisor import Bridge

__all__ = ["FIRST_BACKOFF_S", "MAX_BACKOFF_S", "ServerRetries"]

log = logging.getLogger("scriptbridge.serve")

FIRST_BACKOFF_S: Final = 1.0
MAX_BACKOFF_S: Final = 60.0


class ServerRetries:
    """Start again, with bounded backoff, each server of ``failed`` (a server and why it
    failed), and say which are still down (:attr:`unavailable`)."""

    def __init__(self, bridge: Bridge, failed: Sequence[tuple[McpServer, str]]) -> None:
        self._bridge = bridge
        self._failed = list(failed)
        self.unavailable: dict[str, str] = {server.name: why for server, why in failed}
        """Name -> why, for each server not started yet."""
        for _, why in failed:
            log.warning("%s; trying again in %g s", why, FIRST_BACKOFF_S)

    async def run(self) -> None:
        """Keep trying each failed server until it starts (a task; returns when all have)."""
        async with anyio.create_task_group() as tasks:
            for server, _ in self._failed:
                tasks.start_soon(self._retry, server)

    async def _retry(self, server: McpServer) -> None:
        delay = FIRST_BACKOFF_S
        while True:
            await anyio.sleep(delay)
            try:
                await self._bridge.add_server(server)
            except (ToolServerError, ValueError) as exc:
                delay = min(delay * 2, MAX_BACKOFF_S)
                self.unavailable[server.name] = str(exc)
                log.warning("%s; trying again in %g s", exc, delay)
            else:
                self.unavailable.pop(server.name, None)
                log.warning("server %r started on a later try: its tools are offered", server.name)
                return
