"""What a tool is, described for a model: :class:`ToolSpec`.

A host tool's spec is derived from its function (:func:`scriptbridge.python_tool`); a server's
tool's spec is what the server listed, read field by field: a server is untrusted, so a field
of the wrong type is replaced (an empty description, an input schema that takes any object, no
output schema), never passed on as it came. The schemas themselves are kept as listed; whoever
reads them (:func:`scriptbridge._stubs.render_stubs`) must not trust their shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = ["ToolSpec", "attribute_of", "listed_spec"]


def attribute_of(name: str) -> str:
    """The attribute ``tools.<attribute>`` takes for tool ``name``: ``.`` and ``-`` become
    ``_``, as the sandbox's ``tools`` namespace makes them."""
    return name.replace(".", "_").replace("-", "_")


class ToolSpec(BaseModel):
    """One tool as a model should see it.

    Attributes:
        name: the name ``call_tool`` takes (``<server>.<tool>`` for a server's tool).
        attribute: the attribute ``tools.<attribute>`` takes (``.`` and ``-`` become ``_``).
            Two tools of one bridge can share an attribute; ``tools.<attribute>`` then refuses
            both, and their stubs say to call them with ``call_tool``.
        description: the tool's whole description (a python tool's whole docstring).
        input_schema: the JSON Schema of its arguments (an object schema).
        output_schema: the JSON Schema of its result's ``data``, or ``None`` when it has none.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    attribute: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None = None


def listed_spec(name: str, listed: Mapping[str, Any] | None) -> ToolSpec:
    """The spec of tool ``name`` from the definition a server listed for it (``description``,
    ``inputSchema``, ``outputSchema``); a missing or wrongly typed field is replaced (module
    doc). Never raises for what the definition holds."""
    listed = listed if isinstance(listed, Mapping) else {}
    description = listed.get("description")
    input_schema = listed.get("inputSchema")
    output_schema = listed.get("outputSchema")
    return ToolSpec(
        name=name,
        attribute=attribute_of(name),
        description=description if isinstance(description, str) else "",
        input_schema=_string_keyed(input_schema) or {"type": "object"},
        output_schema=_string_keyed(output_schema),
    )


def _string_keyed(schema: object) -> dict[str, Any] | None:
    if not isinstance(schema, dict):
        return None
    return {key: value for key, value in schema.items() if isinstance(key, str)}
