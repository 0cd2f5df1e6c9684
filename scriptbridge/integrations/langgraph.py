"""A LangGraph CodeAct ``eval_fn`` that runs each step through a bridge's session.

``langgraph_codeact.create_codeact(model, tools, eval_fn)`` calls ``eval_fn(code, locals)``
once a step and takes back ``(output, new_vars)``. :func:`eval_fn` answers with a
:class:`~scriptbridge.SyncBridge` session: each step runs in a fresh sandbox child, starting
from what earlier steps left (plain-data variables, definitions); ``output`` is what the step
printed (and, when it failed, its error on a last line), and ``new_vars`` the plain-data
variables it made or changed. The ``locals`` LangGraph passes are not read: the session keeps
the state, and the agent's tools are the bridge's (offer them with ``bridge.add_tool``), never
functions handed in. Importing this module needs no LangGraph.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .._sync import SyncBridge

__all__ = ["eval_fn"]

EvalFn = Callable[[str, Mapping[str, Any]], tuple[str, dict[str, Any]]]


def eval_fn(bridge: SyncBridge) -> EvalFn:
    """An ``eval_fn`` for ``create_codeact`` over one session of ``bridge`` (open; the session
    closes with it)."""
    session = bridge.session()
    session.__enter__()

    def evaluate(code: str, _locals: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        before = session.variables
        result = session.run(code)
        output = result.stdout
        if result.error is not None:
            line = f" (line {result.error.line})" if result.error.line else ""
            output += f"{result.error.type}: {result.error.message}{line}\n"
        after = session.variables
        changed = {name: value for name, value in after.items() if before.get(name, ...) != value}
        return output, changed

    return evaluate
