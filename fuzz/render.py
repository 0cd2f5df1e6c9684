#!/usr/bin/env python3
"""Fuzz target: the claims walk and the renderer as a whole, on any tool result.

Invariant: for any value built from the fuzzer's bytes (a tool result, mostly, or anything at
all; see ``_shapes.py``), read against a registry holding records (one marked never, one saved):

- :func:`render_script_view` and :func:`read_claims` return, never raise;
- the view is ``{"content": list, "data": ..., "isError": bool}``, plain data within the
  protocol's bounds (``check_plain``) whose every string encodes as UTF-8, and its size and
  script-object ids are what the renderer says they are;
- the claims are the general walk's (:func:`read_plain_claims`, when it reads the result, too);
- the plain path, with the compiled content loop and with the Python one, either declines
  (both alike) or gives the general path's view exactly (types, dict key order, values);
- no script object for a record that is marked never, or whose uri this result claims never,
  shows a uri or a saved path.

Run: ``.venv/bin/python fuzz/run.py --seconds N render`` (``make fuzz`` runs every target,
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
        "scriptbridge._result_dict",
        "scriptbridge._registry",
        "scriptbridge._canonical",
        "sandbox.protocol._plain",
    )
):
    import _shapes

    from sandbox.protocol import MAX_DATA_NODES, check_plain
    from scriptbridge import _render
    from scriptbridge._claims import _read_general, read_claims, read_plain_claims
    from scriptbridge._render import ScriptView, _render_general, _render_plain, render_for_script

COMPILED = _render._compiled_read_blocks
REGISTRY = _shapes.registry()
LOOPS = (COMPILED, None) if COMPILED is not None else (None,)


def same(a: Any, b: Any, path: str = "") -> None:
    """``a`` and ``b`` are the same plain data: same types, dict key order and values."""
    if type(a) is not type(b):
        raise AssertionError(f"{path}: {type(a).__name__} != {type(b).__name__}")
    if type(a) is dict:
        if list(a) != list(b):
            raise AssertionError(f"{path}: keys {list(a)!r} != {list(b)!r}")
        for key in a:
            same(a[key], b[key], f"{path}/{key!r}")
    elif type(a) is list:
        if len(a) != len(b):
            raise AssertionError(f"{path}: {len(a)} items != {len(b)}")
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            same(x, y, f"{path}[{index}]")
    elif type(a) is float and math.isnan(a):
        if not math.isnan(b):
            raise AssertionError(f"{path}: nan != {b!r}")
    elif a != b:
        raise AssertionError(f"{path}: {a!r} != {b!r}")


def walk_view(view: Any) -> tuple[int, set[str], list[dict[str, Any]]]:
    """A view's node count as ``check_plain`` counts it, its script objects' ids, and the
    script objects themselves."""
    nodes, ids, objects, stack = 0, set(), [], [view]
    while stack:
        item = stack.pop()
        nodes += 1
        if type(item) is str:
            item.encode("utf-8")  # every string leaves well formed
        elif type(item) is dict:
            nodes += len(item)
            for key in item:
                key.encode("utf-8")
            if item.get("type") == "reference" and type(item.get("id")) is str:
                ids.add(item["id"])
                objects.append(item)
            elif item.get("type") == "reference" and item.get("id") is None:
                objects.append(item)
            stack.extend(item.values())
        elif type(item) is list:
            stack.extend(item)
    return nodes, ids, objects


def check_view(done: ScriptView, claims: Any) -> None:
    view = done.view
    if type(view) is not dict or list(view) != ["content", "data", "isError"]:
        raise AssertionError(f"not a view: {view!r}")
    if type(view["content"]) is not list or type(view["isError"]) is not bool:
        raise AssertionError(f"not a view: {view!r}")
    nodes, ids, objects = walk_view(view)
    if nodes != done.nodes or ids != done.reference_ids:
        raise AssertionError(f"the renderer miscounted: {done.nodes} / {nodes}, {ids}")
    if done.nodes <= MAX_DATA_NODES:
        check_plain(view)
    for shown in objects:
        record = REGISTRY.get(shown["id"]) if type(shown.get("id")) is str else None
        marked = record is not None and (record.payload_never or REGISTRY.is_marked(record.uri))
        claimed = record is not None and claims.names_never(record.uri)
        if (marked or claimed) and ("uri" in shown or shown.get("savedTo") is not None):
            raise AssertionError(f"a never record shows its uri or path: {shown!r}")


def test_one_input(data: bytes) -> None:
    builder = _shapes.Builder(data)
    result = builder.result()
    builder.done()
    claims = read_claims(result)
    check_view(render_for_script(result, REGISTRY), claims)
    if type(result) is not dict:
        return
    general_claims = _read_general(result, None)
    if claims != general_claims:
        raise AssertionError(f"claims {claims!r} != the general walk's {general_claims!r}")
    plain_claims = read_plain_claims(result)
    if plain_claims is not None and plain_claims != general_claims:
        raise AssertionError(f"plain claims {plain_claims!r} != {general_claims!r}")
    general = _render_general(result, REGISTRY)
    check_view(general, claims)
    declined = set()
    for loop in LOOPS:
        _render._compiled_read_blocks = loop
        try:
            plain = _render_plain(result, REGISTRY)
        finally:
            _render._compiled_read_blocks = COMPILED
        declined.add(plain is None)
        if plain is not None:
            same(plain.view, general.view)
            if (plain.nodes, plain.reference_ids) != (general.nodes, general.reference_ids):
                raise AssertionError("the plain path counted otherwise than the general path")
    if len(declined) != 1:
        raise AssertionError("one content loop declined where the other didn't")


def main() -> None:
    gc.freeze()  # the modules and the registry are never scanned again: collections stay short
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
