"""The restricted language layer's hooks: what a script may touch, name by name.

RestrictedPython rewrites a script so that every attribute read, item read, iteration, write
target, in-place operator, sequence unpacking, ``print`` and ``*args``/``**kwargs`` call goes
through a hook named in the script's globals (``_getattr_``, ``_getitem_`` ...). This module
supplies those hooks, the builtins allowlist, and the guarded ``__import__`` with its proxies.

The policy denies by default:

- every attribute that :data:`sandbox._surface.SURFACE` (the audited table of everything a
  script can reach) does not list for the class that defines it, unless that class is one the
  script defined itself; on top of that, names starting with ``_``, frame/code/generator/
  coroutine/traceback internals (:data:`DENIED_ATTRIBUTES`), ``format``/``format_map`` of
  strings, and any attribute whose value is a module, frame, code object or traceback;
- every builtin not in :func:`safe_builtins` (no ``type``, ``getattr``, ``vars``, ``dir``,
  ``globals``, ``locals``, ``eval``, ``exec``, ``compile``, ``open``, ``input``, ``breakpoint``,
  ``help``, ``memoryview``, ``object``, ``super``, real ``__import__``);
- every import but the modules of :data:`ALLOWED_IMPORTS`, each handed out as a
  :class:`ModuleProxy` exposing the listed public names only (never the module object, never a
  submodule, nothing that leads to ``sys``, ``os`` or a loader);
- writes (``obj.x = ...``, ``obj[k] = ...``) to modules, proxies, and classes and functions the
  script did not define. A class is the script's when its own ``class`` statement (or its
  ``namedtuple`` call) made it: :func:`script_build_class` records each one, so no attribute a
  caller can write (``__module__``) decides it.

``functools.wraps``, ``functools.total_ordering`` and ``collections.namedtuple`` are replaced by
versions of the sandbox's own that act only on the script's functions and classes (see
:mod:`sandbox._surface` for why the originals are out).

The language layer off (the security suite's ``restricted=False`` mode) swaps the audited
proxies for :data:`UNAUDITED_PROXIES`, with the real functions, so that its control runs show
each attack on them really works unprotected.

The proxies and builtins are built once, at import, in the zygote; each child gets its own copy
through ``fork``, so nothing a script does to them can reach another run.
"""

from __future__ import annotations

import base64
import bisect
import collections
import datetime
import decimal
import difflib
import fractions
import functools
import hashlib
import heapq
import importlib
import itertools
import json
import math
import random
import re
import statistics
import string
import sys
import textwrap
import time
import types
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final, NoReturn

from RestrictedPython.Guards import guarded_iter_unpack_sequence, guarded_unpack_sequence
from RestrictedPython.transformer import INSPECT_ATTRIBUTES

from . import _hints, _surface

__all__ = [
    "ALLOWED_IMPORTS",
    "DENIED_ATTRIBUTES",
    "SCRIPT_MODULE",
    "UNAUDITED_PROXIES",
    "ModuleProxy",
    "guard_hooks",
    "guarded_getattr",
    "guarded_import",
    "open_namespace",
    "safe_builtins",
    "script_build_class",
    "script_namedtuple",
    "script_total_ordering",
    "script_wraps",
]

SCRIPT_MODULE: Final = "__script__"
"""The ``__name__`` a script runs under; classes it defines carry it as their module."""

DENIED_ATTRIBUTES: Final[frozenset[str]] = frozenset(INSPECT_ATTRIBUTES) | {
    # frames, tracebacks, code
    "f_back", "f_builtins", "f_code", "f_generator", "f_globals", "f_locals", "f_trace",
    "tb_frame", "tb_next", "co_code", "co_consts", "co_names",
    # generators, coroutines, async generators
    "gi_frame", "gi_code", "gi_yieldfrom",
    "cr_frame", "cr_code", "cr_await", "cr_origin",
    "ag_frame", "ag_code", "ag_await",
    # the class graph (a path to object.__subclasses__)
    "mro",
    # Python 2 spellings that some escape recipes still try
    "func_globals", "func_code", "func_closure", "im_func", "im_self", "im_class",
}  # fmt: skip
"""Attribute names a script may never read, on any object."""

_DENIED_VALUE_TYPES: Final = (
    types.ModuleType,
    types.FrameType,
    types.CodeType,
    types.TracebackType,
)

_FORMAT_METHODS: Final = frozenset({"format", "format_map"})
_SANDBOX_MODULES: Final = "sandbox"  # instances of its classes are read-only to scripts


def _deny(message: str) -> NoReturn:
    raise AttributeError(message)


def guarded_getattr(obj: Any, name: Any, default: Any = ...) -> Any:
    """Return ``obj.<name>`` if the policy allows it (the ``_getattr_`` hook).

    Raises:
        TypeError: ``name`` is not a ``str``.
        AttributeError: the name is denied or not on the audited surface, the value is a
            module/frame/code/traceback, or the attribute does not exist (when no ``default``
            was given).
    """
    if type(name) is not str:
        raise TypeError("attribute name must be a str")
    key = (type(obj), name)
    if key in _BOUND_METHODS:
        # The common case: a listed method of an instance of a class the script can't change
        # (listed names never start with "_" and are never denied, no module or class is ever
        # such an instance, and a method read off an instance is bound: see on_surface).
        try:
            return getattr(obj, name)
        except AttributeError:
            if default is ...:
                raise
            return default
    if _ON_INSTANCES.get(key):  # another listed attribute: its value is checked
        return _checked_value(obj, name, default)
    if name.startswith("_"):
        _deny(f'"{name}" is an invalid attribute name because it starts with "_"')
    if name in DENIED_ATTRIBUTES:
        _deny(f'"{name}" is a restricted attribute')
    if name in _FORMAT_METHODS and (
        isinstance(obj, str) or (isinstance(obj, type) and issubclass(obj, str))
    ):
        _deny(f"str.{name}() is not available in scripts; use f-strings or % formatting")
    if isinstance(obj, types.ModuleType):
        _deny("modules are not available in scripts")
    if not on_surface(obj, name):
        if _defining_class(obj, name) is None and not _exists(obj, name):
            if default is ...:
                raise AttributeError(f"{type(obj).__name__!r} object has no attribute {name!r}")
            return default
        _deny(f"{_owner_label(obj, name)}.{name} is not available in scripts")
    return _checked_value(obj, name, default)


def _checked_value(obj: Any, name: str, default: Any) -> Any:
    """``obj.<name>`` (or ``default``, when given and it is missing), refused when the value
    itself is one no script may hold: an interpreter internal or a metaclass, ``str.format``,
    or a method or property read unbound off a class the script didn't write."""
    try:
        value = getattr(obj, name)
    except AttributeError:
        if default is ...:
            raise
        return default
    if isinstance(value, _DENIED_VALUE_TYPES) or _is_metaclass(value):
        _deny(f'"{name}" leads to an interpreter internal')
    if _is_str_format(value):
        _deny(f"str.{name}() is not available in scripts; use f-strings or % formatting")
    if isinstance(obj, type) and _unbound(value):
        _deny(
            f"{_owner_label(obj, name)}.{name} can't be read off the class in scripts: "
            "call it on an instance"
        )
    return value


def _is_metaclass(value: Any) -> bool:
    """Whether ``value`` is ``type`` or another metaclass: with one a script makes classes
    with any special method, past the compiler's checks."""
    return isinstance(value, type) and issubclass(value, type)


def _is_str_format(value: Any) -> bool:
    """Whether ``value`` is ``str.format``/``format_map``, unbound or bound, however reached."""
    if value is str.format or value is str.format_map:
        return True
    return (
        type(value) is types.BuiltinMethodType
        and value.__name__ in _FORMAT_METHODS
        and isinstance(value.__self__, str)
    )


def _unbound(value: Any) -> bool:
    """Whether ``value``, read off a class, is a Python function or property of a class the
    script did not write: called unbound, such a method runs on whatever ``self`` it is given
    (``Counter.copy(int)`` is ``int.__class__(int)``, the real ``type``), and a property hands
    out its getter. C methods check their ``self``; the script's own functions are its own."""
    if isinstance(value, property):
        fget = value.fget
        return fget is not None and not _is_script_function(fget)
    return type(value) is types.FunctionType and not _is_script_function(value)


# --------------------------------------------------------------------------------------------
# The audited surface, and what the script owns

_ALLOWED: Final = _surface.allowed_pairs()
_SCRIPT_CLASSES: Final[weakref.WeakSet[type]] = weakref.WeakSet()
_NAMESPACE_TYPES: set[type] = set()
_ON_INSTANCES: dict[tuple[type, str], bool] = {}
_ON_CLASSES: dict[tuple[type, str], bool] = {}
_BOUND_METHODS: set[tuple[type, str]] = set()
"""(class, name) pairs of ``_ON_INSTANCES`` whose class attribute is a method: read off an
instance the value is bound to it, never an internal, a metaclass or ``str.format`` (which
is not listed), so it needs no value check."""
_METHOD_TYPES: Final = (
    types.FunctionType,
    types.MethodDescriptorType,
    types.WrapperDescriptorType,
    types.ClassMethodDescriptorType,
    classmethod,
    staticmethod,
)


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _defining_class(obj: Any, name: str) -> type | None:
    """The class whose ``__dict__`` holds ``name`` for a lookup on ``obj`` (for a class: its
    MRO, then its metaclass's), or ``None`` when no class does (an instance attribute)."""
    classes: tuple[type, ...] = type(obj).__mro__
    if isinstance(obj, type):
        classes = obj.__mro__ + classes
    for klass in classes:
        if name in klass.__dict__:
            return klass
    return None


def _exists(obj: Any, name: str) -> bool:
    """Whether ``obj`` (of a class the script did not define) has an attribute ``name`` that
    no class defines: one in its instance ``__dict__``, or one its type computes."""
    try:
        getattr(obj, name)
    except AttributeError:
        return False
    return True


def _owner_label(obj: Any, name: str) -> str:
    owner = _defining_class(obj, name) or type(obj)
    return _qualified(owner)


def _decide(obj: Any, name: str) -> bool:
    owner = _defining_class(obj, name)
    if owner is None:
        owner = type(obj)
    if owner in _SCRIPT_CLASSES:
        return True
    return (_qualified(owner), name) in _ALLOWED


def on_surface(obj: Any, name: str) -> bool:
    """Whether the audited surface lets a script read ``obj.<name>``.

    True when :data:`sandbox._surface.SURFACE` lists ``name`` for the class that defines it
    (an instance attribute: for ``type(obj)``), when that class is one the script defined, or
    when ``obj`` is a namespace that checks names itself (a module proxy, ``tools``). Answers
    for classes the script can't change (every class but its own) are cached.
    """
    cls = type(obj)
    is_class = isinstance(obj, type)
    cache = _ON_CLASSES if is_class else _ON_INSTANCES
    key = (obj if is_class else cls, name)
    verdict = cache.get(key)  # never holds the script's classes: they can change
    if verdict is not None:
        return verdict
    if cls in _NAMESPACE_TYPES:
        return True
    if cls in _SCRIPT_CLASSES or (is_class and obj in _SCRIPT_CLASSES):
        return _decide(obj, name)
    verdict = cache[key] = _decide(obj, name)
    if verdict and not is_class:
        owner = _defining_class(obj, name)
        if owner is not None and isinstance(owner.__dict__[name], _METHOD_TYPES):
            _BOUND_METHODS.add(key)
    return verdict


def open_namespace(cls: type) -> type:
    """Mark ``cls`` as a namespace that allows or denies its own names (its ``__getattr__``
    hands out only the values it was built with); returns ``cls``, so it serves as a class
    decorator."""
    _NAMESPACE_TYPES.add(cls)
    return cls


def _is_script_function(function: Any) -> bool:
    return (
        type(function) is types.FunctionType
        and function.__globals__.get("__name__") == SCRIPT_MODULE
    )


def script_build_class(func: Any, name: Any, /, *bases: Any, **kwargs: Any) -> Any:
    """The script's ``__build_class__``: builds the class of a ``class`` statement and records
    it as the script's own (writable, every attribute readable).

    Only a class this statement made is recorded: the metaclass must be ``type`` (the one
    RestrictedPython's rewrite names; a nested class could otherwise find another under that
    name in its enclosing class's namespace), and the class must hold the ``__module__`` its
    body set. Anything else raises ``TypeError``.
    """
    import builtins

    if kwargs.get("metaclass", type) is not type:
        raise TypeError("classes in scripts take no metaclass")
    cls = builtins.__build_class__(func, name, *bases, **kwargs)
    if isinstance(cls, type):
        if vars(cls).get("__module__") != SCRIPT_MODULE:  # not made by this statement's body
            raise TypeError(f"a class statement made {cls!r}, a class the script didn't write")
        _SCRIPT_CLASSES.add(cls)
    return cls


def script_wraps(wrapped: Any, /) -> Callable[[Any], Any]:
    """``functools.wraps`` for scripts: a decorator that copies ``wrapped``'s ``__name__``,
    ``__qualname__`` and ``__doc__`` (only when they are ``str``, or ``None`` for the doc)
    onto a function the script defined, and returns it.

    Unlike the real one it takes no ``assigned``/``updated`` (names of attributes to copy) and
    sets no ``__wrapped__``. Raises ``TypeError`` when the decorated object is not a function
    of the script's.
    """

    def decorate(wrapper: Any) -> Any:
        if not _is_script_function(wrapper):
            raise TypeError("functools.wraps decorates only functions the script defined")
        for attribute in ("__name__", "__qualname__", "__doc__"):
            try:
                value = getattr(wrapped, attribute)
            except Exception:  # a script object's lookup may raise anything
                continue
            if type(value) is str or (attribute == "__doc__" and value is None):
                setattr(wrapper, attribute, value)
        return wrapper

    return decorate


def script_total_ordering(cls: Any, /) -> Any:
    """``functools.total_ordering`` for classes the script defined; ``TypeError`` for any
    other (the real one sets attributes on whatever class it is given)."""
    if not isinstance(cls, type) or cls not in _SCRIPT_CLASSES:
        raise TypeError("functools.total_ordering takes only classes the script defined")
    return functools.total_ordering(cls)


def script_namedtuple(typename: Any, field_names: Any, /, **kwargs: Any) -> Any:
    """``collections.namedtuple``, with the new class recorded as the script's own (its
    ``__module__`` is the script's unless ``module=`` says otherwise). Field and type names are
    validated by the real one (exact ``str`` identifiers not starting with ``_``)."""
    kwargs.setdefault("module", SCRIPT_MODULE)
    cls = collections.namedtuple(typename, field_names, **kwargs)  # type: ignore[misc]
    _SCRIPT_CLASSES.add(cls)
    return cls


def guarded_getitem(obj: Any, key: Any) -> Any:
    """Return ``obj[key]`` (the ``_getitem_`` hook); modules and proxies are not subscriptable.

    Raises:
        TypeError: ``obj`` is a module or module proxy; otherwise whatever ``obj[key]`` raises.
    """
    if isinstance(obj, (types.ModuleType, ModuleProxy)):
        raise TypeError("modules are not subscriptable")
    value = obj[key]
    if isinstance(value, _DENIED_VALUE_TYPES):
        raise TypeError("that item leads to an interpreter internal")
    return value


def guarded_getiter(obj: Any) -> Iterator[Any]:
    """Return ``iter(obj)`` (the ``_getiter_`` hook)."""
    return iter(obj)


def guarded_write(obj: Any) -> Any:
    """Return ``obj`` as the target of an attribute or item write (the ``_write_`` hook).

    Raises:
        TypeError: ``obj`` is a module, a module proxy or namespace, a class the script did not
            define, or a function the script did not define.
    """
    if isinstance(obj, (types.ModuleType, ModuleProxy)) or type(obj) in _NAMESPACE_TYPES:
        raise TypeError("modules are read-only")
    if isinstance(obj, type):
        if obj not in _SCRIPT_CLASSES:
            raise TypeError(f"class {obj.__name__} is read-only")
    elif isinstance(obj, types.FunctionType) and not _is_script_function(obj):
        raise TypeError("functions the script did not define are read-only")
    elif type(obj).__module__.startswith(_SANDBOX_MODULES):
        raise TypeError(f"{type(obj).__name__} objects are read-only")
    return obj


def guarded_apply(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call ``function(*args, **kwargs)`` (the ``_apply_`` hook for star-argument calls)."""
    return function(*args, **kwargs)


def _iter_unpack_sequence(it: Iterable[Any], spec: Any, getiter: Any) -> Iterator[Any]:
    return guarded_iter_unpack_sequence(it, spec, getiter)  # type: ignore[no-untyped-call, no-any-return]


def _unpack_sequence(it: Iterable[Any], spec: Any, getiter: Any) -> list[Any]:
    return guarded_unpack_sequence(it, spec, getiter)  # type: ignore[no-untyped-call, no-any-return]


def guard_hooks() -> dict[str, Any]:
    """Return the hook globals RestrictedPython's rewritten code calls (a fresh dict).

    ``_print_`` is not included: printing talks to the host, so the runtime supplies it.
    """
    return {
        "_getattr_": guarded_getattr,
        "_getitem_": guarded_getitem,
        "_getiter_": guarded_getiter,
        "_write_": guarded_write,
        "_apply_": guarded_apply,
        "_iter_unpack_sequence_": _iter_unpack_sequence,
        "_unpack_sequence_": _unpack_sequence,
    }


# --------------------------------------------------------------------------------------------
# Imports


@open_namespace
class ModuleProxy:
    """A read-only stand-in for an allowlisted module, exposing a fixed set of public names.

    It holds the chosen attributes only, never the module itself; reading any other name
    raises ``AttributeError``, and it cannot be written to. It deliberately has no
    ``__name__``, ``__path__`` or ``__spec__``: when ``from m import x`` finds no ``x``, CPython
    falls back to ``sys.modules[m.__name__ + ".x"]``, which would hand out a real submodule.
    """

    __slots__ = ("_attributes", "_name")

    def __init__(self, name: str, attributes: Mapping[str, Any]) -> None:
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_attributes", dict(attributes))

    def __getattr__(self, name: str) -> Any:
        try:
            return self._attributes[name]
        except KeyError:
            raise AttributeError(self._missing(name)) from None

    def _missing(self, name: str) -> str:
        """Why ``name`` isn't here, and what to use instead (:mod:`sandbox._hints`)."""
        said = f"module {self._name!r} has no attribute {name!r}"
        hint = _hints.MISSING_ATTRIBUTES.get((self._name, name))
        if hint is not None:
            return f"{said}: {hint}"
        near = _hints.closest(name, self._attributes)
        if near:
            return f"{said} (the closest: {', '.join(f'{self._name}.{n}' for n in near)})"
        return said

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        raise TypeError("modules are read-only")

    def __delattr__(self, name: str) -> NoReturn:
        raise TypeError("modules are read-only")

    def __repr__(self) -> str:
        return f"<module {self._name!r}>"


_ALLOWED_MODULES: Final = (
    json, math, re, datetime, collections, itertools, functools, statistics, random, string,
    textwrap, base64, hashlib, decimal, fractions, heapq, bisect, difflib, time,
)  # fmt: skip

ALLOWED_IMPORTS: Final[Mapping[str, tuple[types.ModuleType, tuple[str, ...]]]] = {
    module.__name__: (module, _surface.names_of(module.__name__)) for module in _ALLOWED_MODULES
}
"""Module name -> (module, the public names its proxy exposes: its row of the audited surface).
Names missing on this Python version are left out of the proxy."""

SCRIPT_IMPORTS: Final[tuple[str, ...]] = tuple(sorted([*ALLOWED_IMPORTS, "asyncio"]))
"""Every module a script may import (``asyncio`` being the async dialect's own)."""

_REPLACEMENTS: Final[Mapping[tuple[str, str], Any]] = {
    ("functools", "wraps"): script_wraps,
    ("functools", "total_ordering"): script_total_ordering,
    ("collections", "namedtuple"): script_namedtuple,
}
"""Proxy names whose value is the sandbox's own version, not the module's."""


def _build_proxies(*, audited: bool) -> dict[str, ModuleProxy]:
    proxies: dict[str, ModuleProxy] = {}
    for name, (module, names) in ALLOWED_IMPORTS.items():
        attributes = {n: getattr(module, n) for n in names if hasattr(module, n)}
        if audited:
            for key, replacement in _REPLACEMENTS.items():
                if key[0] == name:
                    attributes[key[1]] = replacement
        for attribute, value in attributes.items():
            if isinstance(value, _DENIED_VALUE_TYPES):  # pragma: no cover - a listing mistake
                raise AssertionError(f"{name}.{attribute} is a module or an internal")
        proxies[name] = ModuleProxy(name, attributes)
    return proxies


_PROXIES: Final = _build_proxies(audited=True)
UNAUDITED_PROXIES: Final = _build_proxies(audited=False)
"""The proxies with the modules' real functions (no replacements), for the language layer off
only: the security suite's control runs, which show that each attack works unprotected."""
_INTERNAL_IMPORTS: Final = frozenset({"_strptime"})
for _internal in _INTERNAL_IMPORTS:  # imported now, while every file is still readable
    importlib.import_module(_internal)
_EMPTY_PROXY: Final = ModuleProxy("internal", {})


def _importer(proxies: Mapping[str, ModuleProxy]) -> Callable[..., ModuleProxy]:
    def guarded_import(
        name: Any,
        globals: Any = None,
        locals: Any = None,
        fromlist: Any = (),
        level: Any = 0,
    ) -> ModuleProxy:
        """Return the proxy of allowlisted module ``name`` (the script's ``__import__``).

        ``from m import x`` works for the proxy's public names; submodules (``a.b``), relative
        imports and every other module raise ``ImportError``.
        """
        if level != 0:
            raise ImportError("relative imports are not allowed in scripts")
        if name in _INTERNAL_IMPORTS and name in sys.modules:
            # C code of an allowlisted module importing its helper (datetime.strptime imports
            # _strptime through the current builtins). CPython's PyImport_Import ignores what
            # __import__ returns and reads sys.modules, so the script never sees the module; a
            # script itself can't name it (names starting with "_" don't compile).
            return _EMPTY_PROXY
        if type(name) is not str or name not in proxies:
            allowed = ", ".join(sorted(proxies))
            raise ImportError(f"import of {name!r} is not allowed; scripts may import: {allowed}")
        return proxies[name]

    return guarded_import


guarded_import: Final = _importer(_PROXIES)
"""The script's ``__import__``: the audited proxy of an allowlisted module."""
_unaudited_import: Final = _importer(UNAUDITED_PROXIES)


# --------------------------------------------------------------------------------------------
# Builtins


def safe_builtins(
    print_function: Callable[..., None],
    *,
    audited: bool = True,
    extra_modules: Mapping[str, ModuleProxy] | None = None,
) -> dict[str, Any]:
    """Return a fresh builtins dict for one script: the builtins row of the audited surface,
    the guarded ``__import__``, :func:`script_build_class` as ``__build_class__`` (for
    ``class`` statements) and ``print_function`` as ``print``. ``extra_modules`` are proxies of
    the session's own (the dialect's ``asyncio``), importable beside the allowlisted modules.

    ``audited=False`` (the language layer off only) imports :data:`UNAUDITED_PROXIES`.
    """
    import builtins

    allowed: dict[str, Any] = {
        name: getattr(builtins, name) for name in _surface.names_of("builtins") if name != "print"
    }
    proxies = _PROXIES if audited else UNAUDITED_PROXIES
    if extra_modules:
        allowed["__import__"] = _importer({**proxies, **extra_modules})
    else:
        allowed["__import__"] = guarded_import if audited else _unaudited_import
    allowed["__build_class__"] = script_build_class
    allowed["print"] = print_function
    return allowed
