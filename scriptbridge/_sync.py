"""``SyncBridge``: the bridge for sync hosts, in blocking form and safe from many threads.

A :class:`SyncBridge` holds a :class:`~scriptbridge.Bridge` open in a trio thread of its own
(:class:`~scriptbridge._hosting.ThreadHost`) and offers the same methods, blocking: each call
runs on that thread and the caller waits for it, so any number of threads may call ``run`` at
once (each run gets its own child, as always). Every guarantee of ``Bridge.run`` holds as it
is. A ``python_tool`` whose function is a coroutine function runs on the bridge's own trio loop
here (use trio- or anyio-compatible code, or a sync function, which runs in a worker thread).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ._exceptions import ScriptBridgeError
from ._hosting import ThreadHost
from ._isolation_policy import RequiredIsolation
from ._launcher import Launcher
from ._limits import Limits
from ._mcp import McpServer
from ._registry import ReferenceRecord
from ._results import ScriptResult
from ._run_state import RunProgress, Watch
from ._sessions import SyncBridgeSession
from ._supervisor import Bridge, start_server
from ._tool_spec import ToolSpec
from ._tools import PythonTool

__all__ = ["SyncBridge"]


class SyncBridge:
    """A :class:`~scriptbridge.Bridge` for sync code: ``with SyncBridge(...) as bridge:
    result = bridge.run(source)``. Takes the arguments of ``Bridge``; :attr:`bridge` is the
    bridge itself (its trio side lives in this object's thread)."""

    def __init__(
        self,
        workspace: str | os.PathLike[str],
        limits: Limits | None = None,
        fetch_allow: Iterable[str] = (),
        *,
        eager_max_bytes: int | None = None,
        launcher: Launcher | None = None,
        max_spares: int | None = None,
        require_isolation: RequiredIsolation = None,
    ) -> None:
        self.bridge = Bridge(
            workspace,
            limits,
            fetch_allow,
            eager_max_bytes=eager_max_bytes,
            launcher=launcher,
            max_spares=max_spares,
            require_isolation=require_isolation,
        )
        self._host: ThreadHost | None = None

    def __enter__(self) -> SyncBridge:
        if self._host is not None:
            raise ScriptBridgeError("this SyncBridge is open already")
        host = ThreadHost(self.bridge._lifetime)
        host.open_blocking()
        self._host = self.bridge._host = host
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the bridge (as leaving ``async with Bridge`` does) and stop its thread."""
        host, self._host = self._host, None
        if host is not None:
            self.bridge._host = None
            host.close_blocking()

    def _live(self) -> ThreadHost:
        if self._host is None:
            raise ScriptBridgeError("open the SyncBridge (with) before using it")
        return self._host

    def add_tool(self, tool: PythonTool | Any, name: str | None = None) -> None:
        """:meth:`Bridge.add_tool`."""
        self.bridge.add_tool(tool, name)

    def add_server(self, server: McpServer) -> None:
        """:meth:`Bridge.add_server`, blocking until the server is started."""
        self._live().call_blocking(start_server, self.bridge, server)

    def run(
        self,
        source: str,
        *,
        inputs: Mapping[str, Any] | None = None,
        limits: Limits | None = None,
        tools: Sequence[str] | None = None,
        label: str | None = None,
        on_output: Callable[[str], object] | None = None,
    ) -> ScriptResult:
        """:meth:`Bridge.run`, blocking; safe to call from many threads at once
        (``on_output`` is called in the bridge's thread)."""
        watch = Watch(label, on_output)
        return self._live().call_blocking(
            self.bridge._run, source, inputs, limits, tools, None, watch
        )

    def session(
        self, tools: Sequence[str] | None = None, limits: Limits | None = None
    ) -> SyncBridgeSession:
        """:meth:`Bridge.session` as a sync context manager: ``with bridge.session() as
        session: session.run(source)``."""
        return SyncBridgeSession(self, tools, limits)

    def tool_specs(self, tools: list[str] | None = None) -> list[ToolSpec]:
        """:meth:`Bridge.tool_specs`."""
        return self.bridge.tool_specs(tools)

    def tool_stubs(self, tools: list[str] | None = None) -> str:
        """:meth:`Bridge.tool_stubs`."""
        return self.bridge.tool_stubs(tools)

    @property
    def tool_names(self) -> list[str]:
        """:attr:`Bridge.tool_names`."""
        return self.bridge.tool_names

    def ingest(self, result: object, *, server: str | None) -> list[ReferenceRecord]:
        """:meth:`Bridge.ingest`."""
        return self.bridge.ingest(result, server=server)

    def progress(self) -> list[RunProgress]:
        """:meth:`Bridge.progress`."""
        return self.bridge.progress()
