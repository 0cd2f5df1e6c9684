"""Tests for the tools described for a model: ``ToolSpec``, ``render_stubs`` (``tool_stubs``)
and a script written from a stub alone, run through a real ``Bridge``."""

from __future__ import annotations

import ast
import json
import keyword
import os
import pathlib
import shutil
import sys
from collections.abc import Mapping
from typing import Any, Literal, NotRequired

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field
from typing_extensions import TypedDict  # pydantic needs it on Python < 3.12

from sandbox._guards import ALLOWED_IMPORTS
from scriptbridge import Bridge, McpServer, ToolSpec, python_tool
from scriptbridge._stubs import ALLOWED_IMPORTS as STUB_IMPORTS
from scriptbridge._stubs import render_stubs

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"


# --- a python tool with nested arguments ------------------------------------------------------


class Address(BaseModel):
    """Where a parcel goes."""

    street: str
    city: str = Field(description="The city, as the post spells it.")


class Line(TypedDict):
    sku: str
    quantity: int
    note: NotRequired[str]


class Order(BaseModel):
    """One order."""

    lines: list[Line]
    ship_to: Address
    gift: bool = False


class Receipt(TypedDict):
    order_id: str
    total: float


def place_order(
    order: Order, speed: Literal["slow", "fast"] = "slow", coupon: str | None = None
) -> Receipt:
    """Place an order.

    Args:
        order: what to send, and where.
        speed: how fast it goes.
    """
    total = sum(line["quantity"] for line in order.lines) * 2.5
    return {"order_id": f"{order.ship_to.city}-{speed}", "total": total}


def _tools_class(tree: ast.Module) -> ast.ClassDef:
    (found,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "tools"]
    return found


def _defs(source: str) -> dict[str, ast.FunctionDef]:
    tree = ast.parse(source)
    return {n.name: n for n in _tools_class(tree).body if isinstance(n, ast.FunctionDef)}


def _signature(fn: ast.FunctionDef) -> dict[str, str]:
    args = fn.args
    named = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    return {a.arg: ast.unparse(a.annotation) if a.annotation else "" for a in named}


def test_python_tool_stub_names_each_argument_with_its_type() -> None:
    """A python tool's stub: keyword-only arguments typed from its signature, TypedDicts for
    the nested model and TypedDict, its defaults, and a result whose data is its return type."""
    spec = python_tool(place_order, name="shop.place_order").spec()
    assert (spec.name, spec.attribute) == ("shop.place_order", "shop_place_order")
    source = render_stubs([spec])
    fn = _defs(source)["shop_place_order"]
    assert _signature(fn) == {
        "order": "Order",
        "speed": "Literal['slow', 'fast']",
        "coupon": "str | None",
    }
    assert [ast.unparse(d) if d else None for d in fn.args.kw_defaults] == [None, "'slow'", "None"]
    assert ast.unparse(fn.returns) == "ShopPlaceOrderResult"  # type: ignore[arg-type]
    doc = ast.get_docstring(fn) or ""
    assert "Place an order." in doc and "how fast it goes." in doc
    assert 'call_tool("shop.place_order"' in doc
    namespace = _exec(source)
    order = namespace["Order"]
    assert order.__required_keys__ == {"lines", "ship_to"}
    assert order.__annotations__["lines"] == list[namespace["Line"]]
    assert namespace["Address"].__annotations__["street"] is str
    result = namespace["ShopPlaceOrderResult"].__annotations__
    assert result["data"] is namespace["ShopPlaceOrderOutput"]


def _exec(source: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    # the stub runs as a module would (not under this file's `from __future__ import annotations`)
    exec(compile(source, "<stubs>", "exec", dont_inherit=True), namespace)
    return namespace


# --- writing a script from the stub alone -----------------------------------------------------


class _Examples:
    """Example values of a stub's annotations, read from the stub itself."""

    def __init__(self, tree: ast.Module) -> None:
        self.typed: dict[str, list[tuple[str, ast.expr, bool]]] = {}
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and any(
                isinstance(b, ast.Name) and b.id == "TypedDict" for b in node.bases
            ):
                self.typed[node.name] = [
                    (f.target.id, f.annotation, True)
                    for f in node.body
                    if isinstance(f, ast.AnnAssign) and isinstance(f.target, ast.Name)
                ]
            elif (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Call)
                and ast.unparse(node.value.func) == "TypedDict"
            ):
                name, fields = node.value.args
                assert isinstance(name, ast.Constant) and isinstance(fields, ast.Dict)
                self.typed[name.value] = [
                    (k.value, v, True)
                    for k, v in zip(fields.keys, fields.values, strict=True)
                    if isinstance(k, ast.Constant)
                ]

    def of(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Subscript) and ast.unparse(node.value) == "NotRequired":
            return self.of(node.slice)
        if isinstance(node, ast.BinOp):  # a union: its first member
            return self.of(node.left)
        if isinstance(node, ast.Subscript):
            outer = ast.unparse(node.value)
            if outer == "Literal":
                first = node.slice.elts[0] if isinstance(node.slice, ast.Tuple) else node.slice
                return ast.literal_eval(first)
            if outer == "list":
                return [self.of(node.slice)]
            if outer == "dict":
                return {}
        text = ast.unparse(node)
        simple = {"str": "text", "int": 2, "float": 2.5, "bool": True, "None": None, "Any": "x"}
        if text in simple:
            return simple[text]
        return {
            key: self.of(value)
            for key, value, _ in self.typed[text]
            if not (isinstance(value, ast.Subscript) and ast.unparse(value.value) == "NotRequired")
        }


def script_from_stub(source: str) -> str:
    """A script that calls every tool of ``source`` as its def shows it, with an example value
    of each required argument's type; its value is the list of the results' data."""
    tree = ast.parse(source)
    examples = _Examples(tree)
    lines = ["results = []"]
    for fn in _tools_class(tree).body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        args = fn.args
        if args.posonlyargs:  # one dict of arguments
            (only,) = args.posonlyargs
            assert only.annotation is not None
            call = f"tools.{fn.name}({examples.of(only.annotation)!r})"
        else:
            required = [
                f"{a.arg}={examples.of(a.annotation)!r}"  # type: ignore[arg-type]
                for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
                if d is None
            ]
            call = f"tools.{fn.name}({', '.join(required)})"
        lines.append(f"results.append({call}['data'])")
    lines.append("results")
    return "\n".join(lines) + "\n"


async def test_a_script_written_from_the_stub_runs(bridge: Bridge) -> None:
    """Every call the stub shows, for a python tool with nested arguments and for each tool of
    a real MCP server, runs as shown; the specs carry what the server listed."""
    bridge.add_tool(python_tool(place_order, name="shop.place_order"))
    server = McpServer(sys.executable, [str(EXAMPLES / "catalog_server.py")], name="catalog")
    await bridge.add_server(server)
    specs = bridge.tool_specs()
    assert [s.name for s in specs] == [
        "catalog.add_item",
        "catalog.search",
        "catalog.set_status",
        "shop.place_order",
    ]
    listed = server.tools["search"]
    assert specs[1].input_schema == listed["inputSchema"]
    assert specs[1].output_schema == listed["outputSchema"]
    assert specs[1].description == listed["description"]
    source = bridge.tool_stubs()
    assert source == bridge.tool_stubs()
    defs = _defs(source)
    assert _signature(defs["catalog_search"]) == {
        "query": "str",
        "limit": "int",
        "order": "Literal['relevance', 'name']",
    }
    assert _signature(defs["catalog_add_item"]) == {"item": "Item", "count": "int"}
    assert _signature(defs["catalog_set_status"]) == {
        "name": "str",
        "status": "Literal['draft', 'published', 'retired']",
    }
    namespace = _exec(source)
    assert namespace["Item"].__annotations__["size"] == NotRequired[namespace["Size"] | None]
    hit = namespace["Hit"]
    assert namespace["CatalogSearchOutput"].__annotations__["hits"] == list[hit]
    result = await bridge.run(script_from_stub(source))
    assert result.ok, result.error
    added, hits, status, receipt = result.value
    assert added == {"result": "added 1 x text tagged nothing"}
    assert hits["query"] == "text" and len(hits["hits"]) == 3
    assert status == {"name": "text", "status": "draft"}
    assert receipt == {"order_id": "text-slow", "total": 5.0}
    assert bridge.tool_stubs(["catalog.search"]).count("\n    def ") == 1
    with pytest.raises(ValueError, match="nope"):
        bridge.tool_specs(["catalog.search", "nope"])


class _Described:
    """A tool known only by its spec (here: arguments that aren't Python names)."""

    server = None

    def __init__(self, spec: ToolSpec) -> None:
        self.name = spec.name
        self._spec = spec

    def spec(self) -> ToolSpec:
        return self._spec

    async def call(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        return {"content": [], "structuredContent": {"got": dict(arguments)}}


async def test_arguments_that_arent_names_are_one_dict(bridge: Bridge) -> None:
    """A tool whose arguments aren't all Python names (a hyphen, a keyword) takes one dict, as
    its docstring shows, and that call runs."""
    schema = {
        "type": "object",
        "properties": {"max-results": {"type": "integer"}, "class": {"type": "string"}},
        "required": ["max-results"],
    }
    spec = ToolSpec(name="odd.find", attribute="odd_find", description="", input_schema=schema)
    bridge._tools.add([_Described(spec)])
    source = bridge.tool_stubs()
    fn = _defs(source)["odd_find"]
    assert [a.arg for a in fn.args.posonlyargs] == ["arguments"]
    assert "tools.odd_find({" in (ast.get_docstring(fn) or "")
    fields = _exec(source)["OddFindArguments"]
    assert fields.__required_keys__ == {"max-results"}
    result = await bridge.run(script_from_stub(source))
    assert result.ok, result.error
    assert result.value == [{"got": {"max-results": 2}}]


EVERYTHING_NODE = shutil.which("node")
EVERYTHING_ENTRY = (
    pathlib.Path(os.environ.get("SCRIPTBRIDGE_NPM_DIR", pathlib.Path(sys.prefix) / "npm"))
    / "node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)


@pytest.mark.skipif(
    EVERYTHING_NODE is None or not EVERYTHING_ENTRY.exists(),
    reason="server-everything needs node, and `make test` to install it into .venv/npm",
)
async def test_server_everything_stub_runs(bridge: Bridge) -> None:
    """For each tool of server-everything (the npm reference server, nobody here wrote it),
    the stub parses; its calls that need no sampling run as shown (the ones that ask the
    client for something are left out)."""
    assert EVERYTHING_NODE is not None
    server = McpServer(EVERYTHING_NODE, [str(EVERYTHING_ENTRY), "stdio"], name="everything")
    await bridge.add_server(server)
    source = bridge.tool_stubs()
    ast.parse(source)
    wanted = [n for n in bridge.tool_names if n.split(".")[1] in {"echo", "add", "get-sum"}]
    short = {n.split(".")[1] for n in wanted}
    assert "echo" in short and short & {"add", "get-sum"}, (  # a sum is "add" in older releases
        f"server-everything renamed its tools: {bridge.tool_names}"
    )
    result = await bridge.run(script_from_stub(bridge.tool_stubs(wanted)))
    assert result.ok, result.error
    assert type(result.value) is list and len(result.value) == len(wanted), result.value


# --- the header -------------------------------------------------------------------------------


def test_header_says_what_a_script_has() -> None:
    """The header names the script's globals, the allowed imports (the sandbox's own list) and
    the shape of a tool result, and is the same for no tools."""
    assert sorted(STUB_IMPORTS) == sorted(ALLOWED_IMPORTS)
    source = render_stubs([])
    tree = ast.parse(source)
    doc = ast.get_docstring(tree) or ""
    for name in ("call_tool", "call_tools", "tools.", "fetch", "read_text", "read_bytes",
                 "write_text", "inputs", "print", "ToolError"):  # fmt: skip
        assert name in source, name
    for module in ALLOWED_IMPORTS:
        assert module in doc
    namespace = _exec(source)
    assert set(namespace["ToolResult"].__annotations__) == {"content", "data", "isError"}
    assert set(namespace["ReferenceBlock"].__annotations__) >= {"id", "savedTo", "unfetchable"}


# --- determinism, bounds, hostile schemas -----------------------------------------------------


def _spec(name: str = "srv.tool", **fields: Any) -> ToolSpec:
    fields.setdefault("input_schema", {"type": "object"})
    return ToolSpec(
        name=name,
        attribute=name.replace(".", "_").replace("-", "_"),
        description=fields.pop("description", ""),
        **fields,
    )


def test_deterministic_and_sorted() -> None:
    """The same specs in any order give the same text, tools sorted by name."""
    specs = [_spec("b.two"), _spec("a.one"), _spec("c.three")]
    assert render_stubs(specs) == render_stubs(specs[::-1])
    assert list(_defs(render_stubs(specs))) == ["a_one", "b_two", "c_three"]


@pytest.mark.parametrize(
    ("description", "shown"),
    [
        ('"""\nimport os\nos.system("rm -rf /")\n"""', 'os.system("rm -rf /")'),
        ('ends in a quote"', 'ends in a quote"'),
        ('ends in two quotes""', 'ends in two quotes""'),
        ("a backslash at the end \\", "a backslash at the end \\"),
        ("\\N{BULLET} and \\x00 and \x00 and \r\n and \ud800", "\\N{BULLET} and \\x00 and"),
        ("bidi \u202e text", "bidi"),
        ("'''single quotes'''", "'''single quotes'''"),
    ],
)
def test_descriptions_cant_close_their_docstring(description: str, shown: str) -> None:
    """A description that tries to close its docstring, or holds control characters, stays
    inside it: the module holds nothing but the stub's own statements, and the docstring
    reads as the description."""
    spec = _spec(
        description=description,
        input_schema={
            "type": "object",
            "properties": {"q": {"type": "string", "description": description}},
        },
    )
    source = render_stubs([spec])
    tree = ast.parse(source)
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Import)]
    calls = {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert calls <= {"TypedDict"}
    doc = ast.get_docstring(_defs(source)["srv_tool"]) or ""
    assert shown in doc


def test_bounded() -> None:
    """A giant description is cut with a marker, a huge enum isn't listed, and a schema nested
    past a small depth becomes Any."""
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(50):
        deep = {"type": "object", "properties": {"inner": deep}, "required": ["inner"]}
    spec = _spec(
        description="word " * 100_000,
        input_schema={
            "type": "object",
            "properties": {
                "pick": {"enum": [f"v{i}" for i in range(10_000)]},
                "deep": deep,
            },
        },
    )
    source = render_stubs([spec])
    assert len(source) < 30_000
    assert "[cut: " in source
    assert "v9999" not in source
    node, hops = _exec(source)["SrvToolDeep"], 0
    while node is not Any:
        node, hops = node.__annotations__["inner"], hops + 1
    assert node is Any and hops < 10


def test_ref_cycles_and_wrong_types() -> None:
    """A ``$ref`` cycle, a ref to nowhere, and fields of the wrong type anywhere still give
    valid Python."""
    spec = _spec(
        input_schema={
            "type": "object",
            "$defs": {
                "Node": {
                    "type": "object",
                    "properties": {"next": {"$ref": "#/$defs/Node"}, "v": {"type": "integer"}},
                    "required": "v",
                },
                "Loop": {"$ref": "#/$defs/Loop"},
            },
            "properties": {
                "head": {"$ref": "#/$defs/Node"},
                "loop": {"$ref": "#/$defs/Loop"},
                "gone": {"$ref": "#/$defs/Missing"},
                "weird": {"type": ["string", 3, None], "enum": "abc", "items": 7},
                "nums": {"type": "array", "items": {"type": "number"}},
                "t": {"const": "fixed"},
                "x": {"oneOf": [{"type": "integer"}, {"type": "null"}], "default": 5},
            },
            "required": ["head", 3, None],
        },
        output_schema={"type": "object", "properties": 4},
    )
    source = render_stubs([spec])
    namespace = _exec(source)
    assert _signature(_defs(source)["srv_tool"])["x"] == "int | None"
    assert namespace["Node"].__annotations__["v"] == NotRequired[int]  # "required" isn't a list
    assert namespace["Node"].__annotations__["next"] == NotRequired[Any]  # the cycle


def _names(tree: ast.AST) -> list[str]:
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef | ast.FunctionDef):
            found.append(node.name)
        elif isinstance(node, ast.arg):
            found.append(node.arg)
        elif isinstance(node, ast.Name):
            found.append(node.id)
    return found


_KEYS = st.sampled_from(
    ["type", "properties", "required", "items", "enum", "const", "anyOf", "oneOf", "allOf",
     "$ref", "$defs", "definitions", "default", "description", "additionalProperties", "title"]
)  # fmt: skip
_TEXT = st.text(max_size=12) | st.sampled_from(
    ["string", "integer", "number", "boolean", "null", "array", "object", "#/$defs/a", "a",
     "class", "_x", "a-b", '"""', "\\", "#/definitions/a"]
)  # fmt: skip
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | _TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS | _TEXT, inner, max_size=5),
    max_leaves=40,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    input_schema=st.dictionaries(_KEYS | _TEXT, _JSON, max_size=6),
    output_schema=st.none() | st.dictionaries(_KEYS | _TEXT, _JSON, max_size=4),
    description=_TEXT,
    name=st.sampled_from(["s.t", "s.class", "s._x", "s.a-b", "s.a_b", "s.1"]),
)
def test_any_schema_gives_a_stub_that_runs(
    input_schema: dict[str, Any], output_schema: dict[str, Any] | None, description: str, name: str
) -> None:
    """For any JSON-ish schema the stub parses, runs as a module, and every name it makes is
    an identifier that isn't a keyword."""
    spec = _spec(
        name, description=description, input_schema=input_schema, output_schema=output_schema
    )
    other = _spec("s.a.b", input_schema=json.loads(json.dumps(input_schema, default=repr)))
    source = render_stubs([spec, other])
    tree = ast.parse(source)
    _exec(source)
    for found in _names(tree):
        assert found.isidentifier() and not keyword.iskeyword(found), found
