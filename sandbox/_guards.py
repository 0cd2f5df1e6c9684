"""The restricted language layer's hooks: what a script may touch, name by name.

RestrictedPython rewrites a script so that every attribute read, item read, iteration, write
target, in-place operator, sequence unpacking, ``print`` and ``*args``/``**kwargs`` call goes
through a hook named in the script's globals (``_getattr_``, ``_getitem_`` ...). This module
supplies those hooks, the builtins allowlist, and the guarded ``__import__`` with its proxies.

The policy denies by default:

- attribute names starting with ``_``, frame/code/generator/coroutine/traceback internals
  (:data:`DENIED_ATTRIBUTES`), ``format``/``format_map`` of strings, and any attribute whose
  value is a module, frame, code object or traceback, whatever its name;
- every builtin not in :func:`safe_builtins` (no ``type``, ``getattr``, ``vars``, ``dir``,
  ``globals``, ``locals``, ``eval``, ``exec``, ``compile``, ``open``, ``input``, ``breakpoint``,
  ``help``, ``memoryview``, ``object``, ``super``, real ``__import__``);
- every import but the modules of :data:`ALLOWED_IMPORTS`, each handed out as a
  :class:`ModuleProxy` exposing the listed public names only (never the module object, never a
  submodule, nothing that leads to ``sys``, ``os`` or a loader);
- writes (``obj.x = ...``, ``obj[k] = ...``) to modules, proxies and classes the script did not
  define.

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
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final, NoReturn

from RestrictedPython.Guards import guarded_iter_unpack_sequence, guarded_unpack_sequence
from RestrictedPython.transformer import INSPECT_ATTRIBUTES

__all__ = [
    "ALLOWED_IMPORTS",
    "DENIED_ATTRIBUTES",
    "SCRIPT_MODULE",
    "ModuleProxy",
    "guard_hooks",
    "guarded_getattr",
    "guarded_import",
    "safe_builtins",
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


def _deny(message: str) -> NoReturn:
    raise AttributeError(message)


def guarded_getattr(obj: Any, name: Any, default: Any = ...) -> Any:
    """Return ``obj.<name>`` if the policy allows it (the ``_getattr_`` hook).

    Raises:
        TypeError: ``name`` is not a ``str``.
        AttributeError: the name is denied, the value is a module/frame/code/traceback, or the
            attribute does not exist (when no ``default`` was given).
    """
    if type(name) is not str:
        raise TypeError("attribute name must be a str")
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
    try:
        value = getattr(obj, name)
    except AttributeError:
        if default is ...:
            raise
        return default
    if isinstance(value, _DENIED_VALUE_TYPES):
        _deny(f'"{name}" leads to an interpreter internal')
    return value


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
        TypeError: ``obj`` is a module, a module proxy, or a class the script did not define.
    """
    if isinstance(obj, (types.ModuleType, ModuleProxy)):
        raise TypeError("modules are read-only")
    if isinstance(obj, type) and obj.__module__ != SCRIPT_MODULE:
        raise TypeError(f"class {obj.__name__} is read-only")
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
            raise AttributeError(f"module {self._name!r} has no attribute {name!r}") from None

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        raise TypeError("modules are read-only")

    def __delattr__(self, name: str) -> NoReturn:
        raise TypeError("modules are read-only")

    def __repr__(self) -> str:
        return f"<module {self._name!r}>"


_HASH_NAMES: Final = (
    "md5", "sha1", "sha224", "sha256", "sha384", "sha512", "sha3_224", "sha3_256", "sha3_384",
    "sha3_512", "shake_128", "shake_256", "blake2b", "blake2s", "new", "pbkdf2_hmac",
    "algorithms_available", "algorithms_guaranteed",
)  # fmt: skip

ALLOWED_IMPORTS: Final[Mapping[str, tuple[types.ModuleType, tuple[str, ...]]]] = {
    "json": (json, ("dumps", "loads", "JSONDecodeError")),
    "math": (math, tuple(n for n in dir(math) if not n.startswith("_"))),
    "re": (re, (
        "compile", "escape", "findall", "finditer", "fullmatch", "match", "search", "split",
        "sub", "subn", "error", "A", "ASCII", "DOTALL", "I", "IGNORECASE", "M", "MULTILINE",
        "NOFLAG", "S", "U", "UNICODE", "VERBOSE", "X",
    )),
    "datetime": (datetime, (
        "date", "datetime", "time", "timedelta", "timezone", "tzinfo", "MINYEAR", "MAXYEAR",
        "UTC",
    )),
    "collections": (collections, (
        "ChainMap", "Counter", "OrderedDict", "defaultdict", "deque", "namedtuple",
    )),
    "itertools": (itertools, tuple(n for n in dir(itertools) if not n.startswith("_"))),
    "functools": (functools, (
        "cache", "cached_property", "cmp_to_key", "lru_cache", "partial", "reduce",
        "total_ordering", "wraps",
    )),
    "statistics": (statistics, (
        "NormalDist", "StatisticsError", "correlation", "covariance", "fmean",
        "geometric_mean", "harmonic_mean", "linear_regression", "mean", "median",
        "median_grouped", "median_high", "median_low", "mode", "multimode", "pstdev",
        "pvariance", "quantiles", "stdev", "variance",
    )),
    "random": (random, (
        "Random", "SystemRandom", "betavariate", "choice", "choices", "expovariate",
        "gammavariate", "gauss", "getrandbits", "lognormvariate", "normalvariate",
        "paretovariate", "randbytes", "randint", "random", "randrange", "sample", "seed",
        "shuffle", "triangular", "uniform", "vonmisesvariate", "weibullvariate",
    )),
    "string": (string, (
        "Template", "ascii_letters", "ascii_lowercase", "ascii_uppercase", "capwords",
        "digits", "hexdigits", "octdigits", "printable", "punctuation", "whitespace",
    )),
    "textwrap": (textwrap, ("TextWrapper", "dedent", "fill", "indent", "shorten", "wrap")),
    "base64": (base64, (
        "a85decode", "a85encode", "b16decode", "b16encode", "b32decode", "b32encode",
        "b32hexdecode", "b32hexencode", "b64decode", "b64encode", "b85decode", "b85encode",
        "standard_b64decode", "standard_b64encode", "urlsafe_b64decode", "urlsafe_b64encode",
    )),
    "hashlib": (hashlib, _HASH_NAMES),
    "decimal": (decimal, tuple(
        n for n in dir(decimal)
        if not n.startswith("_") and n not in {"HAVE_CONTEXTVAR", "HAVE_THREADS"}
    )),
    "fractions": (fractions, ("Fraction",)),
    "heapq": (heapq, tuple(n for n in dir(heapq) if not n.startswith("_"))),
    "bisect": (bisect, tuple(n for n in dir(bisect) if not n.startswith("_"))),
    "difflib": (difflib, (
        "Differ", "HtmlDiff", "IS_CHARACTER_JUNK", "IS_LINE_JUNK", "SequenceMatcher",
        "context_diff", "diff_bytes", "get_close_matches", "ndiff", "restore", "unified_diff",
    )),
    "time": (time, (
        "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "process_time",
        "process_time_ns", "time", "time_ns",
    )),
}  # fmt: skip
"""Module name -> (module, the public names its proxy exposes). Names missing on this Python
version are left out of the proxy."""


def _build_proxies() -> dict[str, ModuleProxy]:
    proxies: dict[str, ModuleProxy] = {}
    for name, (module, names) in ALLOWED_IMPORTS.items():
        attributes = {n: getattr(module, n) for n in names if hasattr(module, n)}
        for attribute, value in attributes.items():
            if isinstance(value, _DENIED_VALUE_TYPES):  # pragma: no cover - a listing mistake
                raise AssertionError(f"{name}.{attribute} is a module or an internal")
        proxies[name] = ModuleProxy(name, attributes)
    return proxies


_PROXIES: Final = _build_proxies()
_INTERNAL_IMPORTS: Final = frozenset({"_strptime"})
for _internal in _INTERNAL_IMPORTS:  # imported now, while every file is still readable
    importlib.import_module(_internal)
_EMPTY_PROXY: Final = ModuleProxy("internal", {})


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
    if type(name) is not str or name not in _PROXIES:
        allowed = ", ".join(sorted(_PROXIES))
        raise ImportError(f"import of {name!r} is not allowed; scripts may import: {allowed}")
    return _PROXIES[name]


# --------------------------------------------------------------------------------------------
# Builtins

_SAFE_BUILTIN_NAMES: Final = (
    # constants
    "None", "False", "True", "Ellipsis", "NotImplemented",
    # types and constructors
    "bool", "bytearray", "bytes", "complex", "dict", "float", "frozenset", "int", "list",
    "range", "set", "slice", "str", "tuple", "property", "staticmethod", "classmethod",
    # functions
    "abs", "all", "any", "ascii", "bin", "callable", "chr", "divmod", "enumerate", "filter",
    "hash", "hex", "id", "isinstance", "issubclass", "iter", "len", "map", "max", "min", "next",
    "oct", "ord", "pow", "repr", "reversed", "round", "sorted", "sum", "zip",
    # exceptions a script may raise or catch
    "ArithmeticError", "AssertionError", "AttributeError", "Exception", "FileExistsError",
    "FileNotFoundError", "FloatingPointError", "ImportError", "IndexError",
    "IsADirectoryError", "KeyError", "LookupError", "MemoryError", "NameError",
    "NotADirectoryError", "NotImplementedError", "OSError", "OverflowError", "PermissionError",
    "RecursionError", "RuntimeError", "StopIteration", "TimeoutError", "TypeError",
    "UnicodeDecodeError", "UnicodeEncodeError", "UnicodeError", "ValueError",
    "ZeroDivisionError",
)  # fmt: skip


def safe_builtins(print_function: Callable[..., None]) -> dict[str, Any]:
    """Return a fresh builtins dict for one script: the allowlist, the guarded ``__import__``,
    ``__build_class__`` (for ``class`` statements) and ``print_function`` as ``print``."""
    import builtins

    allowed: dict[str, Any] = {name: getattr(builtins, name) for name in _SAFE_BUILTIN_NAMES}
    allowed["__import__"] = guarded_import
    allowed["__build_class__"] = builtins.__build_class__
    allowed["print"] = print_function
    return allowed
