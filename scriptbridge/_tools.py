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

A tool is described by its function (:meth:`PythonTool.spec`): the input schema comes from its
signature (a pydantic model of its parameters: an unannotated one takes anything, a default stays
a default, ``**kwargs`` lets other arguments through; ``*args`` and positional-only parameters
are refused, since a script passes arguments by name), the description is its whole docstring,
and the output schema is the JSON Schema of its return annotation (``None`` without one, or for
``str``, ``None`` and ``Any``, which give no data). A pydantic model it returns is its data,
dumped as JSON data (the SDK's ``CallToolResult`` and any model with a ``content`` list is still
read as a whole result). Arguments are validated against the schema before the function is
called; the function receives the validated values (a model argument as the model), and only
the arguments the script passed, so a left-out one keeps the function's own default. A wrong
one fails the call with :class:`InvalidArguments`, whose one line names each wrong argument and
what was expected.

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
import typing
import warnings
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import trio
from pydantic import BaseModel, ConfigDict, Field, PydanticUserError, TypeAdapter, ValidationError
from pydantic import create_model as create_pydantic_model
from pydantic.json_schema import PydanticJsonSchemaWarning

from ._classify import is_block
from ._plain import PLAIN_SCALARS
from ._result_dict import result_dict
from ._tool_spec import ToolSpec, attribute_of
from ._walk import MAX_DEPTH, Budget, children_of

__all__ = ["InvalidArguments", "PythonTool", "as_tool_result", "python_tool"]

TOOL_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,127}")
MAX_REASONS: Final = 5
"""Wrong arguments one :class:`InvalidArguments` names; it counts the rest."""
NO_DATA: Final = (str, type(None), Any)
"""Return annotations that give a result no data, so no output schema."""


class InvalidArguments(ValueError):
    """A script's arguments don't fit a tool's input schema; the message is one line naming
    each wrong argument and what was expected (the script's ``ToolError`` shows it as is)."""


@dataclass(frozen=True)
class PythonTool:
    """A host callable offered to scripts as a tool named :attr:`name`."""

    name: str
    fn: Callable[..., Any]
    description: str
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object"})
    """The JSON Schema of its arguments, derived from the signature (module doc)."""
    output_schema: dict[str, Any] | None = None
    """The JSON Schema of its result's data, from the return annotation (module doc)."""
    arguments_model: type[BaseModel] | None = field(default=None, repr=False, compare=False)
    """What validates the arguments; ``None`` passes them as they are (a tool built by hand)."""

    @property
    def server(self) -> None:
        """A host tool's result comes from no server."""
        return None

    @functools.cached_property
    def is_coroutine(self) -> bool:
        """Whether :attr:`fn` is a coroutine function (asked once: it is on every call)."""
        return inspect.iscoroutinefunction(self.fn)

    def spec(self) -> ToolSpec:
        """The tool as a model should see it."""
        return ToolSpec(
            name=self.name,
            attribute=attribute_of(self.name),
            description=self.description,
            input_schema=self.input_schema,
            output_schema=self.output_schema,
        )

    async def call(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Validate ``arguments``, then call the function with them as keywords; returns its
        MCP-shaped result.

        Raises :class:`InvalidArguments` (before the function runs) for arguments that don't fit
        the input schema. Whatever the function raises propagates (the supervisor turns it into
        the script's ``ToolError``); ``trio.Cancelled`` passes through.
        """
        keywords = self._validated(arguments)
        if self.is_coroutine:
            value = await self.fn(**keywords)
        else:
            call = functools.partial(self.fn, **keywords)
            value = await trio.to_thread.run_sync(call, abandon_on_cancel=True)
            if inspect.isawaitable(value):  # a sync wrapper that hands back a coroutine
                value = await _awaited(value)
        return as_tool_result(value)

    def _validated(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The keywords to call the function with: the validated values of the arguments
        passed (and, with ``**kwargs``, the others as they came)."""
        model = self.arguments_model
        if model is None:
            return dict(arguments)
        try:
            valid = model.model_validate(dict(arguments))
        except ValidationError as exc:
            raise InvalidArguments(_reasons(exc)) from None
        keywords = {
            model.model_fields[key].alias or key: getattr(valid, key)
            for key in valid.model_fields_set
            if key in model.model_fields
        }
        keywords.update(valid.__pydantic_extra__ or {})
        return keywords


def _reasons(error: ValidationError) -> str:
    """One line: each wrong argument (dotted where it's nested) and what was expected."""
    reasons = []
    details = error.errors(include_url=False, include_context=False)
    for detail in details[:MAX_REASONS]:
        where = ".".join(str(part) for part in detail["loc"]) or "arguments"
        kind = detail["type"]
        if kind == "extra_forbidden":
            reasons.append(f"{where}: unexpected argument")
        elif kind == "missing":
            reasons.append(f"{where}: {detail['msg']}")
        else:
            reasons.append(f"{where}: {detail['msg']} (got {type(detail['input']).__name__})")
    if len(details) > MAX_REASONS:
        reasons.append(f"and {len(details) - MAX_REASONS} more")
    return " ".join(f"invalid arguments: {'; '.join(reasons)}".split())


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
    model = _arguments_model(fn, tool_name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PydanticJsonSchemaWarning)  # a default with no JSON
        input_schema = model.model_json_schema()
    return PythonTool(
        tool_name,
        fn,
        inspect.getdoc(fn) or "",
        input_schema=input_schema,
        output_schema=_output_schema(fn, tool_name),
        arguments_model=model,
    )


def _hints(fn: Callable[..., Any], tool_name: str) -> dict[str, Any]:
    """``fn``'s annotations, resolved (a callable object's are its ``__call__``'s; one with
    none, such as a ``functools.partial``, has none)."""
    targets = [fn] if inspect.isroutine(fn) else [fn, type(fn).__call__]
    for target in targets:
        try:
            return typing.get_type_hints(target, include_extras=True)
        except TypeError:  # not a function, class or module
            continue
        except Exception as exc:  # an annotation naming something its module doesn't have
            raise ValueError(
                f"python_tool({tool_name}): can't read its annotations: {exc}"
            ) from exc
    return {}


def _arguments_model(fn: Callable[..., Any], tool_name: str) -> type[BaseModel]:
    """A pydantic model of ``fn``'s parameters (module doc); raises ``ValueError`` for a
    signature a script couldn't call or an annotation pydantic can't validate."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"python_tool({tool_name}): can't read its signature: {exc}") from exc
    hints = _hints(fn, tool_name)
    fields: dict[str, Any] = {}
    extra: typing.Literal["allow", "forbid"] = "forbid"
    for index, parameter in enumerate(signature.parameters.values()):
        if parameter.kind is parameter.VAR_KEYWORD:
            extra = "allow"
            continue
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.POSITIONAL_ONLY):
            raise ValueError(
                f"python_tool({tool_name}): a script passes arguments by name, so it can't "
                f"pass {parameter}; make it a keyword parameter"
            )
        annotation = hints.get(parameter.name, Any)
        default = ... if parameter.default is parameter.empty else parameter.default
        # fields by position, each aliased to its parameter: any parameter name is safe
        fields[f"p{index}"] = (annotation, Field(default, alias=parameter.name))
    try:
        return create_pydantic_model(
            f"{attribute_of(tool_name)}_arguments",
            __config__=ConfigDict(extra=extra, populate_by_name=False),
            **fields,
        )
    except (PydanticUserError, TypeError, NameError) as exc:
        raise ValueError(f"python_tool({tool_name}): can't validate its arguments: {exc}") from exc


def _output_schema(fn: Callable[..., Any], tool_name: str) -> dict[str, Any] | None:
    """The JSON Schema of the data ``fn``'s return annotation says it returns, or ``None``."""
    returned = _hints(fn, tool_name).get("return", Any)
    if returned in NO_DATA or inspect.isawaitable(returned):
        return None
    try:
        return TypeAdapter(returned).json_schema(mode="serialization")
    except Exception:  # a type with no JSON Schema: the tool says nothing of its data
        return None


def as_tool_result(value: object) -> dict[str, Any]:
    """Turn a tool's return value into an MCP-shaped result (see the module doc)."""
    if isinstance(value, str):
        return {"content": [{"type": "text", "text": value}]}
    if isinstance(value, dict) and isinstance(value.get("content"), list):
        return value
    if not isinstance(value, (dict, list, tuple, *PLAIN_SCALARS)):
        shaped = result_dict(value)  # the SDK's CallToolResult
        if shaped is not None and isinstance(shaped.get("content"), list):
            return shaped
        if isinstance(value, BaseModel):  # a model of the tool's own: its data
            with contextlib.suppress(Exception):
                value = value.model_dump(mode="json", by_alias=True)
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
