"""Plain data: the one definition of the values the channel carries as payload.

Plain data is ``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes`` (:data:`LEAF_TYPES`),
``list`` and ``dict`` with ``str`` keys, exact types only (no subclasses), with no container
deeper than :data:`MAX_DATA_DEPTH` (the value itself is at depth 0) and at most
:data:`MAX_DATA_NODES` values.
:func:`check_plain` is its check (and :data:`sandbox.protocol.PlainData`, in
:mod:`._messages`, the pydantic type of every payload field: tool arguments, tool views, inputs,
the script's value). Both sides use these bounds: the child
converts a script's values to plain data within them (:func:`sandbox._values.to_plain`), and
every walk of the host (claims, views, lanes) stops at the same depth, so a view the host
renders is within them by construction.
No I/O.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["LEAF_TYPES", "MAX_DATA_DEPTH", "MAX_DATA_NODES", "check_plain"]

MAX_DATA_DEPTH: Final = 100
"""The deepest a container may sit in a :data:`PlainData` value (the value itself is at 0)."""

MAX_DATA_NODES: Final = 1_000_000
"""Most values (containers, keys and leaves) allowed in one :data:`PlainData` value."""

LEAF_TYPES: Final[tuple[type, ...]] = (str, int, float, bool, type(None), bytes)
"""The exact types of plain data's leaves (every value that is not a ``list`` or a ``dict``)."""

_LEAVES: Final = frozenset(LEAF_TYPES)


def check_plain(
    value: Any, *, max_depth: int = MAX_DATA_DEPTH, max_nodes: int = MAX_DATA_NODES
) -> Any:
    """Return ``value`` unchanged if it is plain data within the depth and node bounds.

    Plain data is ``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes``, ``list`` and
    ``dict`` with ``str`` keys (exact types, no subclasses). The walk is iterative and linear.

    Raises:
        ValueError: naming the first offending value's type, or the bound that was passed.
    """
    stack: list[tuple[Any, int]] = [(value, 0)]
    nodes = 0
    while stack:
        item, depth = stack.pop()
        nodes += 1
        if nodes > max_nodes:
            raise ValueError(f"plain data has more than {max_nodes} values")
        kind = type(item)
        if kind in _LEAVES:
            continue
        if depth > max_depth:
            raise ValueError(f"plain data is nested deeper than {max_depth}")
        if kind is list:
            stack.extend((child, depth + 1) for child in item)
        elif kind is dict:
            for key, child in item.items():
                if type(key) is not str:
                    raise ValueError(f"plain data has a {type(key).__name__} map key")
                nodes += 1
                stack.append((child, depth + 1))
        else:
            raise ValueError(f"{kind.__name__} is not plain data")
    return value
