"""Never marks through a real Bridge (SPEC sections 4 and 5): a batch's marks reach every view
of the batch, a mark reaches a run's link of a copy whose record was evicted, and a run's
payload requests are bounded by ``Limits.max_fetches``. Real children, a real loopback server.
"""

from __future__ import annotations

import pathlib
import textwrap
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
from loopback_http import LoopbackServer, body, start_server

from scriptbridge import markers
from scriptbridge._limits import Limits
from scriptbridge._supervisor import Bridge
from scriptbridge._tools import python_tool


def script(text: str) -> str:
    return textwrap.dedent(text).strip() + "\n"


def reference(uri: str) -> dict[str, Any]:
    return {"content": [{"type": "resource_link", "uri": uri, "name": "p.txt"}]}


def never(uri: str) -> dict[str, Any]:
    return {"content": [{"type": "resource", "uri": uri, "disposition": "never"}]}


@pytest.fixture
async def payloads(nursery: trio.Nursery) -> LoopbackServer:
    server = await start_server(nursery)
    for n in range(5):
        server.routes[f"/p{n}.txt"] = body(f"payload {n}".encode(), content_type="text/plain")
    return server


@pytest.fixture
async def bridge(tmp_path: pathlib.Path) -> AsyncIterator[Bridge]:
    async with Bridge(tmp_path / "ws", fetch_allow=["127.0.0.1"]) as bridge:
        yield bridge


async def test_a_batch_renders_its_views_after_all_its_marks(
    bridge: Bridge, payloads: LoopbackServer
) -> None:
    """A never in a later call of a batch reaches the view of an earlier, faster call."""
    uri = payloads.url("/p0.txt")

    def first() -> dict[str, Any]:
        return reference(uri)

    async def second() -> dict[str, Any]:
        await trio.sleep(0.2)  # ends well after the first call
        return never(f"HTTP://127.0.0.1:{payloads.port}/./p0.txt")

    bridge.add_tool(python_tool(first, name="first"))
    bridge.add_tool(python_tool(second, name="second"))
    result = await bridge.run(
        script("""
        views = call_tools([("first", {}), ("second", {})])
        block = views[0]["content"][0]
        try:
            fetch(block)
            outcome = "fetched"
        except Unfetchable as exc:
            outcome = str(exc)
        [block, outcome]
        """)
    )
    assert result.ok, result.error
    block, outcome = result.value
    assert "uri" not in block and block["savedTo"] is None
    assert block["unfetchable"] == markers.PAYLOAD_NEVER and outcome == markers.PAYLOAD_NEVER
    assert payloads.hits["/p0.txt"] == 0


async def test_a_mark_after_eviction_unlinks_the_runs_copy(
    tmp_path: pathlib.Path, payloads: LoopbackServer
) -> None:
    """A script fetched a payload, its record was evicted by a flood of links, then a never
    for (another spelling of) its uri arrived: the script can no longer read its copy."""
    uri = payloads.url("/p1.txt")
    async with Bridge(tmp_path / "ws", fetch_allow=["127.0.0.1"]) as bridge:
        bridge.add_tool(python_tool(lambda: reference(uri), name="attach"))
        flood = {
            "content": [
                {"type": "resource_link", "uri": f"http://x.example/{n}", "name": "x"}
                for n in range(bridge.registry.capacity + 1)
            ]
        }
        bridge.add_tool(python_tool(lambda: flood, name="flood"))
        spelled = f"http://0x7f.0.0.1:{payloads.port}/p1.txt#again"
        bridge.add_tool(python_tool(lambda: never(spelled), name="mark"))
        result = await bridge.run(
            script("""
            path = fetch(call_tool("attach", {})["content"][0])
            before = read_text(path)
            call_tool("flood", {})
            call_tool("mark", {})
            try:
                after = read_text(path)
            except FileNotFoundError:
                after = "gone"
            [before, after]
            """)
        )
    assert result.ok, result.error
    assert result.value == ["payload 1", "gone"]
    assert list((tmp_path / "ws" / "refs").iterdir()) == []


async def test_fetches_are_bounded_per_run_and_failures_remembered(
    bridge: Bridge, payloads: LoopbackServer
) -> None:
    """Past ``max_fetches`` a fetch is refused without a request; a failed fetch is answered
    again from the run's memory; a saved copy is answered without counting."""
    links = {"content": [
        {"type": "resource_link", "uri": payloads.url(path), "name": "p.txt"}
        for path in ("/p0.txt", "/p1.txt", "/missing.txt", "/p2.txt")
    ]}  # fmt: skip
    bridge.add_tool(python_tool(lambda: links, name="links"))
    result = await bridge.run(
        script("""
        blocks = call_tool("links", {})["content"]
        outcomes = []
        for block in [blocks[0], blocks[0], blocks[2], blocks[2], blocks[1], blocks[3]]:
            try:
                outcomes.append(fetch(block)[:4])
            except Unfetchable as exc:
                outcomes.append(str(exc))
        outcomes
        """),
        limits=Limits(max_fetches=3),
    )
    assert result.ok, result.error
    saved, again, missing, missing_again, third, refused = result.value
    assert saved == again == third == "refs"
    assert missing == missing_again != "refs"
    assert refused == markers.fetch_limit(3)
    assert payloads.hits["/missing.txt"] == 1 and payloads.hits["/p2.txt"] == 0


async def test_call_tool_gives_the_host_the_models_live_lane(
    bridge: Bridge, payloads: LoopbackServer
) -> None:
    """``Bridge.call_tool`` ingests first and answers with the live lane: a link a mark of the
    same result names shows its stub (no uri), later runs' fetches of it are refused, a tool
    that raises is an error result with its reason, and an unknown name is a ValueError."""
    uri = payloads.url("/p1.txt")

    def leaky() -> dict[str, Any]:
        link = {"type": "resource_link", "uri": f"HTTP://127.0.0.1:{payloads.port}/./p1.txt"}
        return {"content": [{**link, "name": "p1.txt"}, *never(uri)["content"]]}

    def broken() -> dict[str, Any]:
        raise RuntimeError("the tool broke")

    bridge.add_tool(python_tool(leaky))
    bridge.add_tool(python_tool(broken))
    shown = await bridge.call_tool("leaky", {})
    assert shown["isError"] is False
    text = repr(shown)
    assert "p1.txt" in text and markers.PAYLOAD_NEVER in text
    assert str(payloads.port) not in text and "payload 1" not in text, text
    assert bridge.registry.is_marked(uri)
    failed = await bridge.call_tool("broken", {})
    assert failed == {
        "content": [{"type": "text", "text": "RuntimeError: the tool broke"}],
        "isError": True,
    }
    with pytest.raises(ValueError, match="no tool"):
        await bridge.call_tool("missing", {})
    assert payloads.hits["/p1.txt"] == 0
