"""``BridgeExecutor``: a smolagents ``PythonExecutor`` that runs a ``CodeAgent``'s code actions in
a bridge's sandbox (``pip install scriptbridge[smolagents]``).

``CodeAgent(tools=..., model=..., executor=BridgeExecutor(bridge))`` with a
:class:`~scriptbridge.SyncBridge`: every code action runs as one step of a bridge session, so
each runs in a fresh sandbox child with the plain-data variables and the definitions earlier
steps left. What the agent is given:

- its tools (``send_tools``) become host tools of the bridge (each runs in the host, called
  through the bridge like any tool), and a code action calls them as smolagents teaches, as
  plain functions, by keyword or positionally (``web_search(query=...)``, ``web_search(...)``,
  bound to its ``inputs`` in their order): each step starts with a short preamble defining
  those names over ``tools.<name>(...)``; a call gives the tool's structured result, or its
  text; an error's line is the action's own (none when it is in the preamble);
- ``final_answer(value)`` (a plain-data value) ends the step with the agent's final answer;
- ``send_variables`` values (plain data) are globals of the next step.

``__call__`` returns smolagents' ``CodeOutput`` (the value of the last expression or the final
answer, what the step printed, whether it was the final answer) and raises ``RuntimeError``
with the step's error (and what it printed) when the code failed, which the agent shows its
model. No code action runs outside the bridge.
"""

from __future__ import annotations

import keyword
from dataclasses import replace
from typing import Any, ClassVar

from smolagents.local_python_executor import CodeOutput, PythonExecutor
from smolagents.tools import Tool

from sandbox import SCRIPT_IMPORTS

from .._exceptions import ToolServerError
from .._sessions import SyncBridgeSession
from .._sync import SyncBridge
from .._tools import python_tool
from ._functions import tool_functions

__all__ = ["BridgeExecutor", "offer_sandbox_imports"]

FINAL_ANSWER_TOOL = "smolagents.final_answer"
_FINAL_ANSWER_NOTE = "final answer given"


class BridgeExecutor(PythonExecutor):
    """Runs a ``CodeAgent``'s code actions through one session of ``bridge`` (module doc).

    ``authorized_imports`` are the modules a code action may import here; give them to the
    agent (:func:`offer_sandbox_imports`) so its prompt offers those, not smolagents' own list
    (``queue``, ``stat``, ``unicodedata``, ... which the sandbox refuses).
    """

    authorized_imports: ClassVar[tuple[str, ...]] = tuple(SCRIPT_IMPORTS)

    def __init__(self, bridge: SyncBridge) -> None:
        self._bridge = bridge
        self._tool_names: list[str] = []
        self._variables: dict[str, Any] = {}
        self._answers: list[Any] = []
        if FINAL_ANSWER_TOOL not in bridge.tool_names:
            bridge.add_tool(python_tool(self._final_answer, name=FINAL_ANSWER_TOOL))
        self._session: SyncBridgeSession = bridge.session()
        self._session.__enter__()

    def _final_answer(self, answer: Any = None) -> str:
        self._answers.append(answer)
        return _FINAL_ANSWER_NOTE

    def send_tools(self, tools: dict[str, Tool]) -> None:
        """Offer the agent's tools (but ``final_answer``, which the bridge answers itself)."""
        for name, tool in tools.items():
            if name == "final_answer" or not name.isidentifier() or keyword.iskeyword(name):
                continue
            if name not in self._bridge.tool_names:
                host_tool = python_tool(_calling(tool), name=name)
                self._bridge.add_tool(replace(host_tool, input_schema=_schema(tool)))
            if name not in self._tool_names:
                self._tool_names.append(name)

    def send_variables(self, variables: dict[str, Any]) -> None:
        """Variables for the next step (plain data: others can't reach a sandbox)."""
        self._variables.update(variables)

    def __call__(self, code_action: str) -> CodeOutput:
        self._answers.clear()
        preamble = _preamble(self._tool_names)
        result = self._session.run(preamble + code_action, inputs=self._variables)
        self._variables = {}
        if self._answers:
            return CodeOutput(output=self._answers[-1], logs=result.stdout, is_final_answer=True)
        if result.error is not None:
            line = result.error.line
            own = line - preamble.count("\n") if line else 0  # the action's own lines
            where = f" (line {own})" if own > 0 else ""
            raise RuntimeError(
                f"{result.error.type}: {result.error.message}{where}\n{result.stdout}".strip()
            )
        return CodeOutput(output=result.value, logs=result.stdout, is_final_answer=False)


def offer_sandbox_imports(agent: Any) -> Any:
    """Make ``agent`` (a ``CodeAgent``) offer its model the modules the sandbox lets a code
    action import (``BridgeExecutor.authorized_imports``), in place of smolagents' own list;
    returns the agent."""
    agent.authorized_imports = list(BridgeExecutor.authorized_imports)
    return agent


def _calling(tool: Tool) -> Any:
    """A host function calling the smolagents ``tool`` with the script's keywords."""

    def call(**arguments: Any) -> Any:
        try:
            return tool(**arguments)
        except ToolServerError:
            raise
        except Exception as exc:  # the script's ToolError says what went wrong
            raise RuntimeError(f"{tool.name} failed: {exc}") from exc

    call.__doc__ = tool.description
    return call


JSON_TYPES = frozenset({"string", "integer", "number", "boolean", "array", "object", "null"})


def _schema(tool: Tool) -> dict[str, Any]:
    """The input schema of the smolagents ``tool``, from its ``inputs`` in their order: the
    bridge binds a code action's positionals to them (``price('apple')``), as smolagents'
    own executor does."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, spec in tool.inputs.items():
        described: dict[str, Any] = {"description": str(spec.get("description", ""))}
        if spec.get("type") in JSON_TYPES:
            described["type"] = spec["type"]
        properties[name] = described
        if not spec.get("nullable"):
            required.append(name)
    return {"type": "object", "properties": properties, "required": required}


def _preamble(names: list[str]) -> str:
    """Each tool as a plain function of the step's globals, and ``final_answer``."""
    lines = [
        "def final_answer(answer=None):",
        f"    call_tool({FINAL_ANSWER_TOOL!r}, {{'answer': answer}})",
        f"    raise ToolError({_FINAL_ANSWER_NOTE!r})",
    ]
    return "\n".join([*lines, *tool_functions(names)]) + "\n"
