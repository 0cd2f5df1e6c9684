"""Tests for python_tool and how a tool's return value becomes an MCP-shaped result."""

from __future__ import annotations

import inspect
import threading
from typing import Any, NotRequired

import mcp.types as mcp_types
import pytest
import trio
from pydantic import BaseModel
from typing_extensions import TypedDict  # pydantic needs it on Python < 3.12

from scriptbridge import Bridge
from scriptbridge._tools import InvalidArguments, as_tool_result, python_tool


def test_str_becomes_one_text_block() -> None:
    """A plain str becomes one text block."""
    assert as_tool_result("hi") == {"content": [{"type": "text", "text": "hi"}]}


def test_dict_and_list_become_structured_content_with_json_text() -> None:
    """A dict or list becomes structuredContent with a text block of its JSON."""
    assert as_tool_result({"a": [1, "é"]}) == {
        "content": [{"type": "text", "text": '{"a": [1, "é"]}'}],
        "structuredContent": {"a": [1, "é"]},
    }
    assert as_tool_result([1, 2])["content"] == [{"type": "text", "text": "[1, 2]"}]


def test_data_holding_a_block_gets_no_json_text() -> None:
    """Data holding a block (an embedded resource's uri) gets no JSON text that could leak it."""
    data = {"att": {"type": "resource", "resource": {"uri": "mem://secret", "text": "t"}}}
    assert as_tool_result(data) == {"content": [], "structuredContent": data}


def test_unreadable_data_gets_no_json_text() -> None:
    """Data past the walk limits or not JSON gets no text block."""
    loop: list[Any] = []
    loop.append(loop)
    assert as_tool_result({"loop": loop})["content"] == []
    assert as_tool_result({"b": b"bytes"})["content"] == []


def test_mcp_shaped_results_kept() -> None:
    """An MCP-shaped dict is kept; the SDK's CallToolResult is dumped by alias."""
    shaped = {"content": [{"type": "text", "text": "x"}], "isError": True}
    assert as_tool_result(shaped) is shaped
    sdk = mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text="y")], structuredContent={"k": 1}
    )
    assert as_tool_result(sdk)["structuredContent"] == {"k": 1}
    assert as_tool_result(sdk)["content"] == [{"type": "text", "text": "y"}]


async def test_sync_tool_runs_in_a_worker_thread() -> None:
    """A sync callable runs off the trio thread and gets its arguments as keywords."""
    main = threading.get_ident()

    def add(a: int, b: int) -> dict[str, Any]:
        """Add two numbers."""
        return {"sum": a + b, "same_thread": threading.get_ident() == main}

    tool = python_tool(add)
    assert (tool.name, tool.description) == ("add", "Add two numbers.")
    result = await tool.call({"a": 2, "b": 3})
    assert result["structuredContent"] == {"sum": 5, "same_thread": False}


async def test_async_tool_and_errors() -> None:
    """An async callable is awaited; what a tool raises propagates to the caller."""

    async def echo(text: str) -> str:
        await trio.lowlevel.checkpoint()
        return text

    async def broken() -> str:
        raise RuntimeError("no database")

    assert (await python_tool(echo, name="util.echo").call({"text": "x"}))["content"][0][
        "text"
    ] == "x"
    with pytest.raises(RuntimeError, match="no database"):
        await python_tool(broken).call({})


@pytest.mark.parametrize("name", ["", "1abc", "a b", "-x", "x" * 200, "a/b"])
def test_unusable_names_refused(name: str) -> None:
    """A name scripts couldn't call is refused at once."""
    with pytest.raises(ValueError):
        python_tool(lambda: None, name=name)


# --- schemas derived from the signature, and arguments validated against them ----------------


class Point(BaseModel):
    """A point on the plane."""

    x: float
    y: float = 0.0


class Window(TypedDict):
    start: int
    end: NotRequired[int]


def locate(place: str, near: Point, within: Window | None = None, *, exact: bool = False) -> Point:
    """Find a place near a point.

    Args:
        place: what to look for.
        near: where to start.
    """
    return near


def test_schema_description_and_output_are_derived() -> None:
    """The input schema comes from the signature, the description is the whole docstring, the
    output schema comes from the return annotation."""
    tool = python_tool(locate)
    assert tool.description == inspect.getdoc(locate)
    schema = tool.input_schema
    assert schema["type"] == "object"
    assert list(schema["properties"]) == ["place", "near", "within", "exact"]
    assert schema["required"] == ["place", "near"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["exact"]["default"] is False
    assert schema["$defs"]["Point"]["properties"]["x"]["type"] == "number"
    assert tool.output_schema is not None
    assert tool.output_schema["properties"]["x"]["type"] == "number"


def test_unannotated_defaults_and_kwargs() -> None:
    """An unannotated parameter takes anything, a default stays a default, ``**kwargs`` lets
    extra arguments through, and no return annotation (or ``str``) gives no output schema."""

    def f(a, b=2, **more):  # type: ignore[no-untyped-def]
        return {"a": a, "b": b, "more": more}

    def g(q: str) -> str:
        return q

    tool = python_tool(f)
    assert tool.input_schema["properties"]["a"] == {"title": "A"}
    assert tool.input_schema["properties"]["b"]["default"] == 2
    assert tool.input_schema.get("additionalProperties", True) is not False
    assert tool.output_schema is None
    assert python_tool(g).output_schema is None


@pytest.mark.parametrize(
    "fn",
    [lambda *args: args, lambda a, /: a],
    ids=["var-positional", "positional-only"],
)
def test_positional_parameters_refused(fn: Any) -> None:
    """A parameter a script couldn't pass by name is refused when the tool is made."""
    with pytest.raises(ValueError, match="by name"):
        python_tool(fn, name="positional")


def test_an_annotation_without_a_schema_is_refused() -> None:
    """A parameter whose annotation pydantic can't describe is refused, naming it."""

    def f(lock: threading.Lock) -> None:  # type: ignore[valid-type]
        pass

    with pytest.raises(ValueError, match="lock"):
        python_tool(f)


async def test_validated_values_reach_the_function() -> None:
    """The function receives validated values: a model argument as the model, a TypedDict one
    as a dict; an argument left out keeps the function's own default."""
    seen: dict[str, Any] = {}

    def f(near: Point, within: Window | None = None, exact: object = locate) -> str:
        seen.update(near=near, within=within, exact=exact)
        return "ok"

    await python_tool(f).call({"near": {"x": 1, "y": 2}, "within": {"start": 3}})
    assert seen == {"near": Point(x=1, y=2), "within": {"start": 3}, "exact": locate}


async def test_extra_arguments_reach_kwargs() -> None:
    """With ``**kwargs`` an argument the signature doesn't name is passed through."""

    async def f(a: int, **more: Any) -> dict[str, Any]:
        return {"a": a, **more}

    assert (await python_tool(f).call({"a": "3", "z": [1]}))["structuredContent"] == {
        "a": 3,
        "z": [1],
    }


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        (
            {"place": 3, "near": {"x": 1}},
            "invalid arguments: place: Input should be a valid string",
        ),
        ({"place": "a"}, "invalid arguments: near: Field required"),
        ({"place": "a", "near": {"x": "far"}}, "near.x: Input should be a valid number"),
        ({"place": "a", "near": {"x": 1}, "zoom": 3}, "zoom: unexpected argument"),
    ],
)
async def test_wrong_arguments_name_the_argument(arguments: dict[str, Any], reason: str) -> None:
    """A wrong argument fails the call before the function runs, with a one-line reason that
    names the argument and what was expected."""
    called: list[object] = []

    def f(place: str, near: Point) -> None:
        called.append(place)

    with pytest.raises(InvalidArguments) as caught:
        await python_tool(f).call(arguments)
    assert reason in str(caught.value)
    assert "\n" not in str(caught.value)
    assert called == []


async def test_a_model_return_value_becomes_data() -> None:
    """A pydantic model returned by a tool is its data (dumped as JSON data), as the output
    schema says; the SDK's CallToolResult is still read as a whole result."""
    result = await python_tool(locate).call({"place": "a", "near": {"x": 1}})
    assert result["structuredContent"] == {"x": 1.0, "y": 0.0}


async def test_wrong_arguments_reach_the_script_as_its_tool_error(tmp_path: Any) -> None:
    """Through a real run, a wrong argument is the script's ToolError naming the argument."""

    def f(place: str, near: Point) -> str:
        return place

    async with Bridge(tmp_path / "ws") as bridge:
        bridge.add_tool(python_tool(f, name="geo.find"))
        result = await bridge.run(
            "try:\n"
            "    tools.geo_find(place=1, near={'x': 0})\n"
            "except ToolError as exc:\n"
            "    reason = str(exc)\n"
            "reason\n"
        )
    assert result.ok, result.error
    assert result.value == "invalid arguments: place: Input should be a valid string (got int)"
