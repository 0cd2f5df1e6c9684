"""The bridge's sliced ingestion (``scriptbridge._marks_gate``): a flood of claims lets the loop
run while its marks land, it lands whole even for a cancelled caller, and ``wait_settled``
returns only once every ingestion under way has ended."""

from __future__ import annotations

from functools import partial
from typing import Any

import trio
import trio.testing
from tool_results import link as resource_link

from scriptbridge import ReferenceRegistry
from scriptbridge._marks_gate import MarksGate


def never_image(uri: str) -> dict[str, Any]:
    return {"type": "image", "data": "", "mimeType": "image/png", "uri": uri,
            "disposition": "never"}  # fmt: skip


link = partial(resource_link, name="doc")
"""A resource link named ``doc``."""


def flood(prefix: str, claims: int = 10_000, links: int = 1_500) -> dict[str, Any]:
    """A result of ``claims`` inline never claims and ``links`` links, a third of them never:
    several slices of each part of an ingestion."""
    content = [never_image(f"https://{prefix}.example/i/{n}") for n in range(claims)]
    content += [
        link(f"https://{prefix}.example/l/{n}", **({"disposition": "never"} if n % 3 else {}))
        for n in range(links)
    ]
    return {"content": content, "structuredContent": {"more": [never_image(f"{prefix}:last")]}}


def never_uris(result: dict[str, Any]) -> list[str]:
    blocks = [*result["content"], *result["structuredContent"]["more"]]
    return [block["uri"] for block in blocks if block.get("disposition") == "never"]


async def test_a_flood_lets_the_loop_run_while_it_is_read_and_marked() -> None:
    """Other tasks run between the slices of a big result's claims walk and of its marks, and
    the registry ends as the synchronous ``ingest`` leaves it."""
    result = flood("a")
    reg = ReferenceRegistry()
    gate = MarksGate(reg)
    ticks = 0
    at_marks: list[int] = []
    reg.add_key_listener(lambda key: at_marks.append(ticks))

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await trio.sleep(0)
            ticks += 1

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker)
        await trio.sleep(0)
        before = ticks
        records = await gate.ingest(result, "docs")
        nursery.cancel_scope.cancel()
    assert before < at_marks[0] < at_marks[-1]  # it ran during the walk, and during the marks
    assert not gate.ingesting
    alone = ReferenceRegistry().ingest(result, server="docs")
    assert [(r.uri, r.payload_never) for r in records] == [(r.uri, r.payload_never) for r in alone]
    assert all(reg.is_marked(uri) for uri in never_uris(result))
    assert not reg.is_marked("https://a.example/l/0")


async def test_a_cancelled_caller_still_gets_every_mark_of_its_result() -> None:
    """Cancelling the caller midway doesn't stop the ingestion: every claim of the result is
    marked when it returns."""
    result = flood("b", links=0)
    reg = ReferenceRegistry()
    gate = MarksGate(reg)
    with trio.CancelScope() as scope:
        scope.cancel()
        await gate.ingest(result, "docs")
    assert all(reg.is_marked(uri) for uri in never_uris(result))
    assert not gate.ingesting


async def test_wait_settled_returns_only_when_no_ingestion_is_under_way() -> None:
    """A waiter that starts while two floods are being ingested returns after both have landed
    every mark."""
    first, second = flood("c", links=0), flood("d", links=0)
    reg = ReferenceRegistry()
    gate = MarksGate(reg)
    marking = trio.Event()
    reg.add_key_listener(lambda key: marking.set())
    seen: list[bool] = []

    async def waiter() -> None:
        await marking.wait()
        assert gate.ingesting
        await gate.wait_settled()
        seen.append(all(reg.is_marked(u) for u in never_uris(first) + never_uris(second)))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(gate.ingest, first, "docs")
        nursery.start_soon(gate.ingest, second, "other")
        nursery.start_soon(waiter)
    assert seen == [True]


async def test_a_small_result_is_ingested_without_a_checkpoint() -> None:
    """A result that fits in one slice is ingested as the synchronous ``ingest`` does, with
    no checkpoint, and nothing is left to wait for."""
    reg = ReferenceRegistry()
    gate = MarksGate(reg)
    result = {"content": [link("https://e.example/a", disposition="never"), link("x:b")]}
    with trio.testing.assert_no_checkpoints():
        records = await gate.ingest(result, "docs")
        await gate.wait_settled()
    assert [(r.uri, r.payload_never) for r in records] == [
        ("https://e.example/a", True),
        ("x:b", False),
    ]
