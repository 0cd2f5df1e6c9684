"""Plain data as a tool result holds it: exact builtin types, read without running its code.

*Plain data* (:func:`plain_children`, :func:`is_plain_leaf`) is data whose every container,
leaf and key has an exact builtin type, as decoded JSON has: reading it runs no code of its
own, so the walks' fast paths (:class:`scriptbridge._claims.PlainWalk`, the renderer's plain
path) may read it twice and get the same answer. Anything else is read by the general walks.

This is what the host may read of a result as it is; what the channel to a script carries is
narrower (dict keys are ``str`` only, see ``sandbox.protocol.check_plain``), and the views
convert keys (:func:`plain_key`) and leaves (:func:`plain_scalar`) to it.
"""

from __future__ import annotations

from typing import Any, Final

from sandbox.protocol import LEAF_TYPES

from . import markers

__all__ = [
    "INT_MAX",
    "INT_MIN",
    "NOT_PLAIN",
    "PLAIN_SCALARS",
    "is_plain_leaf",
    "plain_children",
    "plain_key",
    "plain_scalar",
]

PLAIN_SCALARS: Final = LEAF_TYPES
"""Leaf values a walk reads as they are (made well formed where they are strings): the leaf
types of the channel's plain data, :data:`sandbox.protocol.LEAF_TYPES`."""

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
