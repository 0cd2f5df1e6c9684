"""Benchmark: the script-view renderer against msgpack.packb of the same result.

Run by hand: ``.venv/bin/python benchmarks/render.py``. Prints, for a 100,000-block tool result
(mixed text, inline images, embedded resources and references, half of them registered), the
renderer's time and the time msgpack takes only to serialize the same result, in the same
process, and their ratio. A view must be built for every tool result a script receives, so the
goal is "well under a second on one core" for 100,000 blocks. A second figure renders a result
that shares one list under itself 2**60 times over, to show the walk stays linear, and which
content loop rendered (the compiled one, or its Python twin where no C compiler built it).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import msgpack

from scriptbridge import ReferenceRegistry, _render, render_script_view


def make_result(blocks: int) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    for n in range(blocks):
        match n % 4:
            case 0:
                content.append({"type": "text", "text": f"line {n} " * 4})
            case 1:
                content.append({"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"})
            case 2:
                content.append(
                    {
                        "type": "resource",
                        "resource": {
                            "uri": f"mem://{n}",
                            "mimeType": "text/plain",
                            "text": "embedded",
                        },
                    }
                )
            case _:
                content.append(
                    {
                        "type": "resource_link",
                        "uri": f"https://x/{n % 1500}",
                        "name": f"f{n}.txt",
                        "disposition": "never" if n % 8 == 3 else None,
                    }
                )
    return {"content": content, "structuredContent": {"rows": [{"n": n} for n in range(1000)]}}


def median_time(fn: Callable[[], object], repeat: int = 5) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    registry = ReferenceRegistry()
    result = make_result(100_000)
    registry.ingest(result, server="bench")
    ours_p50 = median_time(lambda: render_script_view(result, registry))
    peer_p50 = median_time(lambda: msgpack.packb(result))
    print("figure                         ours p50    msgpack p50   ratio")
    print(
        f"render 100,000 blocks       {ours_p50 * 1e3:8.1f} ms {peer_p50 * 1e3:9.1f} ms"
        f"   {ours_p50 / peer_p50:6.1f}x   (goal: ours well under 1 s)"
    )

    layers: Any = [{"type": "text", "text": "x"}]
    for _ in range(60):
        layers = [layers, layers]
    shared = {"content": [], "structuredContent": layers}
    shared_best = median_time(lambda: render_script_view(shared, registry))
    print(f"render 2**60-shared list    {shared_best * 1e3:8.3f} ms   (fails closed, linear)")
    print(f"verdict: {'meets' if ours_p50 < 1.0 else 'MISSES'} the goal")
    loop = "compiled" if _render._compiled_read_blocks is not None else "Python (no C loop built)"
    print(f"content loop: {loop}")


if __name__ == "__main__":
    main()
