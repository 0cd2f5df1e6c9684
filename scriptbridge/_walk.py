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

*Plain data* (:func:`plain_children`, :func:`is_plain_leaf`) is data whose every container,
leaf and key has an exact builtin type, as decoded JSON has: reading it runs no code of its
own, so the walks' fast paths (:class:`scriptbridge._claims.PlainWalk`, the renderer's plain
path) may read it twice and get the same answer. Anything else is read by the general walks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from pydantic import BaseModel

from . import markers
from ._classify import is_block

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

INT_MIN: Final = -(2**63)
INT_MAX: Final = 2**64 - 1


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
        return exact_int if INT_MIN <= exact_int <= INT_MAX else NOT_PLAIN
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


def children_of(container: dict[Any, Any] | list[Any] | tuple[Any, ...]) -> list[Any]:
    """A container's values, read through the base type's own methods.

    A subclass's overridden ``values`` or ``__iter__`` is never called, so a hostile container
    can neither raise here nor show one walk something another walk doesn't see.
    """
    if isinstance(container, dict):
        return list(dict.values(container))
    if isinstance(container, list):
        return list(list.__iter__(container))
    return list(tuple.__iter__(container))


_NONE_TYPE: Final = type(None)


def plain_children(
    container: dict[Any, Any] | list[Any] | tuple[Any, ...],
) -> list[Any] | tuple[()] | None:
    """The containers among an exact dict's, list's or tuple's values, in order, or ``None``
    when one of its values (or one of a dict's keys) is not plain data.

    Plain data here is a value whose type is exactly ``str``, ``int``, ``float``, ``bool``,
    ``NoneType`` or ``bytes`` (a leaf) or exactly ``dict``, ``list`` or ``tuple`` (a container,
    returned to be checked in turn); a dict's keys must be exactly ``str``, ``int``, ``float``,
    ``bool`` or ``None``. Types are compared by identity only, and a dict is read by iterating
    its items (no lookup, which could compare keys), so nothing of the container's own runs, not
    even a metaclass's ``__eq__`` or ``__hash__``; and once it answers, reading, hashing and
    comparing its keys and leaves runs nothing but the interpreter's own code either.
    ``container`` itself must be an exact dict, list or tuple. Returns ``()`` for a container
    that holds none. Linear in the container's size; never raises.
    """
    below: list[Any] | None = None
    if type(container) is dict:
        for key, value in container.items():
            kind = type(key)
            if not (
                kind is str or kind is int or kind is _NONE_TYPE or kind is float or kind is bool
            ):
                return None
            kind = type(value)
            if (
                kind is str
                or kind is _NONE_TYPE
                or kind is int
                or kind is bool
                or kind is float
                or kind is bytes
            ):
                continue
            if kind is dict or kind is list or kind is tuple:
                if below is None:
                    below = [value]
                else:
                    below.append(value)
                continue
            return None
        return () if below is None else below
    for value in container:
        kind = type(value)
        if (
            kind is str
            or kind is _NONE_TYPE
            or kind is int
            or kind is bool
            or kind is float
            or kind is bytes
        ):
            continue
        if kind is dict or kind is list or kind is tuple:
            if below is None:
                below = [value]
            else:
                below.append(value)
            continue
        return None
    return () if below is None else below


def is_plain_leaf(value: object) -> bool:
    """Whether ``value``'s type is exactly one of the leaf types of plain data (see
    :func:`plain_children`); compared by identity, so nothing of the value's own runs."""
    kind = type(value)
    return (
        kind is str
        or kind is _NONE_TYPE
        or kind is int
        or kind is bool
        or kind is float
        or kind is bytes
    )


def data_of(top: dict[Any, Any]) -> Any:
    """A result's data: ``structuredContent``, or ``data`` when it has none.

    Reading ``data`` too lets a rendered script view be read again as the result it came from.
    """
    return top["structuredContent"] if "structuredContent" in top else top.get("data")


class Budget:
    """One walk's limits over one result: a seen set and a node budget, shared by its parts."""

    def __init__(self) -> None:
        self.seen: set[int] = set()
        self.nodes = 1
        self.copied = 0
        """Values :func:`copy_tree` made with this budget, counted as the protocol counts plain
        data (``sandbox.protocol.check_plain``): one per container, leaf and dict key."""

    def open(self, container: object, count: int) -> bool:
        """Open a container of ``count`` values: False when it was reached before in this walk
        (a cycle or a shared container) or when the budget would run out."""
        if id(container) in self.seen or self.nodes + count > NODE_BUDGET:
            return False
        self.seen.add(id(container))
        self.nodes += count
        return True

    def visit(self, container: object) -> bool:
        """Mark a container read whole without walking it (a block): False if reached before."""
        if id(container) in self.seen:
            return False
        self.seen.add(id(container))
        return True


def copy_tree(
    root: object,
    depth: int,
    budget: Budget,
    show_block: Callable[[dict[Any, Any]], Any],
    *,
    keep_bytes: bool,
) -> Any:
    """Copy nested data as plain data, iteratively, with every block replaced by ``show_block``.

    Dicts whose ``type`` is a block type go to ``show_block``; other dicts and lists (tuples
    become lists) are walked; leaves become their exact builtin types (:func:`plain_scalar`;
    ``bytes`` only with ``keep_bytes``), keys become ``str`` (:func:`plain_key`). Past the depth
    limit or the budget, or at a container reached twice, the copy holds ``DATA_TOO_DEEP``; a
    value it can't carry (an object, a bad key, a container whose methods raise) holds
    ``UNREADABLE_VALUE``. ``root`` sits at ``depth``, and no container of the copy sits deeper
    than :data:`MAX_DEPTH`. What the copy holds is added to ``budget.copied`` (a block's view
    must be a flat dict or a leaf). Never raises, never recurses.
    """
    holder: list[Any] = [None]
    stack: list[tuple[Any, Any, Any, int]] = [(root, holder, 0, depth)]
    copied = 0
    while stack:
        value, parent, key, level = stack.pop()
        copied += 1
        try:
            parent[key] = _copy_one(value, level, budget, show_block, keep_bytes, stack)
        except Exception:
            parent[key] = markers.UNREADABLE_VALUE
    budget.copied += copied
    return holder[0]


def _copy_one(
    value: object,
    level: int,
    budget: Budget,
    show_block: Callable[[dict[Any, Any]], Any],
    keep_bytes: bool,
    stack: list[tuple[Any, Any, Any, int]],
) -> Any:
    if isinstance(value, PLAIN_SCALARS):
        leaf = plain_scalar(value)
        if leaf is NOT_PLAIN or (isinstance(leaf, bytes) and not keep_bytes):
            return markers.UNREADABLE_VALUE
        return leaf
    if isinstance(value, dict):
        if level > MAX_DEPTH or id(value) in budget.seen:
            return markers.DATA_TOO_DEEP
        if is_block(value):
            budget.visit(value)
            shown = show_block(value)
            if type(shown) is dict:
                budget.copied += 2 * len(shown)
            return shown
        items = [(plain_key(k), child) for k, child in dict.items(value)]
        if any(k is None for k, _ in items):
            return markers.UNREADABLE_VALUE
        if not budget.open(value, len(items)):
            return markers.DATA_TOO_DEEP
        chosen = dict(items)  # a key spelt twice (1 and "1") keeps its last value only
        budget.copied += len(chosen)
        out: dict[Any, Any] = dict.fromkeys(chosen)  # filled as the stack unwinds
        stack.extend((child, out, k, level + 1) for k, child in reversed(chosen.items()))
        return out
    if isinstance(value, list | tuple):
        if level > MAX_DEPTH or not budget.open(value, len(value)):
            return markers.DATA_TOO_DEEP
        children = children_of(value)
        seq: list[Any] = [None] * len(children)
        stack.extend((children[i], seq, i, level + 1) for i in reversed(range(len(children))))
        return seq
    return markers.UNREADABLE_VALUE
