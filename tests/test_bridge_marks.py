"""Never marks through a real Bridge (SPEC sections 4 and 5): a batch's marks reach every view
of the batch, a mark reaches a run's link of a copy whose record was evicted, a run's
payload requests are bounded by ``Limits.max_fetches``, and while one run's flood of claims is
ingested in slices no other run's view or fetch goes first. Real children, a real loopback
server.
"""

from __future__ import annotations

import pathlib
import textwrap
from typing import Any

import pytest
import trio
from loopback_http import LoopbackServer, body, gated, start_server

from scriptbridge import markers
from scriptbridge._fetcher import Unfetchable
from scriptbridge._limits import Limits
from scriptbridge._supervisor import Bridge
from scriptbridge._tools import python_tool


def script(text: str) -> str:
    return textwrap.dedent(text).strip() + "\n"


def reference(uri: str) -> dict[str, Any]:
    return {"content": [{"type": "resource_link", "uri": uri, "name": "p.txt"}]}


def never(uri: str) -> dict[str, Any]:
    return {"content": [{"type": "resource", "uri": uri, "disposition": "never"}]}


def never_image(uri: str) -> dict[str, Any]:
    return {"type": "image", "data": "", "mimeType": "image/png", "uri": uri,
            "disposition": "never"}  # fmt: skip


def links(uris: list[str]) -> dict[str, Any]:
    return {"content": [{"type": "resource_link", "uri": uri, "name": "p.txt"} for uri in uris]}


FLOOD = 20_000
"""Never claims in a flood: many slices of ingestion (``scriptbridge._marks_gate``)."""


def flood(uris: list[str]) -> dict[str, Any]:
    """A result of ``FLOOD`` never claims, then one for each of ``uris``."""
    content = [never_image(f"https://flood.example/{n}") for n in range(FLOOD)]
    return {"content": content + [never_image(uri) for uri in uris]}


@pytest.fixture
async def payloads(nursery: trio.Nursery) -> LoopbackServer:
    server = await start_server(nursery)
    for n in range(5):
        server.routes[f"/p{n}.txt"] = body(f"payload {n}".encode(), content_type="text/plain")
    return server


@pytest.fixture
def bridge_options() -> dict[str, Any]:
    """The ``bridge`` fixture's Bridge may fetch from the loopback payload server."""
    return {"fetch_allow": ["127.0.0.1"]}


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


async def test_a_view_waits_for_the_marks_of_another_runs_flood(bridge: Bridge) -> None:
    """A run's view of links is rendered only once another run's flood, whose marks were
    landing when the links arrived, has marked every one of them."""
    secret = [f"https://s{n}.example/doc" for n in range(50)]
    marking = trio.Event()
    bridge.registry.add_key_listener(lambda key: marking.set())

    async def the_links() -> dict[str, Any]:
        await marking.wait()  # the flood is being ingested
        return links(secret)

    bridge.add_tool(python_tool(lambda: flood(secret), name="flood"))
    bridge.add_tool(python_tool(the_links, name="links"))
    results: dict[str, Any] = {}

    async def run(name: str, source: str) -> None:
        results[name] = await bridge.run(source)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run, "flood", 'len(call_tool("flood")["content"])')
        nursery.start_soon(run, "links", 'call_tool("links")["content"]')
    assert results["flood"].ok and results["links"].ok, results
    for block in results["links"].value:
        assert "uri" not in block and block["unfetchable"] == markers.PAYLOAD_NEVER, block


async def test_a_fetch_waits_for_the_marks_of_another_runs_flood(
    bridge: Bridge, payloads: LoopbackServer
) -> None:
    """A download that ends while another run's flood naming it never is being ingested is
    answered with the mark, to the run and to the host that joined it, and no later fetch of a
    uri that flood names is even requested."""
    paths = [f"/q{n}.txt" for n in range(8)]
    uris = [payloads.url(path) for path in paths]
    arrived, release = trio.Event(), trio.Event()
    for path in paths:
        payloads.routes[path] = gated(b"secret", arrived, release)

    async def the_flood() -> dict[str, Any]:
        await arrived.wait()  # the first download is in flight
        release.set()  # its body is sent once the flood's ingestion has begun: no checkpoint
        return flood(uris)  # comes between a tool's return and its result's ingestion

    bridge.add_tool(python_tool(the_flood, name="flood"))
    bridge.add_tool(python_tool(lambda: links(uris), name="links"))
    results: dict[str, Any] = {}

    async def run(name: str, source: str) -> None:
        results[name] = await bridge.run(source)

    async def host_fetch() -> None:
        await arrived.wait()
        record = bridge.registry.record_for(uris[0])
        assert record is not None
        results["host"] = await bridge.fetcher.fetch(record)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(host_fetch)
        nursery.start_soon(run, "flood", 'len(call_tool("flood")["content"])')
        nursery.start_soon(
            run,
            "fetches",
            script("""
            outcomes = []
            for block in call_tool("links")["content"]:
                try:
                    outcomes.append(read_text(fetch(block)))
                except Unfetchable as exc:
                    outcomes.append(str(exc))
            outcomes
            """),
        )
    assert results["flood"].ok and results["fetches"].ok, results
    assert results["fetches"].value == [markers.PAYLOAD_NEVER] * len(paths)
    assert results["host"] == Unfetchable(markers.PAYLOAD_NEVER)
    assert [payloads.hits[path] for path in paths] == [1] + [0] * (len(paths) - 1)
    assert list((bridge.workspace.root / "refs").iterdir()) == []
