"""Walk limits shared by every walk of nested data (SPEC section 2), and the one bounded copy.

Every walk (claims, the script view, the lanes) is iterative: none recurses on the Python
stack, so no input can overflow it. Each walk keeps:

- a depth limit: the result itself is at depth 0, and a container deeper than
  :data:`MAX_DEPTH` is not read;
- a seen set: a container reached a second time in one walk (a cycle, or a list or dict shared
  under itself by a Python tool) counts as too deep, so no input makes a walk super-linear;
- a node budget of :data:`NODE_BUDGET` values per result, counted as containers are opened.

Past a limit a walk fails closed: the claims walk calls the result unreadable, and a view shows
``DATA_TOO_DEEP`` in place of what it could not read.

The claims walk can also run in slices (:func:`scriptbridge._claims.read_claims_in_slices`): a
generator that pauses (yields) after every :data:`SLICE_VALUES` values it visits, so a caller
on an event loop can let other tasks run between slices; :func:`run_to_end` runs one without
pausing.

:func:`copy_tree` is the bounded copy every view of data makes (the script view's general path,
the model's lanes).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any, Final, TypeVar

from sandbox.protocol import MAX_DATA_DEPTH, MAX_DATA_NODES

from . import markers
from ._classify import is_block
from ._plain import NOT_PLAIN, PLAIN_SCALARS, plain_key, plain_scalar

MAX_DEPTH: Final = MAX_DATA_DEPTH
"""The channel's own depth limit (``sandbox.protocol.MAX_DATA_DEPTH``): one limit for both sides."""
NODE_BUDGET: Final = MAX_DATA_NODES
"""Values one walk may open: the channel's own bound on one plain-data value."""
SLICE_VALUES: Final = 2048
"""Values a sliced walk visits between two pauses (a few milliseconds of work)."""

T = TypeVar("T")


def run_to_end(slices: Generator[None, None, T]) -> T:
    """Run a sliced computation (a generator that yields at its pauses) through every pause,
    and return its value."""
    while True:
        try:
            next(slices)
        except StopIteration as done:
            value: T = done.value
            return value


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
