"""Script values turned into exact builtin types: the boundary of the script API.

Everything a script hands the script API (``call_tool`` and ``call_tools`` names and arguments,
``fetch``'s reference, ``read_text``/``read_bytes``/``write_text``'s path and text, ``print``'s
``sep`` and ``end``, the script's value) is converted here before any trusted code looks at it,
through the builtin types' own slots: a ``str`` subclass becomes a plain ``str`` without any of
its methods being called, and any other type is refused with ``TypeError``
(:func:`exact_str`, :func:`exact_list`) or :class:`NotPlainError` (:func:`to_plain`). No method of
a script's object ever steers a check. Every string sent to the host is made well formed (a
lone surrogate becomes U+FFFD, :func:`well_formed`). :func:`to_plain` converts to plain data
within the one pair of bounds both sides use (:data:`sandbox.protocol.MAX_DATA_DEPTH`,
:data:`~sandbox.protocol.MAX_DATA_NODES`).
"""

from __future__ import annotations

from typing import Any, Final

from . import _hints
from .protocol import (
    MAX_DATA_DEPTH,
    MAX_DATA_NODES,
)

__all__ = [
    "MESSAGE_CHARS",
    "NotPlainError",
    "cut",
    "describe",
    "exact_list",
    "exact_str",
    "to_plain",
    "well_formed",
]

MESSAGE_CHARS: Final = 4000
"""The most characters of an error message sent to the host."""


class NotPlainError(TypeError):
    """A value is not plain data (see :func:`to_plain`)."""


def well_formed(text: str) -> str:
    """Return ``text`` as an exact ``str`` with every lone surrogate replaced by U+FFFD (other
    text unchanged); a ``str`` subclass is read through ``str``'s own slot."""
    if type(text) is not str:
        text = str.__str__(text)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def exact_str(value: Any, what: str) -> str:
    """Return ``value`` as an exact ``str`` without calling any method of the script's.

    A ``str`` subclass is copied through ``str``'s own slot (``str.__str__``), so no override
    of ``split``, ``__eq__``, ``startswith`` ... ever runs.

    Raises:
        TypeError: ``value`` is not a ``str``; the message names ``what``.
    """
    cls = type(value)
    if cls is str:
        return value  # type: ignore[no-any-return]
    if issubclass(cls, str):
        return str.__str__(value)
    raise TypeError(f"{what} must be a str, not {cls.__name__}")


def exact_list(value: Any, what: str) -> list[Any]:
    """Return the items of a ``list`` or ``tuple`` (or a subclass of either) as a new exact
    ``list``, read through the builtin type's own iterator (no override runs).

    Raises:
        TypeError: ``value`` is neither; the message names ``what``.
    """
    cls = type(value)
    if issubclass(cls, list):
        return list(list.__iter__(value))
    if issubclass(cls, tuple):
        return list(tuple.__iter__(value))
    raise TypeError(f"{what} must be a list or tuple, not {cls.__name__}")


def to_plain(
    value: Any, *, max_depth: int = MAX_DATA_DEPTH, max_nodes: int = MAX_DATA_NODES
) -> Any:
    """Return a plain-data copy of ``value`` (see :data:`sandbox.protocol.PlainData`), made of
    exact builtin types.

    Tuples, sets and frozensets become lists (a set's in its own order), ``bytearray`` becomes
    ``bytes``, subclasses of ``dict``/``list``/``tuple``/``set``/``frozenset``/``str``/``bytes``/
    ``int``/``float`` become the base type, each read through the
    base type's own slots and iterators (types are taken from ``type()``, never from a
    ``__class__`` an object claims), so no method of the script's runs; strings are made well
    formed.

    Raises:
        NotPlainError: some value has another type, an int is outside 64 bits, a dict key is not
            a ``str``, or the bounds are passed.
    """
    nodes = 0

    def convert(item: Any, depth: int) -> Any:
        nonlocal nodes
        nodes += 1
        if nodes > max_nodes:
            raise NotPlainError(f"more than {max_nodes} values")
        if item is None or item is True or item is False:
            return item
        cls = type(item)
        if issubclass(cls, int):
            number = int.__int__(item)
            if not -(2**63) <= number < 2**64:
                raise NotPlainError("an int outside 64 bits")
            return number
        if issubclass(cls, float):
            return float.__float__(item)
        if issubclass(cls, str):
            return well_formed(str.__str__(item))
        if issubclass(cls, (bytes, bytearray)):
            return bytes(memoryview(item))
        if depth > max_depth:
            raise NotPlainError(f"nested deeper than {max_depth}")
        if issubclass(cls, list):
            return [convert(child, depth + 1) for child in list.__iter__(item)]
        if issubclass(cls, tuple):
            return [convert(child, depth + 1) for child in tuple.__iter__(item)]
        if issubclass(cls, set):
            return [convert(child, depth + 1) for child in set.__iter__(item)]
        if issubclass(cls, frozenset):
            return [convert(child, depth + 1) for child in frozenset.__iter__(item)]
        if issubclass(cls, dict):
            converted: dict[str, Any] = {}
            for key, child in dict.items(item):
                if not issubclass(type(key), str):
                    raise NotPlainError(f"a {type(key).__name__} dict key")
                converted[well_formed(str.__str__(key))] = convert(child, depth + 1)
            return converted
        raise NotPlainError(f"a {cls.__name__}")

    return convert(value, 0)


def cut(text: str, limit: int) -> str:
    text = well_formed(text)
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def describe(exc: BaseException) -> str:
    """``exc``'s message, cut to :data:`MESSAGE_CHARS`; for the interpreter's own
    ``NameError`` of a builtin the sandbox leaves out, with what to use instead
    (:data:`sandbox._hints.MISSING_NAMES`)."""
    try:
        text = str(exc)
    except BaseException:  # a script's __str__ may raise anything
        text = f"<{type(exc).__name__} with an unprintable message>"
    if type(exc) is NameError:
        name = exc.name  # a slot of the exact builtin: no code of the script's runs
        hint = _hints.MISSING_NAMES.get(name) if type(name) is str else None
        if hint is not None and text == f"name {name!r} is not defined":
            text = f"{text}: {hint}"
    return cut(text, MESSAGE_CHARS)
