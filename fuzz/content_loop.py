#!/usr/bin/env python3
"""Fuzz target: the compiled content loop (``scriptbridge/_fastcontent.c``) against its twin.

Invariant: for any content array built from the fuzzer's bytes (blocks of every kind and their
near misses, nesting, aliasing and cycles, every leaf type, lone surrogates, huge ints, exact
types and subclasses, see ``_shapes.py``), ``scriptbridge._render._read_content`` reading it
with the compiled loop and with the Python loop (``_read_blocks``) either

- gives the same views (same types, dict key order and values; a block kept to be shown once
  the claims are read is the same block of the value), the same links and waiting indexes, the
  same never claims in the same order, the same seen set and the same node count, or
- raises the same exception type (``NotPlain`` at a limit or a value that is not plain data);

and leaves every object the value's build made (not the words it shares with other values,
whose counts others change) with the reference count it had before (no reference leaked or
lost), without a memory error (run by ``make fuzz`` under AddressSanitizer and
UndefinedBehaviorSanitizer). The value is built twice from the same bytes, one copy for each
loop, so each loop sees a graph with the reference counts the value alone gives it (the loops
put a block in the seen set by its reference count).

Run: ``.venv/bin/python fuzz/run.py --seconds N content_loop`` (``make fuzz`` runs every target,
the C loop built with the sanitizers); a finding's input, given as the only argument, runs
once.
"""

from __future__ import annotations

import gc
import math
import sys
from typing import Any

import _coverage
import _native
import atheris

NATIVE = _native.load()

with atheris.instrument_imports(
    **_coverage.packages(
        "_shapes",
        "scriptbridge._render",
        "scriptbridge._claims",
        "scriptbridge._plain",
        "scriptbridge._classify",
        "scriptbridge._walk",
        "scriptbridge._disclosure",
        "scriptbridge._blocks",
        "scriptbridge.markers",
    )
):
    import _shapes

    from scriptbridge import _render
    from scriptbridge._claims import PlainWalk
    from scriptbridge._render import _NO_CLAIMS, _read_content, _Walk

_native.check(sys.modules.get("scriptbridge._fastcontent"), NATIVE)
COMPILED = _render._compiled_read_blocks
REGISTRY = _shapes.registry()
_SINGLETONS = (type(None), bool)


def graph(value: Any) -> list[Any]:
    """Every object of ``value`` once (by identity), in a fixed order: containers, keys and
    leaves, less the interpreter's shared singletons (whose counts others change)."""
    found: list[Any] = []
    seen: set[int] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if not (
            isinstance(item, _SINGLETONS)
            or (type(item) is int and -5 <= item <= 256)
            or (type(item) in (str, bytes, tuple) and len(item) <= 1)
        ):
            found.append(item)
        if isinstance(item, dict):
            for key, child in dict.items(item):
                stack.append(child)
                stack.append(key)
        elif isinstance(item, list | tuple):
            stack.extend(reversed(item))
    return found


def shape(value: Any, places: dict[int, int]) -> Any:
    """``value`` as comparable data: an object of the input by its place in :func:`graph`,
    anything else by its exact type and contents (dict key order kept, NaN equal to NaN)."""
    if id(value) in places:
        return ("input", places[id(value)])
    kind = type(value).__name__
    if type(value) is dict:
        return (kind, [(shape(k, places), shape(v, places)) for k, v in value.items()])
    if type(value) is list or type(value) is tuple:
        return (kind, [shape(item, places) for item in value])
    if type(value) is float and math.isnan(value):
        return (kind, "nan")
    return (kind, repr(value))


def read(data: bytes, compiled: bool) -> tuple[Any, list[int]]:
    """What one loop makes of the value ``data`` builds, and the change of each of its
    objects' reference counts; ``(None, [])`` when the value has no content array to read."""
    builder = _shapes.Builder(data)
    result = builder.result()
    builder.done()
    if type(result) is not dict or type(result.get("content")) not in (list, tuple):
        return None, []
    objects = graph(result)
    places = {id(item): place for place, item in enumerate(objects)}
    before = [sys.getrefcount(item) for item in objects]
    del objects  # held only while counted: the loops read the value's own counts
    claims_walk = PlainWalk(keep_references=False, strict=True)
    walk = _Walk(REGISTRY, _NO_CLAIMS, {})
    outcome: Any
    _render._compiled_read_blocks = COMPILED if compiled else None
    try:
        claims_walk.open(result, 0)
        claims_walk.count(len(result))
        done = _read_content(claims_walk, result["content"], walk)
    except Exception as exc:  # the same error from both loops is part of the invariant
        outcome = ("raised", type(exc).__name__)
    else:
        outcome = (
            shape(done.shown, places),
            done.links,
            done.waiting,
            shape(list(claims_walk.never), places),
            sorted(places.get(key, -1) for key in claims_walk.seen),
            claims_walk.nodes,
        )
        del done
    finally:
        _render._compiled_read_blocks = COMPILED
    del claims_walk, walk
    after = [sys.getrefcount(item) for item in graph(result)]
    return outcome, [a - b for a, b in zip(after, before, strict=True)]


def test_one_input(data: bytes) -> None:
    global _inputs
    _inputs += 1
    if _inputs % 128 == 0:
        gc.collect()  # here, never while counts are compared (see main)
    compiled, compiled_counts = read(data, compiled=True)
    python, python_counts = read(data, compiled=False)
    if compiled != python:
        raise AssertionError(f"the loops disagree:\ncompiled: {compiled!r}\npython:   {python!r}")
    if any(compiled_counts) or any(python_counts):
        # Only the objects this input made count: a shared one (a word of _shapes, interned)
        # may be held a while by the interpreter or another input's leftovers, on either
        # loop. And a path taken for the first time may fill a cache once; a leak (or a lost
        # reference) changes the counts every time.
        own = owned(data)
        compiled_counts = [n * own[i] for i, n in enumerate(read(data, compiled=True)[1])]
        python_counts = [n * own[i] for i, n in enumerate(read(data, compiled=False)[1])]
    if any(compiled_counts) or any(python_counts):
        raise AssertionError(
            f"reference counts changed: compiled {compiled_counts}, python {python_counts}"
        )


def owned(data: bytes) -> list[bool]:
    """For each object of :func:`graph` of the value ``data`` builds, whether it is the
    input's own (two builds make two of it), not one shared with other values."""
    values = []
    for _ in range(2):
        builder = _shapes.Builder(data)
        values.append(builder.result())
        builder.done()
    first, second = graph(values[0]), graph(values[1])
    return [a is not b for a, b in zip(first, second, strict=True)]


_inputs = 0


def main() -> None:
    # The garbage collector runs only between inputs: run while a loop reads, it would free
    # an earlier input's cycles, and the counts of the objects they shared would change.
    # What is alive now (the modules, the registry) is never scanned again: a collection
    # reads only what the inputs left, and stays short under the sanitizers.
    gc.disable()
    gc.freeze()
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
