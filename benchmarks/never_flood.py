"""Benchmark: ingesting a flood of never claims once the never memory is past its capacity.

Run by hand: ``.venv/bin/python benchmarks/never_flood.py``. A registry whose never memory
(capacity 1,000) is already full ingests one result of n inline never claims (images with a
uri and no data: no record each, only a mark), at n = 25,000 and 100,000, inside ``trio.run``
with a ticker task that records the longest gap between its ticks (the event-loop stall), on
two paths:

- ``sync``: the registry's synchronous ``ReferenceRegistry.ingest`` (public API), which holds
  the loop for the whole ingestion;
- ``bridge``: ``MarksGate.ingest``, the path a Bridge takes for a run's tool result
  (``RunServices._invoke``), which ingests in slices with a checkpoint between them.

It prints, per path, the time at n and 4n (linear work gives a ratio of about 4), the stall,
the ratio to ``msgpack.packb`` of the same result (a single linear pass over it, the floor),
and whether the goal is met. Goal (issue 14): linear cost, and no event-loop stall over 100 ms
on the bridge's path for 100,000 claims. For scale it also prints the time to render the
script view of the 100,000-claim result (synchronous; not part of this goal).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgpack
import trio

from scriptbridge import ReferenceRegistry, render_script_view
from scriptbridge._marks_gate import MarksGate

GOAL_STALL_S = 0.100
GOAL_RATIO = 5.0  # the cost at 4n over the cost at n; linear work gives about 4
SIZES = (25_000, 100_000)


def flood(n: int, prefix: str) -> dict[str, Any]:
    claim = {"type": "image", "data": "", "mimeType": "image/png", "disposition": "never"}
    return {"content": [{**claim, "uri": f"https://h.example/{prefix}/{i}"} for i in range(n)]}


def full_registry() -> ReferenceRegistry:
    registry = ReferenceRegistry(never_capacity=1_000)
    registry.ingest(flood(1_000, "fill"), server="bench")
    assert registry._never.overflowed or len(registry._never) == 1_000
    return registry


Ingest = Callable[[ReferenceRegistry, dict[str, Any]], Awaitable[object]]


async def sync_path(registry: ReferenceRegistry, result: dict[str, Any]) -> object:
    return registry.ingest(result, server="bench")


async def bridge_path(registry: ReferenceRegistry, result: dict[str, Any]) -> object:
    return await MarksGate(registry).ingest(result, "bench")


async def ingest_with_ticker(path: Ingest, result: dict[str, Any]) -> tuple[float, float]:
    """(seconds to ingest, longest gap between ticks of a 1 ms ticker meanwhile)."""
    registry = full_registry()
    longest = 0.0

    async def ticker(task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        nonlocal longest
        task_status.started()
        last = time.perf_counter()
        while True:
            await trio.sleep(0.001)
            now = time.perf_counter()
            longest = max(longest, now - last)
            last = now

    async with trio.open_nursery() as nursery:
        await nursery.start(ticker)
        await trio.sleep(0.01)
        start = time.perf_counter()
        await path(registry, result)
        took = time.perf_counter() - start
        await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    return took, longest


def main() -> None:
    logging.disable(logging.WARNING)
    results = {n: flood(n, "run") for n in SIZES}
    floors = {}
    for n, result in results.items():
        start = time.perf_counter()
        msgpack.packb(result)
        floors[n] = time.perf_counter() - start
    met, stall_100k, ratio_100k = False, 0.0, 0.0
    for name, path in (("sync", sync_path), ("bridge", bridge_path)):
        rows = []
        for n in SIZES:
            took, stall = trio.run(ingest_with_ticker, path, results[n])
            rows.append((took, stall))
            print(
                f"{name:>6} ingest of {n:>7,} never claims, memory full: {took * 1e3:8.1f} ms, "
                f"stall {stall * 1e3:8.1f} ms, {took / floors[n]:6.1f}x msgpack.packb"
            )
        ratio = rows[1][0] / rows[0][0]
        print(f"{name:>6} ratio 4n/n: {ratio:.1f} (linear ~4)")
        if name == "bridge":
            stall_100k, ratio_100k = rows[1][1], ratio
            met = stall_100k <= GOAL_STALL_S and ratio < GOAL_RATIO
    print(
        f"goal: linear cost (4n/n under {GOAL_RATIO}) and no event-loop stall over "
        f"{GOAL_STALL_S * 1e3:.0f} ms on the bridge's path at {SIZES[-1]:,} claims: "
        f"{'met' if met else 'NOT met'} (stall {stall_100k * 1e3:.1f} ms, ratio {ratio_100k:.1f})"
    )
    registry = full_registry()
    registry.ingest(results[SIZES[-1]], server="bench")
    start = time.perf_counter()
    render_script_view(results[SIZES[-1]], registry)
    print(
        f"(for scale, not this goal: rendering the script view of the {SIZES[-1]:,}-claim "
        f"result, synchronous, {(time.perf_counter() - start) * 1e3:.1f} ms)"
    )


if __name__ == "__main__":
    main()
