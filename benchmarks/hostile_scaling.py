"""Benchmark: how the time to ingest a hostile result and show it on every lane grows with it.

Run by hand: ``.venv/bin/python benchmarks/hostile_scaling.py``. For each hostile shape it times
(best of five) the registry's ingest plus the script view and every model lane at size n and
4n, and prints the ratio: linear work gives about 4, quadratic work 16. Shapes that grow a
string (a name full of bidi overrides, a uri, base64 declared as a few bytes) complement the
structural check in ``tests/test_properties.py``, which counts calls and so can't see work done
inside one builtin call on a long string.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from scriptbridge import ReferenceRegistry, render_script_view
from scriptbridge.lanes import convert_push, live_copy, stored_copy


def blocks(n: int) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    for i in range(n):
        content.append({"type": "resource_link", "uri": f"nev:{i}", "disposition": "never"})
        content.append({"type": "resource_link", "uri": f"https://u:p@h/{i}?q", "name": "r"})
        content.append({"type": "resource", "resource": {"uri": f"emb:{i}", "text": "t"}})
    return {"content": content}


def long_name(n: int) -> dict[str, Any]:
    uri = "https://h/" + "x" * 50
    name = ("r\u202e\u200b" * n) + uri + "\ud800"
    return {"content": [{"type": "resource_link", "uri": uri, "name": name, "mimeType": name}]}


def long_uri(n: int) -> dict[str, Any]:
    uri = "https://h/" + "a" * (3 * n)
    return {"content": [{"type": "resource_link", "uri": uri, "name": "a" * (3 * n)}]}


def huge_base64(n: int) -> dict[str, Any]:
    data = "A" * (4 * n)
    return {
        "content": [
            {"type": "image", "data": data, "mimeType": "image/png", "size": 1},
            {"type": "resource", "resource": {"uri": "emb:1", "blob": data}, "size": 1},
        ]
    }


def deep_and_shared(n: int) -> dict[str, Any]:
    nested: Any = [{"type": "text", "text": "x"}]
    for _ in range(n):
        nested = {"d": [nested, nested]}
    return {"content": [], "structuredContent": nested}


def seconds(make: Callable[[int], dict[str, Any]], n: int) -> float:
    result = make(n)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        registry = ReferenceRegistry(capacity=100_000)
        registry.ingest(result, server="bench")
        render_script_view(result, registry)
        stored_copy(result, registry)
        live_copy(result, registry)
        convert_push(result["content"], registry)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    logging.disable(logging.WARNING)  # the deep shape is logged as unreadable on every ingest
    shapes: list[tuple[str, Callable[[int], dict[str, Any]], int]] = [
        ("references and embedded", blocks, 2_000),
        ("bidi name holding the uri", long_name, 200_000),
        ("long uri and name", long_uri, 200_000),
        ("huge base64 declared 1 B", huge_base64, 500_000),
        ("deep, shared 2**n times", deep_and_shared, 2_000),
    ]
    print("shape                          n           time n    time 4n   ratio (linear ~4)")
    worst = 0.0
    for label, make, n in shapes:
        small, large = seconds(make, n), seconds(make, 4 * n)
        ratio = large / max(small, 1e-9)
        worst = max(worst, ratio if small > 1e-4 else 0.0)
        print(f"{label:28} {n:9,} {small * 1e3:9.2f} ms {large * 1e3:8.2f} ms {ratio:7.1f}")
    print(f"verdict: {'linear' if worst < 8 else 'SUPER-LINEAR'} (worst ratio {worst:.1f})")


if __name__ == "__main__":
    main()
