"""A LangGraph CodeAct ``eval_fn`` that runs each step through a bridge's session.

``langgraph_codeact.create_codeact(model, tools, eval_fn)`` calls ``eval_fn(code, locals)``
once a step and takes back ``(output, new_vars)``. :func:`eval_fn` answers with a
:class:`~scriptbridge.SyncBridge` session: each step runs in a fresh sandbox child, starting
from what earlier steps left (plain-data variables, definitions); ``output`` is what the step
printed (and, when it failed, its error on a last line, with the step's own line), and
``new_vars`` the plain-data variables it made or changed.

The tools given to ``create_codeact`` reach ``eval_fn`` in ``locals`` (a name each, bound to
its function): each one becomes a host tool of the bridge the first time it is seen (it runs
in the host, as a tool called through the bridge), and each step starts with a short preamble
defining those names, so a step calls them as the agent's prompt teaches (``price(item=...)``,
or positionally), and a call returns what the tool returned (its structured result, else its
text); a callable no tool can be made of (a builtin) is left out. Every other value of
``locals`` is not read: the session keeps the state. Importing this module needs no LangGraph.
"""

from __future__ import annotations

import keyword
from collections.abc import Callable, Mapping
from typing import Any

from .._sync import SyncBridge
from .._tools import python_tool
from ._functions import tool_functions

__all__ = ["eval_fn"]

EvalFn = Callable[[str, Mapping[str, Any]], tuple[str, dict[str, Any]]]


def eval_fn(bridge: SyncBridge) -> EvalFn:
    """An ``eval_fn`` for ``create_codeact`` over one session of ``bridge`` (open; the session
    closes with it)."""
    session = bridge.session()
    session.__enter__()
    offered: list[str] = []

    def evaluate(code: str, given: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        for name, value in given.items():
            if name in offered or not callable(value) or not _plain_name(name):
                continue
            if name not in bridge.tool_names:
                try:
                    bridge.add_tool(python_tool(value, name=name))
                except ValueError:  # not a function a tool can be made of (a builtin, say)
                    continue
            offered.append(name)
        preamble = _preamble(offered)
        before = session.variables
        result = session.run(preamble + code)
        output = result.stdout
        if result.error is not None:
            own = result.error.line - preamble.count("\n") if result.error.line else 0
            line = f" (line {own})" if own > 0 else ""
            output += f"{result.error.type}: {result.error.message}{line}\n"
        after = session.variables
        changed = {name: value for name, value in after.items() if before.get(name, ...) != value}
        return output, changed

    return evaluate


def _plain_name(name: str) -> bool:
    """Whether ``name`` can be a function of a step (and a tool's name)."""
    return name.isidentifier() and not keyword.iskeyword(name) and not name.startswith("_")


def _preamble(names: list[str]) -> str:
    """Each tool as a plain function of the step, returning what the tool returned."""
    lines = tool_functions(names)
    return "\n".join(lines) + ("\n" if lines else "")
