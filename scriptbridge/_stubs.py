"""Tools described for a model's prompt, as Python: :func:`render_stubs`.

The source it returns is a header (a docstring saying what a script has and how a tool result
looks, the ``TypedDict`` s of a result, and the script's own globals as typed ``def`` s), then
one ``def`` per tool under ``class tools``: keyword-only arguments with the types and defaults
of its input schema, a return type from its output schema, and a docstring from its
description. A script written from it alone runs: ``tools.<def>(<keywords>)`` is how
``tools.<attribute>`` is called.

How a JSON Schema becomes a type: ``string`` ``str``, ``integer`` ``int``, ``number`` ``float``,
``boolean`` ``bool``, ``null`` ``None``, ``array`` ``list[T]``, an object with properties a
``TypedDict`` (named after its ``$defs`` entry, or after the tool and the property it is),
another object ``dict[str, T]``, ``enum`` and ``const`` ``Literal[...]``, ``anyOf``,
``oneOf`` and a list of types a union, a local ``$ref`` what it points at; anything else
``Any``. An optional argument with no default of its own is shown ``= None`` (to be left out).

Decisions where a schema doesn't fit Python:

- A tool whose arguments aren't all names a keyword can have (a hyphen, a Python keyword, a
  leading ``_``; or a top-level schema that isn't an object with properties) takes one dict:
  ``def x(arguments: XArguments, /)``, the ``TypedDict`` written in its functional form, and
  its docstring shows the call, ``tools.x({...})`` (which ``tools.<attribute>`` accepts).
- A tool ``tools.<attribute>`` can't reach (its attribute isn't a name a script may use, or two
  tools share it) is shown under ``class by_name``, its docstring saying to use ``call_tool``.

Guarantees, whatever the specs hold (a server is untrusted):

- The source is valid Python (``ast.parse``), and every name it makes (classes, defs,
  arguments) is an ASCII identifier that isn't a keyword. Text from a spec reaches it only
  inside a docstring, escaped so it can't close the docstring (backslashes, runs of quotes, a
  quote at the end), with control, format and surrogate characters written as escapes; or as a
  literal written by ``repr``.
- It is deterministic: tools are sorted by name; properties keep the schema's order; no ids,
  times or addresses.
- It is bounded: a description is cut to :data:`MAX_DESCRIPTION_CHARS` (an argument's to
  :data:`MAX_FIELD_CHARS`) with a marker saying how much was cut; a schema nested past
  :data:`MAX_DEPTH`, a ``$ref`` cycle, an enum past :data:`MAX_ENUM`, an object past
  :data:`MAX_PROPERTIES` properties and a tool's ``TypedDict`` s past :data:`MAX_CLASSES` become
  ``Any`` or ``dict[str, Any]``. Nothing is read recursively past :data:`MAX_DEPTH`.

The source runs as a module too (its classes are real ``TypedDict`` s), except where a tool's
def is named like a type its later defs use (a tool named ``list``): that def hides the type
from the defs after it in ``class tools``, which a reader doesn't mind and ``ast.parse``
doesn't either.
"""

from __future__ import annotations

import inspect
import json
import keyword
import math
import re
import textwrap
import unicodedata
from collections.abc import Iterable
from typing import Any, Final

from ._tool_spec import ToolSpec

__all__ = ["ALLOWED_IMPORTS", "render_stubs", "render_tool_stub"]

ALLOWED_IMPORTS: Final = (
    "json", "math", "re", "datetime", "collections", "itertools", "functools", "statistics",
    "random", "string", "textwrap", "base64", "hashlib", "decimal", "fractions", "heapq",
    "bisect", "difflib", "time",
)  # fmt: skip
"""The modules a script may import (the sandbox's list; a test checks they agree)."""

MAX_DESCRIPTION_CHARS: Final = 2000
"""A tool's description is cut past this many characters."""
MAX_FIELD_CHARS: Final = 300
"""An argument's or a property's description is cut past this many characters."""
MAX_DEPTH: Final = 6
"""A schema nested deeper than this (``$ref`` hops included) is ``Any``."""
MAX_ENUM: Final = 32
"""An enum of more members is shown as its members' type, not a ``Literal``."""
MAX_LITERAL_CHARS: Final = 80
"""A literal (an enum member, a default) longer than this, written out, isn't shown."""
MAX_PROPERTIES: Final = 64
"""An object of more properties is ``dict[str, Any]``."""
MAX_KEY_CHARS: Final = 64
"""An object with a property name longer than this is ``dict[str, Any]``."""
MAX_UNION: Final = 8
"""A union of more members is ``Any``."""
MAX_CLASSES: Final = 24
"""``TypedDict`` s one tool may add; past them an object is ``dict[str, Any]``."""

_NAME: Final = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
"""A name a script may use as a keyword argument or after ``tools.`` (none starts with ``_``:
the sandbox refuses such names)."""
_ESCAPED: Final = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_SIMPLE: Final = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "null": "None",
}
_ANY: Final = ("Any",)
_RESERVED: Final = frozenset(
    {
        "Any", "Literal", "NotRequired", "TypedDict", "TextBlock", "MediaBlock",
        "ReferenceBlock", "Block", "ToolResult", "ToolError", "Unfetchable", "tools",
        "by_name", "call_tool", "call_tools", "fetch", "read_text", "read_bytes", "write_text",
        "inputs", "print", "str", "int", "float", "bool", "list", "dict", "bytes", "tuple",
        "None", "Exception",
    }
)  # fmt: skip
"""Names the header takes, or that annotations use: no generated class is named so."""

Parts = tuple[str, ...]
"""A type as the members of a union (one member when it's no union), each a Python type."""

_HEADER: Final = f'''"""The tools a script can call, as Python (a script doesn't import this).

A script is Python: statements run top to bottom, and the value of its last expression (or of a
top-level `return`) is its result. Besides builtins it has these globals, and nothing else:

- tools.<name>(...): call a tool as its def in class tools below shows (keywords); it returns
  a ToolResult. The same as call_tool("<tool name>", {{...}}), which takes the name a def's
  docstring gives.
- tools.search(words) -> list[str]: the stubs of the tools that match best, as below;
  tools.describe(name) -> str: one tool's stub.
- call_tools([(name, arguments), ...]): several calls at once, run concurrently; the results
  come back in the order of the calls.
- fetch(reference): save a reference's payload to the workspace; returns its path,
  "refs/<file>". Raises Unfetchable(reason) when it can't be had.
- read_text(path), read_bytes(path): read a file of the workspace (refs/ is read-only).
- write_text(path, text): write a text file under out/.
- inputs: the run's inputs, a dict. print(...): what it prints is captured.
- import: only {", ".join(ALLOWED_IMPORTS)}.
- The async spelling works too: await tools.x(...) or call_tool(...) or fetch(...);
  import asyncio for asyncio.gather(...) over calls (one concurrent batch), asyncio.sleep(s)
  and asyncio.run(main()); async def; a top-level return value.

A call that fails raises ToolError, whose message says why (for wrong arguments, which ones
and what was expected), so a result in hand has isError False. A result's content is a list
of blocks: text, an image or audio (base64 data), or a reference to a payload that isn't in
the result: fetch(block) saves it, and savedTo is its path once saved (unfetchable, when set,
says why it can't be). data is the tool's structured result, None when it has none.

An argument shown `= None` may be left out: leave it out rather than pass None.
"""

from typing import Any, Literal, NotRequired, TypedDict


class TextBlock(TypedDict):
    type: Literal["text"]
    text: str


class MediaBlock(TypedDict):
    type: Literal["image", "audio"]
    data: str
    mimeType: str


class ReferenceBlock(TypedDict):
    type: Literal["reference"]
    id: str | None
    name: str | None
    mimeType: str | None
    size: int | None
    uri: NotRequired[str]
    savedTo: str | None
    unfetchable: str | None


Block = TextBlock | MediaBlock | ReferenceBlock


class ToolResult(TypedDict):
    content: list[Block]
    data: Any
    isError: bool


class ToolError(Exception):
    """A tool call failed; str(error) says why."""


class Unfetchable(Exception):
    """A payload can't be fetched; str(error) says why."""


def call_tool(name: str, arguments: dict[str, Any] | None = None, /, **keywords: Any) -> ToolResult:
    """Call the tool named `name` with `arguments` (or with keywords)."""


def call_tools(calls: list[tuple[str, dict[str, Any]]]) -> list[ToolResult]:
    """Call several tools concurrently; results in the order of `calls`."""


def fetch(reference: ReferenceBlock | str) -> str:
    """Save a reference's payload (a reference block or its id); returns "refs/<file>"."""


def read_text(path: str) -> str: ...
def read_bytes(path: str) -> bytes: ...
def write_text(path: str, text: str) -> None: ...


inputs: dict[str, Any]
'''


def render_stubs(specs: Iterable[ToolSpec]) -> str:
    """Python source describing ``specs`` for a model's prompt (module doc).

    Pure and deterministic: the same specs, in any order, give the same text. Never raises for
    what a spec's schemas or description hold.
    """
    ordered = sorted(specs, key=lambda spec: spec.name)
    shared: dict[str, int] = {}
    for spec in ordered:
        shared[spec.attribute] = shared.get(spec.attribute, 0) + 1
    stubs = _Stubs({spec.attribute for spec in ordered})
    reachable: list[str] = []
    by_name: list[str] = []
    for spec in ordered:
        if _is_name(spec.attribute) and shared[spec.attribute] == 1:
            reachable.append(stubs.tool(spec, spec.attribute, reachable=True))
        else:
            by_name.append(stubs.tool(spec, stubs.def_name(spec.attribute), reachable=False))
    out = [_HEADER, *stubs.classes]
    out.append("\n\nclass tools:\n" + ("\n".join(reachable) if reachable else "    pass\n"))
    if by_name:
        out.append(
            "\n\nclass by_name:\n"
            + _docstring(
                "Tools tools.<name> can't reach (a name a script can't use after tools., or "
                "one two tools share): call each with call_tool, as its docstring shows.",
                "    ",
            )
            + "\n"
            + "\n".join(by_name)
        )
    return "".join(out)


def render_tool_stub(spec: ToolSpec) -> str:
    """One tool's stub, as :func:`render_stubs` writes it in ``class tools`` (dedented), after
    the classes its def names: what a search for tools answers with. Pure; never raises for
    what the spec holds."""
    stubs = _Stubs({spec.attribute})
    reachable = _is_name(spec.attribute)
    name = spec.attribute if reachable else stubs.def_name(spec.attribute)
    body = textwrap.dedent(stubs.tool(spec, name, reachable=reachable))
    classes = "".join(stubs.classes).strip("\n")
    return f"{classes}\n\n\n{body}" if classes else body


class _Stubs:
    """The classes made so far, and the names taken."""

    def __init__(self, attributes: set[str]) -> None:
        self.classes: list[str] = []
        self._taken = set(_RESERVED) | attributes
        self._made: dict[tuple[str, str], str] = {}
        self._defs: set[str] = set()

    def class_name(self, wanted: str, prefix: str) -> str:
        base = _pascal(wanted)
        for candidate in (base, _pascal(prefix + "_" + wanted)):
            if candidate not in self._taken:
                self._taken.add(candidate)
                return candidate
        number = 2
        while f"{base}{number}" in self._taken:
            number += 1
        self._taken.add(f"{base}{number}")
        return f"{base}{number}"

    def def_name(self, attribute: str) -> str:
        base = re.sub(r"[^A-Za-z0-9_]", "_", attribute).lstrip("_")[:60] or "tool"
        if not base[0].isalpha():
            base = "tool_" + base
        name, number = base, 2
        while name in self._defs or keyword.iskeyword(name) or name in _RESERVED:
            name, number = f"{base}_{number}", number + 1
        self._defs.add(name)
        return name

    def add_class(self, wanted: str, prefix: str, render: Any) -> str:
        """The name of a class whose source ``render(name)`` writes; one of the same wanted
        name and the same source is made once."""
        probe = render("X")
        made = self._made.get((wanted, probe))
        if made is not None:
            return made
        name = self.class_name(wanted, prefix)
        self._made[(wanted, probe)] = name
        self.classes.append(render(name))
        return name

    def tool(self, spec: ToolSpec, def_name: str, *, reachable: bool) -> str:
        """The def of one tool, indented for its class."""
        prefix = _pascal(spec.attribute)
        types = _Types(self, spec.input_schema, prefix)
        doc = [_cut(inspect.cleandoc(spec.description), MAX_DESCRIPTION_CHARS)]
        arguments = types.keywords(spec.input_schema)
        returns = "ToolResult"
        if spec.output_schema is not None:
            output = _Types(self, spec.output_schema, prefix, budget=types.budget)
            data = output.type_of(spec.output_schema, 0, prefix + "Output")
            if data != _ANY:
                returns = self.add_class(
                    prefix + "Result",
                    prefix,
                    lambda name: (
                        f"\n\nclass {name}(TypedDict):\n    content: list[Block]\n"
                        f"    data: {_join(data)}\n    isError: bool\n"
                    ),
                )
        name_literal = json.dumps(spec.name)
        if arguments is None:  # one dict of arguments
            parameter = _join(types.type_of(spec.input_schema, 0, prefix + "Arguments"))
            if parameter in {"Any", "dict[str, Any]"}:
                parameter = "dict[str, Any]"
            example = types.example_dict(spec.input_schema)
            signature = f"arguments: {parameter}, /"
            call = f"{{{example}}}"
            how = [f"Call it with one dict: call_tool({name_literal}, {call})"]
            if reachable:
                how[0] += f", or tools.{def_name}({call})"
            doc.append(how[0] + ".")
        else:
            listed, described = arguments
            signature = ", ".join(["*", *listed]) if listed else ""
            if described:
                doc.append("Args:\n" + "\n".join(f"    {line}" for line in described))
            example = types.example_dict(spec.input_schema)
            doc.append(f"Same as call_tool({name_literal}, {{{example}}}).")
        if not reachable:
            doc.append(
                f"tools.{spec.attribute} can't reach it: use call_tool({name_literal}, ...)."
            )
        text = "\n\n".join(part for part in doc if part)
        return f"    def {def_name}({signature}) -> {returns}:\n{_docstring(text, '        ')}\n"


class _Types:
    """Python types for the schemas of one root (its ``$defs`` are where its refs point)."""

    def __init__(
        self, stubs: _Stubs, root: object, prefix: str, budget: list[int] | None = None
    ) -> None:
        self._stubs = stubs
        self._root = root
        self._prefix = prefix
        self._resolving: set[str] = set()
        self._refs: dict[str, Parts] = {}
        self.budget = budget if budget is not None else [MAX_CLASSES]

    def type_of(self, schema: object, depth: int, hint: str) -> Parts:
        """``schema`` as a type (module doc); ``hint`` names a class it makes."""
        if depth > MAX_DEPTH or not isinstance(schema, dict):
            return _ANY
        ref = schema.get("$ref")
        if isinstance(ref, str):
            return self._ref(ref, depth)
        if "const" in schema:
            literal = _literal(schema["const"])
            if literal is not None:
                return (f"Literal[{literal}]",)
        enum = schema.get("enum")
        if isinstance(enum, list) and 0 < len(enum) <= MAX_ENUM:
            literals = [_literal(member) for member in enum]
            if all(literal is not None for literal in literals):
                return (f"Literal[{', '.join(dict.fromkeys(literals))}]",)  # type: ignore[arg-type]
        for key in ("anyOf", "oneOf"):
            members = schema.get(key)
            if isinstance(members, list) and members:
                if len(members) > MAX_UNION:
                    return _ANY
                return _union(self.type_of(member, depth + 1, hint) for member in members)
        all_of = schema.get("allOf")
        if isinstance(all_of, list) and all_of:
            return self.type_of(all_of[0], depth + 1, hint) if len(all_of) == 1 else _ANY
        kind = schema.get("type")
        if isinstance(kind, list):
            kinds = [k for k in kind if isinstance(k, str)]
            if not kinds or len(kinds) > MAX_UNION:
                return _ANY
            return _union(self._typed(schema, k, depth, hint) for k in kinds)
        if isinstance(kind, str):
            return self._typed(schema, kind, depth, hint)
        if isinstance(schema.get("properties"), dict):
            return self._typed(schema, "object", depth, hint)
        return _ANY

    def _typed(self, schema: dict[str, Any], kind: str, depth: int, hint: str) -> Parts:
        if kind in _SIMPLE:
            return (_SIMPLE[kind],)
        if kind == "array":
            items = schema.get("items")
            inner = (
                self.type_of(items, depth + 1, hint + "Item") if isinstance(items, dict) else _ANY
            )
            return (f"list[{_join(inner)}]",)
        if kind != "object":
            return _ANY
        properties = schema.get("properties")
        if isinstance(properties, dict) and properties:
            return (self._typed_dict(schema, properties, depth, hint),)
        extra = schema.get("additionalProperties")
        value = self.type_of(extra, depth + 1, hint + "Value") if isinstance(extra, dict) else _ANY
        return (f"dict[str, {_join(value)}]",)

    def _ref(self, ref: str, depth: int) -> Parts:
        done = self._refs.get(ref)
        if done is not None:
            return done
        if ref in self._resolving or not ref.startswith("#/"):
            return _ANY
        target: object = self._root
        for segment in ref[2:].split("/"):
            segment = segment.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, dict) or segment not in target:
                return _ANY
            target = target[segment]
        self._resolving.add(ref)
        try:
            parts = self.type_of(target, depth + 1, ref.rsplit("/", 1)[-1] or "Ref")
        finally:
            self._resolving.discard(ref)
        self._refs[ref] = parts
        return parts

    def _object_fields(
        self, schema: dict[str, Any], properties: dict[Any, Any], depth: int, hint: str
    ) -> list[tuple[str, Parts, bool, object]] | None:
        """Each property: (name, type, required, its schema); ``None`` past the bounds."""
        keys = [key for key in properties if isinstance(key, str)]
        if len(keys) > MAX_PROPERTIES or any(len(key) > MAX_KEY_CHARS for key in keys):
            return None
        listed = schema.get("required")
        required = {r for r in listed if isinstance(r, str)} if isinstance(listed, list) else set()
        return [
            (key, self.type_of(properties[key], depth + 1, hint + "_" + key), key in required,
             properties[key])
            for key in keys
        ]  # fmt: skip

    def _typed_dict(
        self, schema: dict[str, Any], properties: dict[Any, Any], depth: int, hint: str
    ) -> str:
        if self.budget[0] <= 0:
            return "dict[str, Any]"
        self.budget[0] -= 1
        fields = self._object_fields(schema, properties, depth, hint)
        if fields is None:
            return "dict[str, Any]"
        lines = [
            (key, _join(parts) if required else f"NotRequired[{_join(parts)}]")
            for key, parts, required, _ in fields
        ]
        if all(_is_key(key) for key, _ in lines):
            described = "\n".join(
                f"{key}: {_one_line(_text(sub.get('description')))}"
                for key, _, _, sub in fields
                if isinstance(sub, dict) and _text(sub.get("description"))
            )
            doc = [_cut(_text(schema.get("description")), MAX_FIELD_CHARS), described]
            body = "".join(f"    {key}: {annotation}\n" for key, annotation in lines)
            docstring = _docstring("\n\n".join(d for d in doc if d), "    ")

            def render(name: str) -> str:
                return (
                    f"\n\nclass {name}(TypedDict):\n"
                    + (f"{docstring}\n" if docstring else "")
                    + body
                )

        else:
            items = ", ".join(f"{_repr_key(key)}: {annotation}" for key, annotation in lines)

            def render(name: str) -> str:
                return f'\n\n{name} = TypedDict("{name}", {{{items}}})\n'

        return self._stubs.add_class(hint, self._prefix, render)

    def keywords(self, schema: object) -> tuple[list[str], list[str]] | None:
        """The keyword-only parameters of a tool taking ``schema`` and their descriptions, or
        ``None`` when its arguments can't be keywords (module doc)."""
        schema = self._top(schema)
        if not isinstance(schema, dict):
            return None
        properties = schema.get("properties")
        if properties is None or properties == {}:
            if "anyOf" in schema or "oneOf" in schema or "allOf" in schema or "$ref" in schema:
                return None
            return [], []
        if not isinstance(properties, dict):
            return None
        fields = self._object_fields(schema, properties, 0, self._prefix)
        if fields is None or not all(_is_name(key) for key, _, _, _ in fields):
            return None
        listed, described, optional = [], [], []
        for key, parts, required, sub in fields:
            if required:
                listed.append(f"{key}: {_join(parts)}")
            else:
                default = sub.get("default", None) if isinstance(sub, dict) else None
                literal = _literal(default, containers=True)
                if literal is None or literal == "None":
                    optional.append(f"{key}: {_join(_union([parts, ('None',)]))} = None")
                else:
                    optional.append(f"{key}: {_join(parts)} = {literal}")
            text = _text(sub.get("description")) if isinstance(sub, dict) else ""
            if text:
                described.append(f"{key}: {_one_line(text)}")
        return [*listed, *optional], described

    def example_dict(self, schema: object) -> str:
        """The keys of the required arguments, as a dict literal's inside with ``...``."""
        schema = self._top(schema)
        if not isinstance(schema, dict):
            return "..."
        properties = schema.get("properties")
        listed = schema.get("required")
        if not isinstance(properties, dict) or not isinstance(listed, list):
            return ""
        keys = [k for k in listed if isinstance(k, str) and k in properties][:8]
        return ", ".join(f"{json.dumps(key)}: ..." for key in keys)

    def _top(self, schema: object) -> object:
        """The top-level schema, its ``$ref`` followed once (within bounds)."""
        if isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
            ref = schema["$ref"]
            target: object = self._root
            if not ref.startswith("#/"):
                return None
            for segment in ref[2:].split("/"):
                if not isinstance(target, dict) or segment not in target:
                    return None
                target = target[segment]
            return target if isinstance(target, dict) and "$ref" not in target else None
        return schema


def _union(members: Iterable[Parts]) -> Parts:
    parts: dict[str, None] = {}
    for member in members:
        if member == _ANY:
            return _ANY
        parts.update(dict.fromkeys(member))
    if len(parts) > MAX_UNION:
        return _ANY
    return tuple(parts) or _ANY


def _join(parts: Parts) -> str:
    return " | ".join(parts)


def _is_name(name: str) -> bool:
    """A name a script may write after ``tools.`` or as a def's name."""
    return bool(_NAME.fullmatch(name)) and not keyword.iskeyword(name)


def _is_key(name: str) -> bool:
    """A property a ``TypedDict`` class body may name."""
    return bool(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name)) and not keyword.iskeyword(name)


def _pascal(text: str) -> str:
    """``text`` as an ASCII class name: its words capitalised, at most 60 characters."""
    words = re.split(r"[^A-Za-z0-9]+", text)
    name = "".join(word[:1].upper() + word[1:] for word in words if word)[:60]
    if not name or not name[0].isalpha():
        name = "T" + name
    return name


def _literal(value: object, *, containers: bool = False) -> str | None:
    """``value`` written as a Python literal (a ``Literal`` member, or with ``containers`` a
    default), or ``None`` when it can't be or is too long."""
    if value is None or isinstance(value, bool):
        text = repr(value)
    elif isinstance(value, int):
        text = repr(value) if abs(value) < 2**63 else ""
    elif isinstance(value, str):
        text = repr(value)
    elif containers and isinstance(value, float):
        text = repr(value) if math.isfinite(value) else ""
    elif containers and isinstance(value, list | dict):
        try:
            dumped = json.dumps(value, allow_nan=False)
            text = repr(json.loads(dumped)) if len(dumped) <= MAX_LITERAL_CHARS else ""
        except (TypeError, ValueError, RecursionError):
            text = ""
    else:
        text = ""
    return text if text and len(text) <= MAX_LITERAL_CHARS else None


def _repr_key(key: str) -> str:
    return repr(key)


def _text(value: object) -> str:
    return inspect.cleandoc(value) if isinstance(value, str) else ""


def _one_line(text: str) -> str:
    return _cut(" ".join(text.split()), MAX_FIELD_CHARS)


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]} [cut: {len(text) - limit} more characters]"


def _docstring(text: str, indent: str) -> str:
    """``text`` as a docstring at ``indent`` (empty when ``text`` is), escaped (module doc)."""
    escaped = _escape(text.strip())
    if not escaped:
        return ""
    lines = escaped.split("\n")
    if len(lines) == 1:
        return f'{indent}"""{escaped}"""'
    body = "\n".join(f"{indent}{line}" if line.strip() else "" for line in lines[1:])
    return f'{indent}"""{lines[0]}\n{body}\n{indent}"""'


def _escape(text: str) -> str:
    """``text`` made safe inside a triple-double-quoted, non-raw string."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    out: list[str] = []
    for index, char in enumerate(text):
        if char == "\\":
            out.append("\\\\")
        elif char in "\n\t":
            out.append(char)
        elif unicodedata.category(char) in _ESCAPED:
            out.append(ascii(char)[1:-1])
        elif char == '"' and (index + 1 == len(text) or text[index + 1] == '"'):
            out.append('\\"')
        else:
            out.append(char)
    return "".join(out)
