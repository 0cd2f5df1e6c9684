"""Host tools: ``python_tool`` wraps a sync or async callable as a tool a script can call.

A tool's return value becomes an MCP-shaped result (:func:`as_tool_result`):

- an MCP-shaped dict (one with a ``content`` list) or the SDK's ``CallToolResult`` is kept as it
  is;
- a ``str`` becomes one text block;
- any other value (a dict, a list, a number) becomes ``structuredContent``, with a text block
  of its JSON *only when the value holds no block at any depth*: a JSON text of an embedded
  resource or a never reference would carry its uri past the renderer, so such a value gets no
  text block and a reader sees it through the rendered data instead. A value that can't be read
  whole (too deep, a cycle, a non-JSON type) gets no text block either.

A sync callable runs in a worker thread (``trio.to_thread.run_sync`` with
``abandon_on_cancel=True``, so cancelling a run never waits on a stuck tool); an async one runs
in the caller's task. The thread hop costs a sync tool more per call than a coroutine tool
(``benchmarks/compare.py`` measures ``tool_call_sync`` against ``tool_call``), so a quick
function that never blocks is cheaper offered as a coroutine function.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import trio

from ._classify import is_block
from ._plain import PLAIN_SCALARS
from ._result_dict import result_dict
from ._walk import MAX_DEPTH, Budget, children_of

__all__ = ["PythonTool", "as_tool_result", "python_tool"]

TOOL_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,127}")


@dataclass(frozen=True)
class PythonTool:
    """A host callable offered to scripts as a tool named :attr:`name`."""

    name: str
    fn: Callable[..., Any]
    description: str

    @property
    def server(self) -> None:
        """A host tool's result comes from no server."""
        return None

    async def call(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Call the function with ``arguments`` as keywords; returns its MCP-shaped result.

        Whatever the function raises propagates (the supervisor turns it into the script's
        ``ToolError``); ``trio.Cancelled`` passes through.
        """
        if inspect.iscoroutinefunction(self.fn):
            value = await self.fn(**arguments)
        else:
            call = functools.partial(self.fn, **arguments)
            value = await trio.to_thread.run_sync(call, abandon_on_cancel=True)
            if inspect.isawaitable(value):  # a sync wrapper that hands back a coroutine
                value = await _awaited(value)
        return as_tool_result(value)


async def _awaited(value: Awaitable[Any]) -> Any:
    return await value


def python_tool(fn: Callable[..., Any], name: str | None = None) -> PythonTool:
    """Wrap a sync or async callable as a tool, named ``name`` or the function's own name.

    Raises ``ValueError`` for a name scripts couldn't call (letters, digits, ``_``, ``.`` and
    ``-`` only, at most 128 characters, not starting with a digit, ``.`` or ``-``).
    """
    tool_name = name if name is not None else getattr(fn, "__name__", "")
    if not TOOL_NAME.fullmatch(tool_name):
        raise ValueError(f"not a usable tool name: {tool_name!r}")
    description = inspect.getdoc(fn) or ""
    return PythonTool(tool_name, fn, description.splitlines()[0] if description else "")


def as_tool_result(value: object) -> dict[str, Any]:
    """Turn a tool's return value into an MCP-shaped result (see the module doc)."""
    if isinstance(value, str):
        return {"content": [{"type": "text", "text": value}]}
    if isinstance(value, dict) and isinstance(value.get("content"), list):
        return value
    if not isinstance(value, (dict, list, tuple, *PLAIN_SCALARS)):
        shaped = result_dict(value)  # the SDK's CallToolResult
        if shaped is not None:
            return shaped
    content: list[dict[str, Any]] = []
    if _plain_without_blocks(value):
        with contextlib.suppress(TypeError, ValueError):  # bytes, NaN keys and the like
            content.append({"type": "text", "text": json.dumps(value, ensure_ascii=False)})
    return {"content": content, "structuredContent": value}


def _plain_without_blocks(value: object) -> bool:
    """Whether ``value`` is plain data, within the walk limits, holding no block anywhere."""
    budget = Budget()
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, PLAIN_SCALARS):
            continue
        if not isinstance(item, dict | list | tuple) or depth > MAX_DEPTH or is_block(item):
            return False
        children = children_of(item)
        if not budget.open(item, len(children)):
            return False
        stack.extend((child, depth + 1) for child in children)
    return True
