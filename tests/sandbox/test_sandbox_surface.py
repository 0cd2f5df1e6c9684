"""The audited script surface: what a script can reach at run time is exactly the table.

The walk starts where a script starts (its globals, its builtins, every module proxy) and
from the objects its functions return, made by a real restricted script run in-process with
the real hooks (:data:`SAMPLES`). From each object it reads every public name through the
real ``_getattr_`` hook, as a script would, and follows what it gets. Every (owner, name) it
reaches must be a row of :data:`sandbox._surface.SURFACE`, and every row must be reached, so
the table can neither miss a name nor keep a stale one. A new allowlisted module or type
needs a row and a sample here.
"""

from __future__ import annotations

import collections
import functools
import textwrap
from collections.abc import Iterable
from typing import Any

import pytest

from sandbox import BlockingChannel, _compile, _guards, _session, _surface, _wire

SAMPLES = """
import json, math, re, datetime, collections, itertools, functools, statistics, random
import string, textwrap, base64, hashlib, decimal, fractions, heapq, bisect, difflib, time
def gen():
    yield 1
class Plain:
    pass
Point = collections.namedtuple('Point', 'a b')
cached = functools.lru_cache(len)
matcher = difflib.SequenceMatcher(None, 'ab', 'ab')
samples = [
    'a', b'a', bytearray(b'a'), 1, 1.5, 1j, True, [1], {'a': 1}, {1}, frozenset([1]), (1,),
    range(3), slice(1, 2), {'a': 1}.keys(), {'a': 1}.values(), {'a': 1}.items(), gen(),
    Plain, Plain(), property(len), staticmethod(len), classmethod(len),
    ToolError('x'), ValueError('x'), OSError(2, 'x'), AttributeError('x'), NameError('x'),
    UnicodeDecodeError('utf-8', b'x', 0, 1, 'r'), UnicodeEncodeError('ascii', 'x', 0, 1, 'r'),
    StopIteration(1), ImportError('x'),
    re.compile('a'), re.match('a', 'a'), re.compile('a').scanner('a'), re.I, re.error('x'),
    hashlib.sha256(), hashlib.blake2b(), hashlib.blake2s(), hashlib.shake_128(),
    datetime.datetime.now(), datetime.date.today(), datetime.time(), datetime.timedelta(1),
    datetime.timezone.utc, datetime.datetime.now().timetuple(),
    decimal.Decimal(1), decimal.getcontext(), decimal.getcontext().flags,
    decimal.Decimal(1).as_tuple(), fractions.Fraction(1, 2), random.Random(),
    random.SystemRandom(), collections.deque(), collections.Counter(),
    collections.OrderedDict(), collections.defaultdict(list), collections.ChainMap(),
    Point, Point(1, 2), cached, cached.cache_info(), functools.partial(len),
    functools.cmp_to_key(len)(1), textwrap.TextWrapper(), string.Template('x'),
    matcher, matcher.get_matching_blocks()[0], difflib.Differ(), difflib.HtmlDiff(),
    statistics.NormalDist(), json.JSONDecodeError('x', 'y', 0), {'a': 1}.items().mapping,
]
"""
"""A script that makes one object of every type a script can get from the surface."""

DYNAMIC_OWNERS = {
    "sandbox._session.ToolsNamespace": "tools.<name>: one caller per offered tool",
    "__script__.Plain": "the script's own class",
    "__script__.Point": "the script's own namedtuple",
}
"""Owners whose names the table doesn't list, and why: they are the run's or the script's."""


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _owner(obj: Any, name: str) -> str:
    """The table's owner of ``obj.<name>``: a proxy's module, or the defining class."""
    if isinstance(obj, _guards.ModuleProxy):
        return str(object.__getattribute__(obj, "_name"))
    classes: tuple[type, ...] = type(obj).__mro__
    if isinstance(obj, type):
        classes = obj.__mro__ + classes
    for klass in classes:
        if name in klass.__dict__:
            return _qualified(klass)
    return _qualified(type(obj))


def _public_names(obj: Any) -> list[str]:
    """Every name a script could try on ``obj``: what ``dir`` shows or a namespace holds, and
    what the table lists for its class (some C types compute names ``dir`` doesn't show)."""
    if isinstance(obj, _guards.ModuleProxy):
        return list(object.__getattribute__(obj, "_attributes"))
    if isinstance(obj, _session.ToolsNamespace):
        return list(object.__getattribute__(obj, "_callables"))
    listed = _surface.names_of(_qualified(type(obj)))
    return [name for name in dir(obj) if not name.startswith("_")] + list(listed)


def reachable(roots: Iterable[tuple[str, Any]]) -> set[tuple[str, str]]:
    """Every (owner, name) a script reaches from ``roots`` through the real ``_getattr_``
    hook. Objects are expanded once per class (instances of one class reach the same names),
    classes and namespaces once each."""
    found: set[tuple[str, str]] = set()
    expanded: set[object] = set()
    keep: list[Any] = []
    queue = collections.deque(value for _, value in roots)
    while queue:
        value = queue.popleft()
        mark: object = id(value) if isinstance(value, (type, _guards.ModuleProxy)) else type(value)
        if mark in expanded:
            continue
        expanded.add(mark)
        keep.append(value)
        for name in _public_names(value):
            try:
                child = _guards.guarded_getattr(value, name)
            except Exception:
                continue
            found.add((_owner(value, name), name))
            queue.append(child)
    return found


@functools.cache
def script_roots() -> tuple[tuple[str, Any], ...]:
    """The script's starting points: (owner, name, value) of its globals, builtins and
    proxies, plus the samples a real restricted script made."""
    start = _wire.Start(source="", tools=["docs.search"])
    session = _session.Session(BlockingChannel(-1, -1), start)
    namespace = session.script_globals()
    compiled = _compile.compile_script(SAMPLES, restricted=True)
    assert isinstance(compiled, tuple), compiled
    exec(compiled[0], namespace)
    roots: list[tuple[str, Any]] = []
    made_by_samples = {"samples", "gen", "Plain", "Point", "cached", "matcher"}
    for name, value in namespace.items():
        if not name.startswith("_") and name not in made_by_samples | set(_guards.ALLOWED_IMPORTS):
            roots.append((f"script.{name}", value))
    for name, value in namespace["__builtins__"].items():
        if not name.startswith("_"):
            roots.append((f"builtins.{name}", value))
    roots += [(f"import.{name}", _guards.guarded_import(name)) for name in _guards.ALLOWED_IMPORTS]
    roots += [(f"sample.{index}", value) for index, value in enumerate(namespace["samples"])]
    roots.append(("import.asyncio", namespace["__builtins__"]["__import__"]("asyncio")))
    session.awaiting = True  # the async dialect: a tool call is pending until awaited
    roots.append(("sample.pending", namespace["call_tool"]("docs.search", {})))
    return tuple(roots)


def reached_pairs() -> set[tuple[str, str]]:
    """Everything reached, with the roots' own names as ("script"/"builtins", name) pairs."""
    roots = script_roots()
    pairs = reachable(roots)
    for label, _ in roots:
        kind, _, name = label.partition(".")
        if kind in ("script", "builtins"):
            pairs.add((kind, name))
    return {pair for pair in pairs if pair[0] not in DYNAMIC_OWNERS}


def test_everything_a_script_reaches_is_in_the_table() -> None:
    """No name a script can reach at run time is missing from the audited table."""
    missing = reached_pairs() - _surface.allowed_pairs()
    assert not missing, "\n".join(f"{owner}.{name}" for owner, name in sorted(missing))


def test_every_row_of_the_table_is_reached() -> None:
    """No name in the table is one a script can't reach (stale rows or missing samples)."""
    stale = _surface.allowed_pairs() - reached_pairs()
    assert not stale, "\n".join(f"{owner}.{name}" for owner, name in sorted(stale))


def test_every_row_has_a_reason_and_no_name_twice() -> None:
    """Each row names an owner, at least one name, a one-line reason; no pair is listed
    twice."""
    seen: set[tuple[str, str]] = set()
    for row in _surface.SURFACE:
        assert row.owner and row.names.split() and row.reason
        assert "\n" not in row.reason
        for pair in row.split():
            assert pair not in seen, pair
            seen.add(pair)


@pytest.mark.parametrize(
    ("owner", "name"),
    [
        ("builtins.AttributeError", "obj"),
        ("functools", "cached_property"),
        ("functools", "update_wrapper"),
        ("abc.ABCMeta", "register"),
        ("builtins.str", "format"),
    ],
)
def test_left_out_names_stay_out(owner: str, name: str) -> None:
    """The names the table leaves out on purpose are not in it."""
    assert (owner, name) not in _surface.allowed_pairs()


def test_the_walk_sees_a_name_added_outside_the_table() -> None:
    """The walk would catch a reachable name missing from the table (the check can fail)."""
    namespace = _guards.open_namespace(type("Leaky", (), {"secret": "x"}))
    try:
        found = reachable([("probe", namespace())])
    finally:
        _guards._NAMESPACE_TYPES.discard(namespace)
    assert (f"{__name__}.Leaky", "secret") in found
    assert (f"{__name__}.Leaky", "secret") not in _surface.allowed_pairs()


def test_unlisted_attributes_are_denied_and_missing_ones_say_so() -> None:
    """An attribute the table doesn't list is denied even though it exists; a missing one is
    an ordinary AttributeError, or the default."""
    with pytest.raises(AttributeError, match="not available in scripts"):
        _guards.guarded_getattr(AttributeError("x", obj=textwrap), "obj")
    with pytest.raises(AttributeError, match="has no attribute"):
        _guards.guarded_getattr(1, "nope")
    assert _guards.guarded_getattr(textwrap.TextWrapper(), "nope", 7) == 7
    assert _guards.guarded_getattr(textwrap.TextWrapper(width=5), "width") == 5
