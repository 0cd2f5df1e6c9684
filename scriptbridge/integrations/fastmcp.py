"""FastMCP's code mode on this sandbox: :class:`BridgeSandboxProvider`.

FastMCP's ``CodeMode`` transform collapses a server's tools into an ``execute`` tool that runs
model-written Python through a ``SandboxProvider``: ``await provider.run(code, inputs=...,
external_functions={"call_tool": call_tool})``, the code written in the async dialect
(``await call_tool(name, params)``, a top-level ``return``), the value handed back to the
client. :class:`BridgeSandboxProvider` implements that with an open
:class:`~scriptbridge.Bridge`: each run is a fresh sandbox child of the bridge, with every
layer the bridge gives.

How the external functions reach a run: the first time a function name is seen, the bridge
gets a host tool ``fastmcp.<name>`` (run on the host's loop, as any coroutine tool under
asyncio); each run is given a key of its own (128 random bits) and the functions it was handed,
and starts with a short preamble defining each name as an async function that calls that tool
with the run's key and its arguments, and returns what the function returned. So concurrent
runs each reach only their own functions (a script can't name another run's key), and a
function named ``call_tool``, as FastMCP's is, replaces the sandbox's own ``call_tool`` in that
run: the script calls FastMCP's tools, through FastMCP, as its prompt says.

A script that doesn't end ``ok`` raises FastMCP's ``ToolError`` saying how it ended (its
error's type, line in the model's code and message), so the client's model sees why; its value
otherwise is returned as is (plain data: numbers, strings, lists, dicts, ``None``).

Needs the ``fastmcp`` extra only to raise ``ToolError`` (imported when a run fails); importing
this module needs nothing beyond scriptbridge.
"""

from __future__ import annotations

import keyword
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from .._limits import Limits
from .._supervisor import Bridge

__all__ = ["BridgeSandboxProvider"]

TOOL_PREFIX = "fastmcp."
"""The bridge's host tools that carry a run's external functions: ``fastmcp.<name>``."""
BUILTIN = "sb_sandbox_call_tool"
"""What the preamble names the sandbox's own ``call_tool`` (a function of the run may take the
name ``call_tool``)."""


class BridgeSandboxProvider:
    """A FastMCP ``SandboxProvider`` over an open ``bridge`` (module doc).

    Args:
        bridge: an open :class:`~scriptbridge.Bridge`, on the loop FastMCP serves on.
        limits: each run's limits (the bridge's own by default).
    """

    def __init__(self, bridge: Bridge, *, limits: Limits | None = None) -> None:
        self.bridge = bridge
        self.limits = limits
        self._runs: dict[str, Mapping[str, Callable[..., Any]]] = {}
        """Each run in flight's key -> the external functions it was handed."""
        self._offered: set[str] = set()

    async def run(
        self,
        code: str,
        *,
        inputs: dict[str, Any] | None = None,
        external_functions: dict[str, Callable[..., Any]] | None = None,
    ) -> Any:
        """Run ``code`` in a fresh sandbox child; its value, or ``ToolError`` when it failed.
        Raises ``ValueError`` for an external function name a script can't call (not an
        identifier, a keyword, or starting with ``_``)."""
        functions = dict(external_functions or {})
        for name in functions:
            if (
                not name.isidentifier()
                or keyword.iskeyword(name)
                or name.startswith("_")
                or (name == BUILTIN)
            ):
                raise ValueError(f"an external function can't be named {name!r} in a script")
            self._offer(name)
        key = secrets.token_hex(16)
        self._runs[key] = functions
        try:
            preamble = _preamble(key, sorted(functions))
            result = await self.bridge.run(
                preamble + code,
                inputs=inputs,
                limits=self.limits,
                tools=[TOOL_PREFIX + name for name in sorted(functions)],
            )
        finally:
            del self._runs[key]
        if not result.ok:
            from fastmcp.exceptions import ToolError

            error = result.error
            if error is None:
                raise ToolError("the script didn't end ok")
            own = error.line - preamble.count("\n") if error.line else 0
            where = f" (line {own})" if own > 0 else ""
            raise ToolError(f"{error.type}{where}: {error.message}")
        return result.value

    def _offer(self, name: str) -> None:
        """Give the bridge the host tool carrying external functions named ``name``."""
        if name in self._offered:
            return
        self.bridge.add_tool(_dispatcher(self._runs, name), name=TOOL_PREFIX + name)
        self._offered.add(name)


def _dispatcher(
    runs: Mapping[str, Mapping[str, Callable[..., Any]]], name: str
) -> Callable[..., Awaitable[Any]]:
    """The host tool for functions named ``name``: calls the one of the run ``run`` names."""

    async def dispatch(run: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        functions = runs.get(run)
        if functions is None or name not in functions:
            raise LookupError(f"{name} isn't offered to this run")
        answer = functions[name](*args, **kwargs)
        if isinstance(answer, Awaitable):
            answer = await answer
        return answer

    dispatch.__name__ = name
    return dispatch


def _preamble(key: str, names: list[str]) -> str:
    """Each external function as an async function of the run, calling its host tool and
    returning what the function returned (its structured value, else its text)."""
    lines = [f"{BUILTIN} = call_tool"]
    for name in names:
        lines += [
            f"async def {name}(*args, **kwargs):",
            f"    result = await {BUILTIN}({TOOL_PREFIX + name!r}, "
            f"{{'run': {key!r}, 'args': list(args), 'kwargs': kwargs}})",
            "    if result['data'] is not None or not result['content']:",
            "        return result['data']",
            "    return ''.join(block.get('text', '') for block in result['content'])",
        ]
    return "\n".join(lines) + "\n"
