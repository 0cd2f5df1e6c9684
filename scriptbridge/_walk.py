"""Walk limits shared by every walk of nested data (SPEC section 2), and result normalizing.

Every walk (claims, the script view, the lanes) is iterative: none recurses on the Python
stack, so no input can overflow it. Each walk keeps:

- a depth limit: the result itself is at depth 0, and a container deeper than
  :data:`MAX_DEPTH` is not read;
- a seen set: a container reached a second time in one walk (a cycle, or a list or dict shared
  under itself by a Python tool) counts as too deep, so no input makes a walk super-linear;
- a node budget of :data:`NODE_BUDGET` values per result, counted as containers are opened.

Past a limit a walk fails closed: the claims walk calls the result unreadable, and a view shows
``DATA_TOO_DEEP`` in place of what it could not read.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import BaseModel

from . import markers

MAX_DEPTH: Final = 100
NODE_BUDGET: Final = 1_000_000

PLAIN_SCALARS: Final = (str, int, float, bool, type(None), bytes)
"""Leaf values a walk reads as they are (made well formed where they are strings)."""


def result_dict(result: object) -> dict[Any, Any] | None:
    """Return a tool result as a dict, or ``None`` when it can't be read as one.

    Accepts a dict (returned as it is, not copied); a pydantic model such as the ``mcp`` SDK's
    ``CallToolResult`` (dumped by alias, so its fields read ``structuredContent`` and
    ``isError``); or a list of blocks, read as a result with that content (a push, channel or
    injection message, which hosts ingest the same way). Never raises.
    """
    if isinstance(result, dict):
        return result
    if isinstance(result, list | tuple):
        return {"content": result}
    if isinstance(result, BaseModel):
        try:
            dumped = result.model_dump(mode="python", by_alias=True, exclude_none=True)
        except Exception:
            return None
        return dumped if isinstance(dumped, dict) else None
    return None


NOT_PLAIN: Final = object()
"""What :func:`plain_scalar` answers for a value no view can carry."""

_INT_MIN: Final = -(2**63)
_INT_MAX: Final = 2**64 - 1


def plain_scalar(value: object) -> Any:
    """Return a leaf value as its exact builtin type, or :data:`NOT_PLAIN`.

    Subclasses (an ``IntEnum``, a ``str`` subclass) are copied to their exact base type without
    calling any method they override; strings are made well formed. An ``int`` outside 64 bits
    is not plain: the channel to a script can't carry it.
    """
    if value is None or value is True or value is False:
        return value
    if isinstance(value, str):
        return markers.well_formed(value if type(value) is str else str.__str__(value))
    if isinstance(value, bool):  # a bool subclass can't exist; kept for the type checker
        return bool(value)
    if isinstance(value, int):
        exact_int = value if type(value) is int else int.__int__(value)
        return exact_int if _INT_MIN <= exact_int <= _INT_MAX else NOT_PLAIN
    if isinstance(value, float):
        return value if type(value) is float else float.__float__(value)
    if isinstance(value, bytes):
        return value if type(value) is bytes else bytes.__bytes__(value)
    return NOT_PLAIN


def plain_key(key: object) -> str | None:
    """A dict key as a view carries it: a well-formed ``str``; ``None`` for a key it can't.

    ``int``, ``float``, ``bool`` and ``None`` keys become their ``repr`` (``1``, ``1.5``,
    ``True``, ``None``), as a script would spell them.
    """
    if isinstance(key, str) or key is None or isinstance(key, int | float):
        exact = plain_scalar(key)
        if exact is NOT_PLAIN:
            return None
        return exact if isinstance(exact, str) else repr(exact)
    return None

