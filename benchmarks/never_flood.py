"""Benchmark: ingesting a flood of never claims once the never memory is past its capacity.

Run by hand: ``.venv/bin/python benchmarks/never_flood.py``. A registry whose never memory
(capacity 1,000) is already full ingests one result of n inline never claims (images with a
uri and no data: no record each, only a mark), at n = 25,000 and 100,000, inside ``trio.run``
with a ticker task that records the longest gap between its ticks (the event-loop stall).
It prints the time at n and 4n (linear work gives a ratio of about 4), the stall, and the
ratio to ``msgpack.packb`` of the same result (a single linear pass over it, the floor).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import msgpack
import trio

from scriptbridge import ReferenceRegistry


def flood(n: int, prefix: str) -> dict[str, Any]:
    claim = {"type": "image", "data": "", "mimeType": "image/png", "disposition": "never"}
    return {"content": [{**claim, "uri": f"https://h.example/{prefix}/{i}"} for i in range(n)]}


def full_registry() -> ReferenceRegistry:
    registry = ReferenceRegistry(never_capacity=1_000)
    registry.ingest(flood(1_000, "fill"), server="bench")
    assert registry._never.overflowed or len(registry._never) == 1_000
    return registry


async def ingest_with_ticker(result: dict[str, Any]) -> tuple[float, float]:
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
        registry.ingest(result, server="bench")
        took = time.perf_counter() - start
        await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    return took, longest


def main() -> None:
    logging.disable(logging.WARNING)
    rows = []
    for n in (25_000, 100_000):
        result = flood(n, "run")
        took, stall = trio.run(ingest_with_ticker, result)
        start = time.perf_counter()
        msgpack.packb(result)
        floor = time.perf_counter() - start
        rows.append((n, took, stall, took / floor))
        print(
            f"ingest of {n:>7,} never claims, memory full: {took * 1e3:8.1f} ms, "
            f"stall {stall * 1e3:8.1f} ms, {took / floor:6.1f}x msgpack.packb"
        )
    print(f"ratio 4n/n: {rows[1][1] / rows[0][1]:.1f} (linear ~4)")


if __name__ == "__main__":
    main()
